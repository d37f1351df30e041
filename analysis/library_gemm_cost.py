"""What a contraction group costs when the library GEMM can run it.

`tile-and-promote` hands a contraction group to the library GEMM (cuBLAS)
when its matmul reads its operands from the group's inputs, directly or
through a transpose of the last two axes, in a type with a library GEMM,
and the library is available and faster (`scheduling/gemm_choice.py`); its
epilogue then runs as a second kernel re-reading C. Fusion legality prices
a group the way it will run, so that folding a slice or reshape into a
matmul's operand loads (which takes the library away: the fused SIMT GEMM
reads computed operands) is weighed against the library GEMM it replaces,
not against fusec's SIMT GEMM (a bf16 GPT-2 block ran 0.99 ms fused that
way and 0.56 ms with every op its own kernel, on the H200).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xdsl.ir import Operation, SSAValue

from fusec.analysis.cost_model import KernelCost
from fusec.analysis.library_epilogue import EpilogueFold, fold_epilogue
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.element_types import BY_NAME
from fusec.dialects.nn_base import element_type, element_type_name, tensor_shape
from fusec.dialects.shapes import numel

LIBRARY_PATHS = ("library_gemm", "library_gemm_half")
"""The `cost_model.KERNEL_PATHS` of a library GEMM."""


def library_element(ops: Iterable[Operation], inputs: frozenset[SSAValue]) -> str | None:
    """The element type of the group's one matmul when the library GEMM can
    read its operands (group inputs, directly or transposed in the last two
    axes) and has that type; else None."""
    ops = tuple(ops)
    mms = [op for op in ops if isinstance(op, nn.MatmulOp)]
    if len(mms) != 1:
        return None
    mm = mms[0]
    for v in mm.operands:
        if v in inputs:
            continue
        owner = v.owner
        rank = len(tensor_shape(v))
        swap = [*range(rank - 2), rank - 1, rank - 2]
        if not (isinstance(owner, nn.TransposeOp) and owner in ops
                and list(owner.perm) == swap and owner.operands[0] in inputs):
            return None
    name = element_type_name(element_type(mm.result))
    row = BY_NAME.get(name)
    return name if row is not None and row.library_gemm else None


def library_cost(ops: Iterable[Operation], inputs: frozenset[SSAValue],
                 outputs: Iterable[SSAValue], nbytes: Callable[[SSAValue], int],
                 element: str, target: Target, epilogue: bool = True) -> KernelCost:
    """The library GEMM and, when the group holds more than its matmul, its
    operand transposes and (with `epilogue`) the leading epilogue ops that
    cuBLASLt computes in the same call (`analysis/library_epilogue.py`: read
    by the call, no re-read of C), the epilogue kernel re-reading C, priced
    as one roofline over both kernels' bytes at the library's rate for
    `element`."""
    ops = tuple(ops)
    outputs = tuple(outputs)
    (mm,) = [op for op in ops if isinstance(op, nn.MatmulOp)]
    loaded = [v if v in inputs else v.owner.operands[0] for v in mm.operands]
    fold = fold_epilogue(mm, ops, inputs, outputs) if epilogue else EpilogueFold()
    c = nbytes(mm.result)
    moved = sum(map(nbytes, loaded)) + c + sum(map(nbytes, fold.inputs()))
    launches = 1
    rest = [op for op in ops if op not in fold.ops
            and not isinstance(op, (nn.MatmulOp, nn.TransposeOp, nn.ConstantOp))]
    if rest:
        others = [v for v in inputs if v not in loaded]
        if fold:  # only what the pointwise remainder reads
            others = [v for v in inputs if any(u.operation in rest for u in v.uses)]
        moved += c + sum(map(nbytes, others)) + sum(map(nbytes, outputs))
        launches = 2
    k = tensor_shape(mm.operands[0])[-1]
    flops = 2.0 * numel(tensor_shape(mm.result)) * k
    path = LIBRARY_PATHS[1] if BY_NAME[element].is_half else LIBRARY_PATHS[0]
    return KernelCost(moved, flops, target.max_resident_threads, 0, launches=launches, path=path)
