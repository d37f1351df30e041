"""Wide loads and stores of half-precision arrays: 2 or 4 halves per access.

A warp that reads one f16 or bf16 element per thread moves 64 bytes per
request, half of what an f32 kernel moves; at the bandwidth floor each
thread must move at least 8 bytes per access. numba cannot view an array as
another dtype inside a kernel without a device (and never says what
alignment it assumes), so the kernel prelude gets small intrinsics instead:

| helper | what it is on the GPU |
|---|---|
| `ld_wide32(a, i)`, `ld_wide64(a, i)` | 4 or 8 bytes from element `i` of `a` (`ld.global.u64`) |
| `st_wide32(a, i, w)`, `st_wide64(a, i, w)` | their stores |
| `ld_vec4_f32(a, i)` | 4 floats from element `i` of f32 `a`, 16 bytes (`ld.global.v4.f32`) |
| `st_vec4_f32(a, i, x0, x1, x2, x3)` | its store (`st.global.v4.f32`) |
| `is_aligned(a, n)` | whether `a`'s data pointer is a multiple of `n` bytes |
| `f16_from_bits(b)`, `f16_to_bits(x)` | f16 bits to f32 and back (round to nearest even) |

A wide access must be aligned to its width: kernels test every array they
access wide with `is_aligned` once and take a per-element path when one is
not (a view that starts at an odd element). In the simulator the helpers
are NumPy views of the same bytes, so both paths run on the CPU.
"""

from __future__ import annotations

HALF_ACCESS_BYTES = 8
"""Bytes a thread moves per access of an f16/bf16 array (4 halves; 2 where
the innermost extent or elements per thread forbid 4): a warp request of
one half per thread moves 64 bytes, too few to reach the copy floor."""

