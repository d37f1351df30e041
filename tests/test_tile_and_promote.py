"""tile-and-promote: recorded schedules, the shared-memory limit, and the
library-or-fused GEMM decision with its plan format (CuPy availability is
monkeypatched: CuPy is an optional extra)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.cost_model import gemm_choice
from fusec.analysis.diagnostics import FusecError
from fusec.analysis.remarks import collect_remarks
from fusec.analysis.targets import get_target
from fusec.codegen.generate import generate_program
from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ContractionSchedule, ScheduleAttr, WindowSchedule
from fusec.runtime.plan_loading import program_from_plan
from fusec.scheduling import gemm_choice as gemm_choice_module
from tests.fake_cupy import install_fake_cupy

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

MATMUL = """
func.func @f(%x: tensor<2048x512xf32>, %w: tensor<512x2048xf32>, %b: tensor<2048xf32>)
    -> tensor<2048x2048xf32> {
  %m = nn.matmul %x, %w : (tensor<2048x512xf32>, tensor<512x2048xf32>) -> tensor<2048x2048xf32>
  %s = nn.add %m, %b : (tensor<2048x2048xf32>, tensor<2048xf32>) -> tensor<2048x2048xf32>
  func.return %s : tensor<2048x2048xf32>
}
"""

SMALL_MLP = """
func.func @f(%x: tensor<8x16xf32>, %w: tensor<12x16xf32>, %b: tensor<12xf32>) -> tensor<8x12xf32> {
  %wt = nn.transpose %w {perm = [1, 0]} : (tensor<12x16xf32>) -> tensor<16x12xf32>
  %m = nn.matmul %x, %wt : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %s = nn.add %m, %b : (tensor<8x12xf32>, tensor<12xf32>) -> tensor<8x12xf32>
  %g = nn.gelu %s : tensor<8x12xf32>
  func.return %g : tensor<8x12xf32>
}
"""

SOFTMAX = """
func.func @f(%x: tensor<64x8192xf32>) -> tensor<64x8192xf32> {
  %y = nn.softmax %x {axis = 1} : (tensor<64x8192xf32>) -> tensor<64x8192xf32>
  func.return %y : tensor<64x8192xf32>
}
"""

PIPE = "decompose,form-fusion-groups{target=h200},group-each-op,register-budget,tile-and-promote"


def run(text: str, options: str = "") -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    spec = PIPE + (f"{{{options}}}" if options else "")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return module


def groups(module: ModuleOp) -> list[GroupOp]:
    return [op for op in module.walk() if isinstance(op, GroupOp)]


def sched(g: GroupOp) -> ScheduleAttr:
    attr = g.attributes["schedule"]
    assert isinstance(attr, ScheduleAttr)
    return attr


def tile(g: GroupOp) -> list[int]:
    """A window group's `[th, tw, oc_t, ci_step]`."""
    return [sched(g).int_field(k) for k in ("th", "tw", "oc_t", "ci_step")]


def windows_of(module: ModuleOp) -> list[GroupOp]:
    return [g for g in groups(module) if isinstance(g.attributes.get("schedule"), WindowSchedule)]


def test_contraction_schedule_is_recorded_and_honoured() -> None:
    module = run(MATMUL)
    (g,) = groups(module)
    s = sched(g)
    assert isinstance(s, ContractionSchedule)
    assert [s.int_field(k) for k in ("bm", "bn", "bk", "tm", "tn", "vec")] == [128, 128, 8, 8, 8, 2]
    assert "double-buffered" in g.attributes["schedule_text"].data  # type: ignore[attr-defined]
    assert g.attributes["shared_bytes_est"].value.data == 2 * 8 * (128 + 128 + 8) * 4


def test_shared_memory_limit_forces_a_smaller_tile() -> None:
    module = run(MATMUL, "shared_memory_limit=9000")
    (g,) = groups(module)
    assert (sched(g).int_field("bm"), sched(g).int_field("bn")) == (64, 64)
    assert g.attributes["shared_bytes_est"].value.data == 8704
    notes = collect_remarks(module)
    assert any("tile 128x128x8 (8x8 per thread) needs 16896 bytes of shared memory, over the "
               "limit of 9000; using 64x64x8" in n for n in notes), notes
    assert "tile 64x64x8" in generate_program(module).kernels_source


def test_reduction_row_schedule_follows_the_shared_budget() -> None:
    (g,) = groups(run(SOFTMAX))
    assert sched(g).str_field("row") in ("registers", "shared")
    (g,) = groups(run(SOFTMAX, "shared_memory_limit=4096"))
    assert sched(g).str_field("row") in ("registers", "memory")


