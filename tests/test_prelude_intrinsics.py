"""The kernel prelude's `fast_exp`, `bf16_to_f32` and `select` (codegen/kernel_source.py)
and the half-precision `half_erf`, `half_gelu` (codegen/fast_erf.py),
`half_tanh` and `half_gelu_tanh` (codegen/fast_tanh.py) are intrinsics that
write their LLVM IR directly: numba copies the IR of an `inline=True` device
function into every call's basic block and types and rewrites it there,
which made a bf16 GEMM with a gelu epilogue take 7.4 s to build (3.8 s as
intrinsics, the same cubin). Their PTX must be the PTX of the device
functions they replace, written out below.

The PTX comes from numba + NVVM in one subprocess without the simulator (no
GPU needed)."""

from __future__ import annotations

import json

from test_mma_row import _instructions

from fusec.codegen.fast_erf import ERF_CLAMP, ERF_P, ERF_Q, f32_lit, gelu_coefficients
from fusec.codegen.fast_tanh import TANH_Q, TANH_SMALL, TWO_LOG2_E, gelu_tanh_coefficients
from fusec.codegen.kernel_source import kernel_prelude
from fusec.codegen.ptx import kernel_workdir, run_without_simulator
from tests.ptx_driver import ptx_driver


def _fmaf_horner(coefficients: tuple[float, ...], w: str) -> str:
    """`fmaf(fmaf(c5, w, c4), w, ...)`: the device functions' polynomials."""
    expr = f32_lit(coefficients[-1])
    for c in coefficients[-2::-1]:
        expr = f"libdevice.fmaf({expr}, {w}, {f32_lit(c)})"
    return expr


_GP, _GQ = gelu_coefficients()
_A1, _A3 = gelu_tanh_coefficients()
_Z_CLAMP, _X_CLAMP = f32_lit(ERF_CLAMP), f32_lit(ERF_CLAMP * 2.0 ** 0.5)

# The device functions the intrinsics replace, as the prelude had them.
REPLACED = f"""
@cuda.jit(device=True, inline=True)
def old_fast_exp(x):
    return libdevice.exp2f(float32(x) * float32(1.4426950408889634))


@cuda.jit(device=True, inline=True)
def old_bf16_to_f32(bits):
    return libdevice.int_as_float(int32(uint32(bits) << uint32(16)))


def _one_instruction(instruction):
    @intrinsic
    def f32_asm(typingctx, x):
        def codegen(context, builder, sig, args):
            f = context.cast(builder, args[0], sig.args[0], _t.float32)
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()])
            return builder.asm(fnty, instruction + " $0, $1;", "=f,f", [f], False)
        return _t.float32(x), codegen
    return f32_asm


@intrinsic
def old_fma_sat(typingctx, a, b, c):
    def codegen(context, builder, sig, args):
        fs = [context.cast(builder, v, t, _t.float32) for v, t in zip(args, sig.args)]
        fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()] * 3)
        return builder.asm(fnty, "fma.rn.sat.f32 $0, $1, $2, $3;", "=f,f,f,f", fs, False)
    return _t.float32(a, b, c), codegen


old_rcp_approx = _one_instruction("rcp.approx.ftz.f32")
old_ex2_approx = _one_instruction("ex2.approx.ftz.f32")


@cuda.jit(device=True, inline=True)
def old_half_erf(z):
    zc = math.copysign({_Z_CLAMP}, z) if abs(z) > {_Z_CLAMP} else float32(z)
    w = zc * zc
    return zc * {_fmaf_horner(ERF_P, "w")} * old_rcp_approx({_fmaf_horner(ERF_Q, "w")})


@cuda.jit(device=True, inline=True)
def old_half_gelu(x):
    xc = libdevice.fminf(libdevice.fmaxf(x, -{_X_CLAMP}), {_X_CLAMP})
    v = xc * xc
    return x * old_fma_sat(xc * {_fmaf_horner(_GP, "v")},
                           old_rcp_approx({_fmaf_horner(_GQ, "v")}), float32(0.5))


@cuda.jit(device=True, inline=True)
def old_half_tanh(x):
    x = float32(x)
    w = x * x
    p = x * libdevice.fmaf({_fmaf_horner(TANH_Q, "w")}, w, float32(1.0))
    r = old_rcp_approx(old_ex2_approx(abs(x) * {f32_lit(TWO_LOG2_E)}) + float32(1.0))
    y = math.copysign(libdevice.fmaf(r, float32(-2.0), float32(1.0)), x)
    return p if w < {f32_lit(TANH_SMALL * TANH_SMALL)} else y


@cuda.jit(device=True, inline=True)
def old_half_gelu_tanh(x):
    x = float32(x)
    return x * old_rcp_approx(old_ex2_approx(
        x * libdevice.fmaf(x * x, {f32_lit(_A3)}, {f32_lit(_A1)})) + float32(1.0))

"""

HALF_HELPERS = ("half_erf", "half_gelu", "half_tanh", "half_gelu_tanh")

