"""Schedules are chosen for the resolved target and recorded as data: the
same reduction gets a different launch on h200 and orin, the schedule
attribute prints and parses back, and the emitters obey it verbatim."""

from __future__ import annotations

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import get_target
from fusec.codegen.generate import generate_program
from fusec.compiler.compile import compile_model
from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ReductionSchedule

# 64 columns of a million rows: 2 blocks of columns, far too few for any GPU, so
# each column is split over as many blocks as fill the target.
COLUMN_SUM = """
func.func @f(%x: tensor<1048576x64xf32>) -> tensor<64xf32> {
  %y = nn.reduce_sum %x {axes = [0]} : (tensor<1048576x64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}"""


def _launch(target: str) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    art = compile_model(COLUMN_SUM, target=target)
    (launch,) = art.program.functions["f"].launches
    return launch.grid, launch.block


def test_reduction_launch_follows_the_target() -> None:
    h200, orin = _launch("h200"), _launch("orin")
    assert h200 != orin
    # orin holds 16 x 1536 threads, h200 132 x 2048: fewer splits fill it
    assert orin[0][1] < h200[0][1]


def test_generate_program_schedules_for_its_target() -> None:
    def grid(target: str) -> tuple[int, int, int]:
        module = parse_module(make_context(), COLUMN_SUM, "t.mlir")
        from fusec.passes.group_each_op import GroupEachOpPass

        GroupEachOpPass().apply(make_context(), module)
        (launch,) = generate_program(module, get_target(target)).functions["f"].launches
        return launch.grid

    assert grid("h200") != grid("orin")


def test_schedule_attribute_round_trips_and_is_obeyed() -> None:
    art = compile_model(COLUMN_SUM, target="orin")
    text = art.model_mlir
    assert "schedule = #fusion.reduction<layout = \"column\"" in text
    module = parse_module(make_context(), text, "model.mlir")
    assert module_to_text(module) == text
    (group,) = [g for g in module.walk() if isinstance(g, GroupOp)]
    attr = group.attributes["schedule"]
    assert isinstance(attr, ReductionSchedule)
    # generated again on h200, the recorded (orin) schedule is what runs
    (launch,) = generate_program(module, get_target("h200")).functions["f"].launches
    assert launch.grid[1] == attr.int_field("splits")
    assert launch.block == art.program.functions["f"].launches[0].block


def test_a_schedule_of_the_wrong_kind_is_a_located_error() -> None:
    text = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "pointwise",
      schedule = #fusion.window<path = "direct", th = 1, tw = 1, oc_t = 1, ci_step = 1, pt = 1,
                                ot = 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %e = nn.exp %a : tensor<4x8xf32>
    fusion.yield %e : tensor<4x8xf32>
  }
  func.return %y : tensor<4x8xf32>
}"""
    module = parse_module(make_context(), text, "t.mlir")
    with pytest.raises(FusecError, match=r"needs a #fusion\.pointwise schedule"):
        generate_program(module)


def test_bad_schedule_values_are_parse_errors() -> None:
    text = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "pointwise",
      schedule = #fusion.pointwise<block = 256>} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    fusion.yield %a : tensor<4x8xf32>
  }
  func.return %y : tensor<4x8xf32>
}"""
    with pytest.raises(FusecError, match="elements_per_thread"):
        parse_module(make_context(), text, "t.mlir")
