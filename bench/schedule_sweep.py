"""Time every schedule the scheduler offers each group of a program on a
CUDA GPU, beside the copy floor: what the autotuner would choose from, all
of it, in one table.

    python bench/schedule_sweep.py MODEL.mlir [MODEL.mlir ...]
    python bench/schedule_sweep.py --corpus 3,9,45       # data-movement programs
    python bench/schedule_sweep.py --corpus 0-47 --kinds window --target h200

Each program is compiled by the default pipeline with `--autotune` timing
every candidate (`scheduling/candidates.offered`, untruncated; no tuning
cache), so the times are the autotuner's own: CUDA events, candidates
interleaved round by round on the same fresh random inputs, rotated past
the L2 (`runtime/tuning_timer.py`). Per candidate the table gives the
schedule's fields, its median time and its bandwidth as a fraction of the
copy floor (the group's HBM bytes, as the
cost model counts them, over the device-to-device copy rate measured in the
same run); the model's choice is marked `*`, the fastest `+`. Nothing is
written to OUT or the tuning cache; `--corpus` takes the programs of
`bench/data_movement.py` (seed 0, full size).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=".mlir programs")
    parser.add_argument("--corpus", default="", help="data-movement programs: indexes, "
                        "ranges or names (bench/data_movement.py --only)")
    parser.add_argument("--seed", type=int, default=0, help="the corpus seed (default 0)")
    parser.add_argument("--kinds", default="", help="comma-separated group kinds to time "
                        "(window, pointwise, reduction, ...; default: every kind)")
    parser.add_argument("--target", default="auto", help="target profile (default: the GPU's)")
    return parser


def _programs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(name, text) of every program asked for."""
    out = [(Path(m).stem, Path(m).read_text()) for m in args.models]
    if args.corpus:
        from data_movement import select  # beside this script

        from fusec.fuzz.data_movement import DEFAULT_COUNT, corpus

        for prog in select(corpus(args.seed, DEFAULT_COUNT), args.corpus):
            out.append((prog.name, prog.text))
    return out


def _copy_rate() -> float:
    from numba import cuda

    from fusec.runtime.launch_timer import copy_bandwidth

    return copy_bandwidth(cuda, cuda.stream(), False)


def _short(attr: object) -> str:
    """`window th=16 tw=15 oc_t=1 ci_step=1 pt=2 ot=1 depthwise`: the
    schedule's fields, without the attribute syntax."""
    from fusec.dialects.schedule import ScheduleAttr

    if not isinstance(attr, ScheduleAttr):
        return "(none)"
    fields = " ".join(f"{k}={attr.get(k)}" for k in attr.field_names())
    return f"{attr.name.split('.')[-1]} {fields}"[:64]


def sweep(name: str, text: str, kinds: set[str], target: str, copy_bw: float,
          timer: object | None = None) -> list[str]:
    """The table of one program (`timer`: a `GroupTimer` to use instead of
    CUDA events, as the tests do)."""
    from fusec.analysis.group_kind import kind_name
    from fusec.compiler.autotune import AutotuneOptions
    from fusec.compiler.compile import compile_model
    from fusec.compiler.tuning_trials import group_name
    from fusec.dialects.fusion import GroupOp

    options = AutotuneOptions(top_k=1 << 20, cache=False, quiet=True, timer=timer,  # type: ignore[arg-type]
                              device="given timer" if timer is not None else "")
    art = compile_model(text, target=target, autotune=options, source_name=f"{name}.mlir")
    tuning = art.tuning
    if tuning is None:
        return [f"{name}: nothing timed (no GPU)"]
    launches = {la.group: la for fp in art.program.functions.values() for la in fp.launches}
    groups = {group_name(g): g for g in art.module.walk() if isinstance(g, GroupOp)}
    lines = [f"\n{name}", f"{'group':8} {'':2} {'schedule':64} {'us':>9} {'floor':>6}"]
    for r in tuning.groups:
        group = groups.get(r.group)
        if kinds and group is not None and kind_name(group) not in kinds:
            continue
        t = r.fused
        la = launches.get(r.group)
        floor_us = (la.hbm_bytes / copy_bw * 1e6) if la is not None and la.hbm_bytes else 0.0
        for i, (s, us) in enumerate(zip(t.schedules, t.times, strict=True)):
            mark = ("*" if i == 0 else " ") + ("+" if i == t.fastest else " ")
            frac = f"{floor_us / us:6.0%}" if floor_us and us else f"{'-':>6}"
            lines.append(f"{r.group:8} {mark} {_short(s):64} {us:9.1f} {frac}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    programs = _programs(args)
    if not programs:
        print("schedule_sweep: no programs (give .mlir files or --corpus)", file=sys.stderr)
        return 2
    from fusec.runtime.device import gpu_available

    if not gpu_available():
        print("schedule_sweep: needs a CUDA GPU", file=sys.stderr)
        return 1
    copy_bw = _copy_rate()
    print(f"device-to-device copy: {copy_bw / 1e12:.2f} TB/s (read + write)")
    kinds = {k for k in args.kinds.split(",") if k}
    for name, text in programs:
        try:
            lines = sweep(name, text, kinds, args.target, copy_bw)
        except Exception as err:  # one failing program must not stop the sweep
            lines = [f"\n{name}: failed: {str(err).splitlines()[0][:120]}"]
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
