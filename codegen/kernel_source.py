"""The building blocks every kernel emitter shares.

An emitter turns one `fusion.group` into one `KernelSource`: the text of a
`@cuda.jit` function plus its launch shape. The function is named exactly the
`kernel_name` it is given, which `NameTable.fresh` handed out (unique in
kernels.py); an emitter never makes up or re-cuts a top-level name, and
`generate.check_unique_names` rejects any clash. Its parameters refer to the
group's operands (`role="input"`) and results (`role="output"`) by index, so
the emitter never needs to know which buffers the runtime will bind.

Group attributes the emitters read (set by the grouping passes):
`name` (e.g. "g3", unique in the function) and `kind`
("pointwise", "layout", "reduction", "contraction", "window").

Generated code imports only `math`, `numba` (`cuda`, the scalar types, and
`numba.cuda.core.config` to tell the simulator from a GPU) and `numpy`.
Nothing from the model reaches it except through `sanitize_identifier`
(names) and `float_literal`/`int_literal` (numbers).
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation

from fusec.analysis.half_math_cost import result_is_half
from fusec.codegen.fast_erf import FAST_ERF_NAMES, fast_erf_prelude
from fusec.codegen.fast_tanh import FAST_TANH_NAMES, fast_tanh_prelude
from fusec.codegen.mma import MMA_NAMES, MMA_PRELUDE, MMA_ROW_NAMES, MMA_ROW_PRELUDE
from fusec.codegen.wide_access import WIDE_ACCESS_PRELUDE
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype

KERNEL_PRELUDE = """\
import math
import sys

import numba
import numpy as np
from llvmlite import ir as _ir
from numba import boolean, cuda, float32, float64, int32, int64, uint16, uint32, uint64
from numba.core import types as _t
from numba.cuda import libdevice
from numba.cuda.extending import intrinsic
from numba.types import float16

# The control-flow analysis of numba recurses once per basic block: a kernel
# with more than about 1000 (a 16x16 patch convolution with every tap and
# staged element unrolled had that many) goes past the default Python limit.
# Raised, never lowered.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

# Python math raises (log(0), sqrt(-1), exp(1000), pow(-2, 0.5), ...) where
# a GPU returns inf or NaN. In the simulator these go through `_ieee`, which
# answers what NumPy (IEEE 754, like the GPU) answers when math raises, in the
# float type of the operands. On the GPU they are the math functions
# themselves, so the PTX is the same as calling math.* directly.
if numba.cuda.core.config.ENABLE_CUDASIM:

    def _ieee(fn, fallback):
        def call(*args):
            dtype = np.result_type(*args)
            dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
            with np.errstate(all="ignore"):
                try:
                    return dtype.type(fn(*args))
                except (ValueError, OverflowError):
                    return dtype.type(fallback(*args))
        return call

    ieee_exp, ieee_log = _ieee(math.exp, np.exp), _ieee(math.log, np.log)
    ieee_sqrt, ieee_pow = _ieee(math.sqrt, np.sqrt), _ieee(math.pow, np.power)
    ieee_tanh, ieee_erf = _ieee(math.tanh, np.tanh), _ieee(math.erf, math.erf)
    fast_exp = ieee_exp

    def select(c, a, b):
        return a if c else b

    def bf16_to_f32(bits):
        return np.array([int(bits) << 16], np.uint32).view(np.float32)[0]

    def f32_to_bf16(x):
        b = int(np.array([x], np.float32).view(np.uint32)[0])
        if b & 0x7FFFFFFF > 0x7F800000:
            return np.uint16((b >> 16) | 0x40)
        return np.uint16((b + 0x7FFF + ((b >> 16) & 1)) >> 16)
