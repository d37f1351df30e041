"""register-budget: the estimate against ptxas, the budget, splits and re-tiling.

The accuracy tests compile every kernel of the examples and of the code
generation tests' programs to PTX (numba + NVRTC in a subprocess) and ask
`ptxas -arch=sm_90 -v` for the real count: each estimate must be within
+-25% and no kernel may spill.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.program import Program
from fusec.analysis.remarks import collect_remarks
from fusec.analysis.targets import get_target
from fusec.codegen.generate import generate_program
from fusec.codegen.ptx import compile_program_ptx
from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.passes.register_budget import RegisterBudgetPass, register_budget

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HAS_PTXAS = shutil.which("ptxas") is not None
TOLERANCE = 0.25
# Or this many registers either way: a kernel of 8 to 16 registers (a tiny
# pointwise one) is far from any budget, and 25% of it is 2 to 4 registers.
SLACK = 4
needs_ptxas = pytest.mark.skipif(not HAS_PTXAS, reason="ptxas is not installed")



def wide(n: int) -> str:
    """`n` inputs multiplied pairwise and summed: one fused group with many
    values live at once (a pointer and 4 elements in flight per input)."""
    lines = ["func.func @f(" + ", ".join(f"%a{i}: tensor<4096xf32>" for i in range(n))
             + ") -> tensor<4096xf32> {"]
    t = "(tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>"
    lines += [f"  %p{i} = nn.mul %a{i}, %a{i + 1} : {t}" for i in range(0, n, 2)]
    lines += [f"  %s{i} = nn.add {'%p0' if i == 2 else f'%s{i - 2}'}, %p{i} : {t}"
              for i in range(2, n, 2)]
    return "\n".join([*lines, f"  func.return %s{n - 2} : tensor<4096xf32>", "}"])


WIDE = wide(12)  # ~100 registers: under the default budget of 128, over 48


# The schedules the small examples never reach: the 128x128 and 64x64 GEMM
# tiles, a 32-channel 3x3 conv with its depthwise sibling and a pool, the
# tiled window kernels at MobileNet size (1x1 expand and project, depthwise
# 3x3, a strided max pool), a 4096-wide softmax row.
LARGE_SHAPES = """
func.func @large(%x: tensor<2048x512xf32>, %w: tensor<512x2048xf32>, %b: tensor<2048xf32>)
    -> tensor<2048x2048xf32> {
  %m = nn.matmul %x, %w : (tensor<2048x512xf32>, tensor<512x2048xf32>) -> tensor<2048x2048xf32>
  %s = nn.add %m, %b : (tensor<2048x2048xf32>, tensor<2048xf32>) -> tensor<2048x2048xf32>
  %g = nn.gelu %s : tensor<2048x2048xf32>
  func.return %g : tensor<2048x2048xf32>
}
func.func @medium(%x: tensor<768x768xf32>, %w: tensor<768x768xf32>) -> tensor<768x768xf32> {
  %m = nn.matmul %x, %w : (tensor<768x768xf32>, tensor<768x768xf32>) -> tensor<768x768xf32>
  func.return %m : tensor<768x768xf32>
}
func.func @conv(%x: tensor<8x32x56x56xf32>, %w: tensor<64x32x3x3xf32>,
                %dw: tensor<64x1x3x3xf32>, %b: tensor<64x1x1xf32>) -> tensor<8x64x28x28xf32> {
  %c = nn.conv2d %x, %w {pads = [1, 1, 1, 1]}
      : (tensor<8x32x56x56xf32>, tensor<64x32x3x3xf32>) -> tensor<8x64x56x56xf32>
  %s = nn.add %c, %b : (tensor<8x64x56x56xf32>, tensor<64x1x1xf32>) -> tensor<8x64x56x56xf32>
  %r = nn.relu %s : tensor<8x64x56x56xf32>
  %d = nn.conv2d %r, %dw {pads = [1, 1, 1, 1], groups = 64}
      : (tensor<8x64x56x56xf32>, tensor<64x1x3x3xf32>) -> tensor<8x64x56x56xf32>
  %p = nn.max_pool2d %d {kernel = [2, 2], strides = [2, 2]}
      : (tensor<8x64x56x56xf32>) -> tensor<8x64x28x28xf32>
  func.return %p : tensor<8x64x28x28xf32>
}
func.func @mobilenet(%x: tensor<8x32x56x56xf32>, %we: tensor<192x32x1x1xf32>,
                     %b: tensor<192x1x1xf32>, %wd: tensor<192x1x3x3xf32>,
                     %wp: tensor<32x192x1x1xf32>, %s: tensor<8x16x112x112xf32>)
    -> (tensor<8x32x56x56xf32>, tensor<8x16x56x56xf32>) {
  %e = nn.conv2d %x, %we : (tensor<8x32x56x56xf32>, tensor<192x32x1x1xf32>)
      -> tensor<8x192x56x56xf32>
  %eb = nn.add %e, %b : (tensor<8x192x56x56xf32>, tensor<192x1x1xf32>) -> tensor<8x192x56x56xf32>
  %er = nn.clamp %eb {min = 0.0, max = 6.0} : tensor<8x192x56x56xf32>
  %d = nn.conv2d %er, %wd {pads = [1, 1, 1, 1], groups = 192}
      : (tensor<8x192x56x56xf32>, tensor<192x1x3x3xf32>) -> tensor<8x192x56x56xf32>
  %dr = nn.clamp %d {min = 0.0, max = 6.0} : tensor<8x192x56x56xf32>
  %p = nn.conv2d %dr, %wp : (tensor<8x192x56x56xf32>, tensor<32x192x1x1xf32>)
      -> tensor<8x32x56x56xf32>
  %y = nn.add %p, %x : (tensor<8x32x56x56xf32>, tensor<8x32x56x56xf32>) -> tensor<8x32x56x56xf32>
  %m = nn.max_pool2d %s {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}
      : (tensor<8x16x112x112xf32>) -> tensor<8x16x56x56xf32>
  func.return %y, %m : tensor<8x32x56x56xf32>, tensor<8x16x56x56xf32>
}
func.func @softmax(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %y = nn.softmax %x {axis = 1} : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  func.return %y : tensor<4096x4096xf32>
}
"""

FULL = "decompose,form-fusion-groups{target=h200},group-each-op,register-budget,tile-and-promote"


def run_pipeline(text: str, pipeline: str) -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline)).run(module)
    return module


def groups(module: ModuleOp) -> list[GroupOp]:
    return [op for op in module.walk() if isinstance(op, GroupOp)]


def assert_estimates(program: Program, label: str, skip_pools: bool = False,
                     skip_attention: bool = False) -> list[str]:
    """Every kernel's estimate within +-25% of ptxas, none spilling; returns
    the table printed when one is off. `skip_pools` leaves out lone tiled
    pool kernels (`test_lone_pool_estimates_within_25_percent` covers them)."""
    info = compile_program_ptx(program)
    rows: list[str] = []
    bad: list[str] = []
    for fp in program.functions.values():
        for launch in fp.launches:
            if launch.library or (skip_pools and launch.kernel.endswith("_pool2d")) or (
                    skip_attention and launch.group.startswith("attn")):
                continue
            real = int(info[launch.kernel]["registers"])
            est = launch.est_registers
            err = (est - real) / real
            row = f"{label} {launch.kernel}: est {est}, ptxas {real} ({err:+.0%})"
            rows.append(row)
            off = abs(err) > TOLERANCE and abs(est - real) > SLACK
            if off or int(info[launch.kernel]["spill_bytes"]) != 0:
                bad.append(row)
    assert not bad, "\n".join(["estimates off:", *bad, "all:", *rows])
    return rows


# --- the budget -------------------------------------------------------------------------------


def test_budget_follows_occupancy_and_cap() -> None:
    h200 = get_target("h200")
    assert register_budget(h200, 0.25) == 128  # 512 threads per SM
    assert register_budget(h200, 0.5) == 64
    assert register_budget(h200, 0.25, max_registers=48) == 48
    assert register_budget(h200, 0.01) == 255  # the per-thread hardware limit


def test_every_group_and_launch_carries_an_estimate() -> None:
    art = compile_model(EXAMPLES / "gpt2_block.mlir", target="h200")
    for g in groups(art.module):
        assert "est_registers" in g.attributes
    launches = art.plan["functions"]["gpt2_block"]["launches"]
    assert all(entry["est_registers"] > 0 for entry in launches)
    assert "est. registers" in art.report_md


def test_default_budget_splits_a_group_far_over_it() -> None:
    # ~170 estimated. ptxas needs only ~45 for it unsplit since indices are
    # 32-bit (it does not keep every load in flight): the estimate is high for
    # groups of many arrays, so this checks the mechanism, not the need.
    art = compile_model(wide(40), target="h200")
    launches = art.program.functions["f"].launches
    # a stage estimated near the budget is decided by ptxas's count (where installed)
    notes = collect_remarks(art.module)
    kept = {m.group(1) for n in notes
            if (m := re.match(r"remark: kept group (\S+): ptxas counts (\d+) registers", n))}
    assert len(launches) > 1
    assert all(la.est_registers <= 128 or la.group in kept for la in launches), notes


def test_max_registers_splits_a_group_with_many_values_live() -> None:
    """On estimates alone (`ptxas=false`), a group over the cap is split."""
    plain = compile_model(WIDE, target="h200")
    capped_module = run_pipeline(WIDE, FULL.replace(
        "register-budget", "register-budget{max_registers=48 ptxas=false}"))
    before = plain.program.functions["f"].launches
    after = generate_program(capped_module).functions["f"].launches
    assert len(before) == 1 and before[0].est_registers > 48
    assert len(after) > 1
    assert all(0 < launch.est_registers <= 48 for launch in after)
    notes = collect_remarks(capped_module)
    assert any(re.match(r"remark: split group g0 into g0_s0 and g0_s1 after op \d+: it needs "
                        r"~\d+ registers .* over the budget of 48", n) for n in notes), notes


def test_contraction_over_budget_is_retiled_not_split() -> None:
    text = LARGE_SHAPES.split("func.func @medium")[0]
    module = run_pipeline(text, "decompose,form-fusion-groups{target=h200},group-each-op,"
                          "register-budget{max_registers=100 ptxas=false}")
    (g,) = groups(module)
    tile = g.attributes["schedule"]
    assert [tile.int_field(k) for k in ("bm", "bn", "bk", "tm", "tn", "vec")] == [  # type: ignore[attr-defined]
        64, 64, 8, 4, 4, 2]
    assert g.attributes["est_registers"].value.data <= 100
    notes = collect_remarks(module)
    assert any("re-scheduled group g0" in n and "tile 64x64x8" in n for n in notes), notes
    program = generate_program(module)
    assert "tile 64x64x8" in program.kernels_source  # the emitter honours the schedule



def test_a_gemm_the_library_computes_is_left_to_tile_and_promote() -> None:
    """With tile-and-promote's `gemm=library`, the matmul has no kernel of
    its own: register-budget keeps the group whole, and tile-and-promote
    gives the matmul to the library and the bias + gelu to a kernel."""
    text = LARGE_SHAPES.split("func.func @medium")[0]
    module = run_pipeline(text, "decompose,form-fusion-groups{target=h200},group-each-op,"
                          "register-budget{max_registers=100 ptxas=false gemm=library}")
    (g,) = groups(module)
    assert "schedule" not in g.attributes
    assert not any("re-scheduled" in n or "split group" in n for n in collect_remarks(module))
    module = run_pipeline(text, "decompose,form-fusion-groups{target=h200},group-each-op,"
                          "register-budget{max_registers=100 ptxas=false gemm=library},"
                          "tile-and-promote{target=h200 gemm=library}")
    assert [g.attributes.get("gemm") is not None for g in groups(module)] == [True, False]


def test_register_budget_refuses_an_unknown_library_mode() -> None:
    with pytest.raises(ValueError, match="gemm must be one of"):
        RegisterBudgetPass(gemm="cublas")
    with pytest.raises(ValueError, match="conv must be one of"):
        RegisterBudgetPass(conv="cudnn")

MOBILENET = "func.func @mobilenet" + LARGE_SHAPES.split("func.func @mobilenet")[1].split(
    "func.func @softmax")[0]


def test_window_over_budget_is_retiled_not_split() -> None:
    """A 1x1 conv's 4x8 outputs per thread are over a cap of 48: fewer
    channels per thread, recorded for tile-and-promote and the emitter."""
    module = run_pipeline(MOBILENET, FULL.replace(
        "register-budget", "register-budget{max_registers=48 ptxas=false}"))
    windows = [g for g in groups(module) if g.attributes["kind"].data == "window"]  # type: ignore[attr-defined]
    assert len(windows) == 4  # no split: each conv and the pool one kernel
    assert all(g.attributes["est_registers"].value.data <= 48 for g in windows)  # type: ignore[attr-defined]
    expand = windows[0]
    thread = expand.attributes["schedule"]
    assert (thread.int_field("pt"), thread.int_field("ot")) == (4, 4)  # type: ignore[attr-defined]
    notes = collect_remarks(module)
    assert any(n.startswith("remark: re-scheduled group g0:") and "window tile" in n
               for n in notes), notes
    assert "4x4 outputs per thread" in generate_program(module).kernels_source


def test_group_without_legal_split_says_it_may_spill() -> None:
    text = LARGE_SHAPES.split("func.func @medium")[0]
    module = run_pipeline(text, "decompose,group-each-op,"
                          "register-budget{max_registers=16 ptxas=false}")
    notes = collect_remarks(module)
    assert any(n.startswith("missed: group g0 needs") and "may spill" in n for n in notes), notes


# --- against ptxas ----------------------------------------------------------------------------


@needs_ptxas
@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.mlir")), ids=lambda p: p.stem)
def test_estimate_within_25_percent_of_ptxas_on_examples(path: Path) -> None:
    art = compile_model(path, target="h200")
    assert_estimates(art.program, path.stem, skip_attention=path.stem in ATTENTION_MISSES)


# Examples whose fused attention kernel the register fit misses (below).
ATTENTION_MISSES = ("attention", "gpt2_block")


@needs_ptxas
@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="fused attention at the examples' tiny shapes (one key "
                   "step, head dims 8 and 16): ptxas specialises the constant trip counts "
                   "(32 and 43 registers) where the fit, made on head dims 32 to 128 at "
                   "S = 512, gives about twice")
@pytest.mark.parametrize("name", ATTENTION_MISSES)
def test_attention_estimates_within_25_percent_on_examples(name: str) -> None:
    art = compile_model(EXAMPLES / f"{name}.mlir", target="h200")
    rows = assert_estimates(art.program, name)
    assert any("attn" in r for r in rows)


GROUPED = "register-budget,tile-and-promote"


def _codegen_test_programs() -> tuple[str, str]:
    """Every program of the code generation tests that compiles, as two
    modules (hand-written groups; plain ops the compiler fuses), functions
    renamed apart so one subprocess compiles each module."""
    grouped: list[str] = []
    plain: list[str] = []
    for name in ("contraction", "window", "reduction", "pointwise"):
        text = (ROOT / "tests" / f"test_codegen_{name}.py").read_text(encoding="utf-8")
        for m in re.finditer(r'"""(.*?)"""', text, re.S):
            body = m.group(1)
            if "func.func @f(" not in body:
                continue
            into = grouped if "fusion.group" in body else plain
            try:
                generate_program(run_pipeline(body, GROUPED if into is grouped else FULL))
            except Exception:
                continue
            n = len(grouped) + len(plain)
            into.append(body.replace("@f(", f"@f{n}(").strip())
    return "\n".join(grouped), "\n".join(plain)


@needs_ptxas
@pytest.mark.slow
def test_estimate_within_25_percent_of_ptxas_on_codegen_test_shapes() -> None:
    grouped, plain = _codegen_test_programs()
    assert grouped.count("func.func") + plain.count("func.func") >= 15
    assert_estimates(generate_program(run_pipeline(grouped, GROUPED)), "codegen")
    assert_estimates(generate_program(run_pipeline(plain, FULL)), "codegen")


@needs_ptxas
@pytest.mark.slow
def test_estimate_within_25_percent_of_ptxas_on_large_schedules() -> None:
    module = run_pipeline(LARGE_SHAPES, FULL)
    rows = assert_estimates(generate_program(module), "large", skip_pools=True)
    assert len(rows) >= 8
    # the re-tiled GEMMs register-budget falls back to
    mlp = (EXAMPLES / "mlp.mlir").read_text(encoding="utf-8")
    for cap in (100, 64):
        module = run_pipeline(mlp, FULL.replace(
            "register-budget", f"register-budget{{max_registers={cap} ptxas=false}}"))
        for g in groups(module):  # the estimate predicts the uncapped count: under
            del g.attributes["max_registers"]  # -maxrregcount ptxas fills up to the cap
        assert_estimates(generate_program(module), f"mlp cap {cap}")


POOLS = [(2, 2, "max"), (3, 2, "max"), (3, 1, "max"), (2, 2, "avg"), (5, 1, "max")]


@pytest.mark.slow
@needs_ptxas
def test_lone_pool_estimates_within_25_percent() -> None:
    """Lone 2-D pools (the conv + pool fusion is refused when the direct-loop
    kernel would be slower, so pools now often run alone)."""
    texts = []
    for k, s, kind in POOLS:
        o = (56 - k) // s + 1
        out = f"tensor<8x64x{o}x{o}xf32>"
        texts.append(f"""func.func @p{k}{s}{kind}(%x: tensor<8x64x56x56xf32>) -> {out} {{
  %p = nn.{kind}_pool2d %x {{kernel = [{k}, {k}], strides = [{s}, {s}]}}
      : (tensor<8x64x56x56xf32>) -> {out}
  func.return %p : {out}
}}""")
    assert_estimates(generate_program(run_pipeline("\n".join(texts), FULL)), "pools")


@needs_ptxas
@pytest.mark.slow
def test_max_registers_kernels_stay_within_the_cap_per_ptxas() -> None:
    """Estimated at ~100, the group capped at 48 registers does not spill:
    ptxas's count keeps it whole (the estimate alone would split it)."""
    capped = compile_model(WIDE, target="h200", schedule=ScheduleOptions(max_registers=48))
    info = compile_program_ptx(capped.program)
    notes = collect_remarks(capped.module)
    assert any(n.startswith("remark: kept group g0: ptxas counts") for n in notes), notes
    for name, entry in info.items():
        assert 0 < int(entry["registers"]) <= 48, (name, entry["registers"])
        assert int(entry["spill_bytes"]) == 0, name


