"""The stores of a one-across depthwise or pool block's outputs in words
(`scheduling/window_stage_lanes.py`: `out_lanes`), for
`codegen/window_tiled.py`.

A thread owns `pt` rows of one output column, so its own stores go down a
column: a warp's scalar stores of a narrow bf16 output (4 columns) cover
half of each 16-byte output row per instruction. A block as wide as the
output instead writes its results into its halo tile (free once every
thread has read its taps), then stores the tile's `th x ow` outputs, one
contiguous run of the output, in words of `lanes` (consecutive threads,
consecutive words; a word never spans two rows, the output rows being
whole words):

```python
cuda.syncthreads()                     # every tap read
if tid < 128:
    if o2_0 < 2488:
        xs[numba.uint64(r0), numba.uint64(col)] = yo2_0
    ...
cuda.syncthreads()
yw_ok = is_aligned(out0, 8)
yq0 = tid
if yq0 < 256:
    yr0 = yq0 // 1
    yi0 = o0 * 129376 + o1 * 9952 + (oh0 + yr0) * 4
    if yw_ok:
        st_wide64(out0, numba.uint64(yi0), uint64(bf16x2_bits(xs[...], xs[...])) | ...)
    else:
        out0[numba.uint64(yi0)] = f32_to_bf16(xs[numba.uint64(yr0), numba.uint64(0)])
        ...
```
"""

from __future__ import annotations

from fusec.codegen.kernel_source import int_literal, narrow
from fusec.codegen.point_evaluator import indent
from fusec.codegen.wide_access import WORD_TYPES, pack_values, wide_store
from fusec.codegen.window_staging import at
from fusec.dialects.element_types import of_device_dtype
from fusec.scheduling.window_plan import TiledWindow


def out_word_lines(tiled: TiledWindow, k: int, dtype: str, lanes: int) -> list[str]:
    """Output `k` (device dtype `dtype`), already in the halo tile `xs`,
    stored by every thread of the block in words of `lanes`."""
    g, p = tiled.geo, tiled.plan
    threads = tiled.threads
    per_row = g.ow // lanes
    rows = f"min({int_literal(p.th)}, {int_literal(g.oh)} - oh0)" if g.oh % p.th else None
    total = p.th * per_row
    width = lanes * of_device_dtype(dtype).width
    out = [f"# the block's outputs, {lanes}-element words of its contiguous rows",
           f"yw_ok = is_aligned(out{k}, {int_literal(width)})"]
    if rows is not None:
        out.append(f"yq_n = {rows} * {int_literal(per_row)}")
    plane = f"(o0 * {int_literal(g.c_out)} + o1) * {int_literal(g.oh * g.ow)}"
    for m in range(-(-total // threads)):
        q = f"yq{m}"
        r, c, i = f"yr{m}", f"yc{m}", f"yi{m}"
        place = [f"{r} = {q} // {int_literal(per_row)}" if per_row > 1 else f"{r} = {q}"]
        if per_row > 1:
            place.append(f"{c} = ({q} % {int_literal(per_row)}) * {int_literal(lanes)}")
        col0 = c if per_row > 1 else "0"
        place.append(f"{i} = {plane} + (oh0 + {r}) * {int_literal(g.ow)}"
                     + (f" + {c}" if per_row > 1 else ""))
        values = [f"xs[{at(r, _col(col0, j))}]" for j in range(lanes)]
        wide = _word_store(k, dtype, lanes, i, values)
        scalar = [f"out{k}[{at(_col(i, j))}] = {narrow(dtype, v)}" for j, v in enumerate(values)]
        body = [*place, "if yw_ok:", f"    {wide}", "else:", *indent(scalar, 1)]
        bound = "yq_n" if rows is not None else int_literal(total)
        guard = [] if rows is None and (m + 1) * threads <= total else [f"if {q} < {bound}:"]
        first = f"tid + {int_literal(m * threads)}" if m else "tid"
        out += [f"{q} = {first}", *(guard + indent(body, 1) if guard else body)]
    return out


def _col(base: str, j: int) -> str:
    if base == "0":
        return int_literal(j)
    return f"{base} + {int_literal(j)}" if j else base


def _word_store(k: int, dtype: str, lanes: int, index: str, values: list[str]) -> str:
    at_i = f"numba.uint64({index})"
    if dtype == "float32":
        return f"st_vec4_f32(out{k}, {at_i}, {', '.join(values)})"
    word_type = WORD_TYPES[lanes]
    word = pack_values(of_device_dtype(dtype).name, word_type, values)
    return wide_store(word_type, f"out{k}", at_i, word)

