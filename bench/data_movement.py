"""The data-movement corpus on a CUDA GPU: generated programs that permute,
window, stride and gather their data, timed against torch.compile and the
copy floor in one run.

    python bench/data_movement.py                       # seed 0, 48 programs
    python bench/data_movement.py --seed 3 --count 60
    python bench/data_movement.py --only 0-11,dm20_window_slice_stencil_f32
    python bench/data_movement.py --list [--small]      # names, shapes, traffic (no GPU)
    python bench/data_movement.py --write DIR [--small] # the .mlir files, for `fusec`

The programs come from `fusec/fuzz/data_movement.py` (six families of data
movement, each fused with pointwise neighbours, f32 and bf16, odd and prime
extents, at least 64 MiB that must move each (the floor's count); `--small`: the same
programs shrunk for the simulator). For each program, in one run and on the
same seeded random inputs (`run_gpu._inputs`): fusec (fused, the path a
user's call takes), torch eager and torch.compile of the same ops
(`torch_peer.py`), and the copy floor: bytes that must move
(`torch_peer.floor_work`) / the device-to-device copy bandwidth measured in
the same run. fusec's outputs are checked against torch eager before timing.
Prints a table (fusec's time, its fraction of the copy floor, its speed-up
over torch.compile, its kernel count) and summary lines, and writes them to
bench/results/DATE-DEVICE-data-movement-COMMIT.md (COMMIT: $FUSEC_COMMIT, else
git's). Timing needs PyTorch with CUDA; `--list` and `--write` need neither.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fusec.bench.commit_id import commit  # noqa: E402
from fusec.compiler.arg_types import non_negative_int, positive_int  # noqa: E402
from fusec.fuzz.data_movement import (  # noqa: E402  (after the path of the bench's helpers)
    DEFAULT_COUNT,
    FAMILIES,
    MovementProgram,
    corpus,
)

# Output agreement with torch eager, relative to max |reference| (f32; bf16
# takes its element type's tolerance, `half_precision.tolerance`).
TOLERANCE = 2e-3
# A program whose fusec time is under this fraction of the copy floor is
# counted in the summary (issue 33: none below it).
LOW_FRACTION = 0.5


@dataclass
class Result:
    """One program's measurements (times in ms; None where not measured)."""

    program: MovementProgram
    moved: int = 0
    floor_ms: float = 0.0
    fusec_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    kernels: int = 0
    status: str = ""

    @property
    def fraction(self) -> float | None:
        """fusec's time as a fraction of the copy floor's (1.0: at the floor)."""
        return self.floor_ms / self.fusec_ms if self.fusec_ms else None

    @property
    def speedup(self) -> float | None:
        """torch.compile's time over fusec's."""
        return self.compile_ms / self.fusec_ms if self.compile_ms and self.fusec_ms else None


def build_parser() -> argparse.ArgumentParser:
    """The bench's arguments."""
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=non_negative_int, default=0, help="corpus seed (default 0)")
    p.add_argument("--count", type=positive_int, default=DEFAULT_COUNT,
                   help=f"programs in the corpus (default {DEFAULT_COUNT})")
    p.add_argument("--small", action="store_true",
                   help="the programs shrunk to a few hundred elements (the simulator's size)")
    p.add_argument("--only", metavar="LIST",
                   help="comma-separated program indexes, ranges (3-7) or names")
    p.add_argument("--list", action="store_true",
                   help="print the programs' names, families, shapes and traffic, and stop")
    p.add_argument("--write", metavar="DIR",
                   help="write each program to DIR/NAME.mlir, and stop")
    p.add_argument("--iters", type=positive_int, default=20)
    p.add_argument("--repeat", type=positive_int, default=7)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--out", default=str(HERE / "results"), help="where the table is written")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point: list, write or time the corpus."""
    p = build_parser()
    args = p.parse_args(argv)
    programs = corpus(args.seed, args.count, args.small)
    if args.only:
        try:
            programs = select(programs, args.only)
        except ValueError as err:
            p.error(str(err))
    if args.list or args.write:
        if args.list:
            for prog in programs:
                print(describe(prog))
        if args.write:
            write_programs(programs, Path(args.write))
        return 0
    return _run(programs, args)


