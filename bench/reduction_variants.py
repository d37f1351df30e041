"""Time reduction schedule variants of bench/programs on one GPU, in one run.

    python bench/reduction_variants.py [--rows column_softmax,softmax_mid_axis]

Each program is compiled under every combination of `VARIANTS` (the
`ReductionOptions` the scheduler starts from: splits of the columns over
blocks on or off, the unroll that is also the online update's chunk, threads
per block), checked against torch eager (bench/torch_peer.py), and timed
like bench/run_gpu.py (CUDA-event medians of `model(*inputs)`), with
torch.compile of the same ops for reference. Prints one table per program.
Needs PyTorch with CUDA.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_gpu import _events, _inputs  # noqa: E402  (beside this script)

VARIANTS: dict[str, tuple[int | bool, ...]] = {
    "split": (True, False),
    "unroll": (4, 8, 16),
    "block_threads": (256, 512),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--rows", default="column_softmax,softmax_mid_axis")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args(argv)

    import fusec
    from fusec.compiler.compile import compile_model
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function
    from fusec.runtime.device import select_device
    from fusec.scheduling import reduction_schedule as reduction

    select_device("gpu")
    import torch
    from torch_peer import torch_peer

    default = reduction.DEFAULT_OPTIONS
    for row in args.rows.split(","):
        source = (HERE / "programs" / f"{row}.mlir").read_text(encoding="utf-8")
        func = find_function(parse_module(make_context(), source, row), None)
        peer = torch_peer(func)
        print(f"== {row}")
        print(f"{'split':>5} {'unroll':>6} {'threads':>7} {'launches':>8} {'ms':>8}  grid x block")
        inputs = None
        for values in itertools.product(*VARIANTS.values()):
            fields = dict(zip(VARIANTS, values, strict=True))
            reduction.DEFAULT_OPTIONS = replace(default, **fields)  # type: ignore[arg-type]
            try:
                launches = compile_model(source).program.functions[row].launches
                model = fusec.compile(source, fusion=True, device="gpu")
            finally:
                reduction.DEFAULT_OPTIONS = default
            inputs = inputs or _inputs(torch, model, func)
            want, got = peer(*inputs), model(*inputs)
            scale = float(want.abs().max())
            err = float((got - want).abs().max()) / scale
            ms = _events(torch, lambda m=model, x=inputs: m(*x), args.iters, args.repeat)
            shape = ", ".join(f"{la.grid}x{la.block}" for la in launches)
            bad = "" if err < 2e-3 else f"  WRONG (max rel err {err:.1e})"
            print(f"{fields['split']!s:>5} {fields['unroll']:>6} {fields['block_threads']:>7} "
                  f"{len(launches):>8} {ms:>8.4f}  {shape}{bad}", flush=True)
        assert inputs is not None
        compiled = torch.compile(peer)
        ms = _events(torch, lambda c=compiled, x=inputs: c(*x), args.iters, args.repeat)
        print(f"torch.compile: {ms:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