# Each kernel twice: through the prelude's helper (`new_`) and through the
# replaced device function (`old_`), or the two texts given (`select`
# against the ternaries it replaced); f32 `x`, bf16 bits `h`, f32 result `y`.
# MARKS: an instruction each kernel's PTX must hold (the helper is there).
KERNELS: dict[str, str | tuple[str, str]] = {
    # exp of f32 values, and of an f64 one (the helper rounds it to f32 first)
    "exp": """
    i = cuda.grid(1)
    if i < y.size:
        y[i] = {p}fast_exp(x[i]) + {p}fast_exp(x[i] * 0.5)
""",
    # bf16 bits widened: from uint16 elements and from a uint32 word's halves
    "bf16": """
    i = cuda.grid(1)
    if i + 1 < y.size:
        w = uint32(h[i]) | (uint32(h[i + 1]) << uint32(16))
        y[i] = {p}bf16_to_f32(h[i]) * {p}bf16_to_f32(uint16(w >> uint32(16))) + x[i]
""",
    # a GEMM-like run of widened products: many calls in one basic block
    "bf16_row": """
    i = cuda.grid(1)
    if i + 8 < y.size:
        acc = float32(0.0)
""" + "".join(f"        acc += {{p}}bf16_to_f32(h[i + {k}]) * {{p}}fast_exp(x[i + {k}])\n"
              for k in range(8)) + """        y[i] = acc
""",
    # a NaN-propagating max, a masked score and an integer choice: `select`
    # against the ternary it replaced
    "select": ("""
    i = cuda.grid(1)
    if i + 1 < y.size:
        a = x[i] * float32(0.5)
        b = x[i + 1]
        m = select((a >= b) | math.isnan(a), a, b)
        s = select(h[i] > uint16(7), float32(-math.inf), m)
        k = select(a > b, i, i + 1)
        y[i] = s + x[k]
""", """
    i = cuda.grid(1)
    if i + 1 < y.size:
        a = x[i] * float32(0.5)
        b = x[i + 1]
        m = a if a >= b or math.isnan(a) else b
        s = float32(-math.inf) if h[i] > uint16(7) else m
        k = i if a > b else i + 1
        y[i] = s + x[k]
"""),
    # each half helper alone: its clamp, select and saturation on one value
    **{f"one_{helper}": f"""
    i = cuda.grid(1)
    if i < y.size:
        y[i] = {{p}}{helper}(x[i])
""" for helper in HALF_HELPERS},
    # an epilogue's run of them on widened bf16 values, as in a GEMM tile
    "half_row": """
    i = cuda.grid(1)
    if i + 8 < y.size:
        acc = float32(0.0)
""" + "".join(f"        acc += {{p}}{h}({{p}}bf16_to_f32(h[i + {k}])) * x[i + {k}]\n"
              for k, h in enumerate(HALF_HELPERS * 2))
    + """        y[i] = acc
""",
}

MARKS = {"exp": "ex2.approx", "select": "selp", "bf16": "shl.b32", "bf16_row": "ex2.approx",
         "one_half_erf": "rcp.approx", "one_half_gelu": "fma.rn.sat",
         "one_half_tanh": "ex2.approx", "one_half_gelu_tanh": "ex2.approx",
         "half_row": "fma.rn.sat"}

_DRIVER = ptx_driver("(types.float32[::1], types.uint16[::1], types.float32[::1])")


def _source() -> str:
    kernels = []
    for name, body in KERNELS.items():
        for prefix in ("new", "old"):
            if isinstance(body, tuple):
                text = body[0] if prefix == "new" else body[1]
            else:
                text = body.format(p="" if prefix == "new" else "old_")
            kernels.append(f"@cuda.jit\ndef {prefix}_{name}(x, h, y):{text}")
    text = "\n\n".join(kernels)
    return kernel_prelude([text]) + "\n\n" + REPLACED + "\n\n" + text


def test_intrinsics_are_the_device_functions_they_replace() -> None:
    names = [f"{p}_{k}" for k in KERNELS for p in ("new", "old")]
    with kernel_workdir(_source(), {n: [] for n in names}, "fusec-prelude-") as work:
        run_without_simulator(_DRIVER, work, "(prelude intrinsics)")
        ptx = {n: (work / f"{n}.ptx").read_text() for n in names}
    for name, body in KERNELS.items():
        new, old = ptx[f"new_{name}"], ptx[f"old_{name}"]
        assert MARKS[name] in new, name
        if isinstance(body, tuple):  # selects where the ternaries may keep branches
            ins, was = _instructions(new), _instructions(old)
            assert len(ins) <= len(was), name
            branches = [sum(i.startswith(("bra", "@")) for i in x) for x in (ins, was)]
            assert branches[0] <= branches[1], name
        else:
            assert _instructions(new) == _instructions(old), name


def test_the_helpers_are_one_call_each_to_numba() -> None:
    """On the GPU (not in the simulator) the helpers are intrinsics: numba
    types one call, not a copy of a device function's IR per call."""
    driver = r"""
import json, sys, types
from pathlib import Path
work = Path(sys.argv[1])
module = types.ModuleType("prelude")
exec((work / "kernels.py").read_text(), module.__dict__)
print(json.dumps({n: type(getattr(module, n)).__name__ for n in NAMES}))
"""
    names = ("fast_exp", "bf16_to_f32", *HALF_HELPERS)
    driver = driver.replace("NAMES", repr(names))
    with kernel_workdir(kernel_prelude([f"{h}(" for h in HALF_HELPERS]), {},
                        "fusec-prelude-") as work:
        out = run_without_simulator(driver, work, "(prelude intrinsics)")
    kinds = json.loads(out.strip().splitlines()[-1])
    assert kinds == dict.fromkeys(names, "_Intrinsic")
