"""Fusion legality prices a contraction the library GEMM can read as the
library runs it (`analysis/library_gemm_cost.py`), so folding a slice or
transpose into a matmul's operand loads, which leaves fusec's SIMT GEMM, is
weighed against the library GEMM it replaces."""

from __future__ import annotations

import pytest

from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp

# Q of a fused QKV projection: a column slice, split into heads, @ K^T.
HEADS = """
func.func @f(%qkv: tensor<4096x2304xT>, %kt: tensor<12x64x4096xT>) -> tensor<12x4096x4096xT> {
  %q = nn.slice %qkv {starts = [0, 0], limits = [4096, 768]}
      : (tensor<4096x2304xT>) -> tensor<4096x768xT>
  %r = nn.reshape %q : (tensor<4096x768xT>) -> tensor<4096x12x64xT>
  %h = nn.transpose %r {perm = [1, 0, 2]} : (tensor<4096x12x64xT>) -> tensor<12x4096x64xT>
  %s = nn.matmul %h, %kt : (tensor<12x4096x64xT>, tensor<12x64x4096xT>) -> tensor<12x4096x4096xT>
  func.return %s : tensor<12x4096x4096xT>
}
"""


def _groups(text: str, gemm: str, first: str = "") -> list[list[str]]:
    ctx = make_context()
    module = parse_module(ctx, text, "heads.mlir")
    spec = f'{first}form-fusion-groups{{target="h200" gemm="{gemm}"}},group-each-op'
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return [[op.name for op in g.block.ops][:-1] for g in module.walk() if isinstance(g, GroupOp)]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_views_stay_out_of_a_matmul_the_library_runs(dtype: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import fusec.scheduling.gemm_choice as gemm_choice

    text = HEADS.replace("xT>", f"x{dtype}>")
    monkeypatch.setattr(gemm_choice, "library_available", lambda: True)
    matmul_groups = [g for g in _groups(text, "auto") if "nn.matmul" in g]
    assert matmul_groups == [["nn.matmul"]]
    # the SIMT GEMM asked for (or no library): the views fold into its loads
    (folded,) = [g for g in _groups(text, "fused") if "nn.matmul" in g]
    assert "nn.slice" in folded and "nn.transpose" in folded
    monkeypatch.setattr(gemm_choice, "library_available", lambda: False)
    (folded,) = [g for g in _groups(text, "auto") if "nn.matmul" in g]
    assert "nn.slice" in folded


def test_a_matmul_reading_computed_operands_is_not_priced_as_the_library() -> None:
    from fusec.analysis.library_gemm_cost import library_element

    module = parse_module(make_context(), HEADS.replace("xT>", "xf16>"), "heads.mlir")
    ops = list(module.walk())
    mm = next(op for op in ops if op.name == "nn.matmul")
    h, kt = mm.operands
    assert library_element([mm], frozenset({h, kt})) == "f16"
    transpose = h.owner
    # the transpose is not of the last two axes: cuBLAS cannot read it
    assert library_element([transpose, mm], frozenset({transpose.operands[0], kt})) is None
    i32 = HEADS.replace("xT>", "xi32>")
    mm = next(op for op in parse_module(make_context(), i32, "h.mlir").walk()
              if op.name == "nn.matmul")
    assert library_element([mm], frozenset(mm.operands)) is None


SCORES = """
func.func @f(%q: tensor<8x512x64xT>, %k: tensor<8x512x64xT>, %m: tensor<512x512xT>)
    -> tensor<8x512x512xT> {
  %kt = nn.transpose %k {perm = [0, 2, 1]} : (tensor<8x512x64xT>) -> tensor<8x64x512xT>
  %s = nn.matmul %q, %kt : (tensor<8x512x64xT>, tensor<8x64x512xT>) -> tensor<8x512x512xT>
  %c = nn.constant dense<0.125> : tensor<T>
  %x = nn.mul %s, %c : (tensor<8x512x512xT>, tensor<T>) -> tensor<8x512x512xT>
  %y = nn.add %x, %m : (tensor<8x512x512xT>, tensor<512x512xT>) -> tensor<8x512x512xT>
  %p = nn.softmax %y {axis = -1} : tensor<8x512x512xT>
  func.return %p : tensor<8x512x512xT>
}
"""


def test_an_epilogue_the_library_would_split_off_joins_its_reduction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # cuBLAS runs a matmul's elementwise ops as a second kernel: in the
    # matmul's group they save nothing, in the softmax's a round trip of C.
    import fusec.scheduling.gemm_choice as gemm_choice

    text = SCORES.replace("T>", "f16>")
    monkeypatch.setattr(gemm_choice, "library_available", lambda: True)
    groups = _groups(text, "auto", "decompose,")
    assert ["nn.transpose", "nn.matmul"] in groups
    (softmax,) = [g for g in groups if "nn.reduce_max" in g]
    assert softmax[:2] == ["nn.mul", "nn.add"]
    monkeypatch.setattr(gemm_choice, "library_available", lambda: False)
    (mm,) = [g for g in _groups(text, "auto", "decompose,") if "nn.matmul" in g]
    assert "nn.add" in mm  # the SIMT GEMM keeps its epilogue in registers
