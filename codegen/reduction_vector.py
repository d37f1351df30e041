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

Legality (`scheduling/row_vector.vector_width`): a row schedule whose row is ONE collapsed
dimension (`scheduling/row_index.py`), the innermost, of a length that is a multiple
of 4, with every row operand and per-element output f32, f16 or bf16. Then
every quad starts at a multiple of 4 elements of its array, so the quads of
an array are aligned when its base pointer is, which the runtime promises
(`wide_access.ARRAY_ALIGNMENT`): the kernel has one version, the quads'.
A word wider than that promise would be tested once per kernel
(`aligned_condition`), with the same passes one element per access beside.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from fusec.analysis.group_body import dtype_name
from fusec.codegen.wide_access import (
    alignment_tests,
    lane_value,
    pack_values,
    wide_load,
    wide_store,
)
from fusec.dialects.element_types import of_device_dtype
from fusec.scheduling.reduction_plan import RowAnalysis
from fusec.scheduling.row_vector import quad_bytes, row_args, row_outputs

_WORD = "uint64"  # the word holding a quad of halves


def _element(v: SSAValue) -> str:
    return of_device_dtype(dtype_name(v)).name


def aligned_condition(ra: RowAnalysis) -> str:
    """The run-time test that every array accessed by quads is aligned to
    its quad's bytes; "" where the runtime's alignment promises it (a quad
    is at most 16 bytes, so always today)."""
    arrays = [(f"in{ra.body.arg_index(a)}", quad_bytes(a)) for a in row_args(ra)]
    arrays += [(f"out{k}", quad_bytes(ra.body.outputs[k])) for k in row_outputs(ra)]
    return " and ".join(alignment_tests(arrays))


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
