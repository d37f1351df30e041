"""Which known bug a failure is: the items of issue 10 that other changes fix.

A failure that matches none of them is new and gets a look of its own.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import StringAttr

from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.fuzz.check import Outcome, check_text

KNOWN_ITEMS: dict[int, str] = {
    1: "kernel names collide for long function names",
    2: "nn.max / nn.min drop a NaN depending on operand order",
    4: "a broadcast feeding softmax or a reduction in one group: NameError",
    5: "check-precision with an i1 output: TypeError",
    7: "the simulator raises where a GPU returns inf/NaN",
    8: "zero-size dimensions",
}
_KNOWN_ERRORS: list[tuple[int, re.Pattern[str]]] = [
    (4, re.compile(r"NameError: .*name 'c\d+' is not defined")),
    (5, re.compile(r"'<' not supported between instances of '(NoneType' and 'float|"
                   r"float' and 'NoneType)'")),
    (7, re.compile(r"math (domain|range) error|OverflowError")),
]
_ZERO_DIM = re.compile(r"tensor<(\d+x)*0x")
# Kernel names are cut to this many characters (item 1).
LONG_NAME = 38


def known_item(text: str, outcome: Outcome, seed: int, edges: bool) -> int | None:
    """The issue-10 item `outcome` (a failure of `text`) is an instance of, or None.

    A failure of a program with a long function name that goes away under
    the name `f` is item 1; a mismatch with edge inputs (NaN) reaching
    nn.max or nn.min is item 2 when it goes away without them."""
    if _ZERO_DIM.search(text):
        return 8
    for item, pattern in _KNOWN_ERRORS:
        if pattern.search(outcome.detail):
            return item
    short = short_name_variant(text)
    if short != text and not check_text(short, seed, edges).failed:
        return 1
    if outcome.status == "mismatch" and edges and re.search(r"nn\.(max|min) ", text) \
            and not check_text(text, seed, False).failed:
        return 2
    return None


def short_name_variant(text: str) -> str:
    """`text` with its function renamed `f` (unchanged when the name is short)."""
    module = parse_module(make_context(), text, "fuzz.mlir")
    func = next(iter(module.ops))
    name = func.attributes.get("sym_name") or getattr(func, "sym_name", None)
    if not isinstance(name, StringAttr) or len(name.data) < LONG_NAME:
        return text
    func.sym_name = StringAttr("f")  # type: ignore[attr-defined]
    return module_to_text(module)
