"""The error of a pass that crashed (`compiler/pipeline.py` raises it, the
command line reports it), in a module of its own so that the command line can
catch it without importing the pass pipeline, and so xDSL."""

from __future__ import annotations


class InternalPassError(Exception):
    """A pass crashed: a bug in the pass, not in the user's input."""

    def __init__(self, pass_name: str, cause: Exception) -> None:
        super().__init__(f"internal error in pass '{pass_name}': {type(cause).__name__}: {cause}")
        self.pass_name = pass_name
