"""The `check-precision` pass: run every fused group on random data at compile
time and split the groups whose result drifts too far from the unfused program.

`prec_ok` (analysis/fusion_legality.py) only estimates the drift from the
roundings a fusion skips. That estimate misses cancellation: in f16,
`(x + 1024) - 1024` rounds `x` to a whole number when the sum is stored, but not
when a fused kernel keeps the sum in an f32 register. This pass measures it.

Both sides are the reference interpreter (reference/interpreter.py) on the group
body, computing in f32 (f64 when the group holds an f64 value):

- *unfused*: every value an op produces is rounded to its declared element
  type, as one kernel per op stores it in memory;
- *fused*: only the group's results are rounded (their stores); intermediates
  stay in the compute type, as in the fused kernel's registers.

The difference is `max |fused - unfused| / max |unfused|` over each result
(inf when only one side is finite), compared with the tolerance of the
results' element type (`tau` of dialects.element_types: f64 1e-12, f32 1e-5, f16 1e-2,
bf16 5e-2). A group over it is split back into its ops, which `group-each-op`
then wraps one per kernel. A group whose float values all have the compute
type cannot differ and is not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.dependency_graph import functions
from fusec.analysis.remarks import RemarkCollector
from fusec.dialects import nn
from fusec.dialects.element_types import FLOAT_NAMES, tau
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import (
    FLOAT_TYPES,
    dense_to_numpy,
    element_type_name,
    tensor_shape,
)
from fusec.dialects.shapes import numel
from fusec.reference.interpreter import (
    random_block_inputs,
    round_to_element_type,
    run_block,
)


@dataclass(frozen=True)
class Drift:
    """How far a fused group's results are from the unfused program's."""

    error: float
    tolerance: float
    dtype: str  # the element type whose tolerance applies

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance

    def summary(self) -> str:
        """`3.1e-2 (tolerance 1e-2 for f16)`."""
        return f"{sci(self.error)} (tolerance {sci(self.tolerance, 0)} for {self.dtype})"


def sci(x: float, digits: int = 1) -> str:
    """`3.1e-2`: scientific notation without the exponent's padding."""
    if not np.isfinite(x):
        return str(x)
    return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m[1].replace('+', '')}{m[2]}",
                  f"{x:.{digits}e}")


def _float_types(group: GroupOp) -> set[str]:
    values: list[SSAValue] = [*group.block.args]
    values += [r for op in group.block.ops for r in op.results]
    return {n for v in values if (n := _element(v.type)) in FLOAT_TYPES}


def _element(t: Attribute) -> str:
    return element_type_name(t.element_type) if isinstance(t, TensorType) else ""


def compute_dtype(group: GroupOp) -> type:
    """f64 when the group holds an f64 value, else f32 (f16/bf16 widen to it)."""
    return np.float64 if "f64" in _float_types(group) else np.float32


def can_differ(group: GroupOp) -> bool:
    """Whether the two precisions can disagree: some float value is narrower
    than the compute type."""
    compute = "f64" if compute_dtype(group) is np.float64 else "f32"
    return any(n != compute for n in _float_types(group))


def group_inputs(group: GroupOp, seed: int) -> list[np.ndarray]:
    """Random values for the group's inputs; constants keep their values."""
    arrays = random_block_inputs(group.block, seed)
    for i, v in enumerate(group.inputs):
        owner = v.owner
        if isinstance(owner, nn.ConstantOp):
            arrays[i] = np.broadcast_to(dense_to_numpy(owner.value), arrays[i].shape)
    return arrays


def measure_drift(group: GroupOp, seed: int = 0) -> Drift:
    """Run `group` unfused and fused on the same random inputs (module docstring)."""
    inputs = group_inputs(group, seed)
    dtype = compute_dtype(group)
    unfused = run_block(group.block, inputs, dtype, round_stored=True)
    fused = run_block(group.block, inputs, dtype)
    error = 0.0
    for v, u, f in zip(group.outputs, unfused, fused, strict=True):
        error = max(error, relative_error(u, round_to_element_type(f, v.type)))
    names = [n for v in group.outputs if (n := _element(v.type)) in FLOAT_NAMES] or ["f32"]
    dtype_name = min(names, key=tau)
    return Drift(error, tau(dtype_name), dtype_name)


