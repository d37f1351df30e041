"""Warp-level tensor-core products (`mma.sync`) for the kernels' prelude.

numba-cuda has no matrix-multiply intrinsic, so the prelude gets small ones
built from inline PTX (llvmlite's `builder.asm`, as the half conversions of
`codegen/wide_access.py` are):

- `mma_a_<e>(a00, a01, a10, a11)`: a lane's A fragment registers: f32 split
  into TF32 big and small parts (`cvt.rna.tf32.f32`), f16/bf16 packed in
  pairs (`cvt.rn.f16x2.f32`);
- `mma_b_<e>(b0, b1)`: its B fragment registers, the same way;
- `mma_<e>(X, w, lane, A, B, c0, c1, c2, c3)`: `C + A @ B` of a 16x8x8
  product: one `mma.sync.m16n8k8` on f16/bf16 with f32 accumulation; three
  on TF32 for f32 (small x big, big x small, big x big: about f32 accuracy);
- `tf32_split(x)`: `x`'s TF32 big part and the TF32 rounding of the rest,
  as f32 values (the split `mma_a_f32`/`mma_b_f32` make of each value);
- `mma_a_f32s(a00, a01, a10, a11, s00, s01, s10, s11)`,
  `mma_b_f32s(b0, b1, s0, s1)`: the f32 fragments of values split before
  (big parts, then small parts, both from `tf32_split`): no conversion, so
  an operand that many warps read is split once, where it is staged;
- `ld_pair(a, i)`: `a[i]` and `a[i + 1]` as one 8-byte load (`i` even, `a`
  8-byte aligned);
- `mma_row_<e>(X, w, lane, A, B, at, step, small, C)`: one A fragment times
  the B fragments stored in shared memory `B` every `step` words from `at`:
  `C` is a flat tuple of `len(C) // 4` accumulator fragments (fragment k is
  `C[4k:4k + 4]`) and fragment k gets `A @ B_k`, whose pairs `ld_pair` reads
  at `at + k * step` (their TF32 small parts `small` words on, f32 only): the
  loads, `mma_b_<e>` (`mma_b_f32s` for f32) and `mma_<e>` of each, in order
  (`MMA_ROW_PRELUDE`, after `MMA_PRELUDE`);
- `xor_lanes(X, w, lane, v, m)`: `v` of lane `lane ^ m` of the warp
  (`shfl.sync.bfly`).

`mma_row_<e>` is what an attention kernel calls: its products go straight
into LLVM IR, so numba types and lowers one call per A fragment rather than
four calls per product. numba's own passes grow faster than the size of a
basic block (its SSA rewrite and its search for singly assigned variables
scan the block once per variable): the f32 GPT-2 attention kernel (128
products per key step) took 10 s to build on two cores with its products
written out (0.5 s of it NVVM and ptxas), 3.5 s through `mma_row_f32`, for the same
PTX but for register names (tests/test_mma_row.py).

A fragment is prepared once and used in every product it takes part in (an
A fragment of Q or P meets every 8 columns of K or V): inline PTX is never
merged by the compiler, so a split or a pack written into each product was
done again in each (measured: 1312 TF32 conversions where 640 were needed).

Every helper takes a warp's lane fragments in one layout, whatever the
precision (`g = lane // 4`, `t = lane % 4`): `a00, a01 = A[g][2t], A[g][2t+1]`
and `a10, a11` the same of row `g + 8` (A is 16 x 8), `b0, b1 = B[2t][g],
B[2t+1][g]` (B is 8 x 8), and the accumulators `c0, c1 = C[g][2t], C[g][2t+1]`
and `c2, c3` of row `g + 8`, which is also the layout of the result. The f16
and bf16 instructions take exactly these pairs (two halves to a register);
for TF32, whose registers hold `A[g][t]` and `A[g][t + 4]`, the reduction
index is renumbered (`2t -> t`, `2t + 1 -> t + 4`) on both operands, which
sums the same products. A result fragment is therefore the A fragment of a
next product without any exchange between lanes (a FlashAttention kernel's
probabilities go from the QK product into the PV product so).

In the simulator, whose threads have no shuffles, the lanes exchange their
fragments through `X`, a shared `(warps, 32, 8)` f32 array, with a barrier on
each side: every thread of the block must make the same calls in the same
order (the kernels that use them do). f16 and bf16 operands are rounded to
their type there as the GPU's conversions round them; TF32x3 is modelled as
an f32 product (its error, about 2^-22 relative per product, is below what
the f32 tolerance sees).
"""

from __future__ import annotations

from fusec.scheduling.attention_mma_schedule import MMA_ELEMENTS


def mma_helpers(element: str) -> tuple[str, str, str]:
    """The prelude helpers preparing A and B fragments of `element`
    operands and multiplying them: `(mma_a_<e>, mma_b_<e>, mma_<e>)`."""
    return f"mma_a_{element}", f"mma_b_{element}", f"mma_{element}"


