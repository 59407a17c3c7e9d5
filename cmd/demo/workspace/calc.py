"""A tiny calculator with a bug for the corral demo to fix."""


def add(a, b):
    return a + b


def mean(values):
    """Return the arithmetic mean of values."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / (len(values) - 1)
