"""Split rows: a reduction whose rows cannot fill the GPU spreads each row
over several blocks, and the last block to arrive combines the partials
(`codegen/reduction.py`, "Split rows"). Run in numba's simulator against the
reference interpreter, with a small `fill_threads` so a handful of blocks
split; repeated launches on one executor check that the arrival counters are
left at zero."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import H200
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import Executor
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_plan import RowAnalysis, analyze
from fusec.scheduling.reduction_schedule import ReductionOptions, for_target
from tests.codegen_harness import check_program, compile_text

SMALL = ReductionOptions(fill_threads=4096, min_split_elems=4)


@pytest.fixture(autouse=True)
def small_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU of 4096 threads: small rows already split."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", SMALL)


COLUMN_SUM = """
func.func @f(%x: tensor<600x8xf32>) -> tensor<1x8xf32> {
  %s = nn.reduce_sum %x {axes = [0], keepdims = true} : (tensor<600x8xf32>) -> tensor<1x8xf32>
  func.return %s : tensor<1x8xf32>
}"""


def plan(ra: RowAnalysis, opts: ReductionOptions) -> reduction.RowSchedule:
    """The schedule of `ra` under `opts` on the h200 profile."""
    return reduction.plan_schedule(ra, for_target(H200, opts))


def test_column_sum_split_over_blocks() -> None:
    program = check_program(COLUMN_SUM, pipeline="group-each-op")
    launch = program.functions["f"].launches[0]
    # 8 columns of 600: 32 lanes per column, 4 blocks of 160 rows each (the last short).
    assert launch.block == (8, 32, 1)
    assert launch.grid == (1, 4, 1)
    assert "cuda.atomic.add(arrived, cuda.blockIdx.x, 1)" in program.kernels_source
    # The partials and the counter are workspaces, held like constants.
    fp = program.functions["f"]
    ws = [a.value for a in launch.args if a.value.startswith("w")]
    assert [fp.values[w].shape for w in ws] == [(4, 8), (1,)]
    assert all(not fp.constants[w].any() for w in ws)


def test_exact_chunks_unrolled_with_a_remainder() -> None:
    text = COLUMN_SUM.replace("600x8", "480x8")
    program = check_program(text, pipeline="group-each-op")
    launch = program.functions["f"].launches[0]
    # 480 rows = 3 chunks of 160, 5 rows per lane: 4 unrolled, then 1.
    assert launch.grid == (1, 3, 1)
    src = program.kernels_source
    assert "j_first = uint32(uint32(cuda.blockIdx.y) * uint32(160) + lane)" in src
    assert "j = uint32(j_first + uint32(e * 4 + 3) * uint32(32))" in src
    assert "for e in range(4, 5):" in src
    assert "if j < uint32(480)" not in src


def test_column_partials_transposed_in_shared_memory() -> None:
    program = check_program(COLUMN_SUM, pipeline="group-each-op")
    src = program.kernels_source
    # red[lane, row]: a warp's 32 consecutive rows hit 32 banks.
    assert "red0 = cuda.shared.array((32, 8), float32)" in src
    assert "red0[lane, rloc] = red0[lane, rloc] + red0[lane + 16, rloc]" in src


@pytest.mark.parametrize(
    ("text", "launches"),
    [
        # Everything into one number: one row, split over blocks (row schedule).
        ("""
func.func @f(%x: tensor<3000xf32>) -> tensor<f32> {
  %m = nn.reduce_max %x {axes = [0]} : (tensor<3000xf32>) -> tensor<f32>
  func.return %m : tensor<f32>
}""", 1),
        # Root mean square per column in f64: the epilogue runs in the last block.
        ("""
func.func @f(%x: tensor<500x6xf64>) -> tensor<6xf64> {
  %y = fusion.group (%x) {name = "g0", kind = "reduction"} : (tensor<500x6xf64>) -> tensor<6xf64> {
  ^bb0(%a: tensor<500x6xf64>):
    %q = nn.mul %a, %a : (tensor<500x6xf64>, tensor<500x6xf64>) -> tensor<500x6xf64>
    %m = nn.reduce_mean %q {axes = [0]} : (tensor<500x6xf64>) -> tensor<6xf64>
    %r = nn.sqrt %m : tensor<6xf64>
    fusion.yield %r : tensor<6xf64>
  }
  func.return %y : tensor<6xf64>
}""", 1),
        # Two reductions in one pass, over the middle axis, integers.
        ("""
