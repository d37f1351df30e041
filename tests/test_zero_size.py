"""Tensors with a zero-size dimension, as NumPy and PyTorch define them: a
sum over nothing is 0, a mean NaN, a matmul with K = 0 zeros, a conv with no
input channels zeros; an empty result needs no kernel; max/min over nothing
and a gather from an empty table are located errors. Each runs in the
simulator against the reference, fused and unfused."""

from __future__ import annotations

from pathlib import Path

import codegen_harness as harness
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.cli import main
from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module

PIPELINES = ["fold-empty,decompose,group-each-op",
             "fold-empty,decompose,fold-constants,form-fusion-groups,group-each-op"]


def _program(args: str, results: str, body: str) -> str:
    returned = ", ".join(line.split(" =")[0].strip() for line in body.strip().splitlines()
                         if "=" in line and not line.strip().startswith("//")
                         and line.split(" =")[0].strip().startswith("%r"))
    return (f"func.func @f({args}) -> ({results}) {{\n{body}"
            f"  func.return {returned} : {results}\n}}\n")


CASES = {
    "reductions": (
        "%x: tensor<3x0xf32>, %e: tensor<0x3xf32>",
        "tensor<3xf32>, tensor<3x1xf32>, tensor<0xf32>, tensor<0xf32>",
        """  %r0 = nn.reduce_sum %x {axes = [1]} : (tensor<3x0xf32>) -> tensor<3xf32>
  %r1 = nn.reduce_mean %x {axes = [1], keepdims = true} : (tensor<3x0xf32>) -> tensor<3x1xf32>
  %r2 = nn.reduce_max %e {axes = [1]} : (tensor<0x3xf32>) -> tensor<0xf32>
  %r3 = nn.reduce_sum %e {axes = [1]} : (tensor<0x3xf32>) -> tensor<0xf32>
""", 0),
    "sum_then_kernel": (
        "%x: tensor<3x0xf32>, %y: tensor<3xf32>",
        "tensor<3xf32>",
        """  %s = nn.reduce_sum %x {axes = [1]} : (tensor<3x0xf32>) -> tensor<3xf32>
  %r0 = nn.add %s, %y : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
""", 1),
    "matmul_k0": (
        "%a: tensor<2x3x0xf32>, %b: tensor<0x4xf32>, %c: tensor<4xf32>",
        "tensor<2x3x4xf32>",
        """  %m = nn.matmul %a, %b : (tensor<2x3x0xf32>, tensor<0x4xf32>) -> tensor<2x3x4xf32>
  %r0 = nn.add %m, %c : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
""", 1),
    "matmul_empty_result": (
        "%a: tensor<0x3xf32>, %b: tensor<3x4xf32>",
        "tensor<0x4xf32>",
        """  %r0 = nn.matmul %a, %b : (tensor<0x3xf32>, tensor<3x4xf32>) -> tensor<0x4xf32>
""", 0),
    "conv_no_channels": (
        "%x: tensor<1x0x5x5xf32>, %w: tensor<2x0x3x3xf32>",
        "tensor<1x2x3x3xf32>",
        """  %r0 = nn.conv2d %x, %w {strides = [1, 1], groups = 1}
      : (tensor<1x0x5x5xf32>, tensor<2x0x3x3xf32>) -> tensor<1x2x3x3xf32>
""", 0),
    "conv_no_batch": (
        "%x: tensor<0x2x5x5xf32>, %w: tensor<2x2x3x3xf32>",
        "tensor<0x2x3x3xf32>",
        """  %r0 = nn.conv2d %x, %w {strides = [1, 1], groups = 1}
      : (tensor<0x2x5x5xf32>, tensor<2x2x3x3xf32>) -> tensor<0x2x3x3xf32>
""", 0),
    "layer_norm": (
        "%x: tensor<0x8xf32>, %y: tensor<3x0xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, "
        "%s0: tensor<0xf32>, %b0: tensor<0xf32>",
        "tensor<0x8xf32>, tensor<3x0xf32>, tensor<3x0xf32>",
        """  %r0 = nn.layer_norm %x, %s, %b {axis = 1, epsilon = 1.0e-05}
      : (tensor<0x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<0x8xf32>
  %r1 = nn.layer_norm %y, %s0, %b0 {axis = 1, epsilon = 1.0e-05}
      : (tensor<3x0xf32>, tensor<0xf32>, tensor<0xf32>) -> tensor<3x0xf32>
  %r2 = nn.softmax %y {axis = 1} : tensor<3x0xf32>
""", 0),
    "gather_nothing": (
        "%t: tensor<0x4xf32>, %i: tensor<0xi64>",
        "tensor<0x4xf32>",
        """  %r0 = nn.gather %t, %i {axis = 0} : (tensor<0x4xf32>, tensor<0xi64>) -> tensor<0x4xf32>
""", 0),
    "concat_with_empty": (
        "%a: tensor<2x0xf32>, %b: tensor<2x3xf32>, %c: tensor<2x0xf32>, %z: tensor<0x3xf32>",
        "tensor<2x3xf32>, tensor<2x3xf32>",
        """  %r0 = nn.concat %a, %b, %c {axis = 1}
      : (tensor<2x0xf32>, tensor<2x3xf32>, tensor<2x0xf32>) -> tensor<2x3xf32>
  %e = nn.exp %b : tensor<2x3xf32>
  %r1 = nn.concat %z, %e, %b {axis = 0}
      : (tensor<0x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
""", None),
}


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_zero_size_matches_the_reference(case: str, pipeline: str) -> None:
    args, results, body, launches = CASES[case]
    if case == "concat_with_empty":
        results = "tensor<2x3xf32>, tensor<4x3xf32>"
    text = _program(args, results, body)
    program = harness.compile_text(text, pipeline)
    n = len(program.functions["f"].launches)
    harness.check_program(text, n if launches is None else launches, pipeline)


