"""Passes for the CLI tests, loaded with `--load-pass-plugin`: one that
changes nothing but has typed options, one that crashes (an internal error),
one that validates its option in `__post_init__`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class CliNoopPass(ModulePass):
    """Leave the module as it is (options only to test option parsing)."""

    name = "cli-noop"

    count: int = 1
    verbose: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Do nothing."""


@dataclass(frozen=True)
class CliCrashPass(ModulePass):
    """Raise RuntimeError, as a pass with a bug would."""

    name = "cli-crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fail the way a buggy pass does."""
        raise RuntimeError("cli-crash always fails")


@dataclass(frozen=True)
class CliCheckedPass(ModulePass):
    """Leave the module as it is; rejects a negative `min-count` itself."""

    name = "cli-checked"

    min_count: int = 0

    def __post_init__(self) -> None:
        if self.min_count < 0:
            raise ValueError(f"min-count must be 0 or more, got {self.min_count}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Do nothing."""
