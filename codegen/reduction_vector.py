"""Vector row accesses of reduction kernels (`codegen/reduction.py`): four
row elements per load, 16 bytes of f32 (`ld.global.v4.f32`) or 8 bytes of
f16/bf16 (`wide_access.ld_wide64`).

A row kernel that reads one element per lane per load issues four times the
load instructions (and their address arithmetic) of one that reads a quad;
row reductions are issue bound on the H200, so that is time. Under a
schedule with `vector = 4`, quad `q` of a lane starts at row element

    jq = 4 * (lane + q * lanes)

and its elements are `jq + v`, `v < 4`: a warp reads 512 contiguous bytes
of f32 per load. Every input that varies along the row is read by quads
(broadcast ones too: a layer norm's gamma and beta, the `y` row of an outer
sum), and every row-shaped output is written by quads.

Legality (`vector_width`): a row schedule whose row is ONE collapsed
dimension (`reduction_index`), the innermost, of a length that is a multiple
of 4, with every row operand and per-element output f32, f16 or bf16. Then
every quad starts at a multiple of 4 elements of its array, so the quads of
an array are aligned when its base pointer is. Kernels test every such
pointer once (`aligned_condition`) and run the same passes with one element
per access when one is not (a view that starts at an odd element).
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.group_body import dtype_name, fits_domain
from fusec.analysis.reduction_views import folded_views
from fusec.codegen.reduction_index import plan_index
from fusec.codegen.wide_access import lane_value, pack_values, wide_load, wide_store
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import tensor_shape
from fusec.scheduling.reduction_plan import RowAnalysis

VECTOR = 4
"""Row elements per vector access."""

_WORD = "uint64"  # the word holding a quad of halves


def row_args(ra: RowAnalysis) -> list[BlockArgument]:
    """The inputs that vary along the row (read per element, by quads)."""
    return [a for a in ra.body.args
            if fits_domain(tensor_shape(a), ra.shape) and ra.arg_varies(a)]


def row_outputs(ra: RowAnalysis) -> list[int]:
    """The numbers of the outputs written per row element (by quads)."""
    return [k for k, v in enumerate(ra.body.outputs) if ra.stored_per_element(v)]


def _element(v: SSAValue) -> str:
    return of_device_dtype(dtype_name(v)).name


def _quad_bytes(v: SSAValue) -> int | None:
    """Bytes of a quad of `v`'s elements (the element table's width): f32
    quads are 16 bytes, half quads 8 (one uint64 word); None for the types
    read one element per access (f64, integers, booleans)."""
    row = of_device_dtype(dtype_name(v))
    return VECTOR * row.width if row.is_float and row.width in (2, 4) else None


def vector_width(ra: RowAnalysis) -> int:
    """`VECTOR` where a row schedule of `ra` may access its rows by quads
    (see the module docstring), else 1."""
    ix = plan_index(ra)
    if ix.reduce_dims != (len(ix.shape) - 1,) or ra.row_length % VECTOR or folded_views(
            ra.body.ops):
        return 1  # a view read in place is read one element per access
    args = row_args(ra)
    values = [*args, *(ra.body.outputs[k] for k in row_outputs(ra))]
    if not args or any(_quad_bytes(v) is None for v in values):
        return 1
    return VECTOR


def aligned_condition(ra: RowAnalysis) -> str:
    """The run-time test that every array accessed by quads is aligned to
    its quad's bytes."""
    tests = [f"is_aligned(in{ra.body.arg_index(a)}, {_quad_bytes(a)})"
             for a in row_args(ra)]
    tests += [f"is_aligned(out{k}, {_quad_bytes(ra.body.outputs[k])})"
              for k in row_outputs(ra)]
    return " and ".join(dict.fromkeys(tests))


def load_quad(v: SSAValue, name: str, array: str, index: str) -> tuple[str, list[str]]:
    """The statement loading the quad of `array` (holding `v`) at element
    `index` into `name`, and its four elements in the compute type."""
    element = _element(v)
    if element == "f32":
        return f"{name} = ld_vec4_f32({array}, {index})", [f"{name}[{k}]" for k in range(4)]
    return (f"{name} = {wide_load(_WORD, array, index)}",
            [lane_value(element, _WORD, name, k) for k in range(4)])


def store_quad(v: SSAValue, array: str, index: str, values: list[str]) -> str:
    """The statement storing `values` (compute type) of `v` at element
    `index` of `array`."""
    element = _element(v)
    if element == "f32":
        return f"st_vec4_f32({array}, {index}, {', '.join(values)})"
    return wide_store(_WORD, array, index, pack_values(element, _WORD, values))
