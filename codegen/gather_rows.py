"""A table row staged in shared memory for a gather along its innermost
axis (`scheduling/staged_gather.py` decides; `codegen/pointwise_transpose.py`
writes the rest of the kernel).

Block `(r, part)` copies row `r` of the table into the dynamic shared
array `srow` (its bytes are the launch's `shared_bytes`), then writes its
part of the row's outputs, each gathered from `srow` instead of memory:

```python
srow = cuda.shared.array(0, uint16)   # one table row (bf16 bits)
row0 = uint32(cuda.blockIdx.x) * uint32(50257)
# 16-byte words from the word that holds the row's first element; lanes
# outside the row are not stored
...
cuda.syncthreads()
... out0[i] = f32_to_bf16(gelu(bf16_to_f32(srow[(r * 50257 + id) - row0])))
```

f32 and bf16 rows move in 16-byte words (`WORD_DTYPES`), `UNROLL` words
per thread in flight before their lanes are stored; a row whose words
would pass the table's last element (the last rows) and the other types
copy element by element.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument

from fusec.analysis.group_body import GroupBody, dtype_name
from fusec.codegen.computed_root import Load
from fusec.codegen.kernel_source import int_literal, widen
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel
from fusec.scheduling.staged_gather import WORD_DTYPES, StagedGather

ROW = "srow"
"""The shared array that holds the row."""
ROW_START = "row0"
"""The flat index of the row's first element in the table."""
UNROLL = 4
"""Staging words a thread loads before it stores their lanes."""


def table_load(staged: StagedGather, fallback: Load) -> Load:
    """A loader that reads the staged table from `srow` (at the table index
    less the row's start) and every other group input as `fallback` does."""

    def load(body: GroupBody, arg: BlockArgument, index: str) -> str:
        if arg is staged.table:
            return widen(dtype_name(arg), f"{ROW}[{index} - {ROW_START}]")
        return fallback(body, arg, index)

    return load


def staging_lines(body: GroupBody, staged: StagedGather, threads: int, itype: str,
                  row: str) -> list[str]:
    """Declare `srow`, copy table row `row` (an expression) into it and wait
    for the block."""
    table = f"in{body.arg_index(staged.table)}"
    dtype = dtype_name(staged.table)
    numba_t = of_device_dtype(dtype).numba_type
    k, lit = staged.row, int_literal
    lines = [f"{ROW} = cuda.shared.array(0, {numba_t})",
             f"{ROW_START} = {itype}({itype}({row}) * {itype}({lit(k)}))"]
    each = [f"for e in range(cuda.threadIdx.x, {lit(k)}, {lit(threads)}):",
            f"    {ROW}[e] = {table}[{ROW_START} + {itype}(e)]"]
    if dtype not in WORD_DTYPES:
        return [*lines, *each, "cuda.syncthreads()"]
    v = staged.words
    words = -(-(k + v - 1) // v)  # any alignment of the row's start
    total = numel(tuple(tensor_shape(staged.table)))
    load = "ld_vec4_f32" if dtype == "float32" else "ld_vec4_u32"
    step = threads * UNROLL
    body_lines: list[str] = []
    for u in range(UNROLL):
        body_lines += [f"q{u} = q + {lit(u * threads)}",
                       f"qc{u} = min(q{u}, {lit(words - 1)})",
                       f"wd{u} = {load}({table}, {itype}(lo + {itype}(qc{u}) * {itype}({v})))"]
    for u in range(UNROLL):
        body_lines.append(f"e{u} = int64(qc{u}) * int64({v}) - int64(sa)")
        for j in range(v):
            lane = (f"wd{u}[{j}]" if dtype == "float32" else
                    f"uint16((wd{u}[{j // 2}] >> uint32({16 * (j % 2)})) & uint32(0xFFFF))")
            body_lines += [f"if q{u} < {lit(words)} and 0 <= e{u} + {j} < {lit(k)}:",
                           f"    {ROW}[e{u} + {j}] = {lane}"]
    return [
        *lines,
        f"sa = {ROW_START} % {itype}({v})",
        f"lo = {ROW_START} - sa",
        f"if lo + {itype}({lit(words * v)}) <= {itype}({lit(total)}):",
        f"    for q in range(cuda.threadIdx.x, {lit(words)}, {lit(step)}):",
        *("        " + line for line in body_lines),
        "else:  # the table's last row(s): no word may pass its end",
        *("    " + line for line in each),
        "cuda.syncthreads()",
    ]