def select(programs: list[MovementProgram], only: str) -> list[MovementProgram]:
    """The programs `only` names (indexes, `a-b` ranges, names), in corpus
    order; ValueError naming an unknown one."""
    by_name = {prog.name: i for i, prog in enumerate(programs)}
    chosen: set[int] = set()
    for item in (part.strip() for part in only.split(",")):
        lo, dash, hi = item.partition("-")
        if item in by_name:
            chosen.add(by_name[item])
        elif lo.isdigit() and (not dash or hi.isdigit()):
            first, last = int(lo), int(hi) if dash else int(lo)
            if not first <= last < len(programs):
                raise ValueError(f"--only: '{item}' is not within the corpus's indexes "
                                 f"0-{len(programs) - 1}")
            chosen.update(range(first, last + 1))
        else:
            raise ValueError(f"--only: no program '{item}' in the corpus (--list names them)")
    return [prog for i, prog in enumerate(programs) if i in chosen]


def describe(prog: MovementProgram) -> str:
    """One `--list` line: name, family/variant, traffic, shapes."""
    kind = f"{prog.family}/{prog.variant}"
    return f"{prog.name:46s} {kind:32s} {_bytes(prog.traffic):>10s}  {prog.shapes()}"


def _bytes(n: int) -> str:
    """`96.5 MiB`, `3.1 KiB`."""
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


def write_programs(programs: list[MovementProgram], folder: Path) -> None:
    """Each program's text to FOLDER/NAME.mlir."""
    folder.mkdir(parents=True, exist_ok=True)
    for prog in programs:
        (folder / f"{prog.name}.mlir").write_text(prog.text, encoding="utf-8")
    print(f"wrote {len(programs)} programs to {folder} (reproduce one: "
          f"fusec run {folder / programs[0].name}.mlir --check)" if programs else
          f"wrote no programs to {folder}")


# --- timing (GPU) -------------------------------------------------------------------


def _run(programs: list[MovementProgram], args: argparse.Namespace) -> int:
    """Check and time every program; write the table; 1 if any failed, 2
    without PyTorch or a GPU."""
    import fusec
    from fusec.analysis.diagnostics import FusecError
    from fusec.runtime.device import select_device

    try:
        import torch
    except ImportError:
        print("error: timing needs PyTorch with CUDA (--list and --write run without it)",
              file=sys.stderr)
        return 2
    try:
        select_device("gpu")
    except FusecError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from run_gpu import _ceilings  # pyright: ignore[reportPrivateUsage]

    copy_bw, _ = _ceilings(torch)
    header = _header(torch, copy_bw, args, len(programs))
    results: list[Result] = []
    for prog in programs:
        print(f"== {prog.name}", flush=True)
        try:
            result = measure(prog, fusec, torch, args, copy_bw)
        except Exception as err:  # one broken program must not lose the others
            result = Result(prog, status=f"FAILED: {type(err).__name__}: {err}")
        results.append(result)
        print(_row(result), flush=True)
        _write(args.out, [*header, *table(results)], torch, quiet=True)
        torch.cuda.empty_cache()
    lines = [*header, *table(results)]
    print("\n".join(lines[len(header):]))
    _write(args.out, lines, torch)
    return 0 if all(r.status == "ok" for r in results) else 1


def measure(prog: MovementProgram, fusec: Any, torch: Any, args: argparse.Namespace,
            copy_bw: float) -> Result:
    """Check `prog` against torch eager, then time fusec, torch eager and
    torch.compile on the same inputs."""
    from half_precision import tolerance
    from run_gpu import (  # pyright: ignore[reportPrivateUsage]
        _as_list,
        _check_all,
        _inductor,
        _inputs,
        _time_fusec,
        _time_torch,
    )
    from torch_peer import floor_work, torch_peer

    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function

    func = find_function(parse_module(make_context(), prog.text, f"{prog.name}.mlir"), None)
    peer = torch_peer(func)
    model = fusec.compile(prog.text, fusion=True, device="gpu")
    inputs = _inputs(torch, model, func)
    ref = _as_list(peer(*inputs))
    result = Result(prog, kernels=model.launches)
    result.status = _check_all(torch, _as_list(model(*inputs)), ref,
                               tolerance(prog.dtype, TOLERANCE))
    result.moved, _ = floor_work(func, inputs, ref)
    result.floor_ms = result.moved / copy_bw * 1e3
    result.fusec_ms = _time_fusec(torch, model, inputs, args)
    result.eager_ms = _time_torch(torch, peer, inputs, args)
    if not args.no_compile:
        result.compile_ms = _time_torch(torch, _inductor(torch, peer), inputs, args)
    return result


