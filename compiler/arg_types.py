"""Argument types shared by the command lines: validated by argparse, so a bad
value is a `fusec: error: ...` line naming the option, never an internal error."""

from __future__ import annotations

import argparse


def non_negative_int(text: str) -> int:
    """An integer >= 0 (for counts, byte limits and seeds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (for iteration and program counts)."""
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be a positive integer, not 0")
    return value