WIDE_ACCESS_PRELUDE = """
from llvmlite import ir as _ir
from numba.core import types as _t
from numba.cuda.extending import intrinsic

if numba.cuda.core.config.ENABLE_CUDASIM:

    def _raw(a):
        return a._ary if hasattr(a, "_ary") else np.asarray(a)

    def _wide_load(dtype, lanes):
        return lambda a, i: _raw(a)[int(i):int(i) + lanes].view(dtype)[0]

    def _wide_store(dtype, lanes):
        def store(a, i, w):
            _raw(a)[int(i):int(i) + lanes].view(dtype)[0] = w
        return store

    ld_wide32, ld_wide64 = _wide_load(np.uint32, 2), _wide_load(np.uint64, 4)
    st_wide32, st_wide64 = _wide_store(np.uint32, 2), _wide_store(np.uint64, 4)

    def _vec4_at(a, i):
        raw, i = _raw(a), int(i)
        # The GPU faults on a misaligned vector access; so does the simulator.
        if (raw.ctypes.data + raw.itemsize * i) % 16:
            raise ValueError("16-byte access at an address that is not 16-byte aligned")
        return raw, i

    def ld_vec4_f32(a, i):
        raw, i = _vec4_at(a, i)
        return tuple(raw[i:i + 4])

    def st_vec4_f32(a, i, x0, x1, x2, x3):
        raw, i = _vec4_at(a, i)
        raw[i:i + 4] = (x0, x1, x2, x3)

    def is_aligned(a, n):
        return _raw(a).ctypes.data % int(n) == 0

    def f16_from_bits(bits):
        return np.array([int(bits) & 0xFFFF], np.uint16).view(np.float16)[0].astype(np.float32)

    def f16_to_bits(x):
        return np.uint32(np.array([x], np.float32).astype(np.float16).view(np.uint16)[0])
else:

    def _word_pointer(context, builder, arrty, arr, i, bits):
        data = context.make_array(arrty)(context, builder, arr).data
        return builder.bitcast(builder.gep(data, [i]), _ir.IntType(bits).as_pointer())

    def _wide_load(bits, rtype):
        @intrinsic
        def load(typingctx, a, i):
            def codegen(context, builder, sig, args):
                ptr = _word_pointer(context, builder, sig.args[0], args[0], args[1], bits)
                return builder.load(ptr, align=bits // 8)
            return rtype(a, i), codegen
        return load

    def _wide_store(bits, wtype):
        @intrinsic
        def store(typingctx, a, i, w):
            def codegen(context, builder, sig, args):
                ptr = _word_pointer(context, builder, sig.args[0], args[0], args[1], bits)
                word = context.cast(builder, args[2], sig.args[2], wtype)
                builder.store(word, ptr, align=bits // 8)
                return context.get_dummy_value()
            return _t.void(a, i, w), codegen
        return store

    ld_wide32, ld_wide64 = _wide_load(32, _t.uint32), _wide_load(64, _t.uint64)
    st_wide32, st_wide64 = _wide_store(32, _t.uint32), _wide_store(64, _t.uint64)

    _VEC4 = _ir.VectorType(_ir.FloatType(), 4)

    def _vec4_pointer(context, builder, arrty, arr, i):
        data = context.make_array(arrty)(context, builder, arr).data
        return builder.bitcast(builder.gep(data, [i]), _VEC4.as_pointer())

    @intrinsic
    def ld_vec4_f32(typingctx, a, i):
        quad = _t.UniTuple(_t.float32, 4)

        def codegen(context, builder, sig, args):
            vec = builder.load(_vec4_pointer(context, builder, sig.args[0], *args), align=16)
            items = [builder.extract_element(vec, _ir.Constant(_ir.IntType(32), k))
                     for k in range(4)]
            return context.make_tuple(builder, quad, items)
        return quad(a, i), codegen

    @intrinsic
    def st_vec4_f32(typingctx, a, i, x0, x1, x2, x3):
        def codegen(context, builder, sig, args):
            vec = _ir.Constant(_VEC4, _ir.Undefined)
            for k in range(4):
                x = context.cast(builder, args[2 + k], sig.args[2 + k], _t.float32)
                vec = builder.insert_element(vec, x, _ir.Constant(_ir.IntType(32), k))
            ptr = _vec4_pointer(context, builder, sig.args[0], args[0], args[1])
            builder.store(vec, ptr, align=16)
            return context.get_dummy_value()
        return _t.void(a, i, x0, x1, x2, x3), codegen

    @intrinsic
    def is_aligned(typingctx, a, n):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            addr = builder.ptrtoint(data, _ir.IntType(64))
            n64 = context.cast(builder, args[1], sig.args[1], _t.uint64)
            rest = builder.and_(addr, builder.sub(n64, _ir.Constant(_ir.IntType(64), 1)))
            return builder.icmp_unsigned("==", rest, _ir.Constant(_ir.IntType(64), 0))
        return _t.boolean(a, n), codegen

    @intrinsic
    def f16_from_bits(typingctx, bits):
        def codegen(context, builder, sig, args):
            half = builder.bitcast(builder.trunc(args[0], _ir.IntType(16)), _ir.HalfType())
            return builder.fpext(half, _ir.FloatType())
        return _t.float32(bits), codegen

    @intrinsic
    def f16_to_bits(typingctx, x):
        def codegen(context, builder, sig, args):
            half = builder.fptrunc(args[0], _ir.HalfType())
            return builder.zext(builder.bitcast(half, _ir.IntType(16)), _ir.IntType(32))
        return _t.uint32(_t.float32), codegen
"""
"""Prelude text defining the helpers above (after the kernel prelude's
imports), in the simulator and on the GPU."""

WORD_TYPES = {2: "uint32", 4: "uint64"}
"""The word a wide access of 2 or 4 halves moves."""


def wide_load(word_type: str, array: str, index: str) -> str:
    """The word of halves at element `index` of `array`."""
    return f"ld_wide{word_type[4:]}({array}, {index})"


def wide_store(word_type: str, array: str, index: str, word: str) -> str:
    """The statement storing `word` at element `index` of `array`."""
    return f"st_wide{word_type[4:]}({array}, {index}, {word})"


def lane_bits(word_type: str, word: str, lane: int) -> str:
    """The 16 bits of half number `lane` in `word` (little-endian), as uint32."""
    shifted = word if lane == 0 else f"({word} >> {word_type}({16 * lane}))"
    return f"uint32({shifted} & {word_type}(65535))"


def lane_value(element: str, bits: str) -> str:
    """The f32 value of half bits `bits` of element type `element`."""
    return f"f16_from_bits({bits})" if element == "f16" else f"bf16_to_f32({bits})"


def value_bits(element: str, value: str) -> str:
    """An f32 `value` rounded to element type `element`, as uint32 bits."""
    return f"f16_to_bits({value})" if element == "f16" else f"uint32(f32_to_bf16({value}))"


def pack(word_type: str, bits: list[str]) -> str:
    """The word holding `bits` (lane 0 lowest)."""
    parts = [f"{word_type}({b})" if k == 0 else f"({word_type}({b}) << {word_type}({16 * k}))"
             for k, b in enumerate(bits)]
    return " | ".join(parts)