def table(results: list[Result]) -> list[str]:
    """The markdown table of `results` and the summary lines under it."""
    lines = ["| program | MiB | fusec (ms) | % of copy floor | kernels | torch eager (ms) "
             "| torch.compile (ms) | vs torch.compile | check |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [_row(r) for r in results]
    return [*lines, "", *summary(results), ""]


def summary(results: list[Result]) -> list[str]:
    """Median and minimum fraction of the floor, programs below
    `LOW_FRACTION` of it and below 1.0x torch.compile, failures."""
    timed = [r for r in results if r.fraction is not None]
    out = [f"Programs: {len(results)} ({len(timed)} timed, "
           f"{sum(r.status != 'ok' for r in results)} failed or mismatched)."]
    if timed:
        worst = min(timed, key=lambda r: r.fraction or 0.0)
        fractions = [r.fraction or 0.0 for r in timed]
        out.append(f"Fraction of the copy floor: median {statistics.median(fractions):.0%}, "
                   f"minimum {worst.fraction or 0.0:.0%} ({worst.program.name}).")
        low = [r.program.name for r in timed if (r.fraction or 0.0) < LOW_FRACTION]
        out.append(f"Below {LOW_FRACTION:.0%} of the floor: {len(low)} of {len(timed)}"
                   + (f" ({', '.join(low)})." if low else "."))
    compared = [r for r in timed if r.speedup is not None]
    if compared:
        slow = [r.program.name for r in compared if (r.speedup or 0.0) < 1.0]
        median = statistics.median(r.speedup or 0.0 for r in compared)
        out.append(f"Below 1.0x torch.compile: {len(slow)} of {len(compared)}"
                   + (f" ({', '.join(slow)})" if slow else "")
                   + f"; median {median:.2f}x.")
    for family in FAMILIES:
        mine = [r.fraction or 0.0 for r in timed if r.program.family == family]
        if mine:
            out.append(f"- {family}: median {statistics.median(mine):.0%} of the floor, "
                       f"minimum {min(mine):.0%} ({len(mine)} programs)")
    return out


def _row(r: Result) -> str:
    def ms(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else ""
    fraction = f"{r.fraction:.0%}" if r.fraction is not None else ""
    speedup = f"{r.speedup:.2f}x" if r.speedup is not None else ""
    return (f"| {r.program.name} | {r.moved / (1 << 20):.1f} | {ms(r.fusec_ms)} | {fraction} "
            f"| {r.kernels or ''} | {ms(r.eager_ms)} | {ms(r.compile_ms)} | {speedup} "
            f"| {r.status} |")


def _header(torch: Any, copy_bw: float, args: argparse.Namespace, count: int) -> list[str]:
    size = "small" if args.small else "full size"
    only = f", --only {args.only}" if args.only else ""
    return [
        f"# fusec data-movement corpus: {torch.cuda.get_device_name()}, "
        f"{datetime.date.today().isoformat()}, commit {commit()}",
        "",
        f"Corpus: seed {args.seed}, {count} of {args.count} programs{only}, {size} "
        f"(`python bench/data_movement.py --seed {args.seed} --count {args.count}"
        f"{' --small' if args.small else ''} --write DIR` writes them).",
        f"Measured in this run: device-to-device copy {copy_bw / 1e12:.2f} TB/s (read + "
        "write); the floor is the bytes that must move at that rate. Times: CUDA-event "
        f"medians of {args.repeat} x {args.iters} calls.",
        "",
    ]


def _write(out_dir: str, lines: list[str], torch: Any, quiet: bool = False) -> None:
    """The tables to OUT/DATE-DEVICE-data-movement-COMMIT.md."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name().replace(" ", "_")
    target = folder / f"{datetime.date.today().isoformat()}-{device}-data-movement-{commit()}.md"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if not quiet:
        print(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
