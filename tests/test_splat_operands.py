"""Splat constants read by matmuls, convolutions and reductions stay splats:
the kernel reads one value, not an array, and nothing holds their elements.

`nn.constant dense<1.0> : tensor<65536x65536xf32>` feeding a matmul used to
end in `internal error: MemoryError` (code generation allocated 16 GiB for
constants.npz), with fusion on or off and with or without folding. A splat
divisor inside a reduction kernel generated invalid Python
(`rcp_float32(2.0) = ...`: a name built from the divisor's text).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.cli import main

# Low enough that a 16 GiB array cannot be allocated, high enough for numba,
# llvmlite and ptxas to start.
MEMORY_LIMIT = 6 << 30

N = 65536
HUGE_MATMUL = f"""
func.func @f(%x: tensor<4x{N}xf32>) -> tensor<4x{N}xf32> {{
  %c = nn.constant dense<1.0> : tensor<{N}x{N}xf32>
  %y = nn.matmul %x, %c : (tensor<4x{N}xf32>, tensor<{N}x{N}xf32>) -> tensor<4x{N}xf32>
  func.return %y : tensor<4x{N}xf32>
}}
"""

HUGE_TRANSPOSE = f"""
func.func @f(%x: tensor<2xf32>) -> tensor<{N}x{N}xf32> {{
  %c = nn.constant dense<1.0> : tensor<{N}x{N}xf32>
  %t = nn.transpose %c {{perm = [1, 0]}} : (tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>
  func.return %t : tensor<{N}x{N}xf32>
}}
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _fusec_limited(*argv: str) -> subprocess.CompletedProcess[str]:
    """`fusec ARGV` in a process that cannot allocate more than MEMORY_LIMIT."""
    return subprocess.run(
        [sys.executable, "-m", "fusec.compiler.cli", *argv], capture_output=True, text=True,
        timeout=300, check=False, preexec_fn=_limited)


@pytest.mark.parametrize("flags", [[], ["--no-fusion"], ["--no-fold-constants"]])
def test_a_16_gib_splat_matmul_operand_compiles_in_bounded_memory(
        tmp_path: Path, flags: list[str]) -> None:
    model = tmp_path / "splat.mlir"
    model.write_text(HUGE_MATMUL)
    out = tmp_path / "out"
    proc = _fusec_limited(str(model), "-o", str(out), *flags)
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    # An empty .npz is 22 bytes.
    assert (out / "constants.npz").stat().st_size < 1024
    plan = json.loads((out / "plan.json").read_text())
    f = plan["functions"]["f"]
    assert f["constants"] == {}
    # The kernel reads x and writes y: the splat is a literal in its code.
    (launch,) = f["launches"]
    assert len(launch["args"]) == 2
    assert "float32(1.0)" in (out / "kernels.py").read_text()


def test_a_huge_splat_that_must_be_written_out_is_a_located_error(tmp_path: Path) -> None:
    """A transpose kernel (folding off) reads its operand from memory: 16
    GiB of constants is refused by name, not attempted."""
    model = tmp_path / "t.mlir"
    model.write_text(HUGE_TRANSPOSE)
    proc = _fusec_limited(str(model), "-o", str(tmp_path / "out"), "--no-fold-constants")
    assert proc.returncode == 1
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert f"{model}:3:" in proc.stderr
    assert "splat constant would be written out whole (17179869184 bytes" in proc.stderr


def _compile_and_check(tmp_path: Path, text: str, flags: list[str],
                       capsys: pytest.CaptureFixture[str]) -> Path:
    """Compile `text` with `fusec` and `fusec run OUT --check` it (random
    inputs, compared with the reference interpreter); the OUT."""
    model = tmp_path / "model.mlir"
    model.write_text(text)
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out), *flags]) == 0, capsys.readouterr().err
    code = main(["run", str(out), "--check", "--device", "sim"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "check passed" in captured.out + captured.err
    return out


SOFTMAX_BY_SPLAT = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = nn.constant dense<2.0> : tensor<4xf32>
  %s = nn.softmax %x {axis = 0} : tensor<4xf32>
  %y = nn.div %s, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""

FLAGS = [[], ["--no-fusion"], ["--no-fold-constants"]]


@pytest.mark.parametrize("flags", FLAGS)
def test_softmax_divided_by_a_splat_runs(tmp_path: Path, flags: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = _compile_and_check(tmp_path, SOFTMAX_BY_SPLAT, flags, capsys)
    assert "rcp_float32" not in (out / "kernels.py").read_text()


def _binary(op: str, a: str, b: str, t: str) -> str:
    return f"nn.{op} {a}, {b} : ({t}, {t}) -> {t}"


# Each `{op}` is one of add, sub, mul, div; the splat on either side.
REDUCTION = """
func.func @f(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {{
  %c = nn.constant dense<2.5> : tensor<4x8xf32>
  %s = nn.softmax %x {{axis = 1}} : tensor<4x8xf32>
  %y = {first}
  %z = {second}
  %m = nn.mul %x, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = nn.reduce_sum %m {{axes = [1]}} : (tensor<4x8xf32>) -> tensor<4xf32>
  %k = nn.reduce_max %c {{axes = [1]}} : (tensor<4x8xf32>) -> tensor<4xf32>
  %q = nn.{op} %r, %k : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %z, %q : tensor<4x8xf32>, tensor<4xf32>
}}
"""

POINTWISE = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %c = nn.constant dense<0.75> : tensor<4x8xf32>
  %e = nn.exp %x : tensor<4x8xf32>
  %y = {first}
  func.return %y : tensor<4x8xf32>
}}
"""

GEMM = """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> tensor<4x6xf32> {{
  %b = nn.constant dense<-0.25> : tensor<8x6xf32>
  %c = nn.constant dense<1.5> : tensor<4x6xf32>
  %m = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %n = nn.matmul %x, %b : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %s = nn.add %m, %n : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %y = {first}
  func.return %y : tensor<4x6xf32>
}}
"""

CONV = """
func.func @f(%x: tensor<1x2x6x6xf32>) -> tensor<1x3x6x6xf32> {{
  %w = nn.constant dense<0.125> : tensor<3x2x3x3xf32>
  %c = nn.constant dense<1.5> : tensor<1x3x6x6xf32>
  %s = nn.conv2d %x, %w {{strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}}
      : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x6xf32>
  %y = {first}
  func.return %y : tensor<1x3x6x6xf32>
}}
"""


def _program(template: str, op: str, splat_first: bool) -> str:
    t = {REDUCTION: "tensor<4x8xf32>", POINTWISE: "tensor<4x8xf32>", GEMM: "tensor<4x6xf32>",
         CONV: "tensor<1x3x6x6xf32>"}[template]
    value = "%e" if template is POINTWISE else "%s"
    a, b = ("%c", value) if splat_first else (value, "%c")
    second = _binary(op, "%c", "%y", t) if splat_first else _binary(op, "%y", "%c", t)
    return template.format(first=_binary(op, a, b, t), second=second, op=op)


@pytest.mark.parametrize("flags", [*FLAGS[:2], pytest.param(FLAGS[2], marks=pytest.mark.slow)],
                         ids=["fused", "unfused", "unfolded"])
@pytest.mark.parametrize(("op", "splat_first"), [
    ("add", False), ("mul", True), ("sub", False), ("sub", True), ("div", False), ("div", True),
], ids=["add", "mul-splat-left", "sub", "sub-splat-left", "div", "div-splat-left"])
@pytest.mark.parametrize("template", [REDUCTION, POINTWISE, GEMM, CONV],
                         ids=["reduction", "pointwise", "gemm", "conv"])
def test_arithmetic_with_a_splat_matches_the_reference(
        tmp_path: Path, template: str, op: str, splat_first: bool, flags: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _compile_and_check(tmp_path, _program(template, op, splat_first), flags, capsys)
    # Every splat is a literal of some kernel, never data.
    with np.load(out / "constants.npz") as npz:
        assert npz.files == []