PRESPLIT_HELPERS = ("tf32_split", "mma_a_f32s", "mma_b_f32s")
"""The split of f32 operands and the fragments of split operands."""

MMA_NAMES = (*(name for e in MMA_ELEMENTS for name in mma_helpers(e)), *PRESPLIT_HELPERS,
             "ld_pair", "xor_lanes")
"""Every name the prelude below binds for kernels."""


def mma_row(element: str) -> str:
    """The prelude helper multiplying one A fragment by a row of B fragments
    read from shared memory, for `element` operands (f32: split ones)."""
    return f"mma_row_{element}"


MMA_ROW_NAMES = tuple(mma_row(e) for e in MMA_ELEMENTS)
"""The names `MMA_ROW_PRELUDE` binds."""


MMA_PRELUDE = """
if numba.cuda.core.config.ENABLE_CUDASIM:

    def _sim(rnd):
        def a_fragment(a00, a01, a10, a11):
            return tuple(rnd(v) for v in (a00, a01, a10, a11))

        def b_fragment(b0, b1):
            return rnd(b0), rnd(b1)

        def mma(X, w, lane, A, B, c0, c1, c2, c3):
            X[w, lane, 0:6] = [*A, *B]
            cuda.syncthreads()
            g, t = int(lane) // 4, int(lane) % 4
            out = []
            for r, n, c in ((g, 2 * t, c0), (g, 2 * t + 1, c1), (g + 8, 2 * t, c2),
                            (g + 8, 2 * t + 1, c3)):
                acc = 0.0
                for k in range(8):
                    a = X[w, (r % 8) * 4 + k // 2, (r // 8) * 2 + k % 2]
                    b = X[w, n * 4 + k // 2, 4 + k % 2]
                    acc += float(a) * float(b)
                out.append(np.float32(np.float32(c) + np.float32(acc)))
            cuda.syncthreads()
            return tuple(out)
        return a_fragment, b_fragment, mma

    mma_a_f32, mma_b_f32, mma_f32 = _sim(np.float32)
    mma_a_f16, mma_b_f16, mma_f16 = _sim(lambda v: np.float32(np.float16(v)))
    mma_a_bf16, mma_b_bf16, mma_bf16 = _sim(lambda v: bf16_to_f32(f32_to_bf16(v)))

    # TF32x3 is modelled as an f32 product: a split operand's fragment is the
    # sum of its parts, which is the value (the small part is exact in f32)
    def tf32_split(x):
        # the GPU's split (`cvt.rna`: 10 mantissa bits, ties away from zero)
        x = np.float32(x)
        if not np.isfinite(x):
            return x, np.float32(x - x)
        bits = (int(x.view(np.uint32)) + 0x1000) & 0xFFFFE000
        big = np.uint32(bits).view(np.float32)
        return big, np.float32(x - big)

    def mma_a_f32s(a00, a01, a10, a11, s00, s01, s10, s11):
        return mma_a_f32(a00 + s00, a01 + s01, a10 + s10, a11 + s11)

    def mma_b_f32s(b0, b1, s0, s1):
        return mma_b_f32(b0 + s0, b1 + s1)

    def ld_pair(a, i):
        return a[i], a[i + 1]

    def xor_lanes(X, w, lane, v, m):
        X[w, lane, 7] = v
        cuda.syncthreads()
        other = X[w, int(lane) ^ int(m), 7]
        cuda.syncthreads()
        return other
else:
    from numba.core import cgutils

    _F32 = _ir.FloatType()
    _QUAD = _t.UniTuple(_t.float32, 4)
    _PAIR = _t.UniTuple(_t.float32, 2)

    def _tf32(builder, x):
        # round to nearest (ties away), the rounding the TF32 split assumes
        fnty = _ir.FunctionType(_I32, [_F32])
        return builder.asm(fnty, "cvt.rna.tf32.f32 $0, $1;", "=r,f", [x], False)

    def _split(builder, values):
        \"\"\"The TF32 big parts of `values`, then their small parts (x - big).\"\"\"
        big = [_tf32(builder, x) for x in values]
        small = [_tf32(builder, builder.fsub(x, builder.bitcast(b, _F32)))
                 for x, b in zip(values, big)]
        return big + small

    def _pack(shape):
        fnty = _ir.FunctionType(_I32, [_F32, _F32])

        def pack(builder, lo, hi):  # `cvt.rn.<type>x2.f32 d, a, b` puts a in the upper half
            return builder.asm(fnty, f"cvt.rn.{shape}x2.f32 $0, $1, $2;", "=r,f,f",
                               [hi, lo], False)
        return pack

    def _words(words, prepare):
        \"\"\"The codegen of a fragment intrinsic: f32 lane values in, `words`
        uint32 fragment registers out (`prepare(builder, values)`).\"\"\"
        rtype = _t.UniTuple(_t.uint32, words)

        def codegen(context, builder, sig, args):
            xs = [context.cast(builder, v, t, _t.float32) for v, t in zip(args, sig.args)]
            return context.make_tuple(builder, rtype, prepare(builder, xs))
        return rtype, codegen

    # TF32 registers: a0 = A[g][t], a1 = A[g + 8][t], a2 = A[g][t + 4], a3 =
    # A[g + 8][t + 4]; with the reduction index renumbered, a00 a10 a01 a11.
    @intrinsic
    def mma_a_f32(typingctx, a00, a01, a10, a11):
        rtype, codegen = _words(8, lambda b, xs: _split(b, [xs[0], xs[2], xs[1], xs[3]]))
        return rtype(a00, a01, a10, a11), codegen

    @intrinsic
    def mma_b_f32(typingctx, b0, b1):
        rtype, codegen = _words(4, _split)
        return rtype(b0, b1), codegen

    @intrinsic
    def tf32_split(typingctx, x):
        def codegen(context, builder, sig, args):
            x = context.cast(builder, args[0], sig.args[0], _t.float32)
            parts = [builder.bitcast(w, _F32) for w in _split(builder, [x])]
            return context.make_tuple(builder, _PAIR, parts)
        return _PAIR(x), codegen

    def _bits(builder, xs):
        return [builder.bitcast(x, _I32) for x in xs]

    # the split values in `_split`'s order: big parts, then small parts
    @intrinsic
    def mma_a_f32s(typingctx, a00, a01, a10, a11, s00, s01, s10, s11):
        rtype, codegen = _words(8, lambda b, xs: _bits(b, [xs[k] for k in (0, 2, 1, 3,
                                                                             4, 6, 5, 7)]))
        return rtype(a00, a01, a10, a11, s00, s01, s10, s11), codegen

    @intrinsic
    def mma_b_f32s(typingctx, b0, b1, s0, s1):
        rtype, codegen = _words(4, _bits)
        return rtype(b0, b1, s0, s1), codegen

    def _half_intrinsics(shape):
        pack = _pack(shape)

        @intrinsic
        def a_fragment(typingctx, a00, a01, a10, a11):
            rtype, codegen = _words(2, lambda b, xs: [pack(b, xs[0], xs[1]),
                                                      pack(b, xs[2], xs[3])])
            return rtype(a00, a01, a10, a11), codegen

        @intrinsic
        def b_fragment(typingctx, b0, b1):
            rtype, codegen = _words(1, lambda b, xs: [pack(b, xs[0], xs[1])])
            return rtype(b0, b1), codegen
        return a_fragment, b_fragment

    mma_a_f16, mma_b_f16 = _half_intrinsics("f16")
    mma_a_bf16, mma_b_bf16 = _half_intrinsics("bf16")

    def _mma_asm(builder, shape, a, b, c):
        n = 4 + len(a) + len(b)
        text = (f"mma.sync.aligned.m16n8k8.row.col.f32.{shape}.{shape}.f32 "
                "{$0, $1, $2, $3}, {" + ", ".join(f"${4 + k}" for k in range(len(a)))
                + "}, {" + ", ".join(f"${4 + len(a) + k}" for k in range(len(b)))
                + "}, {" + ", ".join(f"${n + k}" for k in range(4)) + "};")
        constraints = ",".join(["=f"] * 4 + ["r"] * (len(a) + len(b)) + ["f"] * 4)
        fnty = _ir.FunctionType(_ir.LiteralStructType([_F32] * 4),
                                [_I32] * (len(a) + len(b)) + [_F32] * 4)
        out = builder.asm(fnty, text, constraints, [*a, *b, *c], False)
        return [builder.extract_value(out, k) for k in range(4)]

    def _product(shape, passes):
        @intrinsic
        def mma(typingctx, X, w, lane, A, B, c0, c1, c2, c3):
            def codegen(context, builder, sig, args):
                a = cgutils.unpack_tuple(builder, args[3])
                b = cgutils.unpack_tuple(builder, args[4])
                c = [context.cast(builder, v, t, _t.float32)
                     for v, t in zip(args[5:], sig.args[5:])]
                for ka, kb in passes(len(a), len(b)):
                    c = _mma_asm(builder, shape, [a[k] for k in ka], [b[k] for k in kb], c)
                return context.make_tuple(builder, _QUAD, c)
            return _QUAD(X, w, lane, A, B, c0, c1, c2, c3), codegen
        return mma

    # TF32x3: small x big, big x small, then big x big (the small terms are
    # added before the big one that would absorb them)
    mma_f32 = _product("tf32", lambda na, nb: [((4, 5, 6, 7), (0, 1)),
                                               ((0, 1, 2, 3), (2, 3)),
                                               ((0, 1, 2, 3), (0, 1))])
    mma_f16 = _product("f16", lambda na, nb: [((0, 1), (0,))])
    mma_bf16 = _product("bf16", lambda na, nb: [((0, 1), (0,))])
    @intrinsic
    def ld_pair(typingctx, a, i):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            vec = _ir.VectorType(_F32, 2)
            ptr = builder.bitcast(builder.gep(data, [args[1]]), vec.as_pointer())
            both = builder.load(ptr, align=8)
            items = [builder.extract_element(both, _ir.Constant(_I32, k)) for k in range(2)]
            return context.make_tuple(builder, _PAIR, items)
        return _PAIR(a, i), codegen

    @cuda.jit(device=True, inline=True)
    def xor_lanes(X, w, lane, v, m):
        return cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
"""
"""Prelude text defining the helpers above, after the wide-access prelude
(whose imports and `_I32` it uses)."""


