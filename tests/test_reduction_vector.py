"""Row reductions read and write their rows by quads (`vector = 4`,
`codegen/reduction_vector.py`): 16-byte f32 accesses, 8-byte f16/bf16 ones.
Run in numba's simulator (whose `ld_vec4_f32` faults on a misaligned address,
as the GPU does) against the reference interpreter; the PTX of a quad kernel
has `ld.global.v4.f32`."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numba import cuda

from fusec.analysis.diagnostics import FusecError
from fusec.codegen.generate import generate_program
from fusec.codegen.ptx import compile_program_ptx
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import check_program, compile_text

FUSED = "decompose,form-fusion-groups"


def layer_norm(rows: int, n: int, element: str = "f32") -> str:
    """A layer norm written out of primitives, with gamma and beta (row
    operands broadcast over the rows)."""
    x, r, g = f"tensor<{rows}x{n}x{element}>", f"tensor<{rows}x1x{element}>", \
        f"tensor<{n}x{element}>"
    return f"""
func.func @f(%x: {x}, %g: {g}, %b: {g}) -> {x} {{
  %m = nn.reduce_mean %x {{axes = [1], keepdims = true}} : ({x}) -> {r}
  %d = nn.sub %x, %m : ({x}, {r}) -> {x}
  %q = nn.mul %d, %d : ({x}, {x}) -> {x}
  %v = nn.reduce_mean %q {{axes = [1], keepdims = true}} : ({x}) -> {r}
  %e = nn.constant dense<1.0e-05> : tensor<{element}>
  %ve = nn.add %v, %e : ({r}, tensor<{element}>) -> {r}
  %s = nn.rsqrt %ve : {r}
  %y = nn.mul %d, %s : ({x}, {r}) -> {x}
  %yg = nn.mul %y, %g : ({x}, {g}) -> {x}
  %o = nn.add %yg, %b : ({x}, {g}) -> {x}
  func.return %o : {x}
}}"""


def softmax(rows: int, n: int) -> str:
    x, r = f"tensor<{rows}x{n}xf32>", f"tensor<{rows}x1xf32>"
    return f"""
func.func @f(%x: {x}) -> {x} {{
  %m = nn.reduce_max %x {{axes = [1], keepdims = true}} : ({x}) -> {r}
  %d = nn.sub %x, %m : ({x}, {r}) -> {x}
  %e = nn.exp %d : {x}
  %s = nn.reduce_sum %e {{axes = [1], keepdims = true}} : ({x}) -> {r}
  %y = nn.div %e, %s : ({x}, {r}) -> {x}
  func.return %y : {x}
}}"""


def squared_error(rows: int, n: int) -> str:
    x, r = f"tensor<{rows}x{n}xf32>", f"tensor<{rows}xf32>"
    return f"""
func.func @f(%a: {x}, %b: {x}) -> {r} {{
  %d = nn.sub %a, %b : ({x}, {x}) -> {x}
  %q = nn.mul %d, %d : ({x}, {x}) -> {x}
  %s = nn.reduce_sum %q {{axes = [1]}} : ({x}) -> {r}
  func.return %s : {r}
}}"""


OUTER_EXP_SUM = """
func.func @f(%x: tensor<6x1xf32>, %y: tensor<1x48xf32>) -> tensor<6xf32> {
  %s = nn.add %x, %y : (tensor<6x1xf32>, tensor<1x48xf32>) -> tensor<6x48xf32>
  %e = nn.exp %s : tensor<6x48xf32>
  %r = nn.reduce_sum %e {axes = [1]} : (tensor<6x48xf32>) -> tensor<6xf32>
  func.return %r : tensor<6xf32>
}"""


@pytest.mark.parametrize(("rows", "n"), [(3, 64), (5, 40), (2, 12)])
def test_rows_in_registers_by_quads(rows: int, n: int) -> None:
    """Rows a multiple of 4 long: quads of x, gamma and beta, quad stores;
    40 and 12 leave the last quad of some lanes past the row's end."""
    program = check_program(layer_norm(rows, n), pipeline=FUSED)
    src = program.kernels_source
    assert all(f"ld_vec4_f32(in{k}" in src for k in (0, 2, 3))  # in1: the epsilon
    # one version: the runtime gives kernels 16-byte aligned arrays
    assert "st_vec4_f32(out0" in src and "is_aligned(in" not in src


def test_rows_not_a_multiple_of_four_read_one_element_at_a_time() -> None:
    program = check_program(layer_norm(3, 42), pipeline=FUSED)
    assert "ld_vec4_f32(in" not in program.kernels_source
    assert "is_aligned(in" not in program.kernels_source


@pytest.mark.parametrize("budget", [48 * 1024, 256])
@pytest.mark.parametrize("n", [96, 200])
def test_streamed_rows_by_quads(budget: int, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streamed passes walk quads: with the row cached in shared memory
    (quad-major slots), and re-read from memory (256 bytes: the online
    softmax); 200 is no multiple of 4 x lanes (a guarded loop)."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS",
                        ReductionOptions(registers=False, shared_budget=budget, max_lanes=16))
    program = check_program(softmax(3, n), pipeline=FUSED)
    src = program.kernels_source
    assert "ld_vec4_f32(in0" in src and "st_vec4_f32(out0" in src
    assert ("cache0" in src) == (budget > 256)