@pytest.mark.parametrize(("op", "message"), [
    ("%r = nn.reduce_max %x {axes = [1]} : (tensor<3x0xf32>) -> tensor<3xf32>",
     "reduces over axis 1 of size 0: the maximum of no elements is undefined"),
    ("%r = nn.reduce_min %x {axes = [0, 1]} : (tensor<3x0xf32>) -> tensor<f32>",
     "the minimum of no elements is undefined"),
    ("%r = nn.gather %x, %i {axis = 1} : (tensor<3x0xf32>, tensor<2xi64>) -> tensor<3x2xf32>",
     r"gathers from axis 1 of size 0 with 2 index\(es\): none can be in range"),
])
def test_undefined_results_are_located_errors(op: str, message: str) -> None:
    t = op.split("-> ")[1]
    text = (f"func.func @f(%x: tensor<3x0xf32>, %i: tensor<2xi64>) -> {t} {{\n  {op}\n"
            f"  func.return %r : {t}\n}}\n")
    with pytest.raises(FusecError, match=message) as err:
        verify_module(parse_module(make_context(), text, "z.mlir"))
    assert err.value.render().startswith("z.mlir:2:3:")


def test_empty_constants_print_and_read_back() -> None:
    text = ("func.func @f() -> tensor<0x2xf32> {\n"
            "  %c = nn.constant dense<> : tensor<0x2xf32>\n  func.return %c : tensor<0x2xf32>\n}\n")
    printed = module_to_text(parse_module(make_context(), text, "c.mlir"))
    assert "dense<> : tensor<0x2xf32>" in printed
    assert module_to_text(parse_module(make_context(), printed, "c.mlir")) == printed


def test_fusec_run_check_on_zero_size_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, results, body, _ = CASES["matmul_k0"]
    path = tmp_path / "z.mlir"
    path.write_text(_program(args, results, body))
    assert main(["run", str(path), "--check", "--device", "sim"]) == 0
    out = capsys.readouterr().out
    assert "check passed" in out and "1 kernel launch on" in out