def relative_error(want: np.ndarray, got: np.ndarray) -> float:
    """`max |got - want| / max |want|`; inf when only one side is finite."""
    if want.dtype.kind != "f":
        return 0.0 if np.array_equal(want, got) else float("inf")
    finite = np.isfinite(want)
    if not np.array_equal(finite, np.isfinite(got)):
        return float("inf")
    if not finite.any():
        return 0.0
    diff = float(np.max(np.abs(got[finite].astype(np.float64) - want[finite])))
    scale = float(np.max(np.abs(want[finite].astype(np.float64))))
    return diff / scale if scale > 0 else diff


def split_group(group: GroupOp) -> list[Operation]:
    """Put the ops of `group` back before it, in order, and erase it.

    1. the body's arguments become the group's operands;
    2. the ops move out, in program order;
    3. readers of the group's results read the yielded values.
    """
    parent = group.parent_block()
    assert parent is not None
    for arg, operand in zip(group.block.args, group.inputs, strict=True):
        arg.replace_all_uses_with(operand)
    terminator = group.block.last_op
    assert isinstance(terminator, YieldOp)
    yielded = list(terminator.operands)
    moved = [op for op in group.block.ops if op is not terminator]
    for op in moved:
        op.detach()
        parent.insert_op_before(op, group)
    for result, value in zip(group.results, yielded, strict=True):
        result.replace_all_uses_with(value)
    parent.erase_op(group)
    return moved


def _name(group: GroupOp) -> str:
    attr = group.attributes.get("name")
    return attr.data if isinstance(attr, StringAttr) else "?"


@dataclass(frozen=True)
class CheckPrecisionPass(ModulePass):
    """Split the fused groups whose result differs from the unfused program's.

    ```mlir
    // f16: fused, (x + 1024) - 1024 keeps x's fraction; unfused, the stored
    // sum has none, so the group is refused and split:
    %s = fusion.group (%x, %c) {name = "g0", kind = "pointwise"} ... {
      %a = nn.add %x_1, %c_1 : (tensor<64xf16>, tensor<f16>) -> tensor<64xf16>
      %s_1 = nn.sub %a, %c_1 : (tensor<64xf16>, tensor<f16>) -> tensor<64xf16>
      fusion.yield %s_1 : tensor<64xf16>
    }
    // after `check-precision`, with the remark
    // missed: group g0 refused: fused result differs from the unfused one by
    //   1.5e-1 (tolerance 1e-2 for f16); split into one kernel per op
    %a = nn.add %x, %c : (tensor<64xf16>, tensor<f16>) -> tensor<64xf16>
    %s = nn.sub %a, %c : (tensor<64xf16>, tensor<f16>) -> tensor<64xf16>
    ```

    Options: `seed` (of the random inputs), `max_elements` (a group whose
    values hold more elements is not run, and a note says so), `remarks`
    (store them on the module as `fusion.remarks`).
    """

    name = "check-precision"

    seed: int = 0
    max_elements: int = 1 << 24
    remarks: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        collector = RemarkCollector()
        for func in functions(op):
            groups = [g for g in func.body.block.ops if isinstance(g, GroupOp)]
            for group in groups:
                self._check(group, collector)
        if self.remarks:
            collector.store(op)

    def _check(self, group: GroupOp, collector: RemarkCollector) -> None:
        ops = [o for o in group.block.ops if not isinstance(o, YieldOp)]
        if len(ops) < 2 or not can_differ(group):
            return
        name = _name(group)
        size = sum(numel(tensor_shape(v)) for o in ops for v in o.results)
        if size > self.max_elements:
            collector.add("note", f"group {name} not checked: its values hold {size} "
                          f"elements, more than max_elements = {self.max_elements}")
            return
        try:
            drift = measure_drift(group, self.seed)
        except (ValueError, NotImplementedError) as err:  # e.g. a bf16 constant
            collector.add("note", f"group {name} not checked: {err}")
            return
        if drift.ok:
            collector.add("remark", f"group {name} kept: fused result differs from the "
                          f"unfused one by {drift.summary()}")
            return
        split_group(group)
        collector.add("missed", f"group {name} refused: fused result differs from the "
                      f"unfused one by {drift.summary()}; split into one kernel per op")
