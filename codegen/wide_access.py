"""Wide loads and stores of half-precision arrays: 2, 4 or 8 halves per access.

A warp that reads one f16 or bf16 element per thread moves 64 bytes per
request, half of what an f32 kernel moves; at the bandwidth floor each
thread must move at least 8 bytes per access. numba cannot view an array as
another dtype inside a kernel without a device (and never says what
alignment it assumes), so the kernel prelude gets small intrinsics instead:

| helper | what it is on the GPU |
|---|---|
| `ld_wide32(a, i)`, `ld_wide64(a, i)` | 4 or 8 bytes from element `i` of `a` (`ld.global.u64`) |
| `st_wide32(a, i, w)`, `st_wide64(a, i, w)` | their stores |
| `ld_vec4_u32(a, i)` | 8 halves from element `i` of `a` as 4 words (`ld.global.v4.u32`) |
| `st_vec4_u32(a, i, w0, w1, w2, w3)` | its store (`st.global.v4.u32`) |
| `ld_vec4_f32(a, i)` | 4 floats from element `i` of f32 `a`, 16 bytes (`ld.global.v4.f32`) |
| `st_vec4_f32(a, i, x0, x1, x2, x3)` | its store (`st.global.v4.f32`) |
| `st_vec2_f32(a, i, x0, x1)` | 2 floats, 8 bytes (`st.global.v2.f32`; `concat_rows.py`) |
| `is_aligned(a, n)` | whether `a`'s data pointer is a multiple of `n` bytes |
| `f16_from_bits(b)`, `f16_to_bits(x)` | f16 bits to f32 and back (round to nearest even) |
| `bf16_lo(w)`, `bf16_hi(w)` | the low or high bf16 of 32-bit `w` as f32 (one shift or mask) |
| `bf16x2_bits(lo, hi)`, `f16x2_bits(lo, hi)` | two f32 rounded into a word (`cvt.rn.bf16x2.f32`) |

Words are taken apart and put together 32 bits at a time: a 64-bit word is
two 32-bit registers to the GPU, and 64-bit shifts and masks are two
instructions each (bf16 chain16 spent more instructions packing than
computing). Two values round into one word in one instruction (sm_80 and
later), and a bf16 is widened by one shift or mask.

A wide access must be aligned to its width. Every array a kernel is given
starts on an `ARRAY_ALIGNMENT` (16-byte) boundary: fusec allocates its
buffers so, and the runtime copies a caller's array that does not (a view
that starts at an odd element; `runtime/array_alignment.py`). So a kernel
whose words are at most 16 bytes and start at multiples of their width
within the array needs no run-time test and no per-element second version
of its body: `alignment_tests` names only the arrays a wider word would
need tested (none today), which `is_aligned` checks. A second version
doubled the code numba types and lowers: a GPT-2 layer norm's build took
3.5 s with it and 1.4 s without. In the simulator the helpers are NumPy
views of the same bytes, and fault on a misaligned address as the GPU does.
"""

from __future__ import annotations

from collections.abc import Iterable

ARRAY_ALIGNMENT = 16
"""Bytes every array a kernel gets is aligned to (the widest access, a
16-byte vector): the runtime's promise to the kernels."""


def alignment_tests(arrays: Iterable[tuple[str, int]]) -> list[str]:
    """The run-time tests `is_aligned(a, n)` of the (array, access bytes)
    pairs that the runtime's `ARRAY_ALIGNMENT` does not already guarantee,
    once each."""
    return list(dict.fromkeys(f"is_aligned({a}, {n})" for a, n in arrays
                              if ARRAY_ALIGNMENT % n))


