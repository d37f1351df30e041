"""A cheaper erf (and erf-form gelu) for values rounded to f16 or bf16.

libdevice's `erff` is correct to 1 ulp of float32: two polynomials whose
coefficients a GPU picks per element (9 `selp`, 9 `fma`, an `ex2` behind a
branch: 29 PTX instructions per gelu element). A value whose type is
f16 or bf16 is rounded to 2^-11 (f16) or 2^-8 (bf16) relative by the program
itself, so that accuracy cannot be seen there. For such values kernels call
the prelude's `half_erf(z)` and `half_gelu(x)` instead:

    erf(z) ~= zc * P(zc^2) / Q(zc^2),   zc = z clamped to [-ERF_CLAMP, ERF_CLAMP]

a rational minimax fit (P of degree 5, Q of degree 4 with Q(0) = 1 and all
coefficients positive, so Q has no pole), odd in z and so relatively
accurate down to the smallest z; one approximate reciprocal (`rcp.approx`)
divides. Beyond the clamp erf is 1 to within 4e-8; the fit overshoots 1
slightly there, so gelu's `0.5 + 0.5 erf`, saturated to [0, 1] (`.sat`, free
on the fma), is exactly 0 or 1 for |x| >= ERF_CLAMP * sqrt(2): gelu(-10) is
-0 and gelu(-inf) NaN (-inf * 0), as libdevice's erff gives. NaN stays NaN.

Error, float32 arithmetic included (tests/test_fast_erf.py sweeps 2^20
points): |half_erf(z) - erf(z)| <= ERF_ERROR_BOUND * |erf(z)| (relative, so
also absolute), and |half_gelu(x) - gelu(x)| <= ERF_ERROR_BOUND * |x|.
ERF_ERROR_BOUND = 2^-19 is 1/256 of f16's unit roundoff and 1/2048 of
bf16's: a half result rounds to the value the exact erf gives but for an
element now and then that lay within 2^-19 of a rounding boundary, one ulp
apart. When kernels use it is `kernel_source.scalar_expr`'s rule
(docs/nn-dialect.md, "Half precision").

The simulator runs the same formula in NumPy float32 (array or scalar),
with a correctly rounded division for the approximate reciprocal. The cost
model prices these forms from `analysis/half_math_cost.py`'s table.
"""

from __future__ import annotations

import math

import numpy as np

ERF_CLAMP = 3.9
"""|z| past which erf(z) is taken as +-1 (erf(3.9) = 1 - 3.5e-8)."""

# erf(z) / z ~= P(w) / Q(w), w = z^2: coefficients of w^0, w^1, ... Fitted by
# iteratively reweighted least squares (Sanathanan-Koerner, Lawson weights)
# on the relative error over z in (0, ERF_CLAMP], with the value at
# ERF_CLAMP pinned at 1 + 3e-7 (the overshoot gelu's saturation relies on).
ERF_P = (1.1283797025680542, 0.39260321855545044, 0.07645359635353088,
         0.011414318345487118, 0.00028571044094860554, -1.593318415871181e-06)
ERF_Q = (1.0, 0.6812665462493896, 0.19487696886062622, 0.030671682208776474,
         0.0026815140154212713)

ERF_ERROR_BOUND = 2.0 ** -19
"""Relative error bound of `half_erf`; `half_gelu`'s error is below it times |x|."""

def one_instruction_device(name: str, instruction: str) -> str:
    """A block of the prelude's GPU branch defining `name(x)`, an f32
    intrinsic of one PTX `instruction` (`rcp.approx.ftz.f32`, ...)."""
    return f"""\
    @intrinsic
    def {name}(typingctx, x):
        def codegen(context, builder, sig, args):
            f = context.cast(builder, args[0], sig.args[0], _t.float32)
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()])
            return builder.asm(fnty, "{instruction} $0, $1;", "=f,f", [f], False)
        return _t.float32(x), codegen
"""


RCP_APPROX_DEVICE = one_instruction_device("_rcp_approx", "rcp.approx.ftz.f32")
"""The device's `_rcp_approx(x)`: 1 / x within 1 ulp (`rcp.approx.ftz`, one
instruction), as a block of the prelude's GPU branch; shared with
`codegen/fast_tanh.py`, whose prelude leaves it out where this one has it."""

