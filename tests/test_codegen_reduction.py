"""Reduction kernels in numba's CUDA simulator against the reference
interpreter: single reductions over every kind of axis set (the fusion-off
baseline), and fused row groups (softmax, add + layer_norm + gelu,
sum(gelu(x))) that must run as ONE kernel."""

from __future__ import annotations

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import H200
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.dialects.shapes import reduced_shape
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_plan import RowAnalysis, analyze
from fusec.scheduling.reduction_schedule import ReductionOptions, for_target, to_attr
from tests.codegen_harness import check_program, emit_scheduled, tensor


def plan(ra: RowAnalysis, opts: ReductionOptions) -> reduction.RowSchedule:
    """The schedule of `ra` under `opts` on the h200 profile."""
    return reduction.plan_schedule(ra, for_target(H200, opts))


def _reduce_program(op: str, shape: tuple[int, ...], axes: list[int], keepdims: bool) -> str:
    norm = tuple(sorted(a % len(shape) for a in axes))
    out = tensor(reduced_shape(shape, norm, keepdims))
    kd = "true" if keepdims else "false"
    return f"""
func.func @f(%x: {tensor(shape)}) -> {out} {{
  %y = nn.{op} %x {{axes = {axes}, keepdims = {kd}}} : ({tensor(shape)}) -> {out}
  func.return %y : {out}
}}"""


@pytest.mark.parametrize(
    ("op", "shape", "axes", "keepdims"),
    [
        ("reduce_sum", (6, 20), [1], True),  # row (last axis)
        ("reduce_max", (6, 20), [-1], False),
        ("reduce_min", (12, 5), [0], False),  # column (axis 0)
        ("reduce_mean", (3, 7, 5), [1], True),  # middle axis
        ("reduce_sum", (3, 7, 5), [0, 2], False),  # several axes, last included
        ("reduce_mean", (4, 3, 6), [1, 2], False),  # several trailing axes
        ("reduce_max", (2, 3, 4), [0, 1, 2], True),  # everything
        ("reduce_sum", (5, 4, 3), [0, 1], True),  # several leading axes: column schedule
    ],
)
def test_single_reduction(op: str, shape: tuple[int, ...], axes: list[int], keepdims: bool) -> None:
    check_program(_reduce_program(op, shape, axes, keepdims), pipeline="group-each-op")


def test_integer_sum_and_max() -> None:
    text = """
func.func @f(%x: tensor<4x9xi32>) -> (tensor<4xi32>, tensor<9xi32>) {
  %s = nn.reduce_sum %x {axes = [1]} : (tensor<4x9xi32>) -> tensor<4xi32>
  %m = nn.reduce_max %x {axes = [0]} : (tensor<4x9xi32>) -> tensor<9xi32>
  func.return %s, %m : tensor<4xi32>, tensor<9xi32>
}"""
    check_program(text, launches=2, pipeline="group-each-op")


SOFTMAX = """
func.func @f(%x: tensor<5x{n}xf32>) -> tensor<5x{n}xf32> {{
  %y = fusion.group (%x) {{name = "g0", kind = "reduction"}}
      : (tensor<5x{n}xf32>) -> tensor<5x{n}xf32> {{
  ^bb0(%a: tensor<5x{n}xf32>):
    %m = nn.reduce_max %a {{axes = [1], keepdims = true}} : (tensor<5x{n}xf32>) -> tensor<5x1xf32>
    %d = nn.sub %a, %m : (tensor<5x{n}xf32>, tensor<5x1xf32>) -> tensor<5x{n}xf32>
    %e = nn.exp %d : tensor<5x{n}xf32>
    %s = nn.reduce_sum %e {{axes = [1], keepdims = true}} : (tensor<5x{n}xf32>) -> tensor<5x1xf32>
    %r = nn.div %e, %s : (tensor<5x{n}xf32>, tensor<5x1xf32>) -> tensor<5x{n}xf32>
    fusion.yield %r : tensor<5x{n}xf32>
  }}
  func.return %y : tensor<5x{n}xf32>
}}"""


def test_softmax_one_kernel_short_rows() -> None:
    # 12 elements per row: 3 quads (vector = 4), 4 lanes, several rows per block.
    program = check_program(SOFTMAX.format(n=12))
    assert program.functions["f"].launches[0].block == (4, 8, 1)


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generate reductions with the streamed schedule (shared-memory row
    cache) instead of the register-resident one."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(registers=False))


def test_softmax_row_in_registers_with_overhang() -> None:
    # 300 elements in registers: a warp per row, 10 elements per lane, the
    # last one guarded (300 = 9 * 32 + 12), 4 rows per block.
    program = check_program(SOFTMAX.format(n=300))
    assert program.functions["f"].launches[0].block == (32, 4, 1)
    # (by quads: the third quad of each lane is the guarded one)
    assert "okq2 = jqr2 < uint32(300)" in program.kernels_source
    assert "if live and okq2:" in program.kernels_source
    assert "ok8" not in program.kernels_source
    assert "cache0" not in program.kernels_source