def test_window_tile_shrinks_under_the_limit() -> None:
    text = (EXAMPLES / "inverted_residual.mlir").read_text(encoding="utf-8")
    free = {g.attributes["name"].data: tile(g)  # type: ignore[attr-defined]
            for g in windows_of(run(text))}
    module = run(text, "shared_memory_limit=1024")
    windows = windows_of(module)
    assert len(windows) == 3
    assert all(g.attributes["shared_bytes_est"].value.data <= 1024  # type: ignore[attr-defined]
               for g in windows)
    shrunk = [g for g in windows
              if tile(g) != free[g.attributes["name"].data]]  # type: ignore[attr-defined]
    assert shrunk
    notes = collect_remarks(module)
    assert all(any(f"group {g.attributes['name'].data}: window tile" in n  # type: ignore[attr-defined]
                   and "over the limit of 1024" in n for n in notes) for g in shrunk), notes
    assert any(sched(g).str_field("path") == "depthwise" for g in windows)


def test_cli_options_reach_the_passes(tmp_path: Path) -> None:
    art = compile_model(MATMUL, target="h200",
                        schedule=ScheduleOptions(shared_memory_limit=8192, gemm="fused"))
    (launch,) = art.program.functions["f"].launches
    assert launch.shared_bytes <= 8192 or "64x64" in art.kernels_py


# --- library or fused GEMM ---------------------------------------------------------------------


def test_cost_model_prefers_cublas_at_4096_cubed_when_available() -> None:
    h200 = get_target("h200")
    flops, n = 2.0 * 4096**3, 4096 * 4096 * 4
    lib = gemm_choice(h200, flops, 2 * n, n, n + 4096 * 4, "auto", True)
    assert lib.library and lib.t_library < lib.t_fused
    # 137 GFLOP at 50.8 TFLOP/s = 2.71 ms (+ epilogue); at 27 TFLOP/s = 5.09 ms
    assert 2.7e-3 < lib.t_library < 2.9e-3 and 5.0e-3 < lib.t_fused < 5.2e-3
    assert not gemm_choice(h200, flops, 2 * n, n, n, "auto", False).library
    assert not gemm_choice(h200, flops, 2 * n, n, n, "fused", True).library
    assert gemm_choice(h200, 2.0 * 8**3, 768, 256, 256, "library", False).library


def test_without_cupy_the_fused_kernel_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: False)
    art = compile_model(EXAMPLES / "mlp.mlir", target="h200")
    assert all(not launch.library for launch in art.program.functions["mlp"].launches)
    assert "fused (CuPy is not importable)" in art.report_md


def test_library_gemm_plan_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(SMALL_MLP, target="h200", schedule=ScheduleOptions(gemm="library"))
    first, epilogue = art.plan["functions"]["f"]["launches"]
    assert first["library"] == "cublas_sgemm" and first["kernel"] == "cublas_sgemm"
    assert (first["transpose_a"], first["transpose_b"]) == (False, True)
    assert (first["m"], first["n"], first["k"], first["batch"]) == (8, 12, 16, [])
    # the bias add runs in the library call (cuBLASLt); the erf GELU is no epilogue of its
    assert [a["value"] for a in first["args"]] == [first["a"], first["b"], first["c"],
                                                   first["bias"]]
    assert "activation" not in first and "residual" not in first
    assert epilogue["ops"] == ["nn.gelu"]
    assert "cublas_sgemm" not in art.kernels_py  # kernels.py holds only numba kernels
    assert "library GEMM + epilogue" in art.report_md
    program, _ = program_from_plan(art.plan, art.kernels_py, art.constants)
    assert program.functions["f"].launches[0].library == {
        k: first[k] for k in program.functions["f"].launches[0].library or {}}


def test_plan_needing_cupy_fails_clearly_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.runtime.executor import Executor

    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(SMALL_MLP, target="h200", schedule=ScheduleOptions(gemm="library"))
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    with pytest.raises(FusecError, match=r"needs CuPy: install cupy .* --gemm fused"):
        Executor(art.program, "f", device="sim")


def test_library_gemm_runs_through_a_cupy_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime path with a fake `cupy` over NumPy views of the
    simulator's arrays: the product lands in the plan's buffer and the
    epilogue kernel reads it. The bias add folded into the call: without
    libcublasLt to load, the GEMM runs and CuPy adds the bias, with a
    warning."""
    from fusec.reference.interpreter import find_function, random_inputs, run_module
    from fusec.runtime.executor import run_program

    install_fake_cupy(monkeypatch, no_cublaslt=True)  # no libcublasLt to load
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(SMALL_MLP, target="h200", schedule=ScheduleOptions(gemm="library"))
    reference = parse_module(make_context(), SMALL_MLP, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), 0)
    (expected,) = run_module(reference, inputs, "f")
    with pytest.warns(UserWarning, match="cuBLASLt refused .* cannot be loaded"):
        (got,) = run_program(art.program, "f", inputs, device="sim")
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_plan_with_library_launches_passes_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library call has no grid (0 x 0 x 0): plan.json holding one must
    load back from OUT (`fusec run OUT` checked it against the schema)."""
    from fusec.runtime.plan_schema import check_plan

    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(SMALL_MLP, target="h200", schedule=ScheduleOptions(gemm="library"))
    check_plan(art.plan, "plan.json", lambda name: True)
