"""The cheaper tanh of f16/bf16 values (codegen/fast_tanh.py).

Its accuracy over a dense sweep (the simulator's NumPy float32 formula, the
same formula with the device's documented ex2/rcp error on top, and on a
GPU the device's), half programs using it against the reference
interpreter, the instructions it saves per element in the PTX, and float32
programs keeping libdevice's tanh.
"""

from __future__ import annotations

import math
import re
from types import ModuleType

import numpy as np
import pytest

from fusec.analysis.half_math_cost import HALF_FORM_INSTRUCTIONS
from fusec.codegen.fast_tanh import (
    GELU_TANH_ERROR_BOUND,
    TANH_ERROR_BOUND,
    TANH_Q,
    TANH_SMALL,
    TWO_LOG2_E,
    fast_tanh_prelude,
)
from fusec.codegen.kernel_source import KERNEL_PRELUDE
from fusec.dialects.element_types import element, round_to_bf16
from fusec.runtime.executor import load_kernels
from tests.codegen_harness import compile_text
from tests.test_fast_erf import _kernel_ptx, _ptx_instructions
from tests.test_half_precision import FUSED, check

SWEEP = np.linspace(-12.0, 12.0, 2**20 + 1, dtype=np.float32)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-40, -1e-40, 1e-8,
                    TANH_SMALL, -TANH_SMALL, 44.0, -44.0, 90.0, -90.0, 3.4e38, -3.4e38],
                   np.float32)
ALL = np.concatenate([SWEEP, SPECIAL])
SQRT_2_OVER_PI, GELU_K = math.sqrt(2.0 / math.pi), 0.044715


def _prelude() -> ModuleType:
    """The kernel prelude with the fast tanh, as the simulator runs it."""
    return load_kernels(KERNEL_PRELUDE + fast_tanh_prelude())


def _exact_gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_K * x**3)))


def _check_tanh(got: np.ndarray, x: np.ndarray) -> None:
    """`got` within TANH_ERROR_BOUND of tanh(x) relative; NaN kept, odd (the
    sign of zero kept), exactly +-1 far out."""
    want = np.tanh(x.astype(np.float64))
    number = ~np.isnan(want)
    err = np.abs(got[number] - want[number])
    assert np.all(err <= TANH_ERROR_BOUND * np.abs(want[number])), float(np.max(
        err / np.maximum(np.abs(want[number]), 1e-300)))
    assert np.isnan(got[~number]).all()
    assert np.array_equal(np.signbit(got[number]), np.signbit(want[number]))
    assert np.all(np.abs(got[np.abs(x) >= 44.0]) == 1.0)


def _device_model(x: np.ndarray, ex2_error: float, rcp_error: float) -> np.ndarray:
    """half_tanh's formula in float32 with ex2 and the reciprocal off by the
    given relative errors (the device's approximations at an extreme)."""
    f32 = np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        w = x * x
        q = f32(TANH_Q[-1])
        for c in TANH_Q[-2::-1]:  # fused multiply-adds: rounded once
            q = (q.astype(np.float64) * w + c).astype(f32)
        p = x * (q.astype(np.float64) * w + 1.0).astype(f32)
        e = np.exp2(np.abs(x) * f32(TWO_LOG2_E)).astype(np.float64) * (1.0 + ex2_error)
        r = ((1.0 / (e.astype(f32) + f32(1.0))).astype(np.float64) * (1.0 + rcp_error))
        y = np.copysign((1.0 - 2.0 * r.astype(f32).astype(np.float64)).astype(f32), x)
    return np.where(w < f32(TANH_SMALL * TANH_SMALL), p, y)


def test_half_tanh_within_its_bound_over_a_dense_sweep() -> None:
    got = np.asarray(_prelude().half_tanh(ALL), np.float64)
    _check_tanh(got, ALL)
    # Near 0 it is the odd polynomial: tiny and subnormal x come back exactly.
    tiny = np.abs(ALL) < 1e-20
    assert np.array_equal(got[tiny], ALL[tiny].astype(np.float64))