def test_softmax_row_longer_than_block(monkeypatch: pytest.MonkeyPatch) -> None:
    # 300 elements > 256 lanes: each lane takes two elements of its row (the
    # block held at 256 threads: 4 rows would otherwise widen to 512 lanes).
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS",
                        ReductionOptions(registers=False, max_block_threads=256, vector=1))
    program = check_program(SOFTMAX.format(n=300))
    assert program.functions["f"].launches[0].block == (256, 1, 1)


@pytest.fixture
def scalar_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows read one element per access (`vector = 1`): the layout these
    tests describe (quads: tests/test_reduction_vector.py)."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(vector=1))


def _group(text: str) -> GroupOp:
    module = parse_module(make_context(), text, "test.mlir")
    return next(op for op in module.walk() if isinstance(op, GroupOp))


def test_softmax_caches_the_row_unless_over_budget() -> None:
    group = _group(SOFTMAX.format(n=300))
    ra = analyze(GroupBody.of(group))
    streamed = ReductionOptions(registers=False)
    assert plan(ra, streamed).cached == [ra.body.args[0]]
    tight = ReductionOptions(registers=False, shared_budget=2048)
    assert plan(ra, tight).cached == []
    group.attributes["schedule"] = to_attr(ra, plan(ra, tight))
    assert "cache0" not in emit_scheduled(group).text


def test_register_schedule_needs_a_row_that_fits() -> None:
    group = _group(SOFTMAX.format(n=300))
    ra = analyze(GroupBody.of(group))
    sched = plan(ra, ReductionOptions(vector=1))
    assert (sched.registers, sched.lanes, sched.per_lane, sched.cached) == (True, 32, 10, [])
    quads = plan(ra, ReductionOptions())  # 75 quads: 3 per lane of a warp
    assert (quads.registers, quads.lanes, quads.per_lane, quads.vector) == (True, 32, 12, 4)
    # At most 4 elements per lane would need 128 lanes; 64 are allowed.
    narrow = ReductionOptions(register_elems=4, max_register_lanes=64)
    assert not plan(ra, narrow).registers


ADD_LAYERNORM_GELU = """
func.func @f(%x: tensor<6x40xf32>, %r: tensor<6x40xf32>, %g: tensor<40xf32>, %b: tensor<40xf32>)
    -> (tensor<6x40xf32>, tensor<6x40xf32>) {
  %y, %h = fusion.group (%x, %r, %g, %b) {name = "g0", kind = "reduction"}
      : (tensor<6x40xf32>, tensor<6x40xf32>, tensor<40xf32>, tensor<40xf32>)
      -> (tensor<6x40xf32>, tensor<6x40xf32>) {
  ^bb0(%xa: tensor<6x40xf32>, %ra: tensor<6x40xf32>, %ga: tensor<40xf32>, %ba: tensor<40xf32>):
    %h0 = nn.add %xa, %ra : (tensor<6x40xf32>, tensor<6x40xf32>) -> tensor<6x40xf32>
    %mean = nn.reduce_mean %h0 {axes = [1], keepdims = true} : (tensor<6x40xf32>) -> tensor<6x1xf32>
    %c = nn.sub %h0, %mean : (tensor<6x40xf32>, tensor<6x1xf32>) -> tensor<6x40xf32>
    %sq = nn.mul %c, %c : (tensor<6x40xf32>, tensor<6x40xf32>) -> tensor<6x40xf32>
    %var = nn.reduce_mean %sq {axes = [1], keepdims = true} : (tensor<6x40xf32>) -> tensor<6x1xf32>
    %eps = nn.constant dense<1.0e-05> : tensor<f32>
    %ve = nn.add %var, %eps : (tensor<6x1xf32>, tensor<f32>) -> tensor<6x1xf32>
    %inv = nn.rsqrt %ve : tensor<6x1xf32>
    %n = nn.mul %c, %inv : (tensor<6x40xf32>, tensor<6x1xf32>) -> tensor<6x40xf32>
    %s = nn.mul %n, %ga : (tensor<6x40xf32>, tensor<40xf32>) -> tensor<6x40xf32>
    %t = nn.add %s, %ba : (tensor<6x40xf32>, tensor<40xf32>) -> tensor<6x40xf32>
    %o = nn.gelu %t {approximate = "none"} : tensor<6x40xf32>
    fusion.yield %o, %h0 : tensor<6x40xf32>, tensor<6x40xf32>
  }
  func.return %y, %h : tensor<6x40xf32>, tensor<6x40xf32>
}"""


