"""Library GEMM or fused SIMT GEMM, per contraction group.

`tile-and-promote` asks `GemmChooser.decide` for every contraction group.
The cost model (`cost_model.gemm_choice`) prices both: cuBLAS at the target's
`library_gemm_rate` of the element type plus a separate epilogue kernel that re-reads C, against
fusec's fused kernel at `fused_gemm_flops` with the epilogue in registers.
When the library wins, the group is split after its matmul: the matmul alone
becomes a group marked `gemm = "library"` (code generation turns it into a
plan launch `{"library": "cublas_sgemm", ...}` that the runtime runs with
CuPy), the epilogue a pointwise group.

```mlir
%c = fusion.group (%x, %w) {name = "g0_s0", kind = "contraction", gemm = "library"} ...
%y = fusion.group (%c, %b) {name = "g0_s1", kind = "pointwise"} ...
```

The library needs each operand to be a group input, read directly or
transposed (cuBLAS takes a transpose flag), in a type whose row of
`dialects/element_types.py` names a library GEMM (f64, f32, f16, bf16).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.analysis.cost_model import GemmChoice, gemm_choice
from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.group_kind import GEMM_ATTR
from fusec.analysis.library_epilogue import EpilogueFold, fold_epilogue
from fusec.analysis.library_gemm_cost import library_element
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.element_types import ELEMENT_TYPES, of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel
from fusec.scheduling.kinds.common import group_name
from fusec.scheduling.library_tuning import ChoicePoint, LibraryTuner, tuned_choice

GEMM_MODES = ("auto", "library", "fused")
_LIBRARY_TYPES = "/".join(e.name for e in ELEMENT_TYPES if e.library_gemm)


def library_available() -> bool:
    """Whether CuPy can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ValueError, ImportError):  # a module object without a spec (a stand-in)
        return sys.modules.get("cupy") is not None



def cupy_tf32() -> bool:
    """Whether CuPy runs f32 GEMMs on TF32 tensor cores (it reads
    `CUPY_TF32` when it first multiplies f32 matrices)."""
    try:
        return int(os.environ.get("CUPY_TF32", "0")) > 0
    except ValueError:
        return False

def _body(group: GroupOp) -> list[object]:
    return [op for op in group.block.ops if not isinstance(op, (YieldOp, nn.ConstantOp))]


def library_matmul(group: GroupOp) -> nn.MatmulOp | None:
    """The matmul of `group` when cuBLAS can compute it: operands read from
    group inputs directly or transposed, a float type it supports (the rule
    fusion legality prices by: `analysis/library_gemm_cost.library_element`)."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    if library_element(ops, frozenset(group.block.args)) is None:
        return None
    return next(op for op in ops if isinstance(op, nn.MatmulOp))


class GroupSplitter(Protocol):
    """Where a group may be split into two stages, and the split itself: the
    rewrite belongs to `register-budget` (`passes/register_budget.py`), which
    `tile-and-promote` hands to `GemmChooser.decide`."""

    def legal_splits(self, group: GroupOp) -> list[int]:
        """Indices k where the group's ops[:k] and ops[k:] may be two groups."""
        ...

    def split_group(self, group: GroupOp, k: int) -> tuple[GroupOp, GroupOp]:
        """Replace `group` by two groups: its first `k` ops, then the rest."""
        ...


