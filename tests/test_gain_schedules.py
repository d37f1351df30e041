"""gain_ok prices the fused group and its parts under the schedules the
scheduler would give them (docs/fusion.md, "The gain rule"), on temporary
groups that leave the module as it was."""

from __future__ import annotations

from fusec.analysis.fusion_legality import can_fuse, gain_ok, group_cost, kernel_cost, scheduled
from tests.test_fusion_legality import candidate_from_text


def centred(rows: int, cols: int, axis: int) -> str:
    """`x - sum(x, axis)`, returned."""
    x = f"tensor<{rows}x{cols}xf32>"
    s = f"tensor<1x{cols}xf32>" if axis == 0 else f"tensor<{rows}x1xf32>"
    return f"""func.func @f(%x: {x}) -> {x} {{
  %s = nn.reduce_sum %x {{axes = [{axis}], keepdims = true}} : ({x}) -> {s}
  %y = nn.sub %x, %s : ({x}, {s}) -> {x}
  func.return %y : {x}
}}"""


def test_a_column_that_the_scheduler_splits_is_fused() -> None:
    # 64 columns of 65536 rows with a final pass: legality's summary thinks
    # the group cannot split (64 columns of threads, ~1.2 ms); the scheduler
    # splits each column over blocks in two kernels, which fills the GPU.
    c = candidate_from_text(centred(65536, 64, 0), "s", "y")
    fused = c.fused
    assert not isinstance(fused, str)
    summary = kernel_cost(c.dep, c.target, fused, c.outputs)
    priced = group_cost(c, fused, c.outputs)
    assert summary.parallel < c.target.max_resident_threads <= priced.parallel
    assert priced.launches == 2
    kernel = scheduled(c, fused, c.outputs)
    assert kernel is not None and "in two kernels" in kernel.line
    verdict = can_fuse(c)
    assert verdict.ok, verdict.reason


def test_a_refusal_names_both_times_and_schedules() -> None:
    # 8 rows of a million: the lone sum splits its rows, the fused group
    # (a row-shaped output) cannot and runs 8 blocks.
    c = candidate_from_text(centred(8, 1 << 20, 1), "s", "y")
    verdict = gain_ok(c)
    assert not verdict.ok
    assert verdict.reason.startswith("the fused kernel is estimated slower than its parts: "
                                     "fused (reduction) ")
    assert "vs parts " in verdict.reason
    assert "; fused schedule: reduction: 512 lanes per row, 1 rows per block" in verdict.reason
    assert "; parts: reduction: " in verdict.reason
    assert "each row split over" in verdict.reason
    assert verdict.reason.endswith("and pointwise: 4 elements per thread, 256 threads per block")


def test_the_temporary_groups_leave_the_module_unchanged() -> None:
    c = candidate_from_text(centred(8, 1 << 20, 1), "s", "y")
    module = c.dep.block.parent_op()
    assert module is not None
    before = str(module)
    uses = {v: len(list(v.uses)) for op in c.dep.ops for v in (*op.operands, *op.results)}
    gain_ok(c)
    assert c.schedules  # the groups were scheduled (and cached)
    assert str(module) == before
    assert uses == {v: len(list(v.uses)) for op in c.dep.ops for v in (*op.operands, *op.results)}