WIDE_ACCESS_PRELUDE = """
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

    def _vec_at(a, i, nbytes=16):
        raw, i = _raw(a), int(i)
        # The GPU faults on a misaligned vector access; so does the simulator.
        if (raw.ctypes.data + raw.itemsize * i) % nbytes:
            raise ValueError(f"{nbytes}-byte access at an address that is not "
                             f"{nbytes}-byte aligned")
        return raw, i

    def ld_vec4_f32(a, i):
        raw, i = _vec_at(a, i)
        return tuple(raw[i:i + 4])

    def st_vec4_f32(a, i, x0, x1, x2, x3):
        raw, i = _vec_at(a, i)
        raw[i:i + 4] = (x0, x1, x2, x3)

    def st_vec2_f32(a, i, x0, x1):
        raw, i = _vec_at(a, i, 8)
        raw[i:i + 2] = (x0, x1)

    def ld_vec4_u32(a, i):
        raw, i = _vec_at(a, i)
        return tuple(raw[i:i + 8].view(np.uint32))

    def st_vec4_u32(a, i, w0, w1, w2, w3):
        raw, i = _vec_at(a, i)
        raw[i:i + 8].view(np.uint32)[:] = (w0, w1, w2, w3)

    def is_aligned(a, n):
        return _raw(a).ctypes.data % int(n) == 0

    def f16_from_bits(bits):
        return np.array([int(bits) & 0xFFFF], np.uint16).view(np.float16)[0].astype(np.float32)

    def f16_to_bits(x):
        return np.uint32(np.array([x], np.float32).astype(np.float16).view(np.uint16)[0])

    def bf16_lo(w):
        return bf16_to_f32(int(w) & 0xFFFF)

    def bf16_hi(w):
        return bf16_to_f32(int(w) >> 16)

    def bf16x2_bits(lo, hi):
        return np.uint32(int(f32_to_bf16(lo)) | (int(f32_to_bf16(hi)) << 16))

    def f16x2_bits(lo, hi):
        return np.uint32(int(f16_to_bits(lo)) | (int(f16_to_bits(hi)) << 16))
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

    # The load and store of `n` lanes of `lane_t` (16 bytes for n = 4) at
    # element `i` of an array of any element type (halves move as 4 words).
    def _vec(lane_ir, lane_t, n=4):
        vector = _ir.VectorType(lane_ir, n)
        items_t = _t.UniTuple(lane_t, n)
        nbytes = n * 4

        def pointer(context, builder, arrty, arr, i):
            data = context.make_array(arrty)(context, builder, arr).data
            return builder.bitcast(builder.gep(data, [i]), vector.as_pointer())

        @intrinsic
        def load(typingctx, a, i):
            def codegen(context, builder, sig, args):
                vec = builder.load(pointer(context, builder, sig.args[0], *args), align=nbytes)
                items = [builder.extract_element(vec, _ir.Constant(_ir.IntType(32), k))
                         for k in range(n)]
                return context.make_tuple(builder, items_t, items)
            return items_t(a, i), codegen

        def put(context, builder, sig, args):
            vec = _ir.Constant(vector, _ir.Undefined)
            for k in range(n):
                x = context.cast(builder, args[2 + k], sig.args[2 + k], lane_t)
                vec = builder.insert_element(vec, x, _ir.Constant(_ir.IntType(32), k))
            ptr = pointer(context, builder, sig.args[0], args[0], args[1])
            builder.store(vec, ptr, align=nbytes)
            return context.get_dummy_value()

        if n == 2:
            @intrinsic
            def store(typingctx, a, i, x0, x1):
                return _t.void(a, i, x0, x1), put
        else:
            @intrinsic
            def store(typingctx, a, i, x0, x1, x2, x3):
                return _t.void(a, i, x0, x1, x2, x3), put
        return load, store

    ld_vec4_f32, st_vec4_f32 = _vec(_ir.FloatType(), _t.float32)
    ld_vec4_u32, st_vec4_u32 = _vec(_ir.IntType(32), _t.uint32)
    st_vec2_f32 = _vec(_ir.FloatType(), _t.float32, 2)[1]

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

    _I32 = _ir.IntType(32)

    # Rounded to nearest even by the hardware (sm_80 and later; a NaN becomes
    # the canonical quiet NaN 0x7FFF): the integer rounding it replaces took
    # six instructions per element.
    @intrinsic
    def f32_to_bf16(typingctx, x):
        def codegen(context, builder, sig, args):
            f = context.cast(builder, args[0], sig.args[0], _t.float32)
            fnty = _ir.FunctionType(_ir.IntType(16), [_ir.FloatType()])
            return builder.asm(fnty, "cvt.rn.bf16.f32 $0, $1;", "=h,f", [f], False)
        return _t.uint16(x), codegen

    @intrinsic
    def bf16_lo(typingctx, w):
        def codegen(context, builder, sig, args):
            word = context.cast(builder, args[0], sig.args[0], _t.uint32)
            return builder.bitcast(builder.shl(word, _ir.Constant(_I32, 16)), _ir.FloatType())
        return _t.float32(w), codegen

    @intrinsic
    def bf16_hi(typingctx, w):
        def codegen(context, builder, sig, args):
            word = context.cast(builder, args[0], sig.args[0], _t.uint32)
            high = builder.and_(word, _ir.Constant(_I32, 0xFFFF0000))
            return builder.bitcast(high, _ir.FloatType())
        return _t.float32(w), codegen

    # `cvt.rn.{bf16x2,f16x2}.f32 d, a, b` puts a in the upper half of d.
    def _pair_bits(op):
        @intrinsic
        def pair(typingctx, lo, hi):
            def codegen(context, builder, sig, args):
                lo_, hi_ = (context.cast(builder, a, t, _t.float32)
                            for a, t in zip(args, sig.args))
                fnty = _ir.FunctionType(_I32, [_ir.FloatType(), _ir.FloatType()])
                return builder.asm(fnty, f"cvt.rn.{op}.f32 $0, $1, $2;", "=r,f,f",
                                   [hi_, lo_], False)
            return _t.uint32(lo, hi), codegen
        return pair

    bf16x2_bits, f16x2_bits = _pair_bits("bf16x2"), _pair_bits("f16x2")
"""
"""Prelude text defining the helpers above (after the kernel prelude, whose
imports it uses: `_ir`, `_t`, `intrinsic`), in the simulator and on the GPU."""