func.func @f(%x: tensor<2x700x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
  %s, %m = fusion.group (%x) {name = "g0", kind = "reduction"}
      : (tensor<2x700x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
  ^bb0(%a: tensor<2x700x3xi32>):
    %s1 = nn.reduce_sum %a {axes = [1]} : (tensor<2x700x3xi32>) -> tensor<2x3xi32>
    %m1 = nn.reduce_min %a {axes = [1]} : (tensor<2x700x3xi32>) -> tensor<2x3xi32>
    fusion.yield %s1, %m1 : tensor<2x3xi32>, tensor<2x3xi32>
  }
  func.return %s, %m : tensor<2x3xi32>, tensor<2x3xi32>
}""", 1),
    ],
)
def test_split_reductions_match_reference(text: str, launches: int) -> None:
    pipeline = None if "fusion.group" in text else "group-each-op"
    program = check_program(text, launches=launches, pipeline=pipeline)
    assert all(launch.grid[1] > 1 for launch in program.functions["f"].launches)


@pytest.mark.slow
def test_counters_return_to_zero_between_launches() -> None:
    program = compile_text(COLUMN_SUM, "group-each-op")
    ref = parse_module(make_context(), COLUMN_SUM, "test.mlir")
    ex = Executor(program, "f", device="sim")
    for seed in (1, 2, 3):  # a counter left non-zero would skip the combine
        inputs = random_inputs(find_function(ref, "f"), seed)
        expected = run_module(ref, inputs, "f")[0]
        np.testing.assert_allclose(ex(inputs)[0], expected, rtol=1e-4, atol=1e-4)
    counter = next(v for v in ex.constants if ex.fp.values[v].dtype == "int32")
    assert not np.asarray(ex.constants[counter].copy_to_host()).any()


def _schedule(text: str, opts: ReductionOptions) -> reduction.RowSchedule:
    program = parse_module(make_context(), text, "test.mlir")
    group = next(op for op in program.walk() if isinstance(op, GroupOp))
    return plan(analyze(GroupBody.of(group)), opts)


GROUPED = """
func.func @f(%x: tensor<4000x4xf32>) -> tensor<4000x4xf32> {{
  %y = fusion.group (%x) {{name = "g0", kind = "reduction"}}
      : (tensor<4000x4xf32>) -> tensor<4000x4xf32> {{
  ^bb0(%a: tensor<4000x4xf32>):
    {body}
  }}
  func.return %y : tensor<4000x4xf32>
}}"""


def test_row_shaped_outputs_split_in_two_kernels() -> None:
    # x - mean(x) needs every block's partial before its second pass: its
    # columns split over blocks in two kernels (split passes), never by the
    # last block to arrive.
    body = """%m = nn.reduce_mean %a {axes = [0], keepdims = true}
        : (tensor<4000x4xf32>) -> tensor<1x4xf32>
    %d = nn.sub %a, %m : (tensor<4000x4xf32>, tensor<1x4xf32>) -> tensor<4000x4xf32>
    fusion.yield %d : tensor<4000x4xf32>"""
    program = parse_module(make_context(), GROUPED.format(body=body), "test.mlir")
    ra = analyze(GroupBody.of(next(op for op in program.walk() if isinstance(op, GroupOp))))
    sched = plan(ra, SMALL)
    assert sched.splits > 1 and reduction.split_passes(ra, sched)


def test_no_split_when_rows_fill_the_gpu() -> None:
    # 262144 columns: 8192 blocks of 256 threads, four H200s' worth.
    assert _schedule_column(64, 262144, ReductionOptions()).splits == 1
    # 512 columns: 16 blocks. At most 7 splits keep 64 rows per lane (of 8);
    # 5 tile the 4000 rows exactly (800 each), so no row needs a bounds check.
    few = _schedule_column(4000, 512, ReductionOptions())
    assert (few.splits, few.chunk) == (5, 800)
    assert _schedule_column(4000, 512, ReductionOptions(split=False)).splits == 1


def _schedule_column(rows: int, cols: int, opts: ReductionOptions) -> reduction.RowSchedule:
    t = f"tensor<{rows}x{cols}xf32>"
    text = f"""
func.func @f(%x: {t}) -> tensor<{cols}xf32> {{
  %y = fusion.group (%x) {{name = "g0", kind = "reduction"}} : ({t}) -> tensor<{cols}xf32> {{
  ^bb0(%a: {t}):
    %s = nn.reduce_sum %a {{axes = [0]}} : ({t}) -> tensor<{cols}xf32>
    fusion.yield %s : tensor<{cols}xf32>
  }}
  func.return %y : tensor<{cols}xf32>
}}"""
    return _schedule(text, opts)
