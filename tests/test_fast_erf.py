"""The cheaper erf of f16/bf16 values (codegen/fast_erf.py).

Its accuracy over a dense sweep (the simulator's NumPy float32 formula, and
on a GPU the device's), half programs using it against the reference
interpreter, the instructions it saves per element in the PTX, and float32
programs keeping libdevice's erf.
"""

from __future__ import annotations

import math
import re
from types import ModuleType

import numpy as np
import pytest

from fusec.analysis.half_math_cost import HALF_FORM_INSTRUCTIONS
from fusec.codegen.fast_erf import ERF_CLAMP, ERF_ERROR_BOUND, fast_erf_prelude
from fusec.codegen.kernel_source import KERNEL_PRELUDE
from fusec.codegen.ptx import compile_program_ptx
from fusec.dialects.element_types import element, round_to_bf16
from fusec.runtime.executor import load_kernels
from tests.codegen_harness import compile_text
from tests.test_half_precision import FUSED, check

SWEEP = np.linspace(-6.0, 6.0, 2**20 + 1, dtype=np.float32)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-8, ERF_CLAMP,
                    -ERF_CLAMP, 3.4e38, -3.4e38], np.float32)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _prelude() -> ModuleType:
    """The kernel prelude with the fast erf, as the simulator runs it."""
    return load_kernels(KERNEL_PRELUDE + fast_erf_prelude())


def _exact_gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def test_half_erf_within_its_bound_over_a_dense_sweep() -> None:
    x = np.concatenate([SWEEP, SPECIAL])
    got = np.asarray(_prelude().half_erf(x), np.float64)
    want = _erf(x.astype(np.float64))
    finite = ~np.isnan(want)
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= ERF_ERROR_BOUND * np.abs(want[finite])), float(np.max(err))
    assert np.isnan(got[~finite]).all()
    # Odd, signed zeros and saturation kept: erf(-0) = -0, erf(+-inf) = +-1.
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    assert np.all(np.abs(got[np.abs(x) >= ERF_CLAMP]) >= 1.0)


def test_half_gelu_within_its_bound_and_exact_in_the_tails() -> None:
    x = np.concatenate([SWEEP, SPECIAL])
    got = np.asarray(_prelude().half_gelu(x), np.float64)
    want = _exact_gelu(x)
    finite = np.isfinite(x)
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= ERF_ERROR_BOUND * np.abs(x[finite])), float(np.max(err))
    # Past the clamp 0.5 + 0.5 erf saturates at exactly 0 or 1, as in float32
    # libdevice: gelu(-10) is -0, gelu(-inf) NaN (-inf * 0), gelu(inf) inf.
    g = _prelude().half_gelu
    assert float(g(np.float32(-10.0))) == 0.0 and float(g(np.float32(10.0))) == 10.0
    assert math.isnan(g(np.float32(-np.inf))) and g(np.float32(np.inf)) == np.inf
    assert math.isnan(g(np.float32(np.nan))) and np.signbit(g(np.float32(-0.0)))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gelu_rounded_to_half_is_the_exact_gelu_rounded(dtype: str) -> None:
    """Rounded to the half type, the cheap gelu is within the half tolerance
    everywhere; for x >= -2 it is the exact gelu rounded but for a few
    elements in ten thousand, one ulp away. Below -2 (|gelu| < 0.05) its
    error is absolute, 2^-19 |x|, as libdevice's 1 + erf(x) already is (2^-24)."""
    x = SWEEP[np.abs(SWEEP) < 5.0]
    cheap = np.asarray(_prelude().half_gelu(x), np.float32)
    exact = _exact_gelu(x)

    def rnd(a: np.ndarray) -> np.ndarray:
        a = a.astype(np.float32)
        return (a.astype(np.float16) if dtype == "f16" else round_to_bf16(a)).astype(np.float64)

    err = float(np.max(np.abs(rnd(cheap) - exact)))
    assert err <= element(dtype).tolerance * float(np.max(np.abs(exact)))
    body = x >= -2.0
    differ = rnd(cheap)[body] != rnd(exact)[body]
    assert differ.mean() < 2e-3, differ.mean()
    ulp = 2.0 * element(dtype).unit_roundoff * np.maximum(np.abs(rnd(exact)[body]), 2.0**-14)
    assert np.all(np.abs(rnd(cheap) - rnd(exact))[body] <= ulp * 1.01)


ADD_LN_GELU = """func.func @f(%a: tensor<4x256xT>, %r: tensor<4x256xT>, %g: tensor<256xT>,
    %b: tensor<256xT>) -> tensor<4x256xT> {
  %s = nn.add %a, %r : (tensor<4x256xT>, tensor<4x256xT>) -> tensor<4x256xT>
  %n = nn.layer_norm %s, %g, %b {axis = -1, epsilon = 1.0e-05}
      : (tensor<4x256xT>, tensor<256xT>, tensor<256xT>) -> tensor<4x256xT>
  %y = nn.gelu %n {approximate = "none"} : tensor<4x256xT>
  func.return %y : tensor<4x256xT>
}
"""

