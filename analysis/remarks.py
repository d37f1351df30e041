"""Fusion remarks: one readable line per decision, and views of the result.

`form-fusion-groups` records every accepted and refused fusion here:

```
remark: fused nn.exp (%2) into group g0: saves 256 MiB and 1 launch (dT = 60.3 us)
missed: nn.reduce_max (%m) not fused into group g0: a reduction cannot join a contraction group ...
```

They are stored on the module as the string list attribute `fusion.remarks`
(so later passes and report.md see them), read back with
`collect_remarks(module)`, and streamed to listeners while a pass runs (the
CLI's `--remarks` prints them to stderr). Printed and written IR leaves the
attribute out (`without_remarks`): one line holding every remark would push
the program off the screen; `fusec --remarks-in-ir` keeps it. `module_to_dot` draws the op graph
with every `fusion.group` as a Graphviz cluster and shapes on the edges
(`fusec MODEL --emit dot`, after the default pipeline or `-p`'s).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import escape_controls

REMARKS_ATTR = "fusion.remarks"

Listener = Callable[[str], None]
_listeners: list[Listener] = []


@dataclass(frozen=True)
class Remark:
    """One decision: `severity` is "remark" (done), "missed" (refused) or
    "note" (context, such as the target a pass guessed)."""

    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


class RemarkCollector:
    """Collects remarks in decision order; `store` writes them on the module."""

    def __init__(self) -> None:
        self.remarks: list[Remark] = []

    def add(self, severity: str, message: str) -> None:
        """Record a remark and hand it to every active listener."""
        remark = Remark(severity, message)
        self.remarks.append(remark)
        for listen in _listeners:
            listen(str(remark))

    def announce(self, severity: str, message: str) -> None:
        """Hand a remark to the listeners only (`--remarks`), without storing
        it: context such as the guessed target would be noise on every compile."""
        for listen in _listeners:
            listen(str(Remark(severity, message)))

    def lines(self) -> list[str]:
        """`severity: message` lines."""
        return [str(r) for r in self.remarks]

    def store(self, module: ModuleOp) -> None:
        """Append the remarks to the module's `fusion.remarks` list."""
        if not self.remarks:
            return
        old = collect_remarks(module)
        module.attributes[REMARKS_ATTR] = ArrayAttr(
            [StringAttr(line) for line in [*old, *self.lines()]]
        )


def collect_remarks(module: ModuleOp) -> list[str]:
    """The remark lines stored on `module` (empty when none were recorded)."""
    attr = module.attributes.get(REMARKS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return []
    return [a.data for a in attr.data if isinstance(a, StringAttr)]


@contextmanager
def without_remarks(module: ModuleOp) -> Iterator[ModuleOp]:
    """`module` without its `fusion.remarks` attribute inside the block (for
    printing), the attribute restored after it."""
    attr = module.attributes.pop(REMARKS_ATTR, None)
    try:
        yield module
    finally:
        if attr is not None:
            module.attributes[REMARKS_ATTR] = attr


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call `listener(line)` for every remark recorded inside the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


@contextmanager
def remarks_to_stderr() -> Iterator[None]:
    """Collect the remarks of the block and print them to stderr when it
    ends, also when it fails (`fusec --remarks`)."""
    lines: list[str] = []
    try:
        with listening(lines.append):
            yield
    finally:
        for line in lines:
            print(escape_controls(line), file=sys.stderr)


def format_bytes(n: float) -> str:
    """`256 MiB`, `1.5 KiB`, `96 B`: sizes as remarks print them."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            value = n / scale
            text = f"{value:.0f}" if value == int(value) else f"{value:.1f}"
            return f"{text} {unit}"
    return f"{int(n)} B"


# --- Graphviz -----------------------------------------------------------------------------

def module_to_dot(module: ModuleOp) -> str:
    """The op graph of every function as Graphviz; each `fusion.group` is a
    cluster labelled with its name and kind, values are edges labelled with
    their shape and element type.

    ```dot
    digraph fusec { subgraph cluster_softmax_g0 { label="g0 (reduction)"; ... }
      softmax_arg0 -> softmax_0_0 [label="4x8xf32"]; }
    ```
    """
    lines = ["digraph fusec {", "  rankdir=TB;", "  node [shape=box, fontname=monospace];"]
    for func in (op for op in module.walk() if isinstance(op, FuncOp)):
        lines.extend(_function_dot(func))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _function_dot(func: FuncOp) -> list[str]:
    fname = func.sym_name.data
    ids: dict[Operation, str] = {}
    source: dict[SSAValue, str] = {}
    out = [f'  subgraph cluster_{fname} {{', f'    label="@{fname}";']
    for i, arg in enumerate(func.body.block.args):
        node = f"{fname}_arg{i}"
        source[arg] = node
        out.append(f'    {node} [label="%{arg.name_hint or i}", shape=ellipse];')
    for k, op in enumerate(func.body.block.ops):
        if op.regions:
            out.extend(_group_dot(op, f"{fname}_{k}", ids, source))
        node = f"{fname}_{k}"
        ids[op] = node
        for res in op.results:
            source.setdefault(res, node)
        if not op.regions:
            shape = "ellipse" if isinstance(op, ReturnOp) else "box"
            out.append(f'    {node} [label="{op.name}", shape={shape}];')
    for op, node in ids.items():
        for operand in op.operands:
            if operand in source and not op.regions:
                out.append(f'    {source[operand]} -> {node} [label="{edge_label(operand)}"];')
    out.append("  }")
    return out


def _group_dot(
    group: Operation, prefix: str, ids: dict[Operation, str], source: dict[SSAValue, str]
) -> list[str]:
    """A cluster for one group; its block arguments alias the group operands
    and its results alias the yielded values, so edges cross the border."""
    name = _attr_text(group, "name") or prefix
    kind = _attr_text(group, "kind")
    out = [f"    subgraph cluster_{prefix} {{", f'      label="{name} ({kind})";',
           "      style=rounded; color=blue;"]
    block = group.regions[0].blocks.first
    assert block is not None
    for arg, operand in zip(block.args, group.operands, strict=True):
        if operand in source:
            source[arg] = source[operand]
    for j, inner in enumerate(block.ops):
        node = f"{prefix}_{j}"
        if inner.name == "fusion.yield":
            for value, res in zip(inner.operands, group.results, strict=True):
                if value in source:
                    source[res] = source[value]
            continue
        ids[inner] = node
        for res in inner.results:
            source[res] = node
        out.append(f'      {node} [label="{inner.name}"];')
    out.append("    }")
    return out


def edge_label(value: SSAValue) -> str:
    """`4x8xf32` for a `tensor<4x8xf32>` value (a scalar tensor: `f32`)."""
    t = value.type
    if isinstance(t, TensorType):
        return "x".join([*(str(d) for d in t.get_shape()), str(t.element_type)])
    return str(t)


def _attr_text(op: Operation, key: str) -> str:
    attr = op.attributes.get(key)
    return attr.data if isinstance(attr, StringAttr) else ""
