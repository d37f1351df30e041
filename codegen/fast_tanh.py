"""A cheaper tanh (and tanh-form gelu) for values rounded to f16 or bf16.

libdevice's `tanhf` is correct to 2 ulp of float32: an exponential form
with a saturation test (`|x| >= 9.01` gives exactly +-1), a degree-4
polynomial below 0.6, the sign put back by `copysign` (16 PTX instructions
per tanh element, 23 per tanh-form gelu element, `mov`s aside). A value
whose type is f16 or bf16 is rounded to 2^-11 (f16) or 2^-8 (bf16) relative
by the program itself, so for such values kernels call the prelude's
`half_tanh(x)` and `half_gelu_tanh(x)` instead (13 and 6 instructions):

    tanh(x) = x * (1 + w Q(w)),                          w = x^2 < TANH_SMALL^2
            = sign(x) * (1 - 2 / (2^(|x| 2 log2 e) + 1))  otherwise

Q of degree 2 is a minimax fit of (tanh(x) - x) / x^3 weighted to relative
error; the odd form keeps tanh(x) / x accurate down to the smallest x and
the sign of zero. The exponential form runs on the special-function unit
(`ex2.approx.ftz`, `rcp.approx.ftz`) and saturates by itself: for |x| >= 44
2^(...) is inf and 1 - 2 * rcp(inf) = 1 - 0 = 1 exactly, no inf / inf. (On
|x|, not x: for x -> -inf the signed form would rest on rcp(1) being
exactly 1, which the PTX ISA does not promise.) NaN fails the `w <` test
and goes through the exponential form: NaN out. Both forms are computed
and one picked: a `selp`, no branch.

The tanh-form gelu, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715
x^3), is the same exponential form with the 0.5 (1 + .) folded in:
0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), so

    gelu(x) = x * rcp(1 + 2^(x (A1 + A3 x^2)))

with no cancellation and no sign to put back: for x -> -inf the rcp is of
inf (0, so gelu(-20) is -0 and gelu(-inf) NaN, -inf * 0, as libdevice's
form gives), for x -> inf of 1 + 0 (gelu(inf) = inf).

Error, float32 arithmetic included, against float64 (tests/test_fast_tanh.py
sweeps 2^20 points in [-12, 12] and special values): the simulator's
formula (NumPy float32, correctly rounded exp2 and division) is within
2^-22.1 of tanh relative; with the device's documented error on top
(ex2.approx: 2 ulp, rcp.approx: 1 ulp, each at either extreme) within
2^-20.7. The stated bound TANH_ERROR_BOUND = 2^-18 is 1/128 of f16's unit
roundoff: |half_tanh(x) - tanh(x)| <= 2^-18 |tanh(x)|, and
|half_gelu_tanh(x) - gelu(x)| <= GELU_TANH_ERROR_BOUND |x| (2^-20; measured
2^-21.7 with the device's error). When kernels use them is
`kernel_source.scalar_expr`'s rule (docs/nn-dialect.md, "Half precision");
the cost model prices them from `analysis/half_math_cost.py`'s table.
"""

from __future__ import annotations

import math

from fusec.codegen.fast_erf import F32_IR_DEVICE, f32_lit, f32_repr, f32_tuple, horner

TANH_SMALL = 0.4
"""|x| below which the odd polynomial gives tanh(x) (tanh(0.4) = 0.38: the
exponential form's error, about 2^-22 / tanh(x) relative, is small past it)."""

# (tanh(x) - x) / x^3 ~= Q(w), w = x^2: coefficients of w^0, w^1, w^2. Fitted
# by iteratively reweighted least squares (Lawson weights) on the relative
# error of tanh over x in (0, TANH_SMALL]: within 2^-23.
TANH_Q = (-0.3333188593387604, 0.13277703523635864, -0.04779810830950737)

TWO_LOG2_E = 2.0 * math.log2(math.e)
"""tanh(x) = 1 - 2 / (2^(x TWO_LOG2_E) + 1)."""

TANH_ERROR_BOUND = 2.0 ** -18
"""Relative error bound of `half_tanh`, the device's approximations included."""

GELU_TANH_ERROR_BOUND = 2.0 ** -20
"""`half_gelu_tanh(x)` is within this times |x| of the tanh-form gelu."""

