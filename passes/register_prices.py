"""What `register-budget` weighs when a kernel capped at `--max-registers N`
would spill: the spilled registers' local-memory traffic against the extra
HBM traffic and launch of splitting the group.

- spill: ptxas's spill bytes (stores + loads) per thread, times the threads
  the kernel launches, moved at `memory_bandwidth * local_memory_bandwidth_factor`
  (the cost model's `T_spill` rate: local memory mostly hits L1/L2);
- split: every value that crosses the split written by the first stage and
  read by the second, at `memory_bandwidth`, plus one more launch.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.targets import Target
from fusec.codegen.kernel_probe import KernelCount
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel


def spill_seconds(count: KernelCount, target: Target) -> float:
    """Local-memory traffic of the spills ptxas reports, for every thread."""
    traffic = count.spill_bytes * count.threads
    return traffic / (target.memory_bandwidth * target.local_memory_bandwidth_factor)


def crossing_values(first: list[Operation], rest: list[Operation]) -> list[SSAValue]:
    """Values the first stage computes and the second reads (constants are
    cloned into the second stage, not passed)."""
    inside = set(first)
    seen: dict[SSAValue, None] = {}
    for op in rest:
        for v in op.operands:
            if isinstance(v, OpResult) and v.op in inside and not isinstance(v.op, nn.ConstantOp):
                seen[v] = None
    return list(seen)


def split_seconds(first: list[Operation], rest: list[Operation], target: Target) -> float:
    """Writing and re-reading the crossing values, and one more launch."""
    moved = sum(2 * numel(tensor_shape(v)) * np.dtype(value_dtype(v)).itemsize
                for v in crossing_values(first, rest))
    return moved / target.memory_bandwidth + target.launch_overhead


def us(seconds: float) -> str:
    """`12.3 us`."""
    return f"{seconds * 1e6:.1f} us"
