"""Time every candidate tile of the fused attention kernel on a GPU, beside
torch.compile and `F.scaled_dot_product_attention`.

    python bench/attention_sweep.py [--reps 20] [--limit 12] [--dtype f32|f16|bf16]
        [--engine all|simt|mma]

Shape: bench/models/attention.mlir (B8 H12 S512 D64, scale + additive
mask), also gpt2_block's sizes; the peers are timed with that additive
mask and with a causal one (fusec's kernel does the same work for any mask
values; SDPA may skip masked blocks only with `is_causal`, which it is not
given). fusec's inputs are torch CUDA tensors, read in place. Each tile
is compiled with `fuse-attention{block_q=.. block_k=.. rows=.. cols=..
stages=..}` and timed with CUDA events (median of `--reps` after a warm-up);
the cost model's estimate and the tile's shared memory (over 48 KiB: dynamic)
are printed beside it. The tiles are the model's ranking with the fastest of
each kind first (SIMT or tensor-core engine, static or dynamic shared
memory, one or two stages: `scheduling/attention.candidate_order`); the
peers and fusec run in the `--dtype` precision. Stays under about a minute.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parent / "models"
SHAPE = (8, 12, 512, 64)


def _time(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _peers(causal: bool, reps: int, dtype: str) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from fusec.dialects.element_types import element

    tdtype = getattr(torch, element(dtype).torch_name)
    b, h, s, d = SHAPE
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=tdtype) for _ in range(3))
    mask = torch.triu(torch.full((s, s), -1e9, device="cuda"), 1) if causal else \
        torch.randn(s, s, device="cuda")
    mask = mask.to(tdtype)
    scale = 1.0 / d ** 0.5

    def math(q, k, v, mask):  # type: ignore[no-untyped-def]
        return torch.softmax(q @ k.transpose(-1, -2) * scale + mask, dim=-1) @ v

    compiled = torch.compile(math)
    return {"torch.compile": _time(lambda: compiled(q, k, v, mask), reps),
            "F.sdpa": _time(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                            reps)}


def _grouped(text: str, tile: str) -> str:
    """The program with its attention grouped under the fixed `tile`: the
    default pipeline then keeps that group and its schedule."""
    from fusec.compiler.driver import make_registry
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec

    ctx = make_context()
    module = parse_module(ctx, text, "attention.mlir")
    spec = f"decompose,fold-constants,fuse-attention{{{tile}}}"
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return str(module)


def _fusec(text: str, tile: str, reps: int) -> float:
    import fusec
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function, random_inputs

    func = find_function(parse_module(make_context(), text, "attention.mlir"), None)
    import torch

    # On the device already: the timed call reads them in place (no copy in).
    inputs = [torch.as_tensor(np.asarray(x), device="cuda") for x in random_inputs(func, seed=0)]
    if "bf16" in text:  # the reference's stand-in for bf16 is f32: the device holds bf16
        inputs = [x.to(torch.bfloat16) for x in inputs]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "attention.mlir"
        path.write_text(_grouped(text, tile))
        model = fusec.compile(path, fusion=True, device="gpu")
        assert model.launches == 1, f"{tile}: {model.launches} launches"
        return _time(lambda: model(*inputs), reps)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="f32")
    parser.add_argument("--engine", choices=("all", "simt", "mma"), default="all")
    args = parser.parse_args()
    from half_precision import retype  # beside this script

    from fusec.analysis.targets import H200
    from fusec.scheduling.attention import (
        AttentionShape,
        candidate_order,
        fused_time,
        ranked_tiles,
    )
    from fusec.scheduling.attention_schedule import shared_bytes

    b, h, s, d = SHAPE
    item = 4 if args.dtype == "f32" else 2
    shape = AttentionShape(b * h, s, s, d, d, item=item, element=args.dtype)
    tiles = [t for t in candidate_order(ranked_tiles(shape, H200), shape, H200)
             if args.engine in ("all", t.engine)][:args.limit]
    # gpt2's sizes too; its mask is an input
    text = retype((MODELS / "attention.mlir").read_text(), args.dtype)
    print(f"\nattention.mlir: B{b} H{h} S{s} D{d} {args.dtype}")
    print(f"{'tile':58} {'ms':>8} {'model ms':>9} {'shared B':>9}")
    for causal in (False, True):
        for peer, ms in _peers(causal, args.reps, args.dtype).items():
            print(f"{peer + (' (causal)' if causal else ''):58} {ms:8.3f}")
    for t in tiles:
        spec = (f"block_q={t.block_q} block_k={t.block_k} stages={t.stages} engine=mma"
                if t.engine == "mma" else f"block_q={t.block_q} block_k={t.block_k} "
                f"rows={t.rows} cols={t.cols} stages={t.stages}")
        try:
            ms = _fusec(text, spec, args.reps)
            print(f"{t.text():58} {ms:8.3f} {fused_time(t, shape, H200) * 1e3:9.3f} "
                  f"{shared_bytes(t, d, d, args.dtype):9d}")
        except Exception as err:  # one bad tile must not stop the sweep
            print(f"{t.text():58} failed: {re.sub(chr(10), ' ', str(err))[:80]}")


if __name__ == "__main__":
    main()