FAST_TANH_NAMES = ("half_tanh", "half_gelu_tanh", "_F32Ir")
"""Top-level names `fast_tanh_prelude` binds in kernels.py."""


def gelu_tanh_coefficients() -> tuple[float, float]:
    """A1, A3 with 1 / (1 + e^(-2u)) = 1 / (1 + 2^(x (A1 + A3 x^2))) for the
    tanh-form gelu's u = sqrt(2/pi) (x + 0.044715 x^3)."""
    c = -math.sqrt(2.0 / math.pi) * TWO_LOG2_E
    return c, c * 0.044715


def fast_tanh_prelude(f32_ir: bool = True) -> str:
    """The kernel-prelude text defining `half_tanh` and `half_gelu_tanh`
    (read by `kernel_source.kernel_prelude` only when a kernel calls them).
    With `f32_ir` False it leaves out `_F32Ir`, which the fast erf prelude
    placed before it already defines."""
    a1, a3 = gelu_tanh_coefficients()
    small2, k = TANH_SMALL * TANH_SMALL, TWO_LOG2_E
    one, two = "float32(1.0)", "float32(2.0)"
    return f"""

# tanh for values rounded to f16/bf16: an odd polynomial near 0, else
# sign(x) (1 - 2 / (2^(2|x| log2 e) + 1)) on the special-function unit,
# within 2^-18 relative (codegen/fast_tanh.py). NaN takes the second form.
if numba.cuda.core.config.ENABLE_CUDASIM:

    def half_tanh(x):
        x = np.asarray(x, np.float32)
        with np.errstate(over="ignore", invalid="ignore"):  # the form not taken
            w = x * x
            p = x * ({horner(TANH_Q, "w")} * w + {one})
            y = np.copysign({one} - {two} / (np.exp2(np.abs(x) * {f32_lit(k)}) + {one}), x)
        return np.asarray(np.where(w < {f32_lit(small2)}, p, y), np.float32)[()]

    def half_gelu_tanh(x):
        x = np.asarray(x, np.float32)
        with np.errstate(over="ignore", invalid="ignore"):  # -inf * 0: NaN, as on the GPU
            e = np.exp2(x * (x * x * {f32_lit(a3)} + {f32_lit(a1)}))
            return np.asarray(x * ({one} / (e + {one})), np.float32)[()]
else:
{F32_IR_DEVICE if f32_ir else ""}
    # tanh of f32 x, both forms computed, then picked (a branch LLVM makes a
    # select): p = x fmaf(Q(w), w, 1) with w = x^2, and y = copysign(fmaf(r,
    # -2, 1), x) with r = rcp(ex2(|x| * {f32_repr(k)}) + 1).
    @intrinsic
    def half_tanh(typingctx, x):
        def codegen(context, builder, sig, args):
            f = _F32Ir(context, builder)
            x, one = f.arg(args[0], sig.args[0]), f.const(1.0)
            w = f.mul(x, x)
            p = f.mul(x, f.fma(f.horner({f32_tuple(TANH_Q)}, w), w, one))
            ax = f.mul(f.call(libdevice.fabsf, x), f.const({f32_repr(k)}))
            e = f.asm("ex2.approx.ftz.f32", ax)
            r = f.asm("rcp.approx.ftz.f32", builder.fadd(e, one))
            y = f.call(libdevice.copysignf, f.fma(r, f.const(-2.0), one), x)
            small = builder.fcmp_ordered("<", w, f.const({f32_repr(small2)}))
            return f.pick(small, lambda: p, lambda: y)
        return _t.float32(x), codegen

    # tanh-form gelu of f32 x: x rcp(ex2(x fmaf(x^2, A3, A1)) + 1).
    @intrinsic
    def half_gelu_tanh(typingctx, x):
        def codegen(context, builder, sig, args):
            f = _F32Ir(context, builder)
            x = f.arg(args[0], sig.args[0])
            u = f.mul(x, f.fma(f.mul(x, x), f.const({f32_repr(a3)}), f.const({f32_repr(a1)})))
            e = f.asm("ex2.approx.ftz.f32", u)
            return f.mul(x, f.asm("rcp.approx.ftz.f32", builder.fadd(e, f.const(1.0))))
        return _t.float32(x), codegen
"""