@needs_ptxas
@pytest.mark.slow
def test_retiled_windows_stay_within_the_cap_per_ptxas() -> None:
    """Every kernel at most 48 registers; a spill only where a remark says
    the capped kernel was kept with it. (Under `-maxrregcount N` ptxas
    takes N as its target and often uses all of it, so the estimate, which
    predicts the uncapped count, is not compared here.)"""
    module = run_pipeline(MOBILENET, FULL.replace("register-budget",
                                                  "register-budget{max_registers=48}"))
    program = generate_program(module)
    info = compile_program_ptx(program)
    notes = collect_remarks(module)
    for fp in program.functions.values():
        for launch in fp.launches:
            entry = info[launch.kernel]
            assert 0 < int(entry["registers"]) <= 48, (launch.kernel, entry["registers"])
            if int(entry["spill_bytes"]):
                assert any(n.startswith(f"remark: kept group {launch.group} capped at 48")
                           for n in notes), (launch.kernel, notes)


@pytest.mark.parametrize(("name", "cap"), [("add_layernorm_gelu", 16), ("chain16", 16),
                                         pytest.param("inverted_residual", 24,
                                                      marks=pytest.mark.slow)])
def test_split_stages_compute_the_same_result(name: str, cap: int) -> None:
    """Stages split under a tight cap still compute the model (simulator)."""
    import numpy as np

    from fusec.reference.interpreter import find_function, random_inputs, run_module
    from fusec.runtime.executor import run_program

    path = EXAMPLES / f"{name}.mlir"
    # on estimates alone: with ptxas, tiny stages are cheaper kept capped than split
    options = PipelineOptions(target="h200", schedule=ScheduleOptions(max_registers=cap))
    spec = default_pipeline(make_registry([]), options).replace(
        f"max-registers={cap}}}", f"max-registers={cap} ptxas=false}}")
    art = compile_model(path, target="h200", pipeline=spec)
    (fname,) = art.program.functions
    assert len(art.program.functions[fname].launches) > 1
    reference = parse_module(make_context(), path.read_text(encoding="utf-8"), str(path))
    inputs = random_inputs(find_function(reference, fname), 0)
    expected = run_module(reference, inputs, fname)
    got = run_program(art.program, fname, inputs, device="sim")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