FAST_ERF_NAMES = ("half_erf", "half_gelu", "_f32_value", "_rcp_approx", "_fma_sat")
"""Top-level names `fast_erf_prelude` binds in kernels.py."""


def gelu_coefficients() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """P~, Q~ in x (not z = x / sqrt 2), scaled so that
    0.5 * erf(x / sqrt 2) = x * P~(x^2) / Q~(x^2): gelu needs no multiply
    by 1 / sqrt 2 and no halving."""
    p = tuple(c * 0.5 / math.sqrt(2.0) / 2.0 ** k for k, c in enumerate(ERF_P))
    q = tuple(c / 2.0 ** k for k, c in enumerate(ERF_Q))
    return p, q


def f32_lit(value: float) -> str:
    """`float32(<the float32 nearest value>)`: the literal the kernels use."""
    return f"float32({float(np.float32(value))!r})"


def horner(coefficients: tuple[float, ...], w: str, fma: str = "") -> str:
    """`(((c5 * w + c4) * w + ...) * w + c0)` with float32 literals; with
    `fma`, each step a call of that function (on the GPU libdevice's fmaf:
    LLVM rewrites `w * -c + d` as `d - w * c`, a multiply and a subtract)."""
    expr = f32_lit(coefficients[-1])
    for c in coefficients[-2::-1]:
        expr = f"{fma}({expr}, {w}, {f32_lit(c)})" if fma else f"({expr} * {w} + {f32_lit(c)})"
    return expr


def fast_erf_prelude() -> str:
    """The kernel-prelude text defining `half_erf` and `half_gelu` (read by
    `kernel_source.kernel_prelude` only when a kernel calls them, so kernels
    of programs without half erf or gelu are unchanged)."""
    gp, gq = gelu_coefficients()
    fma = "libdevice.fmaf"
    z_clamp, x_clamp = f32_lit(ERF_CLAMP), f32_lit(ERF_CLAMP * math.sqrt(2.0))
    return f"""

# erf for values rounded to f16/bf16: a rational fit within 2^-19 relative,
# one approximate reciprocal (codegen/fast_erf.py). The clamp keeps a NaN.
if numba.cuda.core.config.ENABLE_CUDASIM:

    def _f32_value(a):
        return np.asarray(a, np.float32)[()]

    def half_erf(z):
        z = np.asarray(z, np.float32)
        zc = np.where(np.abs(z) > {z_clamp}, np.copysign({z_clamp}, z), z)
        w = zc * zc
        return _f32_value(zc * {horner(ERF_P, "w")} / {horner(ERF_Q, "w")})

    def half_gelu(x):
        x = np.asarray(x, np.float32)
        xc = np.clip(x, -{x_clamp}, {x_clamp})
        v = xc * xc
        t = xc * {horner(gp, "v")} / {horner(gq, "v")} + float32(0.5)
        with np.errstate(invalid="ignore"):  # -inf * 0: NaN, as on the GPU
            return _f32_value(x * np.clip(t, float32(0.0), float32(1.0)))
else:

{RCP_APPROX_DEVICE}
    # a * b + c clamped to [0, 1] (NaN to 0): one fma with the .sat modifier.
    @intrinsic
    def _fma_sat(typingctx, a, b, c):
        def codegen(context, builder, sig, args):
            fs = [context.cast(builder, v, t, _t.float32) for v, t in zip(args, sig.args)]
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()] * 3)
            return builder.asm(fnty, "fma.rn.sat.f32 $0, $1, $2, $3;", "=f,f,f,f", fs, False)
        return _t.float32(a, b, c), codegen

    @cuda.jit(device=True, inline=True)
    def half_erf(z):
        zc = math.copysign({z_clamp}, z) if abs(z) > {z_clamp} else float32(z)
        w = zc * zc
        return zc * {horner(ERF_P, "w", fma)} * _rcp_approx({horner(ERF_Q, "w", fma)})

    @cuda.jit(device=True, inline=True)
    def half_gelu(x):
        xc = libdevice.fminf(libdevice.fmaxf(x, -{x_clamp}), {x_clamp})
        v = xc * xc
        return x * _fma_sat(xc * {horner(gp, "v", fma)}, _rcp_approx({horner(gq, "v", fma)}),
                            float32(0.5))
"""