else:
    ieee_exp, ieee_log, ieee_sqrt = math.exp, math.log, math.sqrt
    ieee_tanh, ieee_erf, ieee_pow = math.tanh, math.erf, math.pow

    # The helpers below are intrinsics, not `inline=True` device functions:
    # numba inlines those by copying their IR into the basic block of each call,
    # which it then types and rewrites with passes that grow faster than the
    # block (a bf16 GEMM tile reads 80 bf16 values per K step). An intrinsic
    # is one typed call that writes its LLVM IR directly; the instructions
    # are the same (tests/test_prelude_intrinsics.py compares the PTX).

    # f32 exp as 2^(x log2 e) on the special-function unit (ex2.approx: 2
    # instructions, not the 16 of expf), as torch.compile emits it; under
    # 1e-5 relative error for |x| < 80 (docs/running.md, fusec run):
    # `libdevice.exp2f(float32(x) * float32(1.4426950408889634))`.
    @intrinsic
    def fast_exp(typingctx, x):
        def codegen(context, builder, sig, args):
            f = context.cast(builder, args[0], sig.args[0], _t.float32)
            y = builder.fmul(f, context.get_constant(_t.float32, 1.4426950408889634))
            return context.get_function(libdevice.exp2f, _t.float32(_t.float32))(builder, [y])
        return _t.float32(x), codegen

    # `a if c else b` as one LLVM select instead of two branches: the same
    # PTX (LLVM turns such a diamond into a select), but no basic blocks for
    # numba to type and rewrite, whose SSA pass grows with blocks times
    # variables (the f32 attention kernel of GPT-2: 5.7 -> 4.8 s to build). Both
    # values are computed: only for operands a kernel may always evaluate
    # (nn.select, the attention guards).
    @intrinsic
    def select(typingctx, c, a, b):
        rtype = typingctx.unify_pairs(a, b)
        if not isinstance(rtype, (_t.Number, _t.Boolean)):
            return None

        def codegen(context, builder, sig, args):
            cond = context.cast(builder, args[0], sig.args[0], _t.boolean)
            x = context.cast(builder, args[1], sig.args[1], sig.return_type)
            y = context.cast(builder, args[2], sig.args[2], sig.return_type)
            return builder.select(cond, x, y)
        return rtype(c, a, b), codegen

    # bf16 lives in device memory as its uint16 bits: widened in registers by
    # a shift, rounded to nearest even on store (`f32_to_bf16`, with the
    # other intrinsics in the wide-access prelude):
    # `libdevice.int_as_float(int32(uint32(bits) << uint32(16)))`.
    @intrinsic
    def bf16_to_f32(typingctx, bits):
        def codegen(context, builder, sig, args):
            word = context.cast(builder, args[0], sig.args[0], _t.uint32)
            return builder.bitcast(builder.shl(word, _ir.Constant(_ir.IntType(32), 16)),
                                   _ir.FloatType())
        return _t.float32(bits), codegen
""" + WIDE_ACCESS_PRELUDE


TRIG_NAMES = ("ieee_sin", "ieee_cos")
"""The prelude's sine and cosine (`TRIG_PRELUDE`)."""

TRIG_PRELUDE = """

# sin and cos: on the GPU libdevice's sinf/cosf (sin/cos for f64), with full
# range reduction, so a large angle (a rotary embedding's position times its
# frequency) keeps f32 accuracy; in the simulator NaN for +-inf, as there.
if numba.cuda.core.config.ENABLE_CUDASIM:
    ieee_sin, ieee_cos = _ieee(math.sin, np.sin), _ieee(math.cos, np.cos)
else:
    ieee_sin, ieee_cos = math.sin, math.cos
"""
"""Added to a kernels.py only when a kernel calls sin or cos (`kernel_prelude`),
so that the kernels of other programs, and their cache keys, stay as they were."""


@dataclass(frozen=True)
class KernelParam:
    """A kernel parameter: group operand (`input`) or result (`output`) number
    `index`, or the kernel's workspace number `index` (`workspace`), passed
    as a contiguous view of shape `view_shape`."""

    role: Literal["input", "output", "workspace"]
    index: int
    view_shape: tuple[int, ...]
    read_only: bool = False
    """A workspace this kernel only reads (the second kernel of a split reads
    the partials the first wrote): plan.json's `writes` is false for it."""


@dataclass(frozen=True)
class Workspace:
    """Device memory a kernel keeps between launches: zero when first
    allocated, and the kernel must leave what it relies on being zero at zero
    again (a split reduction's arrival counters; its partial results are
    overwritten before they are read). The runtime holds it like a constant:
    allocated once per executor, never pooled with other values."""

    shape: tuple[int, ...]
    dtype: str  # NumPy dtype name