@pytest.mark.usefixtures("scalar_rows")
def test_add_layernorm_gelu_in_registers() -> None:
    # x + r is computed once per element and reused by the variance and the
    # output passes from registers: no row cache, no second read of x or r.
    program = check_program(ADD_LAYERNORM_GELU)
    text = program.kernels_source
    assert "cache0" not in text
    assert text.count("in0[") == 2 and text.count("in1[") == 2  # 40 = 32 + 8 elements
    assert "cuda.shfl_xor_sync(0xffffffff, acc0, 16)" in text


@pytest.mark.usefixtures("streamed")
def test_add_layernorm_gelu_one_kernel_two_outputs() -> None:
    program = check_program(ADD_LAYERNORM_GELU)
    # Three passes read the row; the cache holds x + r (one value, not two inputs).
    assert "cache0" in program.kernels_source
    assert "cache1" not in program.kernels_source


def test_sum_of_gelu_with_reduced_and_row_outputs() -> None:
    text = """
func.func @f(%x: tensor<3x4x10xf32>)
    -> (tensor<3x4xf32>, tensor<3x4x10xf32>, tensor<3x4x1xf32>) {
  %s, %g, %m = fusion.group (%x) {name = "g0", kind = "reduction"}
      : (tensor<3x4x10xf32>) -> (tensor<3x4xf32>, tensor<3x4x10xf32>, tensor<3x4x1xf32>) {
  ^bb0(%a: tensor<3x4x10xf32>):
    %ge = nn.gelu %a {approximate = "tanh"} : tensor<3x4x10xf32>
    %su = nn.reduce_sum %ge {axes = [2]} : (tensor<3x4x10xf32>) -> tensor<3x4xf32>
    %sc = nn.mul %su, %su : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %mx = nn.reduce_max %ge {axes = [2], keepdims = true}
        : (tensor<3x4x10xf32>) -> tensor<3x4x1xf32>
    fusion.yield %sc, %ge, %mx : tensor<3x4xf32>, tensor<3x4x10xf32>, tensor<3x4x1xf32>
  }
  func.return %s, %g, %m : tensor<3x4xf32>, tensor<3x4x10xf32>, tensor<3x4x1xf32>
}"""
    check_program(text)


def test_cached_value_computed_for_a_later_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # tanh(x) is needed only after the sum; pass 1 computes and caches it.
    text = """
func.func @f(%x: tensor<4x24xf32>) -> tensor<4x24xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "reduction"}
      : (tensor<4x24xf32>) -> tensor<4x24xf32> {
  ^bb0(%a: tensor<4x24xf32>):
    %s = nn.reduce_sum %a {axes = [1], keepdims = true} : (tensor<4x24xf32>) -> tensor<4x1xf32>
    %t = nn.tanh %a : tensor<4x24xf32>
    %r = nn.mul %t, %s : (tensor<4x24xf32>, tensor<4x1xf32>) -> tensor<4x24xf32>
    fusion.yield %r : tensor<4x24xf32>
  }
  func.return %y : tensor<4x24xf32>
}"""
    program = check_program(text)
    assert "cache0" not in program.kernels_source  # in registers by default
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(registers=False))
    program = check_program(text)
    assert "cache0[rloc, uint32(0) + jq // uint32(4)] = v1_v0" in program.kernels_source


def test_column_softmax_over_axis_0() -> None:
    text = """
func.func @f(%x: tensor<9x6xf32>) -> tensor<9x6xf32> {
  %y = nn.softmax %x {axis = 0} : tensor<9x6xf32>
  func.return %y : tensor<9x6xf32>
}"""
    # Not decomposed: the composite is expanded inside the emitter.
    check_program(text, pipeline="group-each-op")


def test_composites_in_one_group() -> None:
    text = """
func.func @f(%x: tensor<4x16xf32>, %g: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %y = nn.log_softmax %x {axis = -1} : tensor<4x16xf32>
  %z = nn.rms_norm %x, %g {axis = -1, epsilon = 1.0e-06}
      : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %y, %z : tensor<4x16xf32>, tensor<4x16xf32>
}"""
    check_program(text, launches=2, pipeline="group-each-op")


def test_reductions_over_different_axes_are_refused() -> None:
    text = """
func.func @f(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %a, %b = fusion.group (%x) {name = "g0", kind = "reduction"}
      : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  ^bb0(%v: tensor<4x8xf32>):
    %s = nn.reduce_sum %v {axes = [1]} : (tensor<4x8xf32>) -> tensor<4xf32>
    %t = nn.reduce_sum %v {axes = [0]} : (tensor<4x8xf32>) -> tensor<8xf32>
    fusion.yield %s, %t : tensor<4xf32>, tensor<8xf32>
  }
  func.return %a, %b : tensor<4xf32>, tensor<8xf32>
}"""
    with pytest.raises(FusecError, match="share their input shape and axes"):
        emit_scheduled(_group(text))
