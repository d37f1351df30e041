"""`nn.sin` and `nn.cos` in the simulator against the reference, f32 and the
half types, alone and fused into a rotary-embedding chain with their
neighbours (one kernel): angles up to a few hundred radians, as a rotary
embedding's position times frequency reaches, so the range reduction counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from codegen_harness import compile_text

from fusec.codegen.kernel_source import TRIG_PRELUDE
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import element
from fusec.reference.interpreter import (
    find_function,
    random_inputs,
    round_to_element_type,
    run_module,
)
from fusec.runtime.executor import run_program

FUSED = ("decompose,form-fusion-groups{target=h200},group-each-op,register-budget,"
         "tile-and-promote")
DTYPES = ["f32", "f16", "bf16"]


def _check(text: str, dtype: str, launches: int, pipeline: str, seed: int) -> str:
    """Compile and run `@f` on fresh random inputs rounded to their types;
    every output within `dtype`'s tolerance of the float64 reference,
    relative to max |reference|. Returns kernels.py."""
    program = compile_text(text, pipeline)
    assert len(program.functions["f"].launches) == launches, program.kernels_source
    module = parse_module(make_context(), text, "test.mlir")
    func = find_function(module, "f")
    inputs = [round_to_element_type(x, t) for x, t in
              zip(random_inputs(func, seed), func.function_type.inputs.data, strict=True)]
    expected = run_module(module, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    tolerance = element(dtype).tolerance
    for e, g in zip(expected, got, strict=True):
        scale = max(float(np.max(np.abs(e))), 1.0)
        err = float(np.max(np.abs(g.astype(np.float64) - e)))
        assert err <= tolerance * scale, (err, scale, program.kernels_source)
    return program.kernels_source


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["nn.sin", "nn.cos"])
def test_alone(op: str, dtype: str) -> None:
    t = f"tensor<3x8x{dtype}>"
    text = (f"func.func @f(%x: {t}) -> {t} {{\n  %y = {op} %x : {t}\n"
            f"  func.return %y : {t}\n}}\n")
    source = _check(text, dtype, 1, "decompose,group-each-op", seed=11)
    assert f"ieee_{op[3:]}(" in source


def _rotary(dtype: str) -> str:
    """q * cos(a) + rotate(q) * sin(a), a = position * frequency * 40: the
    angles go past 100 radians; `%r` stands for q's rotated half."""
    t, p, w = f"tensor<4x8x{dtype}>", f"tensor<4x1x{dtype}>", f"tensor<8x{dtype}>"
    return f"""func.func @f(%q: {t}, %r: {t}, %pos: {p}, %freq: {w}) -> ({t}, {t}) {{
  %k = nn.constant dense<40.0> : tensor<{dtype}>
  %a0 = nn.mul %pos, %freq : ({p}, {w}) -> {t}
  %a = nn.mul %a0, %k : ({t}, tensor<{dtype}>) -> {t}
  %c = nn.cos %a : {t}
  %s = nn.sin %a : {t}
  %qc = nn.mul %q, %c : ({t}, {t}) -> {t}
  %rs = nn.mul %r, %s : ({t}, {t}) -> {t}
  %y = nn.add %qc, %rs : ({t}, {t}) -> {t}
  func.return %y, %s : {t}, {t}
}}
"""


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_into_a_rotary_chain(dtype: str) -> None:
    """The angle's multiplies, sin, cos and their uses are one kernel."""
    source = _check(_rotary(dtype), dtype, 1, FUSED, seed=12)
    assert "ieee_sin(" in source and "ieee_cos(" in source
    assert TRIG_PRELUDE in source


def test_programs_without_trig_keep_their_prelude() -> None:
    """sin and cos are defined only in a kernels.py that calls them: the
    kernels (and kernel cache keys) of every other program are unchanged."""
    t = "tensor<4xf32>"
    source = compile_text(f"func.func @f(%x: {t}) -> {t} {{\n  %y = nn.exp %x : {t}\n"
                          f"  func.return %y : {t}\n}}\n", "group-each-op").kernels_source
    assert "ieee_sin" not in source and "ieee_cos" not in source