@dataclass
class KernelSource:
    """One generated kernel and how to launch it."""

    name: str
    text: str  # the function's source: header comment, @cuda.jit, def ...
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: list[KernelParam]
    shared_bytes: int = 0
    notes: list[str] = field(default_factory=list[str])  # schedule facts for the report
    workspaces: list[Workspace] = field(default_factory=list[Workspace])  # `workspace` params
    # Grid axes ("x", "y", "z") the kernel walks with a grid-stride loop, so
    # a launch with fewer blocks there is still correct (`launch_grid.fit_grid`).
    grid_loops: frozenset[str] = frozenset()
    # Kernels launched just before this one for the same group, on the same
    # stream (the first kernel of a reduction's split passes): their
    # `workspace` params index this kernel's `workspaces`.
    before: list[KernelSource] = field(default_factory=list["KernelSource"])


_IDENT = re.compile(r"[^0-9A-Za-z_]")


def sanitize_identifier(name: str, prefix: str = "k") -> str:
    """A harmless Python identifier from an untrusted name: only
    `[0-9A-Za-z_]`, never a keyword or dunder, at most 40 characters.

    >>> sanitize_identifier('x(): import os')
    'x____import_os'
    """
    ident = _IDENT.sub("_", name)[:40].strip("_") or prefix
    if ident[0].isdigit() or keyword.iskeyword(ident) or ident.startswith("__"):
        ident = f"{prefix}_{ident}"
    return ident


# Names the prelude binds in kernels.py: a kernel must never shadow them.
PRELUDE_NAMES = frozenset(
    {"math", "np", "numba", "cuda", "boolean", "float16", "float32", "float64", "int32",
     "int64", "ieee_exp", "fast_exp", "ieee_log", "ieee_sqrt", "ieee_tanh", "ieee_erf", "ieee_pow",
     *TRIG_NAMES,
     "_ieee", "select", "uint16", "uint32", "bf16_to_f32", "f32_to_bf16", "libdevice",
     *FAST_ERF_NAMES, *FAST_TANH_NAMES, *MMA_NAMES, *MMA_ROW_NAMES}
)


def kernel_prelude(kernel_texts: Sequence[str]) -> str:
    """The prelude of a kernels.py holding `kernel_texts`: `KERNEL_PRELUDE`,
    plus the half-precision erf (`codegen/fast_erf.py`), tanh
    (`codegen/fast_tanh.py`), sin and cos (`TRIG_PRELUDE`), the warp
    products and their rows (`codegen/mma.py`) when some kernel calls them,
    so that no other program's kernels.py changes."""
    def calls(names: Sequence[str]) -> bool:
        return any(f"{name}(" in text for text in kernel_texts for name in names)

    prelude = KERNEL_PRELUDE
    erf = calls(("half_erf", "half_gelu"))
    if erf:
        prelude += fast_erf_prelude()
    if calls(("half_tanh", "half_gelu_tanh")):
        prelude += fast_tanh_prelude(f32_ir=not erf)  # one `_F32Ir`
    if calls(TRIG_NAMES):
        prelude += TRIG_PRELUDE
    rows = calls(MMA_ROW_NAMES)
    if rows or calls(MMA_NAMES):
        prelude += MMA_PRELUDE
    if rows:
        prelude += MMA_ROW_PRELUDE
    return prelude


PARTIALS_SUFFIX = "_partials"
"""The name of a split kernel's first pass is its kernel's name and this
(reductions, split and decode attention): `NameTable.fresh` keeps it free."""


class NameTable:
    """Hands out unique sanitized identifiers (never one the prelude binds)."""

    def __init__(self) -> None:
        self.used: set[str] = set(PRELUDE_NAMES)

    def fresh(self, name: str, prefix: str = "k", derived: Sequence[str] = ()) -> str:
        """A new identifier from `name` (sanitized, numbered past the ones
        taken); each `ident + suffix` of `derived` (the `_partials` kernel
        an emitter may add beside it) is free too, and taken with it."""
        base = sanitize_identifier(name, prefix)
        ident, n = base, 1
        while ident in self.used or any(ident + s in self.used for s in derived):
            n += 1
            ident = f"{base}_{n}"
        self.used.update([ident, *(ident + s for s in derived)])
        return ident


