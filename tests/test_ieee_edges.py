"""Kernels give the IEEE result at the edges of each op's domain, in the
simulator as on a GPU: log(0) = -inf, sqrt(-1) = NaN, exp(1000) = inf,
pow(-2, 0.5) = NaN, sigmoid(-1000) = 0, ... (Python's `math` raises on all of
these), each against the NumPy reference interpreter.

The GPU side of the same kernels is checked by compiling them to PTX: the
generated code must call the same device functions as before, with no
branches added.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from codegen_harness import compile_text

from fusec.codegen.ptx import compile_kernels_ptx
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import run_module
from fusec.runtime.executor import run_program

# Zero, signed zero, negatives, tiny, huge and the non-finite values.
EDGES = [0.0, -0.0, -1.0, 1.0, -2.0, 2.5, 1e-30, -1e-30, 100.0, -100.0, 1000.0, -1000.0,
         1e30, -1e30, np.inf, -np.inf, np.nan, 0.5]
PIPELINE = "decompose,group-each-op"

UNARY = ["nn.exp", "nn.log", "nn.sqrt", "nn.rsqrt", "nn.reciprocal", "nn.tanh", "nn.erf",
         "nn.sin", "nn.cos", "nn.sigmoid", "nn.silu", "nn.relu", "nn.abs", "nn.neg", "nn.gelu",
         'nn.gelu {approximate = "tanh"}']
BINARY = ["nn.pow", "nn.div", "nn.add", "nn.sub", "nn.mul"]


def _run(text: str, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    program = compile_text(text, PIPELINE)
    got = run_program(program, "f", inputs, device="sim")
    expected = run_module(parse_module(make_context(), text, "t.mlir"), inputs, "f")
    return got, expected


def _assert_ieee_close(got: np.ndarray, expected: np.ndarray, rtol: float) -> None:
    with np.errstate(over="ignore"):  # the float64 reference rounds to inf
        e = expected.astype(got.dtype)
    assert np.array_equal(np.isnan(got), np.isnan(e)), (got, e)
    assert np.array_equal(np.isinf(got) & (got > 0), np.isinf(e) & (e > 0)), (got, e)
    assert np.array_equal(np.isinf(got) & (got < 0), np.isinf(e) & (e < 0)), (got, e)
    finite = np.isfinite(e)
    # Subnormal results may flush or round differently: an absolute floor.
    tiny = float(np.finfo(got.dtype).tiny)
    np.testing.assert_allclose(got[finite], e[finite], rtol=rtol, atol=tiny)


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("op", UNARY)
def test_unary_at_domain_edges(op: str, element: str) -> None:
    name, _, attrs = op.partition(" ")
    t = f"tensor<{len(EDGES)}x{element}>"
    text = (f"func.func @f(%x: {t}) -> {t} {{\n"
            f"  %y = {name} %x {attrs} : {t}\n  func.return %y : {t}\n}}\n")
    dtype = np.float32 if element == "f32" else np.float64
    got, expected = _run(text, [np.array(EDGES, dtype)])
    _assert_ieee_close(got[0], expected[0], 2e-6 if element == "f32" else 1e-13)


@pytest.mark.parametrize("op", BINARY)
def test_binary_at_domain_edges(op: str) -> None:
    a, b = np.meshgrid(np.array(EDGES, np.float32), np.array(EDGES, np.float32))
    t = f"tensor<{a.size}xf32>"
    text = (f"func.func @f(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %y = {op} %a, %b : ({t}, {t}) -> {t}\n  func.return %y : {t}\n}}\n")
    got, expected = _run(text, [a.ravel(), b.ravel()])
    _assert_ieee_close(got[0], expected[0], 2e-6)


def test_batch_norm_with_negative_variance_is_nan() -> None:
    """N(0, 1) variances (the default random inputs of a model whose variance
    is computed) give NaN where var + eps < 0, as on a GPU."""
    x, c = "tensor<2x3x2xf32>", "tensor<3xf32>"
    text = (f"func.func @f(%x: {x}, %s: {c}, %b: {c}, %m: {c}, %v: {c}) -> {x} {{\n"
            f"  %y = nn.batch_norm %x, %s, %b, %m, %v {{epsilon = 1.0e-05}} : "
            f"({x}, {c}, {c}, {c}, {c}) -> {x}\n  func.return %y : {x}\n}}\n")
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((2, 3, 2)).astype(np.float32)]
    inputs += [rng.standard_normal(3).astype(np.float32) for _ in range(3)]
    inputs.append(np.array([-1.0, 0.0, 2.0], np.float32))
    for pipeline in (PIPELINE, "group-each-op"):
        program = compile_text(text, pipeline)
        got = run_program(program, "f", inputs, device="sim")[0]
        expected = run_module(parse_module(make_context(), text, "t.mlir"), inputs, "f")[0]
        assert np.isnan(got[:, 0]).all()
        _assert_ieee_close(got, expected, 1e-5)


# Every op that goes through an `ieee_*` function, in three float types.
ALL_IEEE_OPS = """
func.func @f(%x: tensor<8xf32>, %h: tensor<8xf16>, %d: tensor<8xf64>)
    -> (tensor<8xf32>, tensor<8xf16>, tensor<8xf64>) {
""" + "".join(
    f"  %{v}0 = nn.exp %{v} : tensor<8x{e}>\n"
    f"  %{v}1 = nn.log %{v}0 : tensor<8x{e}>\n"
    f"  %{v}2 = nn.sqrt %{v}1 : tensor<8x{e}>\n"
    f"  %{v}3 = nn.rsqrt %{v}2 : tensor<8x{e}>\n"
    f"  %{v}4 = nn.tanh %{v}3 : tensor<8x{e}>\n"
    f"  %{v}5 = nn.erf %{v}4 : tensor<8x{e}>\n"
    f"  %{v}6 = nn.sigmoid %{v}5 : tensor<8x{e}>\n"
    f"  %{v}7 = nn.silu %{v}6 : tensor<8x{e}>\n"
    f"  %{v}8 = nn.gelu %{v}7 : tensor<8x{e}>\n"
    f'  %{v}9 = nn.gelu %{v}8 {{approximate = "tanh"}} : tensor<8x{e}>\n'
    f"  %{v}10 = nn.pow %{v}9, %{v} : (tensor<8x{e}>, tensor<8x{e}>) -> tensor<8x{e}>\n"
    f"  %{v}11 = nn.sin %{v}10 : tensor<8x{e}>\n"
    f"  %{v}12 = nn.cos %{v}11 : tensor<8x{e}>\n"
    for v, e in (("x", "f32"), ("h", "f16"), ("d", "f64"))
) + """  func.return %x12, %h12, %d12 : tensor<8xf32>, tensor<8xf16>, tensor<8xf64>
}
"""


@pytest.mark.slow
def test_gpu_code_is_the_same_as_calling_math_directly() -> None:
    """On the GPU the `ieee_*` names are the math functions themselves: the
    PTX equals that of the kernels calling math.* (no guard, no branch)."""
    program = compile_text(ALL_IEEE_OPS, "decompose,form-fusion-groups")
    source = program.kernels_source
    assert "ieee_pow(" in source and "math.exp(" not in source
    direct = re.sub(r"\bieee_(exp|log|sqrt|tanh|erf|pow|sin|cos)\(", r"math.\1(", source)
    pairs = [(la, fp.values) for fp in program.functions.values() for la in fp.launches]
    ieee = compile_kernels_ptx(source, pairs, program.target)
    plain = compile_kernels_ptx(direct, pairs, program.target)
    assert ieee.keys() == plain.keys() and ieee
    for name in ieee:
        assert ieee[name]["ptx"] == plain[name]["ptx"], name


EXP_F32_F64 = """
func.func @f(%x: tensor<64xf32>, %d: tensor<64xf64>) -> (tensor<64xf32>, tensor<64xf64>) {
  %a = nn.exp %x : tensor<64xf32>
  %b = nn.exp %d : tensor<64xf64>
  func.return %a, %b : tensor<64xf32>, tensor<64xf64>
}
"""


def test_f32_exp_runs_on_the_special_function_unit() -> None:
    """float32 exp is `ex2.approx.f32` of x log2 e (as torch.compile's
    kernels compute it), float64 exp stays libdevice's."""
    program = compile_text(EXP_F32_F64, "group-each-op")
    pairs = [(la, fp.values) for fp in program.functions.values() for la in fp.launches]
    ptx = compile_kernels_ptx(program.kernels_source, pairs, program.target)
    by_dtype = {str(fp.values[la.args[0].value].dtype): ptx[la.kernel]["ptx"]
                for fp in program.functions.values() for la in fp.launches}
    assert "ex2.approx.f32" in by_dtype["float32"]
    assert "fma.rm.f32" not in by_dtype["float32"]  # libdevice expf's range reduction
    assert "ex2.approx" not in by_dtype["float64"]


@pytest.mark.gpu
def test_f32_exp_on_the_gpu_is_within_1e_5_relative() -> None:
    """The documented error bound of the float32 exp, on a GPU, over the
    finite range of its results and the edges."""
    from fusec.compiler.compile import compile_model
    from fusec.runtime.executor import run_program as run

    x = np.concatenate([np.linspace(-80, 80, 200_001), np.array(EDGES)]).astype(np.float32)
    text = EXP_F32_F64.replace("64x", f"{x.size}x")
    program = compile_model(text).program
    got = run(program, "f", [x, x.astype(np.float64)], device="gpu")[0]
    with np.errstate(over="ignore"):  # the edges include +inf and 1e30
        exact = np.exp(x.astype(np.float64))
    finite = np.isfinite(exact) & (np.abs(x) <= 80)
    rel = np.abs(got[finite] - exact[finite]) / exact[finite]
    assert rel.max() < 1e-5, rel.max()
    with np.errstate(over="ignore"):
        edge = np.exp(x)  # float32: inf past 88.7, 0 below -103.9, NaN for NaN
    same = ~np.isfinite(edge) | (edge == 0)
    np.testing.assert_array_equal(got[same], edge[same])