@pytest.mark.parametrize("ex2_ulps", [-2, 2])
@pytest.mark.parametrize("rcp_ulps", [-1, 1])
def test_half_tanh_bound_holds_with_the_device_error(ex2_ulps: int, rcp_ulps: int) -> None:
    """ex2.approx is within 2 ulp, rcp.approx within 1 ulp (PTX ISA): with
    either at either extreme the bound still holds (measured 2^-19.9)."""
    got = _device_model(ALL, ex2_ulps * 2.0**-23, rcp_ulps * 2.0**-23).astype(np.float64)
    _check_tanh(got, ALL)


def test_half_gelu_tanh_within_its_bound() -> None:
    got = np.asarray(_prelude().half_gelu_tanh(ALL), np.float64)
    want = _exact_gelu(ALL)
    finite = np.isfinite(ALL)
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= GELU_TANH_ERROR_BOUND * np.abs(ALL[finite])), float(np.max(err))
    # Relative to gelu itself where it is not tiny (x >= -3: |gelu| > 0.004).
    body = finite & (ALL >= -3.0)
    assert np.all(np.abs(got[body] - want[body]) <= TANH_ERROR_BOUND * np.abs(want[body]))
    g = _prelude().half_gelu_tanh
    assert float(g(np.float32(-20.0))) == 0.0 and float(g(np.float32(20.0))) == 20.0
    assert math.isnan(g(np.float32(-np.inf))) and g(np.float32(np.inf)) == np.inf
    assert math.isnan(g(np.float32(np.nan))) and np.signbit(g(np.float32(-0.0)))


def _round(a: np.ndarray, dtype: str) -> np.ndarray:
    a = a.astype(np.float32)
    return (a.astype(np.float16) if dtype == "f16" else round_to_bf16(a)).astype(np.float64)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_rounded_to_half_tanh_and_gelu_are_the_exact_ones_rounded(dtype: str) -> None:
    """Rounded to the half type, half_tanh and half_gelu_tanh are within the
    half tolerance everywhere, and the exact values rounded but for a few
    elements in ten thousand, one ulp away (gelu: for x >= -3; below, where
    |gelu| < 0.004, its error is 2^-20 |x|, absolute)."""
    x = SWEEP[np.abs(SWEEP) < 8.0]
    gelu_body = x >= -3.0
    for cheap, exact, body in (
            (_prelude().half_tanh(x), np.tanh(x.astype(np.float64)), np.ones_like(gelu_body)),
            (_prelude().half_gelu_tanh(x), _exact_gelu(x), gelu_body)):
        got, want = _round(np.asarray(cheap), dtype), _round(exact, dtype)
        assert float(np.max(np.abs(got - exact))) <= element(dtype).tolerance * float(
            np.max(np.abs(exact)))
        differ = got[body] != want[body]
        assert differ.mean() < 1e-3, differ.mean()
        ulp = 2.0 * element(dtype).unit_roundoff * np.maximum(np.abs(want), 2.0**-14)
        assert np.all((np.abs(got - want) <= ulp * 1.01)[body])


TANH_SCALE = """func.func @f(%x: tensor<R x CxT>, %s: tensor<CxT>) -> tensor<R x CxT> {
  %m = nn.mul %x, %s : (tensor<R x CxT>, tensor<CxT>) -> tensor<R x CxT>
  %e = OP : tensor<R x CxT>
  func.return %e : tensor<R x CxT>
}
"""
TANH = "nn.tanh %m"
GELU_TANH = 'nn.gelu %m {approximate = "tanh"}'


def _program(op: str, dtype: str, rows: int = 4, cols: int = 64) -> str:
    return TANH_SCALE.replace("OP", op).replace("R x C", f"{rows}x{cols}").replace(
        "<C", f"<{cols}").replace("T>", f"{dtype}>")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("op", [TANH, GELU_TANH])
def test_half_tanh_ops_in_the_simulator(op: str, dtype: str) -> None:
    program = check(_program(op, dtype), dtype, launches=1, pipeline=FUSED)
    call = "half_tanh" if op == TANH else "half_gelu_tanh"
    assert f"= {call}(" in program.kernels_source
    assert "ieee_tanh(" not in program.kernels_source


