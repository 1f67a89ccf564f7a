"""Counting and ranging helpers, each checked by its own tests in tests/test_core.py."""


def clamp(x, low, high):
    """x limited to the range [low, high]."""
    if x < low:
        return low
    if x > high:
        return high
    return x


def mean(values):
    """The arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def count_if(pred, values):
    """How many of values satisfy pred."""
    n = 0
    for v in values:
        if pred(v):
            n += 1
    return n


def chunks(values, size):
    """values cut into lists of size items (the last may be shorter)."""
    if size <= 0:
        raise ValueError("size must be positive")
    return [values[i:i + size] for i in range(0, len(values), size)]


def is_sorted(values):
    """Whether values never decrease."""
    return all(a <= b for a, b in zip(values, values[1:]))