MMA_ROW_PRELUDE = """
if numba.cuda.core.config.ENABLE_CUDASIM:

    def _row(b_fragment, mma):
        def row(X, w, lane, A, B, at, step, small, C):
            out = []
            for k in range(len(C) // 4):
                i = at + k * step
                out += mma(X, w, lane, A, b_fragment(B, i, small), *C[4 * k:4 * k + 4])
            return tuple(out)
        return row

    mma_row_f32 = _row(lambda B, i, small: mma_b_f32s(B[i], B[i + 1], B[i + small],
                                                      B[i + small + 1]), mma_f32)
    mma_row_f16 = _row(lambda B, i, small: mma_b_f16(B[i], B[i + 1]), mma_f16)
    mma_row_bf16 = _row(lambda B, i, small: mma_b_bf16(B[i], B[i + 1]), mma_bf16)
else:

    def _pair(builder, data, i):  # `ld_pair`'s load
        ptr = builder.bitcast(builder.gep(data, [i]), _ir.VectorType(_F32, 2).as_pointer())
        both = builder.load(ptr, align=8)
        return [builder.extract_element(both, _ir.Constant(_I32, k)) for k in range(2)]

    # For each accumulator fragment of `C`: its B fragment's words read from
    # `B` (`b_words(builder, data, i, small)`) and its products (`passes`,
    # those of `mma_<e>`), the IR that `ld_pair`, `mma_b_<e>` and `mma_<e>`
    # emit, in their order (tests/test_mma_row.py compares the PTX).
    def _row(shape, passes, b_words):
        @intrinsic
        def row(typingctx, X, w, lane, A, B, at, step, small, C):
            if not (isinstance(C, _t.UniTuple) and C.dtype == _t.float32 and C.count % 4 == 0):
                return None

            def codegen(context, builder, sig, args):
                data = context.make_array(sig.args[4])(context, builder, args[4]).data
                a = cgutils.unpack_tuple(builder, args[3])
                c = cgutils.unpack_tuple(builder, args[8])
                at, step, small = (context.cast(builder, v, t, _t.intp)
                                   for v, t in zip(args[5:8], sig.args[5:8]))
                out = []
                for k in range(len(c) // 4):
                    i = builder.add(at, builder.mul(step, _ir.Constant(step.type, k)))
                    b = b_words(builder, data, i, small)
                    acc = list(c[4 * k:4 * k + 4])
                    for ka, kb in passes:
                        acc = _mma_asm(builder, shape, [a[q] for q in ka], [b[q] for q in kb], acc)
                    out += acc
                return context.make_tuple(builder, sig.return_type, out)
            return C(X, w, lane, A, B, at, step, small, C), codegen
        return row

    def _split_b(builder, data, i, small):  # `mma_b_f32s` of the pairs at i and i + small
        return _bits(builder, _pair(builder, data, i) + _pair(builder, data,
                                                              builder.add(i, small)))

    def _half_b(shape):
        pack = _pack(shape)
        return lambda builder, data, i, small: [pack(builder, *_pair(builder, data, i))]

    # `mma_f32`'s TF32x3 passes (small x big, big x small, big x big); a half
    # product is one pass
    mma_row_f32 = _row("tf32", [((4, 5, 6, 7), (0, 1)), ((0, 1, 2, 3), (2, 3)),
                                ((0, 1, 2, 3), (0, 1))], _split_b)
    mma_row_f16 = _row("f16", [((0, 1), (0,))], _half_b("f16"))
    mma_row_bf16 = _row("bf16", [((0, 1), (0,))], _half_b("bf16"))
"""
"""Prelude text defining `mma_row_<e>` (see above), after `MMA_PRELUDE`
(whose helpers it uses); only kernels that call it get it, so that the
kernels.py of other programs that use the warp helpers stay as they were."""
