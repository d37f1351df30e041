"""`nn.constant` literals that xDSL alone reads differently from MLIR: a bare
hex splat of a float is the element's bit pattern (`dense<0xFF800000> :
tensor<f32>` is -inf), and a literal out of its element type's range is a
located error, not a crash."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects import nn
from fusec.dialects.nn_base import dense_to_numpy


def _constant(literal: str, t: str) -> np.ndarray:
    text = f"""
func.func @f() -> {t} {{
  %c = nn.constant {literal} : {t}
  func.return %c : {t}
}}"""
    module = parse_module(make_context(), text, "c.mlir")
    op = next(o for o in module.walk() if isinstance(o, nn.ConstantOp))
    return dense_to_numpy(op.value)


@pytest.mark.parametrize(
    ("literal", "t", "expected"),
    [
        ("dense<0xFF800000>", "tensor<f32>", -np.inf),
        ("dense<0x7F800000>", "tensor<2x2xf32>", np.inf),
        ("dense<0x3F800000>", "tensor<f32>", 1.0),
        ("dense<0xFC00>", "tensor<f16>", -np.inf),
        ("dense<0xBFF0000000000000>", "tensor<f64>", -1.0),
        # bf16 once read as the integer 0xFF80, rounded: 65536 for -inf, 16256 for 1.0
        ("dense<0xFF80>", "tensor<bf16>", -np.inf),
        ("dense<0x3F80>", "tensor<2x3xbf16>", 1.0),
    ],
)
def test_bare_hex_float_splat_is_the_bit_pattern(literal: str, t: str, expected: float) -> None:
    got = _constant(literal, t)
    assert np.all(got == expected) and got.size >= 1


def test_bare_hex_integer_stays_an_integer() -> None:
    assert _constant("dense<0xFF>", "tensor<i32>").item() == 255


def test_quoted_hex_bytes_unchanged() -> None:
    assert _constant('dense<"0x0000803F">', "tensor<f32>").item() == 1.0


@pytest.mark.parametrize(
    ("literal", "t", "message"),
    [
        ("dense<0x7FC0>", "tensor<f32>", "write one element's bits (8 hex digits)"),
        ("dense<0xFF800000>", "tensor<f16>", "out of range of its element type"),
        ("dense<0xFF800000>", "tensor<bf16>", "write one element's bits (4 hex digits)"),
    ],
)
def test_bad_literals_are_located_errors(literal: str, t: str, message: str) -> None:
    with pytest.raises(FusecError) as err:
        _constant(literal, t)
    assert message in err.value.message and err.value.render().startswith("c.mlir:3:")