QUAD_WORD = "uint32x4"
"""A 16-byte word of 8 halves: a tuple of four 32-bit words (numba has no
128-bit integer; the GPU moves it as one `v4.u32` access)."""

WORD_TYPES = {2: "uint32", 4: "uint64", 8: QUAD_WORD}
"""The word a wide access of 2, 4 or 8 halves moves."""


def wide_load(word_type: str, array: str, index: str) -> str:
    """The word of halves at element `index` of `array`."""
    if word_type == QUAD_WORD:
        return f"ld_vec4_u32({array}, {index})"
    return f"ld_wide{word_type[4:]}({array}, {index})"


def wide_store(word_type: str, array: str, index: str, word: str) -> str:
    """The statement storing `word` (for a quad word, its four 32-bit words
    separated by commas: `pack_values`) at element `index` of `array`."""
    if word_type == QUAD_WORD:
        return f"st_vec4_u32({array}, {index}, {word})"
    return f"st_wide{word_type[4:]}({array}, {index}, {word})"


def _half_word(word_type: str, word: str, lane: int) -> str:
    """The 32-bit word of `word` holding half number `lane`."""
    if word_type == "uint32":
        return word
    if word_type == QUAD_WORD:
        return f"{word}[{lane // 2}]"
    return f"uint32({word})" if lane < 2 else f"uint32({word} >> uint64(32))"


def lane_value(element: str, word_type: str, word: str, lane: int) -> str:
    """The f32 value of half number `lane` (little-endian) of `word`, a word
    of element type `element`."""
    w = _half_word(word_type, word, lane)
    if element == "bf16":
        return f"bf16_hi({w})" if lane % 2 else f"bf16_lo({w})"
    return f"f16_from_bits({w} >> uint32(16))" if lane % 2 else f"f16_from_bits({w})"


def pack_values(element: str, word_type: str, values: list[str]) -> str:
    """The word of element type `element` holding the f32 `values` rounded
    (lane 0 lowest), two per conversion."""
    pair = "bf16x2_bits" if element == "bf16" else "f16x2_bits"
    words = [f"{pair}({lo}, {hi})" for lo, hi in zip(values[::2], values[1::2], strict=True)]
    if word_type == "uint32":
        return words[0]
    if word_type == QUAD_WORD:
        return ", ".join(words)
    return f"uint64({words[0]}) | (uint64({words[1]}) << uint64(32))"
