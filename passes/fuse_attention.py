"""The `fuse-attention` pass: wrap each attention, `softmax(f(Q @ Kᵀ)) @ V`,
in one `fusion.group` of kind `attention` (one FlashAttention-style kernel,
`codegen/attention.py`), before `form-fusion-groups`, which leaves groups
alone.

```mlir
// before (after decompose): matmul, mul, add, reduce_max, sub, exp, reduce_sum, div, matmul
// after:
%o = fusion.group (%q, %k, %mask, %v) {name = "attn0", kind = "attention", schedule =
    #fusion.attention<block_q = 64, block_k = 64, threads = 256, rows = 4, cols = 4,
                      stages = 2>} : (...) -> ... {
^bb0(...):
  %c = nn.constant dense<0.125> : tensor<f32>     // splat constants are cloned in
  %kt = nn.transpose %k_1 {perm = [0, 1, 3, 2]} ...
  ...
  fusion.yield %6 : tensor<8x12x512x64xf32>
}
```

What is matched is `analysis/attention_pattern.py`; the tile is chosen by
`scheduling/attention.py` for the target, and the attention is fused only
when that tile's estimated time beats the three-kernel path's. Each
attention found gets a remark: `remark: fused attention ...` with the bytes
the scores no longer cost and both times, or `missed: attention ... not
fused into one kernel: <reason>` (the fused kernel estimated slower, scores
read elsewhere, softmax not over the keys, a mask that broadcasts the scores,
a type other than f32, a head dim too large for the tile's registers and
shared memory); a refused one stays with `form-fusion-groups` (three
kernels, the scores through memory).

A scale of Q or K by a constant before `Q @ Kᵀ` (`q * self.scale`) moves
onto the scores first, so the group takes it in instead of a kernel of its
own scaling Q (`passes/fuse_attention_scale.py`; `remark: Q's scale ...
moved onto the scores ...`); it goes back on Q where the attention is then
not fused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.attention_pattern import (
    OPERAND_VIEWS,
    AttentionPattern,
    Refusal,
    match_attention,
)
from fusec.analysis.cudnn_library import FRONTEND_MISSING, frontend_missing, sdpa_available
from fusec.analysis.dependency_graph import value_names
from fusec.analysis.group_kind import BACKEND_ATTR, LIBRARY_BACKEND
from fusec.analysis.remarks import RemarkCollector, format_bytes
from fusec.analysis.rewriting import copy_location
from fusec.analysis.targets import WARP_SIZE, Target, resolve_target, unknown_target
from fusec.codegen.kernel_probe import KernelProbe
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import element_type, tensor_shape
from fusec.dialects.schedule import SCHEDULE_KEY
from fusec.dialects.shapes import fmt, numel
from fusec.passes.fuse_attention_scale import (
    OPERANDS,
    MovedScale,
    OperandScale,
    operand_scale,
    restore_scale,
    room,
    scale_scores,
)
from fusec.passes.register_budget import inline_group
from fusec.scheduling import gemm_choice
from fusec.scheduling.attention import (
    choose_tile,
    forced_decode_tile,
    fused_time,
    normalized_splits,
    unfused_time,
)
from fusec.scheduling.attention_group import attention_shape
from fusec.scheduling.attention_library import (
    BACKEND_MODES,
    CAUSAL_ATTR,
    MASK_REFUSAL,
    bias_ops,
    library_attention,
    library_time,
    mask_select,
    scores_bias,
)
from fusec.scheduling.attention_schedule import AttentionShape, AttentionTile
from fusec.scheduling.gemm_choice import GEMM_MODES, cupy_tf32
from fusec.scheduling.library_tuning import (
    ChoicePoint,
    LibraryTuner,
    active_tuner,
    tuned_choice,
)

ITEM = 4  # f32 bytes
# Unfused, the scores are written by the QK kernel, read and written by the
# softmax kernel, and read by the PV kernel.
SCORE_PASSES = 4
DECODE_THREADS = 128  # engine=decode without `threads`: four warps


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def build_group(pattern: AttentionPattern, name: str, attrs: Mapping[str, Attribute]) -> GroupOp:
    """Move the pattern's ops into a new `fusion.group` placed after its last
    op; splat constants are cloned in (the kernel writes them as literals)."""
    block = pattern.pv.parent_block()
    assert block is not None
    members = {op for op in pattern.ops() if not isinstance(op, nn.ConstantOp)}
    ops = [op for op in block.ops if op in members]
    constants = [op for op in pattern.ops() if isinstance(op, nn.ConstantOp)]
    after = ops[-1].next_op
    assert after is not None  # a function body ends with func.return
    output = pattern.output
    outside = [u for u in output.uses if u.operation not in members]
    clones = {c.results[0]: c.clone() for c in constants}
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            inside = isinstance(v, OpResult) and v.op in members
            if not inside and v not in clones and v not in inputs:
                inputs.append(v)
    body = Block(arg_types=[v.type for v in inputs])
    for arg, v in zip(body.args, inputs, strict=True):
        arg.name_hint = v.name_hint
    position = {v: body.args[k] for k, v in enumerate(inputs)}
    position.update({v: c.results[0] for v, c in clones.items()})
    for c in clones.values():
        body.add_op(c)
    for op in ops:
        op.detach()
        body.add_op(op)
        for i, v in enumerate(op.operands):
            if v in position:
                op.operands[i] = position[v]
    body.add_op(YieldOp([output]))
    group = GroupOp(inputs, [output.type], Region(body),
                    {"name": StringAttr(name), "kind": StringAttr("attention"), **attrs})
    group.location = pattern.qk.location
    group.outputs[0].name_hint = output.name_hint
    Rewriter.insert_op(group, InsertPoint.before(after))
    for use in outside:
        use.operation.operands[use.index] = group.outputs[0]
    for c in constants:  # the originals, when only the pattern read them
        if not c.results[0].uses and c.parent is not None:
            Rewriter.erase_op(c)
    return group


def _own_operand_views(p: AttentionPattern) -> bool:
    """Give Q, K and V each a chain of layout ops of its own: a view op that
    other ops read too (the transpose of a fused QKV projection, which three
    slices read) is cloned for this operand, so the attention can read its
    operand in place through the whole chain instead of a copy kernel
    writing the shared view out. Layout ops are views: a clone costs nothing.
    Returns whether anything was cloned."""
    cloned = False
    for reader, index in ((p.qk, 0), (p.qk, 1), (p.pv, 1)):
        v = reader.operands[index]
        while isinstance(v, OpResult) and isinstance(owner := v.op, OPERAND_VIEWS):
            if len(list(v.uses)) > 1:
                clone = owner.clone()
                clone.results[0].name_hint = v.name_hint
                Rewriter.insert_op(clone, InsertPoint.after(owner))
                reader.operands[index] = clone.results[0]
                owner, cloned = clone, True
            reader, index = owner, 0
            v = owner.operands[0]
    return cloned


@dataclass
class _Fuser:
    target: Target
    tile: AttentionTile | None
    remarks: RemarkCollector
    gemm: str = "auto"  # how the three-kernel path's GEMMs will run (`--gemm`)
    splits: int | None = None  # forced split-KV chunks (None: chosen)
    decode: bool = True  # offer the model decode tiles
    forced_decode: tuple[int, int] | None = None  # engine=decode: (warps, unroll)
    backend: str = "auto"  # cuDNN's fused attention: auto (when faster), library, fused
    # `--autotune` (`scheduling/library_tuning.py`): what times cuDNN against fusec's
    # kernel, and the context its scratch modules are scheduled in
    tuner: LibraryTuner | None = None
    ctx: Context = field(default_factory=Context)
    count: int = 0

    def run(self, func: FuncOp) -> None:
        names = value_names(func)

        def describe(op: Operation) -> str:
            return f"{op.name} ({names.get(op.results[0], '%?')})" if op.results else op.name

        block = func.body.block
        for op in list(block.ops):
            if op.parent_block() is not block:  # already moved into a group
                continue
            found = match_attention(op, describe)
            moved: list[tuple[MovedScale, str]] = []
            if isinstance(found, AttentionPattern):
                moved = self._scales_to_scores(found, describe)
                again = match_attention(op, describe) if moved else found
                assert isinstance(again, AttentionPattern), "a moved scale lost the attention"
                found = again
            if isinstance(found, AttentionPattern) and _own_operand_views(found):
                found = match_attention(op, describe)
            if isinstance(found, Refusal):
                self.remarks.add("missed", f"attention at {describe(found.op)} not fused into "
                                 f"one kernel: {found.reason}")
            elif found is not None:
                if self._mask_as_bias(found):
                    again = match_attention(op, describe)
                    found = again if isinstance(again, AttentionPattern) else found
                if self._fuse(found, describe):
                    for _, remark in moved:
                        self.remarks.add("remark", remark)
                else:  # the three-kernel path scales the operand as written
                    for scale, _ in reversed(moved):
                        restore_scale(scale)

    def _scales_to_scores(self, p: AttentionPattern, describe: Callable[[Operation], str]
                          ) -> list[tuple[MovedScale, str]]:
        """Move a scale of Q or K by a constant onto the scores of `p`
        (`passes/fuse_attention_scale.py`), where the attention kernel
        applies it instead of a kernel of its own that reads and writes
        all of Q; each with its remark, for when the attention is fused."""
        moved: list[tuple[MovedScale, str]] = []
        ops = len(p.score_ops)
        where = f"the attention at {describe(p.pv)}"
        for index, which in OPERANDS.items():
            found = operand_scale(p.qk, index, describe)
            if isinstance(found, OperandScale):
                found = room(ops, found) or found
            if isinstance(found, Refusal):
                self.remarks.add("missed", f"{which}'s scale {describe(found.op)} stays outside "
                                 f"{where}: {found.reason}")
            elif found is not None:
                remark = (f"{which}'s scale {describe(found.scale)} moved onto the scores of "
                          f"{where}: no kernel of its own")
                moved.append((scale_scores(found, p.qk), remark))
                ops += len(found.ops)
        return moved

    def _mask_as_bias(self, p: AttentionPattern) -> bool:
        """Where cuDNN's attention would take `p` but for a boolean mask of
        the program's (`select(mask, scores, -inf)`, `mask_select`), write
        the mask as a bias added to the scores (`scores + select(mask, 0,
        -inf)`: the same numbers, as adding 0 is exact and -inf stays -inf),
        which cuDNN reads; True when rewritten. Not under `fused` or a forced
        tile, nor where cuDNN's attention is not installed."""
        if self.backend == "fused" or self.tile is not None or \
                self.forced_decode is not None or not sdpa_available():
            return False
        if library_attention(p, {}) != MASK_REFUSAL or (found := mask_select(p)) is None:
            return False
        sel, kept = found
        fill = sel.on_false if kept is sel.on_true else sel.on_true
        zero_type = TensorType(element_type(fill), ())
        zero = nn.ConstantOp.create(result_types=[zero_type], attributes={
            "value": DenseIntOrFPElementsAttr.from_list(zero_type, [0.0])})  # pyright: ignore
        fills = (fill, zero.results[0]) if kept is sel.on_false else (zero.results[0], fill)
        bias = nn.SelectOp.create(operands=[sel.cond, *fills], result_types=[
            TensorType(element_type(fill), tensor_shape(sel.cond))])
        added = nn.AddOp.create(operands=[kept, bias.results[0]], result_types=[sel.result.type])
        for op, hint in ((zero, "zero"), (bias, "bias"), (added, "")):
            name = sel.result.name_hint
            op.results[0].name_hint = f"{name}_{hint}" if name and hint else name
            copy_location(sel, op)
            Rewriter.insert_op(op, InsertPoint.before(sel))
        sel.result.replace_all_uses_with(added.results[0])
        Rewriter.erase_op(sel)
        return True

    def _fuse(self, p: AttentionPattern, describe: Callable[[Operation], str]) -> bool:
        """Group `p` as one attention (fusec's kernel or cuDNN's call), or
        say why not (a `missed:` remark); whether it did."""
        ops = set(p.ops())
        inputs = {v for op in ops for v in op.operands
                  if not (isinstance(v, OpResult) and v.op in ops)}
        shape = attention_shape(p, len(inputs) + 1)
        if self.forced_decode is not None:
            tile = forced_decode_tile(shape, self.target, *self.forced_decode, self.splits)
        else:
            tile = self.tile or choose_tile(shape, self.target, self.splits, self.decode)
        where = f"attention at {describe(p.pv)} not fused into one kernel"
        if isinstance(tile, str):
            self.remarks.add("missed", f"{where}: {tile}")
            return False
        tile = normalized_splits(tile, shape)
        if (problem := tile.problem(self.target)) is not None:
            self.remarks.add("missed", f"{where}: tile {tile.text()} is invalid: {problem}")
            return False
        fused = fused_time(tile, shape, self.target)
        parts = unfused_time(shape, self.target, self.gemm, gemm_choice.library_available(),
                             cupy_tf32())
        times = f"fused {_us(fused)} vs 3 kernels {_us(parts)}"
        forced = self.tile is not None or self.forced_decode is not None
        offer = self._library(p, shape, forced)
        if isinstance(offer, LibraryOffer) and (bias := scores_bias(p)) is not None:
            # cuDNN reads the bias from memory: what computes it is no part of the group
            outside = set(bias_ops(p, bias))
            p.side_ops = [op for op in p.side_ops if op not in outside]
        library = isinstance(offer, LibraryOffer) and (
            self.backend == "library" or offer.time < min(fused, parts))
        if isinstance(offer, LibraryOffer):
            times = (f"cuDNN {_us(offer.time)} vs {times}" if library else
                     f"{times}; cuDNN's attention: estimated {_us(offer.time)}, slower")
        elif offer is not None:
            times = f"{times}; cuDNN's attention: not taken: {offer}"
        # `--autotune` times cuDNN's call against fusec's kernel where both can run it
        tuner = self.tuner if isinstance(offer, LibraryOffer) else None
        if not library and not forced and fused > parts and tuner is None:
            self.remarks.add("missed", f"{where}: the fused kernel is estimated slower than "
                             f"the three-kernel path: {times} (tile {tile.text()})")
            return False
        name = f"attn{self.count}"
        self.count += 1
        scores = tensor_shape(p.qk.result)
        saved = SCORE_PASSES * numel(scores) * shape.item
        subject = f"{describe(p.qk)} .. {describe(p.pv)}"
        group = build_group(p, name, {SCHEDULE_KEY: tile.attr()})
        if tuner is not None and isinstance(offer, LibraryOffer):
            tuned = tuned_choice(tuner, self.backend, lambda: ChoicePoint(
                "attention", group, library, offer.time * 1e6, fused * 1e6, True,
                f"causal={offer.causal}", self._schedule_alone(offer.causal)),
                lambda note: self.remarks.add("remark", f"group {name}: {note}"))
            library = library if tuned is None else tuned
        if library and isinstance(offer, LibraryOffer):
            mark_library(group, offer.causal)
            self.remarks.add("remark", f"fused attention {subject} into one cuDNN fused "
                             f"attention call, group {name}: the {fmt(scores)} scores stay on "
                             f"chip (saves {format_bytes(saved)} and 2 launches; {times})")
            return True
        if not forced and fused > parts:  # measured own, but the model prefers 3 kernels
            inline_group(group)
            self.count -= 1
            self.remarks.add("missed", f"{where}: the fused kernel is estimated slower than "
                             f"the three-kernel path: {times} (tile {tile.text()})")
            return False
        into, launches = "one kernel", 2
        if tile.splits > 1:
            plan = tile.split_plan(shape.skv)
            engine = "decode" if tile.engine == "decode" else "split-KV"
            into, launches = (f"a {engine} kernel ({plan.splits} chunks of {plan.chunk_keys} "
                              "keys) plus a combine kernel"), 1
        self.remarks.add("remark", f"fused attention {subject} into {into}, group {name}: "
                         f"the {fmt(scores)} scores stay on chip (saves {format_bytes(saved)} "
                         f"and {launches} launch{'es' * (launches > 1)}; {times}); "
                         f"tile {tile.text()}")
        return True

    def _library(self, p: AttentionPattern, shape: AttentionShape,
                 forced: bool) -> LibraryOffer | str | None:
        """cuDNN's call for `p` (its estimated time and mask) where it can
        take the attention; else why not (None: not asked, or no cuDNN)."""
        if self.backend == "fused" or forced:
            return None
        if not sdpa_available():  # cuDNN alone: say what its package would give
            known = frontend_missing() and not isinstance(library_attention(p, {}), str)
            return FRONTEND_MISSING if known else None
        found = library_attention(p, {})
        if isinstance(found, str):
            return found
        return LibraryOffer(library_time(shape, self.target, found.causal), found.causal)

    def _schedule_alone(self, causal: bool) -> Callable[[ModuleOp, str], None]:
        """How `--autotune` schedules a scratch module holding one attention
        group as cuDNN's call (`library`) or fusec's kernel (`fused`): as the
        rest of the pipeline would (`tile-and-promote`, with this pass's
        `gemm` mode and target)."""
        def schedule(module: ModuleOp, mode: str) -> None:
            from fusec.passes.tile_and_promote import TileAndPromotePass

            for g in module.walk():
                if isinstance(g, GroupOp) and g.attributes.get("kind") == StringAttr("attention"):
                    if mode == "library":
                        mark_library(g, causal)
                    else:
                        g.attributes.pop(BACKEND_ATTR, None)
                        g.attributes.pop(CAUSAL_ATTR, None)
            TileAndPromotePass(target=self.target.name, gemm=self.gemm,
                               remarks=False).apply(self.ctx, module)
        return schedule