def float_literal(value: float, ctype: str = "float32") -> str:
    """A typed numeric literal: bare Python floats would promote the whole
    expression to float64, which is slow on most GPUs."""
    v = float(value)
    if math.isnan(v):
        return f"{ctype}(math.nan)"
    if math.isinf(v):
        return f"{ctype}({'-' if v < 0 else ''}math.inf)"
    return f"{ctype}({v!r})"


def int_literal(value: int) -> str:
    """An integer literal (only ever from an int, never from text)."""
    return str(int(value))


def max_expr(a: str, b: str, ctype: str) -> str:
    """The larger of `a` and `b` (of compute type `ctype`), NaN when either is
    NaN, as np.maximum and torch.maximum: the builtin `max` is fmaxf on a GPU
    (NaN loses) and Python's in the simulator (NaN wins only as `a`). `a` and
    `b` must be names, literals or reads without side effects: each appears
    more than once."""
    if not ctype.startswith("float"):
        return f"max({a}, {b})"
    return f"({a} if {a} >= {b} or math.isnan({a}) else {b})"


def min_expr(a: str, b: str, ctype: str) -> str:
    """The smaller of `a` and `b`, NaN when either is NaN (see `max_expr`)."""
    if not ctype.startswith("float"):
        return f"min({a}, {b})"
    return f"({a} if {a} <= {b} or math.isnan({a}) else {b})"


def rounded_to_half(op: Operation) -> bool:
    """Whether `op`'s result is of type f16 or bf16: the program rounds it to
    2^-11 relative or coarser, so every use of it, fused or not, was promised
    no more, and an erf within 2^-19 (`half_erf`) or a tanh within 2^-18
    (`half_tanh`) cannot be told from the exact one there (docs/nn-dialect.md,
    "Half precision"); the cost model prices those forms by the same rule."""
    return result_is_half(op)


def _gelu(op: nn.GeluOp, a: str, t: str) -> str:
    half, one = float_literal(0.5, t), float_literal(1.0, t)
    if op.approximate != "tanh" and t == "float32" and rounded_to_half(op):
        return f"half_gelu({a})"
    if op.approximate == "tanh" and t == "float32" and rounded_to_half(op):
        return f"half_gelu_tanh({a})"
    if op.approximate == "tanh":
        c, k = float_literal(math.sqrt(2.0 / math.pi), t), float_literal(0.044715, t)
        return f"({half} * {a} * ({one} + ieee_tanh({c} * ({a} + {k} * {a} * {a} * {a}))))"
    return f"({half} * {a} * ({one} + ieee_erf({a} * {float_literal(1 / math.sqrt(2.0), t)})))"


def _clamp(op: nn.ClampOp, a: str, t: str) -> str:
    expr = a
    if op.min is not None:
        expr = f"max({expr}, {float_literal(op.min, t)})"
    if op.max is not None:
        expr = f"min({expr}, {float_literal(op.max, t)})"
    # NaN stays NaN (np.clip, torch.clamp); the builtins would drop it on a GPU
    return f"({a} if math.isnan({a}) else {expr})" if t.startswith("float") and expr != a \
        else expr


_UNARY: dict[type[Operation], str] = {
    nn.NegOp: "(-{a})",
    nn.AbsOp: "abs({a})",
    nn.ExpOp: "{exp}({a})",
    nn.LogOp: "ieee_log({a})",
    nn.SqrtOp: "ieee_sqrt({a})",
    nn.RsqrtOp: "({one} / ieee_sqrt({a}))",
    nn.ReciprocalOp: "({one} / {a})",
    nn.TanhOp: "ieee_tanh({a})",
    nn.ErfOp: "ieee_erf({a})",
    nn.SinOp: "ieee_sin({a})",
    nn.CosOp: "ieee_cos({a})",
    nn.SigmoidOp: "({one} / ({one} + {exp}(-{a})))",
    nn.SiluOp: "({a} / ({one} + {exp}(-{a})))",
}