@dataclass
class GemmChooser:
    """Decides per contraction group and rewrites the library choice."""

    family: ClassVar[str] = "gemm"  # its `ChoicePoint.family`
    target: Target
    mode: str
    available: bool
    remarks: RemarkCollector
    epilogue: bool = True  # fold the epilogue's leading ops into the call (cuBLASLt)
    # `--autotune` (`scheduling/library_tuning.py`): what overrules the model's
    # choice in `auto` mode, and how a group is scheduled alone in a mode.
    tuner: LibraryTuner | None = None
    schedule_alone: Callable[[ModuleOp, str], None] = field(default=lambda _m, _mode: None)

    def fold(self, group: GroupOp, mm: nn.MatmulOp) -> EpilogueFold:
        """What of the epilogue the library call computes (nothing when off)."""
        if not self.epilogue:
            return EpilogueFold()
        last = group.block.last_op
        yielded = list(last.operands) if isinstance(last, YieldOp) else []
        ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
        return fold_epilogue(mm, ops, group.block.args, yielded)

    def price(self, group: GroupOp, mm: nn.MatmulOp,
              fold: EpilogueFold | None = None) -> GemmChoice:
        """Both estimates for `group`'s matmul; what `fold` puts in the
        library call is read by it (bias, residual) and needs no kernel."""
        fold = fold or EpilogueFold()
        row = of_device_dtype(value_dtype(mm.result))
        item = row.width
        out = tensor_shape(mm.result)
        k = tensor_shape(mm.operands[0])[-1]
        operands = sum(numel(tensor_shape(v)) * item for v in mm.operands)
        operands += sum(_nbytes(v) for v in fold.inputs())
        result = numel(out) * item
        epilogue = 0
        body = _body(group)
        if len(body) > 1 + len(fold.ops) + sum(isinstance(o, nn.TransposeOp) for o in body):
            rest = [o for o in body if o is not mm and o not in fold.ops]
            others = [a for a in group.block.args if all(u.operation is not mm
                                                         for u in a.uses)]
            if fold:  # only what the pointwise remainder reads
                others = [a for a in group.block.args if any(u.operation in rest
                                                             for u in a.uses)]
            epilogue = result + sum(_nbytes(a) for a in others)
        return gemm_choice(self.target, 2.0 * numel(out) * k, operands, result, epilogue,
                           self.mode, self.available, row.name, cupy_tf32())

    def planned(self, group: GroupOp) -> bool:
        """Whether the cost model (or `--gemm library`) gives `group`'s
        matmul to the library, as `decide` will, without a remark or a
        rewrite. A group whose epilogue then turns out not to split from the
        matmul stays fused in `decide` though planned here."""
        mm = library_matmul(group)
        return mm is not None and self.price(group, mm, self.fold(group, mm)).library

    def decide(self, group: GroupOp, splitter: GroupSplitter) -> GroupOp:
        """The group to schedule as fused: `group` itself, or the matmul
        group (marked library) after `splitter` split the epilogue off."""
        mm = library_matmul(group)
        if mm is None:
            if self.mode == "library":
                self.remarks.add("missed", f"group {group_name(group)}: --gemm library needs "
                                 f"operands read directly (or transposed) in {_LIBRARY_TYPES}; "
                                 "fused")
            return group
        fold = self.fold(group, mm)
        choice = self.price(group, mm, fold)
        self.remarks.add("remark", f"group {group_name(group)}: {choice.summary()}")
        tuned = tuned_choice(self.tuner, self.mode, lambda: ChoicePoint(
            self.family, group, choice.library, choice.t_library * 1e6, choice.t_fused * 1e6,
            self.available, f"epilogue={self.epilogue}; tf32={cupy_tf32()}", self.schedule_alone),
            lambda note: self.remarks.add("remark", f"group {group_name(group)}: {note}"))
        if not (choice.library if tuned is None else tuned):
            return group
        if fold:
            self.remarks.add("remark", f"group {group_name(group)}: the library call computes "
                             f"{fold.describe()} (cuBLASLt epilogue)")
            _lead(group, mm, fold)
        ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
        head = split_head(group, ops.index(mm) + 1 + len(fold.ops), splitter)
        if head is None:
            self.remarks.add("missed", f"group {group_name(group)}: the epilogue cannot "
                             "be split from the matmul; fused")
            return group
        head.attributes[GEMM_ATTR] = StringAttr("library")
        return head


def split_head(group: GroupOp, k: int, splitter: GroupSplitter) -> GroupOp | None:
    """The group of `group`'s first `k` ops: `group` itself when only
    constants follow them, else the first of the two `splitter` makes;
    None when it may not split there."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    if k >= len(ops) or all(isinstance(o, nn.ConstantOp) for o in ops[k:]):
        return group
    if k not in splitter.legal_splits(group):
        return None
    return splitter.split_group(group, k)[0]


def _nbytes(v: SSAValue) -> int:
    return numel(tensor_shape(v)) * of_device_dtype(value_dtype(v)).width


def _lead(group: GroupOp, mm: nn.MatmulOp, fold: EpilogueFold) -> None:
    """Move the folded ops right after the matmul, so that the split after
    them leaves the library call its matmul and epilogue. They read only the
    group's inputs, the matmul and each other, and the ops moved past them
    none of theirs, so the order stays a valid one."""
    anchor: Operation = mm
    for op in fold.ops:
        op.detach()
        group.block.insert_op_after(op, anchor)
        anchor = op
