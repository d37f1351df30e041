"""Time the decode attention kernel (`engine = "decode"`) on a GPU over its
warps and splits, beside fusec's default compile (not fused: three
kernels) and torch eager `F.scaled_dot_product_attention`.

    python bench/decode_sweep.py [--reps 20] [--unroll 4]

Shape: bench/programs/decode_attention.mlir (B8 H32, one query over 4096
keys, D128, f32). Each point is compiled with `fuse-attention{engine=decode
threads=32W cols=U splits=N}` for W in (2, 4, 8) and N in (1, 2, 4, 8, 16)
and timed with CUDA events (median of `--reps` after a warm-up), checked
once against torch; the cost model's estimate is printed beside it, and
the time reading K and V once at the target's bandwidth. fusec's inputs are
torch CUDA tensors, read in place.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from attention_sweep import _grouped, _time  # beside this script

PROGRAM = Path(__file__).resolve().parent / "programs" / "decode_attention.mlir"
SHAPE = (8, 32, 1, 4096, 128)  # batch, heads, queries, keys, head dim
WARPS = (2, 4, 8)
SPLITS = (1, 2, 4, 8, 16)


def _fusec(text: str, inputs: list, reps: int):  # type: ignore[no-untyped-def]
    """(ms, launches, output) of `text` compiled by fusec's default pipeline."""
    import fusec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / PROGRAM.name
        path.write_text(text)
        model = fusec.compile(path, fusion=True, device="gpu")
        out = model(*inputs)
        return _time(lambda: model(*inputs), reps), model.launches, out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--unroll", type=int, default=4)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    from fusec.analysis.targets import H200
    from fusec.scheduling.attention import decode_time
    from fusec.scheduling.attention_schedule import AttentionShape, AttentionTile

    b, h, s, skv, d = SHAPE
    text = PROGRAM.read_text()
    q, k, v = (torch.randn(b, h, n, d, device="cuda") for n in (s, skv, skv))
    expected = F.scaled_dot_product_attention(q, k, v)
    shape = AttentionShape(b * h, s, skv, d, d)
    stream = b * h * skv * 2 * d * 4 / H200.memory_bandwidth * 1e3
    print(f"\ndecode_attention.mlir: B{b} H{h} S{s} Skv{skv} D{d} f32; "
          f"K and V once at {H200.name}'s bandwidth: {stream:.3f} ms")
    print(f"{'variant':44} {'ms':>8} {'model ms':>9} {'launches':>8} {'max err':>9}")
    eager = _time(lambda: F.scaled_dot_product_attention(q, k, v), args.reps)
    print(f"{'torch eager F.sdpa':44} {eager:8.3f}")
    rows = [("fusec default (unfused)", text, None)]
    for w in WARPS:
        for n in SPLITS:
            options = f"engine=decode threads={32 * w} cols={args.unroll} splits={n}"
            tile = AttentionTile.decode(s, w, args.unroll, n)
            rows.append((f"decode W{w} splits {n}", _grouped(text, options), tile))
    for label, program, tile in rows:
        try:
            ms, launches, out = _fusec(program, [q, k, v], args.reps)
            err = float((torch.as_tensor(out, device="cuda") - expected).abs().max())
            model = f"{decode_time(tile, shape, H200) * 1e3:9.3f}" if tile else f"{'':9}"
            print(f"{label:44} {ms:8.3f} {model} {launches:8d} {err:9.2e}")
        except Exception as exc:  # one bad point must not stop the sweep
            print(f"{label:44} failed: {str(exc).splitlines()[0][:80]}")


if __name__ == "__main__":
    main()