@dataclass(frozen=True)
class LibraryOffer:
    """cuDNN's fused attention offered for one attention (what
    `scheduling/attention_library.library_attention` found, priced)."""

    time: float  # estimated seconds (`scheduling/attention_library.library_time`)
    causal: bool


def mark_library(group: GroupOp, causal: bool) -> None:
    """Make `group` a cuDNN fused attention call (with a causal mask)."""
    group.attributes[BACKEND_ATTR] = StringAttr(LIBRARY_BACKEND)
    if causal:
        group.attributes[CAUSAL_ATTR] = StringAttr("true")


@dataclass(frozen=True)
class FuseAttentionPass(ModulePass):
    """Wrap each `softmax(f(Q @ Kᵀ)) @ V` in one `attention` group.

    Options: `target` (profile of analysis/targets.py, or `auto`), `block_q`,
    `block_k`, `rows`, `cols`, `stages` (a fixed tile: block_q, block_k,
    rows and cols all or none, stages 1 or 2; 0: chosen per attention for
    the target, and fused only when estimated faster), `engine` (`simt`,
    or `mma` for a fixed tensor-core tile: block_q and block_k only, rows
    and cols follow), `splits` (simt: the keys split over that many blocks
    plus a combine kernel, with the fixed tile or the fastest tile for it;
    1: never split; 0: chosen, among split tiles only with `split-kv`),
    `split-kv` (offer the model split-KV tiles; off by default: on the H200
    the one-warp split kernel of a decode step, B8 H32 Skv 4096 D128, ran
    2.93 ms where the model said 0.26 and the unfused kernels took 1.30),
    `engine=decode` (a decode tile, S <= 4 queries and head dims multiples
    of 32: `threads` 32 per warp, 128 by default, `cols` keys per warp
    step, `splits` as above, 0: chosen), `decode` (offer the model decode
    tiles; on by default: on the H200 decode_attention.mlir ran 0.27-0.33 ms
    on them against 1.07 unfused, K and V read once taking 0.25), `gemm` (`auto`,
    `library`, `fused`: how `tile-and-promote` will run the three-kernel
    path's GEMMs, whose time the fused kernel must beat), `backend` (`auto`:
    cuDNN's fused attention where it is installed, takes the attention
    (`scheduling/attention_library.py`) and is estimated faster than
    fusec's kernel and the three-kernel path; `library`: wherever it takes
    it; `fused`: never), `remarks`.
    """

    name = "fuse-attention"

    target: str = "h200"
    block_q: int = 0
    block_k: int = 0
    rows: int = 0
    cols: int = 0
    stages: int = 1
    engine: str = "simt"
    splits: int = 0
    split_kv: bool = False
    threads: int = 0
    decode: bool = True
    gemm: str = "auto"
    backend: str = "auto"
    remarks: bool = True

    def __post_init__(self) -> None:
        if (problem := unknown_target(self.target)) is not None:
            raise ValueError(problem)
        if self.gemm not in GEMM_MODES:
            raise ValueError(f"gemm must be one of {', '.join(GEMM_MODES)}")
        if self.backend not in BACKEND_MODES:
            raise ValueError(f"backend must be one of {', '.join(BACKEND_MODES)}")
        if self.engine not in ("simt", "mma", "decode"):
            raise ValueError("engine must be simt, mma or decode")
        # A fixed tile must launch on the target asked for (its block limit).
        target, _ = resolve_target(self.target)
        if self.engine == "decode":
            if self.block_q or self.block_k or self.rows or self.stages != 1 or \
                    self.threads % WARP_SIZE or \
                    not 0 <= self.threads <= target.max_threads_per_block or self.cols < 0:
                raise ValueError("engine=decode takes threads (a multiple of 32), cols and "
                                 "splits only")
            return
        if self.threads:
            raise ValueError("threads is an option of engine=decode")
        if self.splits < 0 or (self.splits > 1 and self.engine == "mma"):
            raise ValueError("splits must be >= 0 (0: chosen), and 1 with engine mma")
        fixed = (self.block_q, self.block_k) if self.engine == "mma" else \
            (self.block_q, self.block_k, self.rows, self.cols)
        if any(fixed) and not all(v > 0 for v in fixed):
            raise ValueError("block_q, block_k, rows and cols must be given together"
                             if self.engine == "simt" else
                             "block_q and block_k must be given together")
        if any(fixed) and (problem := self._fixed().problem(target)) is not None:
            raise ValueError(f"tile {self._fixed().text()} is invalid: {problem}")

    def _fixed(self) -> AttentionTile:
        if self.engine == "mma":
            return AttentionTile.mma(self.block_q, self.block_k, self.stages)
        return AttentionTile(self.block_q, self.block_k, self.rows, self.cols, self.stages,
                             splits=max(1, self.splits))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target, _ = resolve_target(self.target)
        tile = self._fixed() if self.block_q and self.engine != "decode" else None
        collector = RemarkCollector()
        splits = self.splits or (None if self.split_kv else 1)
        fuser = _Fuser(target, tile, collector, self.gemm, splits, self.decode,
                       backend=self.backend, tuner=active_tuner(), ctx=ctx)
        if self.engine == "decode":
            fuser.splits = self.splits or None
            fuser.forced_decode = ((self.threads or DECODE_THREADS) // 32, self.cols)
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if func.body.blocks:
                fuser.run(func)
        # The passes after this one leave attention groups as they are, and
        # an attention kernel is the longest build of a model's cold first
        # call: where workers run for a compile that builds its kernels (the
        # torch backend, `fusec.compile`), each starts building now, before
        # form-fusion-groups, rather than at register-budget.
        KernelProbe().speculate([g for g in op.walk() if isinstance(g, GroupOp)
                                 and getattr(g.attributes.get("kind"), "data", "") == "attention"
                                 and BACKEND_ATTR not in g.attributes], target)
        if self.remarks:
            collector.store(op)
