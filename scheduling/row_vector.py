"""Whether a row schedule may access its rows by quads (`vector_width`):
the legality rule of `codegen/reduction_vector.py` (its docstring tells
it), which writes the quad loads and stores. The row schedule
(`scheduling/reduction_schedule.py`) and the row writer both ask it.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.group_body import dtype_name, fits_domain
from fusec.analysis.reduction_views import folded_views
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import tensor_shape
from fusec.scheduling.reduction_plan import RowAnalysis
from fusec.scheduling.row_index import plan_index

VECTOR = 4
"""Row elements per vector access: a quad (16 bytes of f32, 8 of halves)."""
HALF_VECTOR = 8
"""Row elements per access where every row array holds halves: 16 bytes,
as f32 quads move. Measured on an H100 (2026-12-06): the bf16 bench rows
(add + layer norm + gelu, softmax) were at 97% of the copy floor with
8-byte quads and stay there; ViT's bf16 layer norms, 1.6x inductor's time
per kernel with 8-byte quads, are not measured with 16-byte ones yet."""

def row_args(ra: RowAnalysis) -> list[BlockArgument]:
    """The inputs that vary along the row (read per element, by quads)."""
    return [a for a in ra.body.args
            if fits_domain(tensor_shape(a), ra.shape) and ra.arg_varies(a)]


def row_outputs(ra: RowAnalysis) -> list[int]:
    """The numbers of the outputs written per row element (by quads)."""
    return [k for k, v in enumerate(ra.body.outputs) if ra.stored_per_element(v)]


def quad_bytes(v: SSAValue, vector: int = VECTOR) -> int | None:
    """Bytes of `vector` of `v`'s elements (the element table's width): an
    f32 quad is 16 bytes, a half quad 8 (one uint64 word), 8 halves 16;
    None for the types read one element per access (f64, integers,
    booleans)."""
    row = of_device_dtype(dtype_name(v))
    return vector * row.width if row.is_float and row.width in (2, 4) else None


def vector_width(ra: RowAnalysis) -> int:
    """The row elements per access of a row schedule of `ra` (see the
    module docstring): `HALF_VECTOR` when every row array holds halves and
    the row is a multiple of it long, else `VECTOR` where the rows may be
    read by quads, else 1."""
    ix = plan_index(ra)
    if ix.reduce_dims != (len(ix.shape) - 1,) or ra.row_length % VECTOR or folded_views(
            ra.body.ops):
        return 1  # a view read in place is read one element per access
    args = row_args(ra)
    values = [*args, *(ra.body.outputs[k] for k in row_outputs(ra))]
    if not args or any(quad_bytes(v) is None for v in values):
        return 1
    halves = all(of_device_dtype(dtype_name(v)).width == 2 for v in values)
    return HALF_VECTOR if halves and ra.row_length % HALF_VECTOR == 0 else VECTOR