_BINARY: dict[type[Operation], str] = {
    nn.AddOp: "({a} + {b})",
    nn.SubOp: "({a} - {b})",
    nn.MulOp: "({a} * {b})",
    nn.DivOp: "({a} / {b})",
    nn.PowOp: "ieee_pow({a}, {b})",
}

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def exp_function(ctype: str) -> str:
    """The prelude's exp for compute type `ctype`: the special-function unit's
    for f32 (`fast_exp`, as torch.compile's kernels do), libdevice's
    correctly rounded one for f64."""
    return "fast_exp" if ctype == "float32" else "ieee_exp"


def _batch_norm(op: nn.BatchNormOp, args: Sequence[str], t: str) -> str:
    # args: x, scale, bias, mean, var, each already read at x's channel.
    x, scale, bias, mean, var = args
    eps = float_literal(op.epsilon, t)
    return f"(({x} - {mean}) / ieee_sqrt({var} + {eps}) * {scale} + {bias})"


def _cast(op: nn.CastOp, args: Sequence[str], t: str) -> str:
    return f"({args[0]} != 0)" if t == "boolean" else f"{t}({args[0]})"


# Elementwise ops whose expression needs more than a template: op, argument
# names, compute type -> the expression.
_SPECIAL: dict[type[Operation], Callable[[Any, Sequence[str], str], str]] = {
    nn.ReluOp: lambda op, a, t: max_expr(a[0], float_literal(0.0, t), t),
    nn.MaxOp: lambda op, a, t: max_expr(a[0], a[1], t),
    nn.MinOp: lambda op, a, t: min_expr(a[0], a[1], t),
    nn.GeluOp: lambda op, a, t: _gelu(op, a[0], t),
    nn.ClampOp: lambda op, a, t: _clamp(op, a[0], t),
    nn.CmpOp: lambda op, a, t: f"({a[0]} {_CMP[op.predicate]} {a[1]})",
    nn.SelectOp: lambda op, a, t: f"select({a[0]}, {a[1]}, {a[2]})",
    nn.BatchNormOp: _batch_norm,
    nn.CastOp: _cast,
}

SCALAR_OPS: frozenset[type[Operation]] = frozenset(_UNARY) | frozenset(_BINARY) \
    | frozenset(_SPECIAL)
"""Every op `scalar_expr` writes an expression for: tests/test_op_tables.py
checks that each elementwise op of `analysis/op_kinds.py` is one."""


def scalar_expr(op: Operation, args: Sequence[str], ctype: str) -> str:
    """The expression computing one element of elementwise `op`.

    `args` must be plain variable names or literals (an argument may appear
    several times in the result); `ctype` is the compute type name of the
    result (`float32`, ...; for nn.cmp the operands' compute type).
    """
    one, zero = float_literal(1.0, ctype), float_literal(0.0, ctype)
    if isinstance(op, nn.ErfOp) and ctype == "float32" and rounded_to_half(op):
        return f"half_erf({args[0]})"
    if isinstance(op, nn.TanhOp) and ctype == "float32" and rounded_to_half(op):
        return f"half_tanh({args[0]})"
    if type(op) in _UNARY:
        return _UNARY[type(op)].format(a=args[0], one=one, zero=zero, exp=exp_function(ctype))
    if type(op) in _BINARY:
        return _BINARY[type(op)].format(a=args[0], b=args[1])
    if type(op) in _SPECIAL:
        return _SPECIAL[type(op)](op, args, ctype)
    raise NotImplementedError(f"{op.name} is not an elementwise op")


def unravel(flat: str, shape: Sequence[int], prefix: str = "i") -> tuple[list[str], list[str]]:
    """Lines that split flat index `flat` into coordinates of `shape`, and
    the coordinate names (`i0`, `i1`, ...)."""
    names = [f"{prefix}{d}" for d in range(len(shape))]
    rests = [f"{prefix}r{d}" for d in range(len(shape))]
    return unravel_into(flat, shape, names, rests), names


