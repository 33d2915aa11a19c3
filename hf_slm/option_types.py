"""The argparse types of every numeric option of `hf-slm` (issue 30, class 3): each says its range, so that a
value out of it is refused where it is parsed, in argparse's one line naming the option
("argument --batch-size: expected a positive integer, got 0"), before any model loads. A value 0 that would mean
"not given" is therefore never passed on: an option where 0 means something (--top-k 0: all legal actions,
--warmup-steps 0) is non-negative, the others positive.

`or_default` is the one way a value that may be left out gets its default.

Here, not in cli/, because the families' records and the data preparation hooks (lower layers) declare options
too. No torch: building the parser stays quick.
"""

import argparse
import math


def _number(text, convert, noun):
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text}")
    return value


def positive_int(text):
    """An integer >= 1 (a count, a size, a number of steps)."""
    value = _number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text):
    """An integer >= 0 (a seed, a number of warmup steps, a top-k where 0 means all)."""
    value = _number(text, int, "a non-negative integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def positive_float(text):
    """A finite number > 0 (a learning rate, a multiplier, a number of seconds or epochs)."""
    value = _number(text, float, "a positive number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def or_default(value, default):
    """`value`, or `default` when it is None: never when it is 0, an empty string or False, which a user gave
    (issue 30, class 1: `x or default` took `--max-new-words 0` for "not given"); the callee then refuses a value
    out of range, naming it."""
    return default if value is None else value


__all__ = ["non_negative_int", "or_default", "positive_float", "positive_int"]
