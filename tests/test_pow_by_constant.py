"""A power by a constant 2, 3 or 4 becomes products (`passes/pow_by_constant.py`,
applied by `decompose`): the IR, the numbers before and after against the
reference interpreter, and GPT-2's tanh GELU compiled into one kernel with no
`pow` left in it, checked in the simulator on fresh random inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_decompose import assert_same_numbers, decompose, op_names, parse

import fusec
from fusec.compiler.cli import main
from fusec.reference.interpreter import find_function, random_inputs, run_module


def power(exponent: str, shape: str = "tensor<6x5xf32>", ctype: str = "tensor<f32>") -> str:
    return f"""
func.func @f(%x: {shape}) -> {shape} {{
  %c = nn.constant dense<{exponent}> : {ctype}
  %y = nn.pow %x, %c : ({shape}, {ctype}) -> {shape}
  func.return %y : {shape}
}}
"""


@pytest.mark.parametrize(("exponent", "muls"), [("2.0", 1), ("3.0", 2), ("4.0", 2)])
def test_whole_exponents_become_products(exponent: str, muls: int) -> None:
    names = op_names(decompose(parse(power(exponent))))
    assert "nn.pow" not in names and names.count("nn.mul") == muls
    assert_same_numbers(power(exponent), rtol=1e-12)


def test_a_splat_exponent_of_the_operand_shape_too() -> None:
    text = power("3.0", ctype="tensor<6x5xf32>")
    assert "nn.pow" not in op_names(decompose(parse(text)))
    assert_same_numbers(text, rtol=1e-12)


@pytest.mark.parametrize("text", [
    power("2.5"),  # not whole
    power("5.0"),  # more products would round more often than powf
    """
func.func @f(%x: tensor<5xf32>) -> tensor<6x5xf32> {
  %c = nn.constant dense<2.0> : tensor<6x5xf32>
  %y = nn.pow %x, %c : (tensor<5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  func.return %y : tensor<6x5xf32>
}
""",  # the exponent broadcasts x
    """
func.func @f(%x: tensor<4xf32>, %e: tensor<f32>) -> tensor<4xf32> {
  %y = nn.pow %x, %e : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
""",  # not a constant
], ids=["fractional", "five", "broadcasting", "input"])
def test_other_powers_stay(text: str) -> None:
    assert "nn.pow" in op_names(decompose(parse(text)))


GELU_TANH = """
func.func @f(%x: tensor<8x96xf32>) -> tensor<8x96xf32> {
  %half = nn.constant dense<0.5> : tensor<f32>
  %three = nn.constant dense<3.0> : tensor<f32>
  %k = nn.constant dense<0.044715> : tensor<f32>
  %s = nn.constant dense<0.7978846> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %a = nn.mul %x, %half : (tensor<8x96xf32>, tensor<f32>) -> tensor<8x96xf32>
  %p = nn.pow %x, %three : (tensor<8x96xf32>, tensor<f32>) -> tensor<8x96xf32>
  %b = nn.mul %p, %k : (tensor<8x96xf32>, tensor<f32>) -> tensor<8x96xf32>
  %c = nn.add %x, %b : (tensor<8x96xf32>, tensor<8x96xf32>) -> tensor<8x96xf32>
  %d = nn.mul %c, %s : (tensor<8x96xf32>, tensor<f32>) -> tensor<8x96xf32>
  %t = nn.tanh %d : tensor<8x96xf32>
  %e = nn.add %t, %one : (tensor<8x96xf32>, tensor<f32>) -> tensor<8x96xf32>
  %y = nn.mul %a, %e : (tensor<8x96xf32>, tensor<8x96xf32>) -> tensor<8x96xf32>
  func.return %y : tensor<8x96xf32>
}
"""


def test_tanh_gelu_is_one_kernel_without_pow(tmp_path: Path) -> None:
    (tmp_path / "g.mlir").write_text(GELU_TANH, encoding="utf-8")
    out = tmp_path / "out"
    assert main([str(tmp_path / "g.mlir"), "-o", str(out), "--quiet", "--no-cache"]) == 0
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert len(plan["functions"]["f"]["launches"]) == 1
    source = (out / "kernels.py").read_text(encoding="utf-8")
    kernel = source[source.index("def f_g0"):]
    assert "pow" not in kernel
    reference = parse(GELU_TANH)
    inputs = random_inputs(find_function(reference, "f"), seed=11)
    want = run_module(reference, inputs, "f")[0]
    got = fusec.load_out(out, device="sim")(*inputs)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