@pytest.mark.parametrize("budget", [48 * 1024, 256])
def test_streamed_half_rows_by_16_byte_words(budget: int, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """A streamed bf16 layer norm of 200 (a multiple of 8, not of 8 x
    lanes): 8 halves per access, cached in shared memory by element of the
    word (`v * n / 8 + jq / 8`), or re-read from memory."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS",
                        ReductionOptions(registers=False, shared_budget=budget, max_lanes=16))
    program = check_program(layer_norm(3, 200, "bf16"), pipeline=FUSED,
                            tolerance={"float16": 2e-2, "float32": 5e-2})
    src = program.kernels_source
    assert "ld_vec4_u32(in0" in src and "st_vec4_u32(out0" in src
    assert ("cache0" in src) == (budget > 256)


def test_split_rows_by_quads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS",
                        ReductionOptions(fill_threads=4096, min_split_elems=4, max_lanes=16))
    program = check_program(squared_error(2, 1024), pipeline=FUSED)
    (launch,) = program.functions["f"].launches
    assert launch.grid[1] > 1
    assert "ld_vec4_f32(in0" in program.kernels_source


def test_broadcast_row_operand_by_quads() -> None:
    """exp(x_i + y_j) summed over j: every row reads the y row by quads."""
    program = check_program(OUTER_EXP_SUM, pipeline=FUSED)
    src = program.kernels_source
    assert "ld_vec4_f32(in1" in src and "ld_vec4_f32(in0" not in src


def test_scalar_schedule_still_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(vector=1))
    program = check_program(layer_norm(3, 64), pipeline=FUSED)
    assert "ld_vec4_f32(in" not in program.kernels_source


@pytest.mark.parametrize("text", [softmax(3, 64), squared_error(3, 32)])
def test_misaligned_views_are_copied_for_the_quads(text: str) -> None:
    """Device arrays one element into a buffer are not 16-byte aligned: the
    runtime copies them before the kernel, which has only its quad version,
    reads them (the simulator's 16-byte access faults on a misaligned
    address, as the GPU does)."""
    program = compile_text(text, FUSED)
    assert "ld_vec4_f32(in0" in program.kernels_source
    assert "is_aligned(in" not in program.kernels_source
    module = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(module, "f"), 4)
    (want,) = run_module(module, inputs, "f")
    for offset in (0, 1):
        views = [cuda.to_device(np.concatenate([np.zeros(offset, np.float32), a.ravel()]))[offset:]
                 .reshape(a.shape) for a in inputs]
        (got,) = run_program(program, "f", views)
        np.testing.assert_allclose(got.copy_to_host(), want, rtol=1e-5, atol=1e-5)
        for view, a in zip(views, inputs, strict=True):  # read, never written
            np.testing.assert_array_equal(view.copy_to_host(), a)


@pytest.mark.parametrize("element", ["f16", "bf16"])
@pytest.mark.parametrize(("n", "load", "store"), [(64, "ld_vec4_u32(in0", "st_vec4_u32(out0"),
                                                  (36, "ld_wide64(in0", "st_wide64(out0")])
def test_half_rows_by_16_byte_words(element: str, n: int, load: str, store: str) -> None:
    """Rows of halves a multiple of 8 long move 8 per access (16 bytes, as
    f32 quads do); a multiple of 4 only, 4 (8 bytes)."""
    program = check_program(layer_norm(3, n, element), pipeline=FUSED,
                            tolerance={"float16": 2e-2, "float32": 5e-2})
    assert load in program.kernels_source and store in program.kernels_source
    assert "is_aligned(in" not in program.kernels_source
    vector = 8 if n % 8 == 0 else 4
    assert f"vector = {vector}>" in compile_model(layer_norm(3, n, element),
                                                  target="h200").model_mlir


def test_vector_is_recorded_in_the_schedule() -> None:
    text = compile_model(layer_norm(2, 64), target="h200").model_mlir
    assert "online = 0, vector = 4>" in text


BAD_VECTOR = """
func.func @f(%x: tensor<4x6xf32>) -> tensor<4xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "reduction",
      schedule = #fusion.reduction<layout = "row", row = "registers", lanes = 2,
          rows_per_block = 4, splits = 1, chunk = 0, per_lane = 4, cached = 0, unroll = 4,
          online = 0VECTOR>} : (tensor<4x6xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x6xf32>):
    %s = nn.reduce_sum %a {axes = [1]} : (tensor<4x6xf32>) -> tensor<4xf32>
    fusion.yield %s : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}"""


def test_schedule_without_vector_parses_and_a_wrong_vector_is_an_error() -> None:
    module = parse_module(make_context(), BAD_VECTOR.replace("VECTOR", ""), "t.mlir")
    source = generate_program(module).kernels_source
    assert "ld_vec4_f32(in" not in source
    module = parse_module(make_context(), BAD_VECTOR.replace("VECTOR", ", vector = 4"), "t.mlir")
    with pytest.raises(FusecError, match="vector = 4"):
        generate_program(module)


@pytest.mark.slow  # ptxas / a large compile: the slow set (README)
def test_quad_kernel_ptx_has_16_byte_accesses() -> None:
    try:
        info = compile_program_ptx(compile_text(layer_norm(64, 1024), FUSED))
    except FusecError as err:
        if re.search("nvrtc|nvvm", str(err), re.IGNORECASE):
            pytest.skip(f"NVRTC/NVVM unavailable: {err}")
        raise
    (ptx,) = [str(k["ptx"]) for k in info.values()]
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx
