"""Which known bug a failure is: the items of issues 10 and 28 that other
changes fix, and the bugs this fuzzer found and reported (`nan-max-window`).

A failure that matches none of them is new and gets a look of its own.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import StringAttr

from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.fuzz.check import Outcome, check_text
from fusec.fuzz.special import edge_kind

KNOWN_ITEMS: dict[str, str] = {
    "item 1": "kernel names collide for long function names",
    "item 2": "nn.max / nn.min drop a NaN depending on operand order",
    "item 4": "a broadcast feeding softmax or a reduction in one group: NameError",
    "item 5": "an i1 output in a group with f16 values: TypeError in form-fusion-groups",
    "item 7": "the simulator raises where a GPU returns inf/NaN",
    "item 8": "zero-size dimensions",
    "nan-max-window": "max_pool2d, reduce_max and reduce_min drop a NaN (max(acc, x))",
}
_KNOWN_ERRORS: list[tuple[str, re.Pattern[str]]] = [
    ("item 4", re.compile(r"NameError: .*name 'c\d+' is not defined")),
    ("item 5", re.compile(r"'<' not supported between instances of '(NoneType' and 'float|"
                   r"float' and 'NoneType)'")),
    ("item 7", re.compile(r"math (domain|range) error|OverflowError")),
]
_ZERO_DIM = re.compile(r"tensor<(\d+x)*0x")
_NAN_DROPPED = re.compile(r"NaN at .*reference (np\.float64\()?nan")
_MAX_MIN = re.compile(r"nn\.(max|min) ")
_MAX_WINDOW = re.compile(r"nn\.(max_pool2d|reduce_max|reduce_min) ")
# Kernel names are cut to this many characters (item 1).
LONG_NAME = 38


def known_item(text: str, outcome: Outcome, seed: int, edges: bool | str,
               device: str = "sim") -> str | None:
    """The known bug (a key of `KNOWN_ITEMS`) `outcome`, a failure of `text`,
    is an instance of, or None.

    A failure of a program with a long function name that goes away under
    the name `f` is item 1; a NaN missing with edge inputs is item 2 (nn.max,
    nn.min) or nan-max-window (pools and reductions) when the program has
    such an op and passes without edge inputs.
    `edges` and `device` are `check_text`'s."""
    if _ZERO_DIM.search(text):
        return "item 8"
    for item, pattern in _KNOWN_ERRORS:
        if pattern.search(outcome.detail):
            return item
    short = short_name_variant(text)
    if short != text and not check_text(short, seed, edges, device).failed:
        return "item 1"
    if outcome.status != "mismatch" or edge_kind(edges) == "no" or \
            not _NAN_DROPPED.search(outcome.detail):
        return None
    for key, ops in (("item 2", _MAX_MIN), ("nan-max-window", _MAX_WINDOW)):
        if ops.search(text) and not check_text(text, seed, False, device).failed:
            return key
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
