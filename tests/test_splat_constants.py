"""Splat constants stay splats from parsing to the kernel: one element in the
IR, a literal in the kernel, nothing in constants.npz.

`dense<1.0> : tensor<8192x8192xf32>` used to be expanded by the parser into
67 million elements (half a minute, 1.6 GB) and written out whole (268 MB).
"""

from __future__ import annotations

from pathlib import Path

import codegen_harness as harness
import numpy as np
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.cli import main
from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects import nn
from fusec.dialects.nn_base import dense_to_numpy

BIG = "tensor<8192x8192xf32>"
HUGE_SPLATS = f"""
func.func @f(%x: {BIG}) -> ({BIG}, {BIG}) {{
  %one = nn.constant dense<1.0> : {BIG}
  %two = nn.constant dense<2.0> : {BIG}
  %e = nn.exp %two : {BIG}
  %y = nn.add %x, %one : ({BIG}, {BIG}) -> {BIG}
  %z = nn.mul %y, %e : ({BIG}, {BIG}) -> {BIG}
  func.return %y, %z : {BIG}, {BIG}
}}
"""


def _constants(text: str) -> list[nn.ConstantOp]:
    module = parse_module(make_context(), text, "c.mlir")
    return [o for o in module.walk() if isinstance(o, nn.ConstantOp)]


@pytest.mark.parametrize("flags", [[], ["--no-fusion"], ["--no-fold-constants"]])
def test_huge_splats_compile_small(tmp_path: Path, flags: list[str]) -> None:
    model = tmp_path / "splat.mlir"
    model.write_text(HUGE_SPLATS)
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out), *flags]) == 0
    # An empty .npz is 22 bytes; one 8192x8192 float32 array would be 268 MB.
    assert (out / "constants.npz").stat().st_size < 1024
    assert (out / "model.mlir").stat().st_size < 8192
    kernels = (out / "kernels.py").read_text()
    assert "float32(1.0)" in kernels


@pytest.mark.parametrize(
    ("literal", "t", "expected"),
    [
        ("dense<1.5>", "tensor<1000x1000xf32>", 1.5),
        ("dense<-3>", "tensor<1000x1000xi32>", -3),
        ("dense<true>", "tensor<1000x1000xi1>", True),
        ("dense<0xFF800000>", "tensor<1000x1000xf32>", -np.inf),
        ('dense<"0x0000803F">', "tensor<1000x1000xf32>", 1.0),
    ],
)
def test_a_parsed_splat_holds_one_element(literal: str, t: str, expected: object) -> None:
    (op,) = _constants(f"func.func @f() -> {t} {{\n  %c = nn.constant {literal} : {t}\n"
                       f"  func.return %c : {t}\n}}\n")
    assert len(op.value) == 1
    values = dense_to_numpy(op.value)
    assert values.shape == (1000, 1000) and np.all(values == expected)
    # Printed as a splat, and read back the same.
    text = module_to_text(op.parent_op().parent_op())  # type: ignore[union-attr]
    assert len(text) < 1000
    (again,) = _constants(text)
    assert again.value == op.value


def test_splat_literal_errors_stay_located() -> None:
    t = "tensor<4xi32>"
    with pytest.raises(FusecError, match="invalid value: expected integer") as err:
        _constants(f"func.func @f() -> {t} {{\n  %c = nn.constant dense<1.5> : {t}\n"
                   f"  func.return %c : {t}\n}}\n")
    assert str(err.value.render()).startswith("c.mlir:2:")


SMALL = "tensor<4x8xf32>"
SMALL_SPLATS = f"""
func.func @f(%x: {SMALL}, %w: tensor<8x3xf32>) -> ({SMALL}, tensor<4x3xf32>) {{
  %half = nn.constant dense<0.5> : {SMALL}
  %three = nn.constant dense<3.0> : {SMALL}
  %ones = nn.constant dense<1.0> : tensor<4x8xf32>
  %a = nn.mul %x, %half : ({SMALL}, {SMALL}) -> {SMALL}
  %b = nn.sub %three, %a : ({SMALL}, {SMALL}) -> {SMALL}
  %c = nn.add %b, %ones : ({SMALL}, {SMALL}) -> {SMALL}
  %m = nn.matmul %ones, %w : ({SMALL}, tensor<8x3xf32>) -> tensor<4x3xf32>
  func.return %c, %m : {SMALL}, tensor<4x3xf32>
}}
"""


@pytest.mark.parametrize(("pipeline", "launches"), [
    ("decompose,group-each-op", 4), ("decompose,form-fusion-groups,group-each-op", None),
])
def test_small_splats_give_the_reference_numbers(pipeline: str, launches: int | None) -> None:
    program = harness.compile_text(SMALL_SPLATS, pipeline)
    n = len(program.functions["f"].launches)
    harness.check_program(SMALL_SPLATS, launches if launches is not None else n, pipeline)
    source = program.kernels_source
    assert "float32(0.5)" in source and "float32(3.0)" in source
    # The matmul reads its splat operand as a literal too: nothing is held as data.
    assert program.functions["f"].constants == {}
    assert "float32(1.0)" in source
