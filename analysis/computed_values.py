"""The values of tensors that constants alone compute, evaluated at compile
time without folding them into the program.

`fold-constants` folds an op of constants into a constant only while the
result stays small; a causal mask built from index ranges (GPT-2's
`[4, 1, 256, 256]` from two `[256]` ranges) is larger than what it is built
from and stays ops. Some decisions still need its values: whether a mask is
causal (cuDNN's attention, `scheduling/attention_library.py`), whether a
select's condition is the same everywhere (`fold-constants`). `computed_value`
evaluates such a value through the reference interpreter's op functions
(`reference/ops.py`, as `fold-constants` does), looking through a group's
block arguments to the values outside, within `EVALUATED` elements per op and
`MAX_DEPTH` ops back to the constants.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.ir import BlockArgument, SSAValue

from fusec.dialects import nn
from fusec.dialects.nn_base import NNOp, dense_to_numpy, tensor_shape
from fusec.dialects.shapes import numel
from fusec.reference.ops import OP_FUNCTIONS

EVALUATED = 1 << 24  # elements of one op evaluated at compile time, at most
MAX_DEPTH = 16  # ops from the value back to its constants, at most


def computed_value(v: SSAValue, outer: Mapping[BlockArgument, SSAValue] | None = None,
                   depth: int = 0) -> np.ndarray | None:
    """The values of `v` when constants alone compute it (looked through a
    group input to the value outside, `outer`): a constant, or an op of
    constants evaluated as the reference interpreter does. None for anything
    else, past `EVALUATED` elements or `MAX_DEPTH` ops."""
    if isinstance(v, BlockArgument) and outer is not None and v in outer:
        v = outer[v]
    owner = getattr(v, "op", None)
    if isinstance(owner, nn.ConstantOp):
        return np.asarray(dense_to_numpy(owner.value))
    if not isinstance(owner, NNOp) or type(owner) not in OP_FUNCTIONS or depth > MAX_DEPTH or \
            len(owner.results) != 1 or numel(tensor_shape(owner.results[0])) > EVALUATED:
        return None
    arrays = []
    for o in owner.operands:  # the first operand that is not constant ends the walk
        a = computed_value(o, outer, depth + 1)
        if a is None:
            return None
        arrays.append(a)
    with np.errstate(all="ignore"):
        value = np.asarray(OP_FUNCTIONS[type(owner)](owner, *arrays))
    return value if value.shape == tensor_shape(owner.results[0]) else None
