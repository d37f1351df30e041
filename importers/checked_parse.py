"""Every importer's last step: the `nn` text it wrote, parsed and verified by
fusec's own front end, so an importer bug is caught at import time."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import require_functions, verify_module


def parse_imported(text: str, filename: str, error: type[FusecError]) -> ModuleOp:
    """The module of `text`; IR that does not verify is an `error` (the
    importer's own error class) saying so, with the located message."""
    try:
        module = parse_module(make_context(), text, filename)
        require_functions(module)
        verify_module(module)
    except FusecError as err:
        raise error("internal error: the imported IR does not verify: "
                    + err.render({filename: text})) from None
    return module
