"""The `fold-constants` pass: an op that reads only constants becomes one.

Imported models keep small weights as `nn.constant`s and compute from them on
every call: after `decompose`, a BatchNorm's `scale * rsqrt(var + eps)` and
`bias - mean * scale` are five ops over `[C]` vectors that are the same on
every call (the MobileNetV2 fixture: 14 such chains, one kernel each even when
fused). This pass computes them once, at compile time, so they never reach a
kernel.

Values come from the reference interpreter's own op functions
(`reference/ops.py`, pure NumPy: no device code is imported), so a
folded constant means what the op means. Floats are computed in float64 from
the operands' stored values and rounded once to the result's element type,
as the unfused program stores that value: folding a chain op by op gives
exactly what `run_module(..., round_stored=True)` gives, and differs from
the kernels (which compute f16 and f32 in f32) only by rounding, well within
`fusec run --check`'s tolerances. Integers and i1 keep their own types.

An `nn.select` whose condition holds one value everywhere is the branch it
picks, when that branch already has the select's type (the guard an
attention gets for rows a mask takes out entirely, with a causal mask that
takes out no row): its readers read the branch, with a remark. The condition
is a constant, or computed from constants alone and evaluated for the
decision without being folded (`analysis/computed_values.py`: GPT-2's and
Llama's guards are reduced from a `[B, 1, S, S]` mask larger than the index
ranges it is built from, which stays ops).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from fusec.analysis.computed_values import computed_value
from fusec.analysis.dependency_graph import functions, value_names
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.nn_base import (
    NNOp,
    dense_to_numpy,
    element_type_name,
    numpy_dtype,
    numpy_to_dense,
    tensor_shape,
)
from fusec.dialects.shapes import numel
from fusec.reference.ops import OP_FUNCTIONS, round_to_bf16


def constant_operands(op: Operation) -> list[nn.ConstantOp] | None:
    """The `nn.constant`s `op` reads, in operand order, when it reads nothing
    else; None when some operand is not a constant (or there is none)."""
    owners = [v.owner for v in op.operands]
    if not owners or not all(isinstance(o, nn.ConstantOp) for o in owners):
        return None
    return [o for o in owners if isinstance(o, nn.ConstantOp)]


def _compute_array(constant: nn.ConstantOp) -> np.ndarray:
    """A constant's value as the interpreter holds it: floats in float64 (a
    splat stays a broadcast view)."""
    array = dense_to_numpy(constant.value)
    if array.dtype.kind != "f":
        return array
    if array.size > 1 and array.strides.count(0) == array.ndim:
        return np.broadcast_to(array.reshape(-1)[:1].astype(np.float64), array.shape)
    return array.astype(np.float64)


# Ops that read one operand and give its elements in another arrangement: of
# a splat, the same splat.
_SPLAT_VIEWS = (nn.TransposeOp, nn.ReshapeOp, nn.SliceOp, nn.BroadcastToOp)


def _splat_result(op: Operation, arrays: list[np.ndarray]) -> bool:
    """Whether `op` of these operand values is a splat computed from one
    element of each: an elementwise op or a view of splats only."""
    return (op_kind(op) == OpKind.ELEMENTWISE or isinstance(op, _SPLAT_VIEWS)) and all(
        a.strides.count(0) == a.ndim for a in arrays)


def _is_stored_splat(constant: nn.ConstantOp) -> bool:
    """`constant` holds one element for a shape of more (a parsed splat)."""
    array = dense_to_numpy(constant.value)
    return array.size > 1 and array.strides.count(0) == array.ndim


def evaluate(op: Operation, operands: list[nn.ConstantOp]) -> np.ndarray:
    """The value of `op`'s single result, in its element type (module docstring).

    Raises `ValueError` where the reference interpreter would (an `nn.gather`
    index out of range).
    """
    result = op.results[0]
    arrays = [_compute_array(c) for c in operands]
    splat = _splat_result(op, arrays)
    if splat:  # one element of each (of its rank), the result is a splat
        arrays = [a.reshape(-1)[:1].reshape((1,) * a.ndim) for a in arrays]
    # Overflow to inf or NaN (also when rounding to f16) is the program's
    # value, as it would be on a GPU.
    with np.errstate(all="ignore"):
        view = splat and isinstance(op, _SPLAT_VIEWS)
        raw = arrays[0] if view else OP_FUNCTIONS[type(op)](op, *arrays)
        value = np.asarray(raw)
        # bf16 has no NumPy type: its values are held as float32, rounded.
        value = round_to_bf16(value) if element_type_name(_element(result)) == "bf16" else \
            value.astype(numpy_dtype(_element(result)))
    if splat:
        return np.broadcast_to(value.reshape(-1)[0], tensor_shape(result))
    if value.shape != tensor_shape(result):
        raise AssertionError(f"reference for '{op.name}' produced shape {value.shape} for a "
                             f"result of shape {tensor_shape(result)}")
    return value


def _element(value: SSAValue) -> Attribute:
    t = value.type
    assert isinstance(t, TensorType)
    return t.element_type


def _candidate(op: Operation) -> TypeGuard[NNOp]:
    """An `nn` op with one result that the reference interpreter can run
    (every `nn` op is side-effect free)."""
    return (isinstance(op, NNOp) and not isinstance(op, nn.ConstantOp)
            and len(op.results) == 1 and type(op) in OP_FUNCTIONS)


def _held_bytes(op: Operation, operands: list[nn.ConstantOp]) -> int:
    """About the bytes `evaluate` holds for `op`: each operand as computed
    and the result, 8 bytes an element (floats are computed in float64), a
    splat as one element."""
    arrays = [dense_to_numpy(c.value) for c in operands]
    if _splat_result(op, arrays):
        return 8 * (len(arrays) + 1)
    held = sum(1 if a.strides.count(0) == a.ndim else a.size for a in arrays)
    return 8 * (held + numel(tensor_shape(op.results[0])))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass
class _FunctionFolder:
    """Folds the top-level ops of one function, in program order."""

    func: FuncOp
    max_elements: int
    max_bytes: int
    collector: RemarkCollector
    folded: int = 0
    erased: int = 0
    conditions: dict[SSAValue, np.ndarray | None] = field(default_factory=dict)

    def run(self) -> None:
        # Names as the input prints them, taken before any op is replaced.
        names = value_names(self.func)
        for op in list(self.func.body.block.ops):
            if isinstance(op, nn.SelectOp) and self._decided(op, names):
                continue
            operands = constant_operands(op)
            if operands is None or not _candidate(op):
                continue
            subject = f"{op.name} ({names.get(op.results[0], '%?')})"
            refusal = self._refusal(op)
            if refusal is None:
                try:
                    self._fold(op, operands)
                    self.collector.announce(
                        "remark", f"folded {subject} into a constant of "
                        f"{_count(numel(tensor_shape(op.results[0])), 'element')}")
                    continue
                except ValueError as err:  # the interpreter refuses the value
                    refusal = str(err)
            self.collector.announce("missed", f"{subject} not folded: {refusal}")
        if self.folded:
            erased = f"; erased {_count(self.erased, 'constant')} nothing reads any more"
            self.collector.announce(
                "remark", f"folded {_count(self.folded, 'op')} of @{self.func.sym_name.data} "
                f"into constants{erased if self.erased else ''}")

    def _decided(self, op: nn.SelectOp, names: dict[SSAValue, str]) -> bool:
        """A select whose constant condition is the same everywhere is the
        branch it picks (when that branch has the select's type): the
        guard of attention rows a constant mask takes out entirely, which no
        row of the mask does (importers/torch/decompositions.py)."""
        cond = op.cond.owner
        if isinstance(cond, nn.ConstantOp):
            values = dense_to_numpy(cond.value)
        else:  # computed from constants but not folded (larger than what it is built from)
            values = self.condition(op.cond)
            if values is None:
                return False
        if values.size == 0 or not (values.all() or not values.any()):
            return False
        picked = op.on_true if values.all() else op.on_false
        if picked.type != op.results[0].type:
            return False
        self.collector.announce(
            "remark", f"{op.name} ({names.get(op.results[0], '%?')}) always picks "
            f"{names.get(picked, '%?')}: its condition is the same everywhere")
        op.results[0].replace_all_uses_with(picked)
        Rewriter.erase_op(op)
        self._erase_unread(cond)
        return True

    def _erase_unread(self, op: Operation | None) -> None:
        """Erase `op` when nothing reads it any more, and then the ops of
        its operands nothing reads: a condition computed only for a select
        that no longer exists would otherwise get kernels of its own."""
        pending = [op]
        while pending:
            op = pending.pop()
            if not isinstance(op, NNOp) or op.parent is None or \
                    any(r.uses for r in op.results):
                continue
            owners = [v.owner for v in op.operands]
            Rewriter.erase_op(op)
            self.erased += 1
            pending.extend(o for o in owners if isinstance(o, Operation))

    def condition(self, v: SSAValue) -> np.ndarray | None:
        """The values constants alone compute for a select's condition
        (`analysis/computed_values.py`), evaluated once per value."""
        if v not in self.conditions:
            self.conditions[v] = computed_value(v)
        return self.conditions[v]

    def _refusal(self, op: NNOp) -> str | None:
        """Why `op` stays as it is, or None to fold it."""
        if "fusion" in op.attributes:
            # The contract asks for a kernel shaped a certain way; computing
            # the op away at compile time would silently void it.
            return f'it carries fusion = "{op.str_attr("fusion", "")}"'
        size = numel(tensor_shape(op.results[0]))
        largest = max(numel(tensor_shape(v)) for v in op.operands)
        if size > self.max_elements and size > largest:
            return (f"its result holds {size} elements, more than max_elements = "
                    f"{self.max_elements} and than its largest operand ({largest})")
        operands = constant_operands(op) or []
        held = _held_bytes(op, operands)
        if held > self.max_bytes:
            return (f"computing it would hold {held} bytes, more than max_bytes = "
                    f"{self.max_bytes}")
        if largest > self.max_elements and any(_is_stored_splat(o) for o in operands) and \
                not _splat_result(op, [dense_to_numpy(o.value) for o in operands]):
            # Elementwise ops and views fold a splat as one element; others
            # would expand it to all of its elements.
            return (f"it reads a splat constant of {largest} elements, more than "
                    f"max_elements = {self.max_elements}")
        return None

    def _fold(self, op: Operation, operands: list[nn.ConstantOp]) -> None:
        """Replace `op` by a constant of its value; erase the operands it
        leaves unread."""
        result = op.results[0]
        t = result.type
        assert isinstance(t, TensorType)
        constant = nn.ConstantOp.create(
            result_types=[t], attributes={"value": numpy_to_dense(evaluate(op, operands), t)})
        # Readers keep reading a value of the same name, from the same line.
        constant.result.name_hint = result.name_hint
        copy_location(op, constant)
        Rewriter.replace_op(op, constant)
        self.folded += 1
        for operand in dict.fromkeys(operands):
            if not operand.result.uses:
                Rewriter.erase_op(operand)
                self.erased += 1


@dataclass(frozen=True)
class FoldConstantsPass(ModulePass):
    """Replace every nn op whose operands are all constants by a constant of its value.

    ```mlir
    // before
    %eps = nn.constant dense<1.0e-05> : tensor<f32>
    %var = nn.constant dense<[0.5, 2.0]> : tensor<2xf32>
    %v = nn.add %var, %eps : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
    %s = nn.rsqrt %v : tensor<2xf32>
    %y = nn.mul %x, %s : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    // after `fusec -p fold-constants`
    %s = nn.constant dense<[1.4141994, 0.70710504]> : tensor<2xf32>
    %y = nn.mul %x, %s : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    ```

    One walk in program order reaches the fixpoint: an op's operands are
    folded before the op is visited. Each constant takes the name and source
    location of the op it replaces; a constant that nothing reads any more
    after a fold is erased (other unused ops are left alone).

    Kept as they are, with a `missed:` remark for `--remarks`:

    - results larger than `max_elements` (default 65536) *and* than the
      largest operand: `nn.broadcast_to` of a scalar to a big tensor would
      put all of it in model.mlir and constants.npz, where the op costs one
      cheap kernel. A fold never makes a constant bigger than that bound or
      than a constant the program already holds; `max_elements=0` folds only
      ops whose result is no larger than an operand.
    - ops whose evaluation would hold more than `max_bytes` (default
      1 GiB): each operand as computed (floats in float64, a splat as one
      element) and the result. Large weights stay as they are and the op
      becomes a kernel, where folding them would take the compiler's memory;
    - ops with a `fusion = "never" | "must"` contract: the user asked for
      that op's kernel;
    - ops on bf16 values (no NumPy dtype; code generation has none either);
    - values the interpreter refuses (an `nn.gather` index out of range,
      which a kernel clamps but cannot report).

    Only ops at the top level of a function are folded: inside a
    `fusion.group` a non-splat constant cannot stand (it must be an input).
    Remarks go to `--remarks` only, not to `fusion.remarks`: they are not
    fusion decisions, which the report lists from there.
    """

    name = "fold-constants"

    max_elements: int = 1 << 16
    max_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        if self.max_elements < 0:
            raise ValueError(f"max_elements must be 0 or more, got {self.max_elements}")
        if self.max_bytes < 0:
            raise ValueError(f"max_bytes must be 0 or more, got {self.max_bytes}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        collector = RemarkCollector()
        for func in functions(op):
            _FunctionFolder(func, self.max_elements, self.max_bytes, collector).run()
