"""Layout ops as strided views: where element `(i0, ..., in)` of a value lies
in the buffer it was computed from, without moving any data.

A chain of `nn.transpose`, `nn.slice` and `nn.reshape` over a contiguous
buffer is an offset plus one stride per dimension whenever the reshapes only
split or merge dimensions that are contiguous with each other (NumPy's
no-copy reshape rule). The attention kernel reads the heads of a packed QKV
projection this way, and writes its output straight into the layout the next
matmul reads:

```python
v = StridedView.contiguous((8, 512, 2304))
v = v.slice([0, 0, 768], [1, 1, 1]).reshape((8, 512, 12, 64)).transpose([0, 2, 1, 3])
v.offset, v.strides   # 768, (1179648, 64, 2304, 1): head h, token s, dim d
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation

from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape

VIEW_OPS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)


@dataclass(frozen=True)
class StridedView:
    """Element `idx` of a value of `shape` is `buffer[offset + sum(idx * strides)]`."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def contiguous(shape: Sequence[int]) -> StridedView:
        """A row-major buffer of `shape`."""
        strides: list[int] = []
        step = 1
        for n in reversed(shape):
            strides.append(step)
            step *= n
        return StridedView(tuple(shape), tuple(reversed(strides)))

    def transpose(self, perm: Sequence[int]) -> StridedView:
        """Result dimension i is dimension `perm[i]`."""
        return StridedView(tuple(self.shape[p] for p in perm),
                           tuple(self.strides[p] for p in perm), self.offset)

    def untranspose(self, perm: Sequence[int]) -> StridedView:
        """The view of a transpose's operand, given the view of its result."""
        shape, strides = [0] * len(perm), [0] * len(perm)
        for i, p in enumerate(perm):
            shape[p], strides[p] = self.shape[i], self.strides[i]
        return StridedView(tuple(shape), tuple(strides), self.offset)

    def slice(self, starts: Sequence[int], steps: Sequence[int],
              shape: Sequence[int]) -> StridedView:
        """`x[starts::steps]` cut to `shape`."""
        offset = self.offset + sum(s * st for s, st in zip(starts, self.strides, strict=True))
        strides = tuple(st * k for st, k in zip(self.strides, steps, strict=True))
        return StridedView(tuple(shape), strides, offset)

    def broadcast(self, shape: Sequence[int]) -> StridedView:
        """The view broadcast (right-aligned) to `shape`: its new leading
        dimensions and the size-1 dimensions that grow read the same
        elements again (stride 0)."""
        lead = len(shape) - len(self.shape)
        grown = [0 if n == 1 and m != 1 else s
                 for n, m, s in zip(self.shape, shape[lead:], self.strides, strict=True)]
        return StridedView(tuple(shape), (0,) * lead + tuple(grown), self.offset)

    def reshape(self, shape: Sequence[int]) -> StridedView | None:
        """The same elements in row-major order as `shape`, or None when that
        needs a copy (merging dimensions that are not contiguous)."""
        strides = _reshape_strides(self.shape, self.strides, tuple(shape))
        return None if strides is None else StridedView(tuple(shape), strides, self.offset)

    def index(self, coords: Sequence[str]) -> str:
        """`offset + c0 * s0 + ...` as code, leaving out size-1 dimensions."""
        terms = [str(self.offset)] if self.offset else []
        for c, n, s in zip(coords, self.shape, self.strides, strict=True):
            if n != 1 and s != 0:
                terms.append(c if s == 1 else f"{c} * {s}")
        return " + ".join(terms) or "0"


def _reshape_strides(old: tuple[int, ...], old_strides: tuple[int, ...],
                     new: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy's no-copy reshape: each run of old dimensions that becomes a run
    of new ones must be contiguous within itself (size-1 dimensions aside)."""
    if 0 in old:
        return StridedView.contiguous(new).strides
    od = [(n, s) for n, s in zip(old, old_strides, strict=True) if n != 1]
    nd = [(k, n) for k, n in enumerate(new) if n != 1]
    out = [0] * len(new)
    oi = ni = 0
    while oi < len(od) and ni < len(nd):
        oj, nj = oi + 1, ni + 1
        o_prod, n_prod = od[oi][0], nd[ni][1]
        while o_prod != n_prod:  # grow the smaller side until both cover the same run
            if n_prod < o_prod:
                if nj == len(nd):
                    return None
                n_prod, nj = n_prod * nd[nj][1], nj + 1
            else:
                if oj == len(od):
                    return None
                o_prod, oj = o_prod * od[oj][0], oj + 1
        if any(od[k][1] != od[k + 1][0] * od[k + 1][1] for k in range(oi, oj - 1)):
            return None  # merging dimensions that are not contiguous: a copy
        step = od[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            out[nd[k][0]] = step
            step *= nd[k][1]
        oi, ni = oj, nj
    return tuple(out) if (oi, ni) == (len(od), len(nd)) else None


def forward(view: StridedView, op: Operation) -> StridedView | None:
    """The view of `op`'s result, given the view of its operand (None: not a
    view, or a reshape that would copy)."""
    if isinstance(op, nn.TransposeOp):
        return view.transpose(op.perm)
    if isinstance(op, nn.SliceOp):
        return view.slice(op.starts, op.strides, tensor_shape(op.results[0]))
    if isinstance(op, nn.ReshapeOp):
        return view.reshape(tensor_shape(op.results[0]))
    if isinstance(op, nn.BroadcastToOp):
        return view.broadcast(tensor_shape(op.results[0]))
    return None


def backward(view: StridedView, op: Operation) -> StridedView | None:
    """The view of `op`'s operand, given the view of its result; only for
    ops that cover their operand exactly (transpose, reshape)."""
    if isinstance(op, nn.TransposeOp):
        return view.untranspose(op.perm)
    if isinstance(op, nn.ReshapeOp):
        return view.reshape(tensor_shape(op.operands[0]))
    return None