ERF_SCALE = """func.func @f(%x: tensor<4x64xT>, %s: tensor<64xT>) -> tensor<4x64xT> {
  %m = nn.mul %x, %s : (tensor<4x64xT>, tensor<64xT>) -> tensor<4x64xT>
  %e = nn.erf %m : tensor<4x64xT>
  func.return %e : tensor<4x64xT>
}
"""


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_add_layernorm_gelu_in_the_simulator(dtype: str) -> None:
    program = check(ADD_LN_GELU.replace("T>", f"{dtype}>"), dtype, launches=1,
                    pipeline=FUSED)
    assert "= half_gelu(" in program.kernels_source
    assert "ieee_erf(" not in program.kernels_source


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_erf_op_in_the_simulator(dtype: str) -> None:
    program = check(ERF_SCALE.replace("T>", f"{dtype}>"), dtype, launches=1, pipeline=FUSED)
    assert "= half_erf(" in program.kernels_source


def _ptx_instructions(ptx: str) -> int:
    """PTX instructions, moves aside (the assembler folds them)."""
    return sum(1 for line in ptx.splitlines()
               if line.strip().endswith(";") and not line.strip().startswith((".", "//", "mov.")))


def _kernel_ptx(text: str) -> tuple[str, str]:
    program = compile_text(text, FUSED)
    (kernel,) = compile_program_ptx(program).values()
    return program.kernels_source, str(kernel["ptx"])


@pytest.mark.slow  # compiles kernels to PTX in a subprocess
def test_half_gelu_costs_about_half_the_instructions_of_libdevice_erf() -> None:
    """The f16 add + layer norm + gelu kernel against the same kernel with a
    negation for the gelu: libdevice's erf form cost 29 PTX instructions and
    a branch per element (9 `selp`, `ex2`); the cheap one costs 15."""
    text = ADD_LN_GELU.replace("T>", "f16>")
    source, with_gelu = _kernel_ptx(text)
    _, with_neg = _kernel_ptx(text.replace('nn.gelu %n {approximate = "none"}', "nn.neg %n"))
    elements = len(re.findall(r"= half_gelu\(|\+ ieee_erf\(", source))  # calls, not defs
    per_element = (_ptx_instructions(with_gelu) - _ptx_instructions(with_neg)) / elements
    assert per_element <= HALF_FORM_INSTRUCTIONS["gelu"].half + 1, per_element
    assert "ex2." not in with_gelu and "selp" not in with_gelu


@pytest.mark.parametrize("op", ['nn.gelu %m {approximate = "none"}', "nn.erf %m"])
def test_float32_keeps_libdevice_erf(op: str) -> None:
    """f32 results, and an f32 erf inside a half program (cast to f16 after),
    keep `ieee_erf`; their kernels.py has no fast erf at all."""
    for text in (ERF_SCALE.replace("T>", "f32>"), ERF_SCALE.replace(
            "%e = nn.erf %m : tensor<4x64xT>",
            "%w = nn.cast %m : (tensor<4x64xT>) -> tensor<4x64xf32>\n"
            "  %v = nn.erf %w : tensor<4x64xf32>\n"
            "  %e = nn.cast %v : (tensor<4x64xf32>) -> tensor<4x64xT>").replace("T>", "f16>")):
        source = compile_text(text.replace("nn.erf %m", op).replace("nn.erf %w", op.replace(
            "%m", "%w")), FUSED).kernels_source
        assert "ieee_erf(" in source
        assert "half_erf" not in source and "half_gelu" not in source


SWEEP_KERNEL = """

@cuda.jit
def sweep(x, g, e):
    i = cuda.grid(1)
    if i < x.size:
        g[i] = half_gelu(x[i])
        e[i] = half_erf(x[i])
"""


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:.*Host array used in CUDA kernel")  # the sweep's copies
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_gelu_on_the_gpu(dtype: str) -> None:
    """The device's half_gelu (approximate reciprocal, fused multiply-adds)
    within the bound over the sweep, and the half add_layernorm_gelu kernel
    against the reference on the GPU."""
    module = load_kernels(KERNEL_PRELUDE + fast_erf_prelude() + SWEEP_KERNEL)
    x = np.concatenate([SWEEP, SPECIAL])
    g, e = np.zeros_like(x), np.zeros_like(x)
    module.sweep[(x.size + 255) // 256, 256](x, g, e)
    finite = np.isfinite(x)
    want_e = _erf(x[finite].astype(np.float64))
    assert np.all(np.abs(e[finite] - want_e) <= ERF_ERROR_BOUND * np.abs(want_e))
    want_g = _exact_gelu(x[finite])
    assert np.all(np.abs(g[finite] - want_g) <= ERF_ERROR_BOUND * np.abs(x[finite]))
    check(ADD_LN_GELU.replace("T>", f"{dtype}>"), dtype, launches=1, pipeline=FUSED,
          device="gpu")
