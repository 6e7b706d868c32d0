"""mathgym's built-in programming tasks: 48 functions, graded easy (0) to hard (3).

Written for this project. Each task shows the agent a description, the signature and one
example; the remaining checks are hidden tests. Every reference solution passes its tests
(``tests/envs/test_env_code.py`` runs them in the sandbox).
"""

from __future__ import annotations

import functools
import textwrap

from mathgym.envs.coding.code_records import CodeTask, report_unverifiable

LEVEL_NAMES = ("easy", "medium", "harder", "hard")

# (name, level, signature, description, reference solution, test expressions). The first
# expression is shown as an example; all of them are run as hidden tests.
_SPECS: tuple[tuple[str, int, str, str, str, tuple[str, ...]], ...] = (
    ("sum_of_evens", 0, "def sum_of_evens(nums: list[int]) -> int:",
     "Return the sum of the even numbers in `nums` (0 when there are none).",
     "def sum_of_evens(nums):\n    return sum(n for n in nums if n % 2 == 0)",
     ("sum_of_evens([1, 2, 3, 4]) == 6", "sum_of_evens([]) == 0", "sum_of_evens([1, 3, 5]) == 0", "sum_of_evens([-2, -3, 10]) == 8")),
    ("count_vowels", 0, "def count_vowels(text: str) -> int:",
     "Count the vowels (a, e, i, o, u, in either case) in `text`.",
     "def count_vowels(text):\n    return sum(ch in 'aeiouAEIOU' for ch in text)",
     ("count_vowels('Hello World') == 3", "count_vowels('') == 0", "count_vowels('xyz') == 0", "count_vowels('AEIOUaeiou') == 10")),
    ("reverse_words", 0, "def reverse_words(sentence: str) -> str:",
     "Return the words of `sentence` in reverse order, joined by single spaces (extra spaces are dropped).",
     "def reverse_words(sentence):\n    return ' '.join(reversed(sentence.split()))",
     ("reverse_words('the quick fox') == 'fox quick the'", "reverse_words('') == ''", "reverse_words('  one   two ') == 'two one'", "reverse_words('solo') == 'solo'")),
    ("clamp", 0, "def clamp(x: float, low: float, high: float) -> float:",
     "Return `x` limited to the interval [low, high].",
     "def clamp(x, low, high):\n    return max(low, min(high, x))",
     ("clamp(5, 0, 10) == 5", "clamp(-3, 0, 10) == 0", "clamp(42, 0, 10) == 10", "clamp(2.5, 2.5, 3) == 2.5")),
    ("is_leap_year", 0, "def is_leap_year(year: int) -> bool:",
     "Say whether `year` is a leap year in the Gregorian calendar.",
     "def is_leap_year(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)",
     ("is_leap_year(2024) is True", "is_leap_year(1900) is False", "is_leap_year(2000) is True", "is_leap_year(2023) is False")),
    ("digit_sum", 0, "def digit_sum(n: int) -> int:",
     "Return the sum of the decimal digits of `n` (ignore the sign).",
     "def digit_sum(n):\n    return sum(int(d) for d in str(abs(n)))",
     ("digit_sum(1234) == 10", "digit_sum(0) == 0", "digit_sum(-907) == 16", "digit_sum(10**12) == 1")),
    ("fizzbuzz_word", 0, "def fizzbuzz_word(n: int) -> str:",
     "Return 'FizzBuzz' if `n` is divisible by 15, 'Fizz' if by 3, 'Buzz' if by 5, else `n` as a string.",
     "def fizzbuzz_word(n):\n    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n        return 'Fizz'\n"
     "    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)",
     ("fizzbuzz_word(9) == 'Fizz'", "fizzbuzz_word(10) == 'Buzz'", "fizzbuzz_word(30) == 'FizzBuzz'", "fizzbuzz_word(7) == '7'")),
    ("count_words", 0, "def count_words(text: str) -> int:",
     "Count the words in `text`; words are separated by any whitespace.",
     "def count_words(text):\n    return len(text.split())",
     ("count_words('a b  c') == 3", "count_words('') == 0", "count_words('line one\\nline\\ttwo') == 4", "count_words('   ') == 0")),
    ("is_palindrome_number", 0, "def is_palindrome_number(n: int) -> bool:",
     "Say whether the integer `n` reads the same backwards; negative numbers never do.",
     "def is_palindrome_number(n):\n    return n >= 0 and str(n) == str(n)[::-1]",
     ("is_palindrome_number(121) is True", "is_palindrome_number(-121) is False", "is_palindrome_number(10) is False", "is_palindrome_number(7) is True")),
    ("initials", 0, "def initials(full_name: str) -> str:",
     "Return the upper-case initials of a name, each followed by a dot: 'ada lovelace' -> 'A.L.'.",
     "def initials(full_name):\n    return ''.join(part[0].upper() + '.' for part in full_name.split())",
     ("initials('ada lovelace') == 'A.L.'", "initials('Grace Brewster Hopper') == 'G.B.H.'", "initials('') == ''", "initials('  alan   turing ') == 'A.T.'")),
    ("factorial", 0, "def factorial(n: int) -> int:",
     "Return n! for a non-negative integer `n` (0! = 1).",
     "def factorial(n):\n    result = 1\n    for k in range(2, n + 1):\n        result *= k\n    return result",
     ("factorial(5) == 120", "factorial(0) == 1", "factorial(1) == 1", "factorial(20) == 2432902008176640000")),
    ("max_gap", 0, "def max_gap(nums: list[int]) -> int:",
     "Return the largest difference between two neighbouring elements of `nums` (absolute value); 0 for fewer than two elements.",
     "def max_gap(nums):\n    return max((abs(a - b) for a, b in zip(nums, nums[1:])), default=0)",
     ("max_gap([1, 5, 2]) == 4", "max_gap([]) == 0", "max_gap([3]) == 0", "max_gap([10, -10, 0]) == 20")),
    ("run_length_encode", 1, "def run_length_encode(text: str) -> str:",
     "Encode runs of equal characters as the character followed by the run length: 'aaabcc' -> 'a3b1c2'.",
     "def run_length_encode(text):\n    out, i = [], 0\n    while i < len(text):\n        j = i\n        while j < len(text) and text[j] == text[i]:\n"
     "            j += 1\n        out.append(f'{text[i]}{j - i}')\n        i = j\n    return ''.join(out)",
     ("run_length_encode('aaabcc') == 'a3b1c2'", "run_length_encode('') == ''", "run_length_encode('z') == 'z1'", "run_length_encode('aabbaa') == 'a2b2a2'", "run_length_encode('x' * 12) == 'x12'")),
    ("second_largest", 1, "def second_largest(nums: list[int]) -> int | None:",
     "Return the second largest distinct value in `nums`, or None when there is no such value.",
     "def second_largest(nums):\n    values = sorted(set(nums))\n    return values[-2] if len(values) >= 2 else None",
     ("second_largest([3, 1, 4, 1, 5]) == 4", "second_largest([7, 7, 7]) is None", "second_largest([]) is None", "second_largest([-1, -5]) == -5", "second_largest([5, 5, 4]) == 4")),
    ("is_anagram", 1, "def is_anagram(a: str, b: str) -> bool:",
     "Say whether `a` and `b` use the same letters the same number of times, ignoring case and spaces.",
     "def is_anagram(a, b):\n    key = lambda s: sorted(s.replace(' ', '').lower())\n    return key(a) == key(b)",
     ("is_anagram('Listen', 'Silent') is True", "is_anagram('dormitory', 'dirty room') is True", "is_anagram('abc', 'abd') is False", "is_anagram('aab', 'abb') is False")),
    ("flatten", 1, "def flatten(nested: list) -> list:",
     "Flatten a list whose elements may be lists nested to any depth, keeping the order.",
     "def flatten(nested):\n    out = []\n    for item in nested:\n        if isinstance(item, list):\n            out.extend(flatten(item))\n"
     "        else:\n            out.append(item)\n    return out",
     ("flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]", "flatten([]) == []", "flatten([[[]]]) == []", "flatten([['a'], 'b', [[['c']]]]) == ['a', 'b', 'c']")),
    ("chunk", 1, "def chunk(items: list, size: int) -> list[list]:",
     "Split `items` into consecutive lists of length `size` (the last one may be shorter).",
     "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items), size)]",
     ("chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]", "chunk([], 3) == []", "chunk([1, 2], 5) == [[1, 2]]", "chunk(list(range(6)), 3) == [[0, 1, 2], [3, 4, 5]]")),
    ("most_common_char", 1, "def most_common_char(text: str) -> str:",
     "Return the most frequent character of a non-empty `text`; on a tie, the one that appears first.",
     "def most_common_char(text):\n    counts = {}\n    for ch in text:\n        counts[ch] = counts.get(ch, 0) + 1\n"
     "    best = max(counts.values())\n    return next(ch for ch in text if counts[ch] == best)",
     ("most_common_char('hello') == 'l'", "most_common_char('abab') == 'a'", "most_common_char('z') == 'z'", "most_common_char('bbaaa cc') == 'a'")),
    ("rotate_right", 1, "def rotate_right(items: list, k: int) -> list:",
     "Return `items` rotated right by `k` positions (`k` may exceed the length; an empty list stays empty).",
     "def rotate_right(items, k):\n    if not items:\n        return []\n    k %= len(items)\n    return items[-k:] + items[:-k] if k else list(items)",
     ("rotate_right([1, 2, 3, 4], 1) == [4, 1, 2, 3]", "rotate_right([1, 2, 3], 5) == [2, 3, 1]", "rotate_right([], 3) == []", "rotate_right([1, 2], 0) == [1, 2]")),
    ("digits_to_words", 1, "def digits_to_words(n: int) -> str:",
     "Spell each decimal digit of the non-negative integer `n` in English, separated by spaces: 405 -> 'four zero five'.",
     "def digits_to_words(n):\n    names = 'zero one two three four five six seven eight nine'.split()\n"
     "    return ' '.join(names[int(d)] for d in str(n))",
     ("digits_to_words(405) == 'four zero five'", "digits_to_words(0) == 'zero'", "digits_to_words(9876) == 'nine eight seven six'")),
    ("merge_sorted", 1, "def merge_sorted(a: list[int], b: list[int]) -> list[int]:",
     "Merge two ascending lists into one ascending list (keep duplicates) without calling sort.",
     "def merge_sorted(a, b):\n    out, i, j = [], 0, 0\n    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n"
     "            out.append(a[i]); i += 1\n        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]",
     ("merge_sorted([1, 3, 5], [2, 4]) == [1, 2, 3, 4, 5]", "merge_sorted([], [1]) == [1]", "merge_sorted([2, 2], [2]) == [2, 2, 2]", "merge_sorted([], []) == []")),
    ("gcd_of_list", 1, "def gcd_of_list(nums: list[int]) -> int:",
     "Return the greatest common divisor of all numbers in `nums` (always non-negative; 0 for an empty list).",
     "import math\n\ndef gcd_of_list(nums):\n    result = 0\n    for n in nums:\n        result = math.gcd(result, n)\n    return result",
     ("gcd_of_list([12, 18, 24]) == 6", "gcd_of_list([]) == 0", "gcd_of_list([7]) == 7", "gcd_of_list([-4, 6]) == 2", "gcd_of_list([0, 0, 5]) == 5")),
    ("caesar_shift", 1, "def caesar_shift(text: str, k: int) -> str:",
     "Shift every letter of `text` by `k` places in the alphabet (wrapping, keeping case); other characters stay.",
     "def caesar_shift(text, k):\n    out = []\n    for ch in text:\n        if ch.isascii() and ch.isalpha():\n"
     "            base = ord('A') if ch.isupper() else ord('a')\n            out.append(chr(base + (ord(ch) - base + k) % 26))\n"
     "        else:\n            out.append(ch)\n    return ''.join(out)",
     ("caesar_shift('abc', 1) == 'bcd'", "caesar_shift('Hello, World!', 3) == 'Khoor, Zruog!'", "caesar_shift('xyz', 3) == 'abc'", "caesar_shift('abc', -1) == 'zab'", "caesar_shift('Zz', 27) == 'Aa'")),
    ("balanced_brackets", 1, "def balanced_brackets(text: str) -> bool:",
     "Say whether the brackets (), [] and {} in `text` are balanced and properly nested; other characters are ignored.",
     "def balanced_brackets(text):\n    pairs, stack = {')': '(', ']': '[', '}': '{'}, []\n    for ch in text:\n        if ch in '([{':\n"
     "            stack.append(ch)\n        elif ch in pairs:\n            if not stack or stack.pop() != pairs[ch]:\n                return False\n"
     "    return not stack",
     ("balanced_brackets('f(a[1]) {x}') is True", "balanced_brackets('(]') is False", "balanced_brackets('') is True", "balanced_brackets('((') is False", "balanced_brackets(')(') is False")),
    ("roman_to_int", 2, "def roman_to_int(numeral: str) -> int:",
     "Convert a Roman numeral (I, V, X, L, C, D, M with subtractive pairs such as IV and CM) to an integer.",
     "def roman_to_int(numeral):\n    values = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n"
     "    for i, ch in enumerate(numeral):\n        v = values[ch]\n        if i + 1 < len(numeral) and values[numeral[i + 1]] > v:\n"
     "            total -= v\n        else:\n            total += v\n    return total",
     ("roman_to_int('XIV') == 14", "roman_to_int('MCMXCIV') == 1994", "roman_to_int('III') == 3", "roman_to_int('MMMCMXCIX') == 3999", "roman_to_int('XL') == 40")),
    ("int_to_roman", 2, "def int_to_roman(n: int) -> str:",
     "Write an integer from 1 to 3999 as a Roman numeral, using subtractive pairs (4 -> 'IV', 900 -> 'CM').",
     "def int_to_roman(n):\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'),\n"
     "             (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = []\n    for value, letters in table:\n"
     "        while n >= value:\n            out.append(letters)\n            n -= value\n    return ''.join(out)",
     ("int_to_roman(14) == 'XIV'", "int_to_roman(1994) == 'MCMXCIV'", "int_to_roman(1) == 'I'", "int_to_roman(3999) == 'MMMCMXCIX'", "int_to_roman(444) == 'CDXLIV'")),
    ("longest_common_prefix", 2, "def longest_common_prefix(words: list[str]) -> str:",
     "Return the longest string that starts every word in `words` ('' for an empty list).",
     "def longest_common_prefix(words):\n    if not words:\n        return ''\n    prefix = min(words)\n    last = max(words)\n"
     "    i = 0\n    while i < len(prefix) and prefix[i] == last[i]:\n        i += 1\n    return prefix[:i]",
     ("longest_common_prefix(['flower', 'flow', 'flight']) == 'fl'", "longest_common_prefix(['dog', 'car']) == ''", "longest_common_prefix([]) == ''", "longest_common_prefix(['same', 'same']) == 'same'", "longest_common_prefix(['ab', 'a']) == 'a'")),
    ("primes_up_to", 2, "def primes_up_to(n: int) -> list[int]:",
     "Return all primes less than or equal to `n`, in increasing order.",
     "def primes_up_to(n):\n    if n < 2:\n        return []\n    sieve = [True] * (n + 1)\n    sieve[0] = sieve[1] = False\n"
     "    for p in range(2, int(n ** 0.5) + 1):\n        if sieve[p]:\n            sieve[p * p::p] = [False] * len(range(p * p, n + 1, p))\n"
     "    return [i for i, ok in enumerate(sieve) if ok]",
     ("primes_up_to(10) == [2, 3, 5, 7]", "primes_up_to(1) == []", "primes_up_to(2) == [2]", "len(primes_up_to(10000)) == 1229", "primes_up_to(30)[-1] == 29")),
    ("word_frequencies", 2, "def word_frequencies(text: str) -> dict[str, int]:",
     "Count the words of `text`: a word is a maximal run of ASCII letters, compared in lower case.",
     "import re\n\ndef word_frequencies(text):\n    counts = {}\n    for word in re.findall('[a-z]+', text.lower()):\n"
     "        counts[word] = counts.get(word, 0) + 1\n    return counts",
     ("word_frequencies('The cat and the hat.') == {'the': 2, 'cat': 1, 'and': 1, 'hat': 1}", "word_frequencies('') == {}", "word_frequencies(\"it's 2 o'clock\") == {'it': 1, 's': 1, 'o': 1, 'clock': 1}")),
    ("transpose", 2, "def transpose(matrix: list[list[int]]) -> list[list[int]]:",
     "Return the transpose of a rectangular matrix given as a list of rows ([] for an empty matrix).",
     "def transpose(matrix):\n    return [list(col) for col in zip(*matrix)]",
     ("transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]", "transpose([]) == []", "transpose([[7]]) == [[7]]", "transpose([[1], [2]]) == [[1, 2]]")),
    ("spiral_order", 2, "def spiral_order(matrix: list[list[int]]) -> list[int]:",
     "Return the elements of a rectangular matrix in clockwise spiral order, starting at the top-left corner.",
     "def spiral_order(matrix):\n    out = []\n    rows = [list(r) for r in matrix]\n    while rows:\n        out.extend(rows.pop(0))\n"
     "        rows = [list(r) for r in zip(*rows)][::-1]\n    return out",
     ("spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == [1, 2, 3, 6, 9, 8, 7, 4, 5]", "spiral_order([]) == []",
      "spiral_order([[1, 2, 3, 4], [5, 6, 7, 8]]) == [1, 2, 3, 4, 8, 7, 6, 5]", "spiral_order([[1], [2], [3]]) == [1, 2, 3]")),
    ("longest_increasing_run", 2, "def longest_increasing_run(nums: list[int]) -> int:",
     "Return the length of the longest run of consecutive elements that strictly increases (0 for an empty list).",
     "def longest_increasing_run(nums):\n    best = run = 0\n    for i, n in enumerate(nums):\n        run = run + 1 if i and n > nums[i - 1] else 1\n"
     "        best = max(best, run)\n    return best",
     ("longest_increasing_run([1, 2, 2, 3, 4, 5, 1]) == 4", "longest_increasing_run([]) == 0", "longest_increasing_run([5, 4, 3]) == 1", "longest_increasing_run([1, 2, 3]) == 3")),
    ("two_sum_indices", 2, "def two_sum_indices(nums: list[int], target: int) -> tuple[int, int] | None:",
     "Return indices (i, j) with i < j and nums[i] + nums[j] == target, the smallest such pair in (i, j) order; None if there is none.",
     "def two_sum_indices(nums, target):\n    for i in range(len(nums)):\n        for j in range(i + 1, len(nums)):\n"
     "            if nums[i] + nums[j] == target:\n                return (i, j)\n    return None",
     ("two_sum_indices([2, 7, 11, 15], 9) == (0, 1)", "two_sum_indices([3, 3], 6) == (0, 1)", "two_sum_indices([1, 2], 7) is None", "two_sum_indices([1, 5, 3, 3], 6) == (0, 1)", "two_sum_indices([4, 1, 2, 3], 5) == (0, 1)")),
    ("binary_search", 2, "def binary_search(sorted_nums: list[int], x: int) -> int:",
     "Return the index of `x` in the strictly increasing list `sorted_nums`, or -1; use O(log n) comparisons.",
     "def binary_search(sorted_nums, x):\n    lo, hi = 0, len(sorted_nums) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n"
     "        if sorted_nums[mid] == x:\n            return mid\n        if sorted_nums[mid] < x:\n            lo = mid + 1\n        else:\n"
     "            hi = mid - 1\n    return -1",
     ("binary_search([1, 3, 5, 7], 5) == 2", "binary_search([], 1) == -1", "binary_search([1, 3, 5], 4) == -1", "binary_search(list(range(0, 10**6, 2)), 123456) == 61728")),
    ("compress_ranges", 2, "def compress_ranges(nums: list[int]) -> str:",
     "Describe a sorted list of distinct integers as comma-separated ranges: [1, 2, 3, 5, 7, 8] -> '1-3,5,7-8'.",
     "def compress_ranges(nums):\n    parts, i = [], 0\n    while i < len(nums):\n        j = i\n        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:\n"
     "            j += 1\n        parts.append(str(nums[i]) if i == j else f'{nums[i]}-{nums[j]}')\n        i = j + 1\n    return ','.join(parts)",
     ("compress_ranges([1, 2, 3, 5, 7, 8]) == '1-3,5,7-8'", "compress_ranges([]) == ''", "compress_ranges([4]) == '4'", "compress_ranges([-3, -2, 0]) == '-3--2,0'")),
    ("valid_ipv4", 2, "def valid_ipv4(address: str) -> bool:",
     "Say whether `address` is four decimal numbers 0-255 joined by dots, without leading zeros (except '0' itself).",
     "def valid_ipv4(address):\n    parts = address.split('.')\n    if len(parts) != 4:\n        return False\n    for p in parts:\n"
     "        if not p.isdigit() or not p.isascii() or (len(p) > 1 and p[0] == '0') or int(p) > 255:\n            return False\n    return True",
     ("valid_ipv4('192.168.0.1') is True", "valid_ipv4('256.1.1.1') is False", "valid_ipv4('1.2.3') is False", "valid_ipv4('01.2.3.4') is False",
      "valid_ipv4('0.0.0.0') is True", "valid_ipv4('1.2.3.-4') is False")),
    ("longest_palindrome", 3, "def longest_palindrome(text: str) -> str:",
     "Return the longest substring of `text` that is a palindrome; if several are longest, the leftmost.",
     "def longest_palindrome(text):\n    best = ''\n    for center in range(2 * len(text) - 1):\n        lo, hi = center // 2, center // 2 + center % 2\n"
     "        while lo >= 0 and hi < len(text) and text[lo] == text[hi]:\n            lo -= 1\n            hi += 1\n"
     "        if hi - lo - 1 > len(best):\n            best = text[lo + 1:hi]\n    return best",
     ("longest_palindrome('babad') == 'bab'", "longest_palindrome('cbbd') == 'bb'", "longest_palindrome('') == ''", "longest_palindrome('abc') == 'a'",
      "longest_palindrome('forgeeksskeegfor') == 'geeksskeeg'")),
    ("edit_distance", 3, "def edit_distance(a: str, b: str) -> int:",
     "Return the Levenshtein distance between `a` and `b` (insertions, deletions, substitutions).",
     "def edit_distance(a, b):\n    prev = list(range(len(b) + 1))\n    for i, ca in enumerate(a, 1):\n        cur = [i]\n"
     "        for j, cb in enumerate(b, 1):\n            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))\n        prev = cur\n    return prev[-1]",
     ("edit_distance('kitten', 'sitting') == 3", "edit_distance('', 'abc') == 3", "edit_distance('same', 'same') == 0", "edit_distance('flaw', 'lawn') == 2", "edit_distance('a' * 300, 'b' * 300) == 300")),
    ("evaluate_rpn", 3, "def evaluate_rpn(tokens: list[str]) -> int:",
     "Evaluate an expression in reverse Polish notation over integers with + - * /; division truncates toward zero.",
     "def evaluate_rpn(tokens):\n    stack = []\n    for tok in tokens:\n        if tok in ('+', '-', '*', '/'):\n            b, a = stack.pop(), stack.pop()\n"
     "            if tok == '+':\n                stack.append(a + b)\n            elif tok == '-':\n                stack.append(a - b)\n            elif tok == '*':\n"
     "                stack.append(a * b)\n            else:\n                q = abs(a) // abs(b)\n                stack.append(q if (a >= 0) == (b > 0) else -q)\n"
     "        else:\n            stack.append(int(tok))\n    return stack[-1]",
     ("evaluate_rpn(['2', '1', '+', '3', '*']) == 9", "evaluate_rpn(['4', '13', '5', '/', '+']) == 6", "evaluate_rpn(['7', '-2', '/']) == -3", "evaluate_rpn(['-7', '2', '/']) == -3", "evaluate_rpn(['42']) == 42")),
    ("count_islands", 3, "def count_islands(grid: list[str]) -> int:",
     "Count the islands in a grid of '1' (land) and '0' (water) strings; land cells connect up, down, left and right.",
     "def count_islands(grid):\n    seen, count = set(), 0\n    for r, row in enumerate(grid):\n        for c, ch in enumerate(row):\n"
     "            if ch == '1' and (r, c) not in seen:\n                count += 1\n                stack = [(r, c)]\n                seen.add((r, c))\n"
     "                while stack:\n                    y, x = stack.pop()\n                    for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):\n"
     "                        if 0 <= ny < len(grid) and 0 <= nx < len(grid[ny]) and grid[ny][nx] == '1' and (ny, nx) not in seen:\n"
     "                            seen.add((ny, nx))\n                            stack.append((ny, nx))\n    return count",
     ("count_islands(['110', '010', '001']) == 2", "count_islands([]) == 0", "count_islands(['000']) == 0", "count_islands(['101', '010', '101']) == 5", "count_islands(['1' * 200] * 200) == 1")),
    ("coin_change_ways", 3, "def coin_change_ways(amount: int, coins: list[int]) -> int:",
     "Count the ways to make `amount` from unlimited coins of the given distinct values (order does not matter).",
     "def coin_change_ways(amount, coins):\n    ways = [1] + [0] * amount\n    for coin in coins:\n        for v in range(coin, amount + 1):\n"
     "            ways[v] += ways[v - coin]\n    return ways[amount]",
     ("coin_change_ways(5, [1, 2, 5]) == 4", "coin_change_ways(3, [2]) == 0", "coin_change_ways(0, [7]) == 1", "coin_change_ways(100, [1, 5, 10, 25, 50]) == 292")),
    ("min_coins", 3, "def min_coins(amount: int, coins: list[int]) -> int:",
     "Return the fewest coins (unlimited supply of each value) that sum to `amount`, or -1 if it cannot be made.",
     "def min_coins(amount, coins):\n    inf = float('inf')\n    best = [0] + [inf] * amount\n    for v in range(1, amount + 1):\n"
     "        for coin in coins:\n            if coin <= v and best[v - coin] + 1 < best[v]:\n                best[v] = best[v - coin] + 1\n"
     "    return best[amount] if best[amount] != inf else -1",
     ("min_coins(11, [1, 2, 5]) == 3", "min_coins(3, [2]) == -1", "min_coins(0, [1]) == 0", "min_coins(6, [1, 3, 4]) == 2", "min_coins(10000, [7, 13]) == 772")),
    ("topological_order", 3, "def topological_order(n: int, edges: list[tuple[int, int]]) -> list[int] | None:",
     "Nodes are 0..n-1; an edge (a, b) means a comes before b. Return the lexicographically smallest order that respects "
     "every edge, or None if the edges form a cycle.",
     "import heapq\n\ndef topological_order(n, edges):\n    indeg = [0] * n\n    out = [[] for _ in range(n)]\n    for a, b in edges:\n"
     "        out[a].append(b)\n        indeg[b] += 1\n    heap = [v for v in range(n) if indeg[v] == 0]\n    heapq.heapify(heap)\n    order = []\n"
     "    while heap:\n        v = heapq.heappop(heap)\n        order.append(v)\n        for w in out[v]:\n            indeg[w] -= 1\n"
     "            if indeg[w] == 0:\n                heapq.heappush(heap, w)\n    return order if len(order) == n else None",
     ("topological_order(3, [(2, 0), (0, 1)]) == [2, 0, 1]", "topological_order(2, [(0, 1), (1, 0)]) is None", "topological_order(3, []) == [0, 1, 2]",
      "topological_order(4, [(3, 1), (2, 1)]) == [0, 2, 3, 1]")),
    ("knapsack", 3, "def knapsack(capacity: int, items: list[tuple[int, int]]) -> int:",
     "Each item is (weight, value) and can be taken at most once. Return the largest total value with total weight at most `capacity`.",
     "def knapsack(capacity, items):\n    best = [0] * (capacity + 1)\n    for weight, value in items:\n        for c in range(capacity, weight - 1, -1):\n"
     "            best[c] = max(best[c], best[c - weight] + value)\n    return best[capacity]",
     ("knapsack(5, [(1, 1), (3, 4), (4, 5), (5, 7)]) == 7", "knapsack(0, [(1, 10)]) == 0", "knapsack(10, []) == 0", "knapsack(7, [(1, 1), (3, 4), (4, 5), (5, 7)]) == 9")),
    ("lis_length", 3, "def lis_length(nums: list[int]) -> int:",
     "Return the length of the longest strictly increasing subsequence of `nums` (not necessarily contiguous).",
     "import bisect\n\ndef lis_length(nums):\n    tails = []\n    for n in nums:\n        i = bisect.bisect_left(tails, n)\n"
     "        if i == len(tails):\n            tails.append(n)\n        else:\n            tails[i] = n\n    return len(tails)",
     ("lis_length([10, 9, 2, 5, 3, 7, 101, 18]) == 4", "lis_length([]) == 0", "lis_length([7, 7, 7]) == 1", "lis_length(list(range(5000))) == 5000")),
    ("next_permutation", 3, "def next_permutation(nums: list[int]) -> list[int]:",
     "Return the next permutation of `nums` in lexicographic order as a new list; after the last one, wrap to the first (ascending).",
     "def next_permutation(nums):\n    a = list(nums)\n    i = len(a) - 2\n    while i >= 0 and a[i] >= a[i + 1]:\n        i -= 1\n    if i >= 0:\n"
     "        j = len(a) - 1\n        while a[j] <= a[i]:\n            j -= 1\n        a[i], a[j] = a[j], a[i]\n    a[i + 1:] = reversed(a[i + 1:])\n    return a",
     ("next_permutation([1, 2, 3]) == [1, 3, 2]", "next_permutation([3, 2, 1]) == [1, 2, 3]", "next_permutation([1, 1, 5]) == [1, 5, 1]", "next_permutation([]) == []", "next_permutation([1, 3, 2]) == [2, 1, 3]")),
    ("word_break", 3, "def word_break(text: str, words: list[str]) -> bool:",
     "Say whether `text` can be split into a sequence of words from `words` (each word may be used many times).",
     "def word_break(text, words):\n    vocab = set(words)\n    ok = [True] + [False] * len(text)\n    for end in range(1, len(text) + 1):\n"
     "        ok[end] = any(ok[start] and text[start:end] in vocab for start in range(end))\n    return ok[-1]",
     ("word_break('applepenapple', ['apple', 'pen']) is True", "word_break('catsandog', ['cats', 'dog', 'sand', 'and', 'cat']) is False", "word_break('', ['a']) is True",
      "word_break('a' * 200 + 'b', ['a', 'aa', 'aaa']) is False")),
    ("grid_shortest_path", 3, "def grid_shortest_path(grid: list[str]) -> int:",
     "In a grid of '.' (open) and '#' (wall), return the fewest moves (up, down, left, right) from the top-left to the "
     "bottom-right cell, or -1 if there is no path or either corner is a wall.",
     "from collections import deque\n\ndef grid_shortest_path(grid):\n    if not grid or grid[0][0] == '#' or grid[-1][-1] == '#':\n        return -1\n"
     "    rows, cols = len(grid), len(grid[0])\n    dist = {(0, 0): 0}\n    queue = deque([(0, 0)])\n    while queue:\n        r, c = queue.popleft()\n"
     "        if (r, c) == (rows - 1, cols - 1):\n            return dist[(r, c)]\n        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):\n"
     "            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] == '.' and (nr, nc) not in dist:\n"
     "                dist[(nr, nc)] = dist[(r, c)] + 1\n                queue.append((nr, nc))\n    return -1",
     ("grid_shortest_path(['..', '..']) == 2", "grid_shortest_path(['.#', '#.']) == -1", "grid_shortest_path(['.']) == 0", "grid_shortest_path(['...', '##.', '...']) == 4",
      "grid_shortest_path(['#.', '..']) == -1")),
)


def _build(spec: tuple[str, int, str, str, str, tuple[str, ...]]) -> CodeTask:
    name, level, signature, description, reference, checks = spec
    prompt = (
        f"{description}\n\n```python\n{signature}\n```\n"
        f"For example, `{checks[0]}` holds.\n"
        "Answer with the complete function (and any imports it needs) in a ```python block."
    )
    tests = tuple((f"test_{i}", f"assert {check}, {check!r}\n") for i, check in enumerate(checks))
    return CodeTask(f"builtin/{name}", prompt, name, tests, textwrap.dedent(reference) + "\n", level=level)


@functools.lru_cache(maxsize=1)
def builtin_tasks() -> tuple[CodeTask, ...]:
    """The built-in tasks, ordered from easy to hard."""
    tasks = tuple(sorted((_build(spec) for spec in _SPECS), key=lambda task: task.level or 0))
    report_unverifiable(tasks, "builtin")
    return tasks
