"""conv + elementwise + pool as one window kernel, the conv tile in shared
memory (`codegen/conv_pool.py`): fusion, numbers against the reference in
the simulator, and the cases that must stay two kernels."""

from __future__ import annotations

import pytest

from fusec.analysis.remarks import collect_remarks
from fusec.dialects.fusion import GroupOp
from tests.codegen_harness import check_program

PIPELINE = ("decompose,form-fusion-groups{target=h200},group-each-op,register-budget,"
            "tile-and-promote")


def model(pool: str, pads: str, extra_use: bool = False) -> str:
    """conv (3 -> 4 channels, or depthwise) + bias + relu + pool + neg on a
    2x3x20x19 image: 2x2 tiles of pooled outputs, a ragged last tile."""
    out = "tensor<2x4x20x19xf32>"
    ret = "tensor<2x4x10x10xf32>" if pads else "tensor<2x4x10x9xf32>"
    results = f"{ret}, {out}" if extra_use else ret
    returned = "%n, %r" if extra_use else "%n"
    return f"""
func.func @f(%x: tensor<2x3x20x19xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>)
    -> ({results}) {{
  %c = nn.conv2d %x, %w {{pads = [1, 1, 1, 1]}}
      : (tensor<2x3x20x19xf32>, tensor<4x3x3x3xf32>) -> {out}
  %s = nn.add %c, %b : ({out}, tensor<4x1x1xf32>) -> {out}
  %r = nn.relu %s : {out}
  %p = {pool} %r {{kernel = [2, 2], strides = [2, 2]{pads}}} : ({out}) -> {ret}
  %n = nn.neg %p : {ret}
  func.return {returned} : {results}
}}
"""


@pytest.mark.parametrize("pool", ["nn.max_pool2d", "nn.avg_pool2d"])
@pytest.mark.parametrize("pads", ["", ", pads = [0, 0, 0, 1]"], ids=["valid", "padded"])
def test_conv_and_pool_are_one_kernel(pool: str, pads: str) -> None:
    program = check_program(model(pool, pads), launches=1, pipeline=PIPELINE)
    assert "cuda.shared.array((4, 4), float32)" not in program.kernels_source
    assert "ctile = cuda.shared.array((16, 16), float32)" in program.kernels_source


def test_conv_result_read_elsewhere_keeps_the_pool_apart() -> None:
    check_program(model("nn.max_pool2d", "", extra_use=True), launches=2, pipeline=PIPELINE)


def test_fusion_is_a_remark_and_the_schedule_is_recorded() -> None:
    from fusec.compiler.driver import make_registry
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec

    ctx = make_context()
    module = parse_module(ctx, model("nn.max_pool2d", ""), "t.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), PIPELINE)).run(module)
    assert any("fused nn.max_pool2d (%p) into group g0" in n for n in collect_remarks(module))
    (g,) = [op for op in module.walk() if isinstance(op, GroupOp)]
    assert g.attributes["schedule_text"].data.startswith("conv + pool: a 16x16 conv tile")  # type: ignore[attr-defined]
    assert g.attributes["schedule"].str_field("path") == "conv_pool"  # type: ignore[attr-defined]
