"""Vector row accesses of reduction kernels (`codegen/reduction.py`): four
row elements per load, 16 bytes of f32 (`ld.global.v4.f32`) or 8 bytes of
f16/bf16 (`wide_access.ld_wide64`); eight halves, 16 bytes
(`ld_vec4_u32`), where every row array holds halves (`vector = 8`). Below,
"quad" stands for either width.

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
    WORD_TYPES,
    alignment_tests,
    lane_value,
    pack_values,
    wide_load,
    wide_store,
)
from fusec.dialects.element_types import of_device_dtype
from fusec.scheduling.reduction_plan import RowAnalysis
from fusec.scheduling.row_vector import VECTOR, quad_bytes, row_args, row_outputs


def _element(v: SSAValue) -> str:
    return of_device_dtype(dtype_name(v)).name


def aligned_condition(ra: RowAnalysis, vector: int) -> str:
    """The run-time test that every array accessed by quads is aligned to
    its quad's bytes (`vector` elements); "" where the runtime's alignment
    promises it (a quad is at most 16 bytes, so always today)."""
    arrays = [(f"in{ra.body.arg_index(a)}", quad_bytes(a, vector)) for a in row_args(ra)]
    arrays += [(f"out{k}", quad_bytes(ra.body.outputs[k], vector)) for k in row_outputs(ra)]
    return " and ".join(alignment_tests((a, n) for a, n in arrays if n is not None))


def load_quad(v: SSAValue, name: str, array: str, index: str, vector: int = VECTOR
              ) -> tuple[str, list[str]]:
    """The statement loading the `vector` elements of `array` (holding `v`)
    at element `index` into `name`, and those elements in the compute type:
    an f32 quad, 4 halves in a uint64 word, 8 in four uint32 words."""
    element = _element(v)
    if element == "f32":
        return f"{name} = ld_vec4_f32({array}, {index})", [f"{name}[{k}]" for k in range(4)]
    word = WORD_TYPES[vector]
    return (f"{name} = {wide_load(word, array, index)}",
            [lane_value(element, word, name, k) for k in range(vector)])


def store_quad(v: SSAValue, array: str, index: str, values: list[str]) -> str:
    """The statement storing `values` (compute type; 4 f32, or 4 or 8
    halves) of `v` at element `index` of `array`."""
    element = _element(v)
    if element == "f32":
        return f"st_vec4_f32({array}, {index}, {', '.join(values)})"
    word = WORD_TYPES[len(values)]
    return wide_store(word, array, index, pack_values(element, word, values))
