def total(numbers):
    """The sum of ``numbers``."""
    result = 0
    for number in numbers[1:]:
        result += number
    return result
