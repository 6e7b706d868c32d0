import sys

sys.path.insert(0, "/app")
from sumlib import total  # noqa: E402


def test_sums():
    assert total([1, 2, 3]) == 6
    assert total([]) == 0
    assert total([5]) == 5
