"""The argument parser of every `fusec` command (`fusec`, `fusec run`,
`fusec import`): exit code 1 (not argparse's 2) with `PROG: error: ...`,
no abbreviated flags, and a suggestion for a misspelt one.

argparse takes any unambiguous prefix of a flag by default (`--remark` for
`--remarks`): a flag added later can then change what an old command line
means, so prefixes are refused (`allow_abbrev=False`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from fusec.compiler.suggest import closest

_UNRECOGNIZED = "unrecognized arguments: "


class FusecArgumentParser(argparse.ArgumentParser):
    """argparse with fusec's error style, whole flags only, and 'did you mean'."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print the usage and `PROG: error: MESSAGE` to stderr; exit with 1."""
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {self._with_suggestion(message)}\n")

    def _with_suggestion(self, message: str) -> str:
        """`message` plus `; did you mean '--flag'?` for each unknown flag close
        to one of this parser's (naming the unknown one when there are several)."""
        if not message.startswith(_UNRECOGNIZED):
            return message
        words = message[len(_UNRECOGNIZED):].split()
        known = [s for s in self._option_string_actions if s.startswith("--")]
        pairs = [(flag, match) for flag in (w.split("=", 1)[0] for w in words)
                 if flag.startswith("--") and (match := closest(flag, known)) is not None]
        if not pairs:
            return message
        if len(words) == 1:
            return f"{message}; did you mean '{pairs[0][1]}'?"
        hints = ", ".join(f"'{match}' for '{flag}'" for flag, match in pairs)
        return f"{message}; did you mean {hints}?"
