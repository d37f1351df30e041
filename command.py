"""The `fusec` command: the console script and `python -m fusec`.

The driver (`fusec.compiler.cli`) runs the compile and IR jobs and
`fusec run`; `fusec import` writes a model of a front end as `nn` IR, and the
importers sit above the driver (docs/layers.md), so the driver cannot
dispatch to them. This module, like `fusec/__init__.py`, sits above every
layer: it hands the driver its commands with `import` added.
"""

from __future__ import annotations

import sys

from fusec.compiler.cli import SUBCOMMANDS, Subcommand
from fusec.compiler.cli import main as driver_main


def _import(argv: list[str]) -> int:
    from fusec.importers.onnx.cli import main as import_main

    return import_main(argv)


COMMANDS: dict[str, Subcommand] = {
    **SUBCOMMANDS,
    "import": Subcommand(_import, "write an ONNX model or a torch.export program (.pt2) "
                         "as nn IR", "MODEL [-o FILE.mlir] [options]"),
}
"""Every `fusec NAME ...` command, in the order `fusec --help` lists them."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `fusec` console script: runs `argv` (default: the
    command line) and returns the exit code."""
    return driver_main(argv, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
