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

F32_IR_DEVICE = """\
    # Writes f32 LLVM IR for the intrinsics below: libdevice calls, single PTX
    # instructions and branches, the instructions the `inline=True` device
    # functions they replace gave (tests/test_prelude_intrinsics.py). Those
    # had numba copy and type their IR again at every call.
    class _F32Ir:
        def __init__(self, context, builder):
            self.context, self.builder = context, builder

        def const(self, value):
            return self.context.get_constant(_t.float32, value)

        def arg(self, value, ty):
            return self.context.cast(self.builder, value, ty, _t.float32)

        def mul(self, a, b):
            return self.builder.fmul(a, b)

        def call(self, fn, *args):  # a libdevice function of f32s
            sig = _t.float32(*[_t.float32] * len(args))
            return self.context.get_function(fn, sig)(self.builder, list(args))

        def fma(self, a, b, c):
            return self.call(libdevice.fmaf, a, b, c)

        # (c_n w + c_n-1) w + ... + c_0 in fmaf steps (not fmul + fadd, which
        # LLVM would rewrite: `w * -c + d` as `d - w * c`, two instructions)
        def horner(self, coefficients, w):
            acc = self.const(coefficients[-1])
            for c in coefficients[-2::-1]:
                acc = self.fma(acc, w, self.const(c))
            return acc

        def asm(self, instruction, *args):  # one PTX instruction of f32s
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()] * len(args))
            places = ", ".join(f"${i}" for i in range(len(args) + 1))
            constraints = ",".join(["=f"] + ["f"] * len(args))
            return self.builder.asm(fnty, f"{instruction} {places};", constraints,
                                    list(args), False)

        def pick(self, cond, then, otherwise):  # a branch and a phi, as `a if c else b`
            with self.builder.if_else(cond) as (on_then, on_otherwise):
                with on_then:
                    a, a_block = then(), self.builder.block
                with on_otherwise:
                    b, b_block = otherwise(), self.builder.block
            phi = self.builder.phi(_ir.FloatType())
            phi.add_incoming(a, a_block)
            phi.add_incoming(b, b_block)
            return phi
"""
"""A block of the prelude's GPU branch defining `_F32Ir`, which the fast
erf and tanh intrinsics write their IR with; shared with
`codegen/fast_tanh.py`, whose prelude leaves it out where this one has it."""

FAST_ERF_NAMES = ("half_erf", "half_gelu", "_f32_value", "_F32Ir")
"""Top-level names `fast_erf_prelude` binds in kernels.py."""


def gelu_coefficients() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """P~, Q~ in x (not z = x / sqrt 2), scaled so that
    0.5 * erf(x / sqrt 2) = x * P~(x^2) / Q~(x^2): gelu needs no multiply
    by 1 / sqrt 2 and no halving."""
    p = tuple(c * 0.5 / math.sqrt(2.0) / 2.0 ** k for k, c in enumerate(ERF_P))
    q = tuple(c / 2.0 ** k for k, c in enumerate(ERF_Q))
    return p, q


def f32_repr(value: float) -> str:
    """The float32 nearest `value`, written as a Python float."""
    return repr(float(np.float32(value)))


def f32_lit(value: float) -> str:
    """`float32(<the float32 nearest value>)`: the literal the kernels use."""
    return f"float32({f32_repr(value)})"


def f32_tuple(values: tuple[float, ...]) -> str:
    """The float32 values nearest `values`, as a Python tuple literal (what an
    intrinsic's codegen hands `_F32Ir.horner`)."""
    return "(" + ", ".join(f32_repr(v) for v in values) + ",)"


def horner(coefficients: tuple[float, ...], w: str) -> str:
    """`(((c5 * w + c4) * w + ...) * w + c0)` with float32 literals (the
    simulator's form; the GPU's is `_F32Ir.horner`, a chain of fmaf)."""
    expr = f32_lit(coefficients[-1])
    for c in coefficients[-2::-1]:
        expr = f"({expr} * {w} + {f32_lit(c)})"
    return expr


def fast_erf_prelude() -> str:
    """The kernel-prelude text defining `half_erf` and `half_gelu` (read by
    `kernel_source.kernel_prelude` only when a kernel calls them, so kernels
    of programs without half erf or gelu are unchanged)."""
    gp, gq = gelu_coefficients()
    z_clamp, x_clamp = f32_lit(ERF_CLAMP), f32_lit(ERF_CLAMP * math.sqrt(2.0))
    x_lim = f32_repr(ERF_CLAMP * math.sqrt(2.0))
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

{F32_IR_DEVICE}
    # erf of f32 z: zc = z clamped to +-{f32_repr(ERF_CLAMP)} (a branch; copysign keeps
    # the sign, NaN goes through), then zc P(w) rcp(Q(w)) with w = zc^2:
    # each polynomial a chain of fmaf, one rcp.approx dividing.
    @intrinsic
    def half_erf(typingctx, z):
        def codegen(context, builder, sig, args):
            f = _F32Ir(context, builder)
            z, clamp = f.arg(args[0], sig.args[0]), f.const({f32_repr(ERF_CLAMP)})
            big = builder.fcmp_ordered(">", f.call(libdevice.fabsf, z), clamp)
            zc = f.pick(big, lambda: f.call(libdevice.copysignf, clamp, z), lambda: z)
            w = f.mul(zc, zc)
            p = f.mul(zc, f.horner({f32_tuple(ERF_P)}, w))
            return f.mul(p, f.asm("rcp.approx.ftz.f32", f.horner({f32_tuple(ERF_Q)}, w)))
        return _t.float32(z), codegen

    # gelu of f32 x: xc = fminf(fmaxf(x, -c), c) with c = {x_lim}, v = xc^2, then
    # x times xc P~(v) rcp(Q~(v)) + 0.5 on one fma with .sat (clamped to
    # [0, 1], NaN to 0).
    @intrinsic
    def half_gelu(typingctx, x):
        def codegen(context, builder, sig, args):
            f = _F32Ir(context, builder)
            x = f.arg(args[0], sig.args[0])
            xc = f.call(libdevice.fmaxf, x, f.const(-{x_lim}))
            xc = f.call(libdevice.fminf, xc, f.const({x_lim}))
            v = f.mul(xc, xc)
            p = f.mul(xc, f.horner({f32_tuple(gp)}, v))
            r = f.asm("rcp.approx.ftz.f32", f.horner({f32_tuple(gq)}, v))
            return f.mul(x, f.asm("fma.rn.sat.f32", p, r, f.const(0.5)))
        return _t.float32(x), codegen
"""
