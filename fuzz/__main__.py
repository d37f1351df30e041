"""`python -m fusec.fuzz`: the long mode of the differential fuzzer.

```
nice -n 19 python -m fusec.fuzz --graphs 2000 --seed 1 --jobs 2 --out fuzz-out
nice -n 19 python -m fusec.fuzz --mode all --graphs 700 --jobs 2
python -m fusec.fuzz --mode gpu --sizes large --graphs 500     # on a GPU machine
```
prints a progress line, writes each failing program (minimized) to `--out`,
and ends with the counts by mode and category; the exit status is 1 when
anything failed that is not a known bug (`fuzz/triage.py`). Kernels run in
numba's CUDA simulator, except when a chosen mode runs on the GPU (`gpu`):
then every mode runs on the GPU when there is one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from fusec.fuzz.generate import GenConfig
from fusec.fuzz.modes import MODES, SIZES, parse_modes
from fusec.fuzz.run import FuzzOptions, Result, fuzz_one


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fusec.fuzz", description=__doc__.split("\n")[0],
                                allow_abbrev=False)
    p.add_argument("--graphs", type=int, default=100, help="how many programs (default 100)")
    p.add_argument("--seed", type=int, default=0, help="graph i is generated from (seed, i)")
    p.add_argument("--start", type=int, default=0, help="first graph index (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--out", type=Path, default=Path("fuzz-failures"),
                   help="folder for the minimized failing programs (default fuzz-failures)")
    p.add_argument("--max-ops", type=int, default=GenConfig.max_ops,
                   help=f"most ops per program (default {GenConfig.max_ops})")
    p.add_argument("--edge-rate", type=float, default=FuzzOptions.edge_rate,
                   help="share of programs with 0/-1/inf/NaN input elements")
    p.add_argument("--zero-dim-rate", type=float, default=0.0,
                   help="share of fresh arguments with a zero-size dimension")
    p.add_argument("--no-minimize", action="store_true", help="write failures as found")
    p.add_argument("--mode", action="append", default=[], metavar="NAME",
                   help="the kind of programs, repeatable or comma-separated; graph i runs "
                   "in the (i mod count)-th: " + ", ".join(MODES) + ", or all "
                   "(default: default)")
    p.add_argument("--sizes", choices=("auto", *SIZES), default="auto",
                   help="the gpu mode's shapes: large (axes up to 4096) or small (for the "
                   "simulator); auto: large when a GPU is found")
    args = p.parse_args(argv)
    if args.graphs < 0 or args.jobs < 1 or args.max_ops < 1:
        p.error("--graphs must be >= 0, --jobs and --max-ops >= 1")
    try:
        args.modes = parse_modes(args.mode)
    except ValueError as err:
        p.error(str(err))
    return args


def _device(modes: tuple[str, ...]) -> str:
    """Where kernels run: the simulator, unless a chosen mode runs on the GPU
    and there is one. Chosen before anything imports numba.cuda."""
    if not any(MODES[m].gpu for m in modes):
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
        return "sim"
    from fusec.runtime.device import select_device

    return select_device("auto")


def _progress(done: int, total: int, counts: Counter[str], started: float) -> str:
    failed = done - counts["ok"]
    new = sum(n for c, n in counts.items() if c.endswith(" new"))
    rate = done / max(time.monotonic() - started, 1e-9) * 60
    return (f"\r[{done}/{total}] ok {counts['ok']}  failed {failed} "
            f"(known {failed - new}, new {new})  {rate:.0f} graphs/min")


def main(argv: list[str] | None = None) -> int:
    """Run the long mode; 1 when a failure is not a known bug."""
    args = _arguments(argv)
    device = _device(args.modes)
    sizes = args.sizes if args.sizes != "auto" else "large" if device == "gpu" else "small"
    options = FuzzOptions(seed=args.seed, edge_rate=args.edge_rate,
                          minimize=not args.no_minimize, out=args.out,
                          gen=GenConfig(max_ops=args.max_ops, zero_dim_rate=args.zero_dim_rate),
                          modes=args.modes, sizes=sizes, device=device)
    indices = range(args.start, args.start + args.graphs)
    counts: Counter[str] = Counter()
    by_mode: Counter[tuple[str, str]] = Counter()
    started = time.monotonic()
    results = _results(indices, options, args.jobs)
    for done, result in enumerate(results, start=1):
        counts[result.category] += 1
        by_mode[result.mode, result.category] += 1
        if result.outcome.failed and not result.known:
            print(f"\nnew failure, graph {result.index} ({result.mode}): {result.category}: "
                  f"{result.outcome.detail[:200]} -> {result.path}", file=sys.stderr)
        print(_progress(done, len(indices), counts, started), end="", file=sys.stderr,
              flush=True)
    print(file=sys.stderr)
    for (mode, category), n in sorted(by_mode.items()):
        print(f"{n:6d}  {mode:14s} {category}")
    return 1 if any(c.endswith(" new") for c in counts) else 0


def _results(indices: range, options: FuzzOptions, jobs: int) -> Iterator[Result]:
    """Results as they come (out of order with several jobs)."""
    if jobs == 1:
        yield from (fuzz_one(i, options) for i in indices)
        return
    import multiprocessing
    from functools import partial

    # A process that asked the CUDA driver for its devices must not fork.
    method = "spawn" if options.device == "gpu" else "fork"
    with multiprocessing.get_context(method).Pool(jobs) as pool:
        # fuzz_one, not a function of this module: a spawned worker cannot
        # find this `__main__`'s functions
        yield from pool.imap_unordered(partial(fuzz_one, options=options), indices)


if __name__ == "__main__":
    sys.exit(main())
