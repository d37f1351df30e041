"""fusec's own import-time evaluation of ONNX ops, for when ONNX's reference
evaluator fails on valid data.

`onnx.reference` computes `GatherElements` with `np.choose`, which takes at
most 32 choices (64 on NumPy 2); past that it falls back to a 2-d special
case that returns the wrong number of elements (BERT's position ids:
`cannot reshape array of size 1 into shape (1,16)`), where onnxruntime runs
the node. The importer then tries, in order: a NumPy implementation here;
the node's own `nn` handler (the ops are emitted, and the `fold-constants`
pass computes them with fusec's reference interpreter when it compiles);
only then is it an error.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fusec.importers.onnx.context import NodeCtx, axis_of


def _gather_elements(ctx: NodeCtx) -> list[np.ndarray]:
    data = ctx.const(0, "the data")
    indices = ctx.const(1, "the indices").astype(np.int64)
    axis = axis_of(ctx, int(ctx.attr("axis", 0)), data.ndim)
    if indices.ndim != data.ndim:
        raise ctx.fail(f"indices of rank {indices.ndim} for data of rank {data.ndim}")
    size = data.shape[axis]
    if np.any((indices < -size) | (indices >= size)):
        raise ctx.fail(f"an index is out of range for axis {axis} of size {size}")
    return [np.take_along_axis(data, np.where(indices < 0, indices + size, indices), axis)]


FOLDERS: dict[str, Callable[[NodeCtx], list[np.ndarray]]] = {
    "GatherElements": _gather_elements,
}
"""ONNX op type -> fusec's NumPy evaluation of it, for constant inputs."""