def unravel_into(flat: str, shape: Sequence[int], names: Sequence[str],
                 rests: Sequence[str], itype: str = "") -> list[str]:
    """Lines setting `names` to the coordinates of flat index `flat` in
    `shape` (innermost first: `flat % n`, then the quotient, named by
    `rests`, is split further); with `itype`, every value and literal is in
    that integer type (`uint32`: 32-bit divisions by literals)."""
    def typed(expr: str) -> str:
        return f"{itype}({expr})" if itype else expr

    lines: list[str] = []
    rest = flat
    for d in range(len(shape) - 1, 0, -1):
        n = typed(int_literal(shape[d]))
        lines.append(f"{names[d]} = {typed(f'{rest} % {n}')}")
        lines.append(f"{rests[d]} = {typed(f'{rest} // {n}')}")
        rest = rests[d]
    if shape:
        lines.append(f"{names[0]} = {typed(rest)}")
    return lines


def broadcast_index(
    in_shape: Sequence[int], out_shape: Sequence[int], coords: Sequence[str],
    itype: str = "",
) -> str:
    """Flat row-major index into an operand of `in_shape` broadcast to
    `out_shape`, given the output coordinates (right-aligned, size-1
    dimensions contribute nothing); with `itype`, literals in that integer
    type (as `unravel_into`)."""
    def lit(value: int) -> str:
        return f"{itype}({int_literal(value)})" if itype else int_literal(value)

    offset = len(out_shape) - len(in_shape)
    terms: list[str] = []
    stride = 1
    for d in range(len(in_shape) - 1, -1, -1):
        if in_shape[d] != 1:
            c = coords[d + offset]
            terms.append(c if stride == 1 else f"{c} * {lit(stride)}")
        stride *= in_shape[d]
    return " + ".join(reversed(terms)) if terms else lit(0)


# --- launch shapes, types and headers shared by the emitters --------------------

# Header comments wrap their op lists at this width.
_HEADER_WIDTH = 96


def widen(dtype: str, text: str) -> str:
    """`text`, a stored element of device dtype `dtype`, in its compute type."""
    fn = of_device_dtype(dtype).widen
    return f"{fn}({text})" if fn else text


def narrow(dtype: str, text: str) -> str:
    """`text`, a compute-type value, rounded to the stored type `dtype`."""
    fn = of_device_dtype(dtype).narrow
    return f"{fn}({text})" if fn else text


def kernel_header(
    group: Operation, ops: Sequence[Operation], launch: str, notes: Sequence[str] = ()
) -> list[str]:
    """Comment lines naming the group, its ops and its launch shape; the group
    name is sanitized (it comes from the model)."""
    name = group.attributes.get("name")
    label = sanitize_identifier(name.data, "g") if isinstance(name, StringAttr) else "group"
    kind = group.attributes.get("kind")
    kind_text = sanitize_identifier(kind.data) if isinstance(kind, StringAttr) else "?"
    lines = [f"# {label} ({kind_text}), {len(ops)} op{'s' * (len(ops) != 1)}:"]
    current = "#  "
    for op in ops:
        piece = f" {op.name}"  # registered op names only: safe text
        if len(current) + len(piece) > _HEADER_WIDTH:
            lines.append(current + ",")
            current = "#  "
        current += ("," if current != "#  " else "") + piece
    lines.append(current)
    lines.append(f"# launch: {launch}")
    lines.extend(f"# {note}" for note in notes)
    return lines


def launch_text(grid: Sequence[int], block: Sequence[int], per_thread: str = "") -> str:
    """`grid (16, 1, 1) x block (256, 1, 1)` plus what one thread does."""
    text = f"grid {tuple(grid)} x block {tuple(block)}"
    return f"{text}, {per_thread}" if per_thread else text


def capped(kernel: KernelSource, max_registers: int) -> KernelSource:
    """`kernel` declared with numba's `max_registers=N` (the linker's
    `maxrregcount`: registers past N spill to local memory), on the GPU only
    (the simulator's `cuda.jit` takes no such option)."""
    old = f"@cuda.jit\ndef {kernel.name}("
    if max_registers <= 0 or old not in kernel.text:
        return kernel
    new = (f"@cuda.jit if numba.cuda.core.config.ENABLE_CUDASIM "
           f"else cuda.jit(max_registers={max_registers})\ndef {kernel.name}(")
    return dataclasses.replace(kernel, text=kernel.text.replace(old, new, 1))