def test_half_erf_and_tanh_in_one_program_share_the_reciprocal() -> None:
    """Both cheap preludes in one kernels.py: `_F32Ir` defined once."""
    text = _program(TANH, "f16").replace("  func.return %e", (
        '  %g = nn.gelu %e {approximate = "none"} : tensor<4x64xf16>\n  func.return %g'))
    program = check(text, "f16", launches=1, pipeline=FUSED)
    source = program.kernels_source
    assert "= half_tanh(" in source and "= half_gelu(" in source
    assert source.count("class _F32Ir:") == 1


def _per_element(op: str) -> tuple[float, str]:
    """PTX instructions per element of `op` in the f16 mul + op kernel,
    against the same kernel with a negation for `op` (8 elements a thread,
    every one stored: 64x255 is not vectorised and fills the threads)."""
    source, ptx = _kernel_ptx(_program(op, "f16", 64, 255))
    _, with_neg = _kernel_ptx(_program("nn.neg %m", "f16", 64, 255))
    elements = len(re.findall(r"= half_(?:gelu_)?tanh\(|ieee_tanh\(", source))  # calls
    return (_ptx_instructions(ptx) - _ptx_instructions(with_neg)) / elements, ptx


@pytest.mark.slow  # compiles kernels to PTX in a subprocess
def test_half_tanh_costs_fewer_instructions_than_libdevice() -> None:
    """libdevice's tanhf took 16 PTX instructions per element (2 `selp`),
    its tanh-form gelu 23; the cheap ones take 13 (1 `selp`) and 6."""
    tanh, tanh_ptx = _per_element(TANH)
    gelu, gelu_ptx = _per_element(GELU_TANH)
    assert tanh <= HALF_FORM_INSTRUCTIONS["tanh"].half, tanh
    assert gelu <= HALF_FORM_INSTRUCTIONS["gelu_tanh"].half, gelu
    assert tanh_ptx.count("selp") == tanh_ptx.count("ex2.approx.ftz")
    assert "selp" not in gelu_ptx


@pytest.mark.parametrize("op", [TANH, GELU_TANH])
def test_float32_keeps_libdevice_tanh(op: str) -> None:
    """f32 results, and an f32 tanh inside a half program (cast to f16 after),
    keep `ieee_tanh`; their kernels.py has no fast tanh at all."""
    cast = _program(op, "f16").replace(
        f"%e = {op} : tensor<4x64xf16>",
        f"%w = nn.cast %m : (tensor<4x64xf16>) -> tensor<4x64xf32>\n"
        f"  %v = {op.replace('%m', '%w')} : tensor<4x64xf32>\n"
        f"  %e = nn.cast %v : (tensor<4x64xf32>) -> tensor<4x64xf16>")
    for text in (_program(op, "f32"), cast):
        source = compile_text(text, FUSED).kernels_source
        assert "ieee_tanh(" in source
        assert "half_tanh" not in source and "half_gelu_tanh" not in source


SWEEP_KERNEL = """

@cuda.jit
def sweep(x, t, g):
    i = cuda.grid(1)
    if i < x.size:
        t[i] = half_tanh(x[i])
        g[i] = half_gelu_tanh(x[i])
"""


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:.*Host array used in CUDA kernel")  # the sweep's copies
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_tanh_on_the_gpu(dtype: str) -> None:
    """The device's half_tanh and half_gelu_tanh (ex2.approx, rcp.approx)
    within their bounds over the sweep, and the half tanh and gelu programs
    against the reference on the GPU."""
    module = load_kernels(KERNEL_PRELUDE + fast_tanh_prelude() + SWEEP_KERNEL)
    t, g = np.zeros_like(ALL), np.zeros_like(ALL)
    module.sweep[(ALL.size + 255) // 256, 256](ALL, t, g)
    _check_tanh(t.astype(np.float64), ALL)
    finite = np.isfinite(ALL)
    err = np.abs(g[finite] - _exact_gelu(ALL[finite]))
    assert np.all(err <= GELU_TANH_ERROR_BOUND * np.abs(ALL[finite])), float(np.max(err))
    for op in (TANH, GELU_TANH):
        check(_program(op, dtype), dtype, launches=1, pipeline=FUSED, device="gpu")
