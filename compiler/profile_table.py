"""The table `fusec run --profile` prints: each launch's measured time
beside the cost model's estimate, the bytes the plan says it moves, the
bandwidth that achieves as a fraction of the measured copy floor, its flops
and FLOP/s, and whether it is memory-bound.

```text
profile of @f on NVIDIA H200 (cc 9.0): each launch's median of 5 calls after a warm-up call
copy floor 4.12 TB/s (measured now); compute roof 50.8 TFLOP/s, ridge 12 flop/B (target h200)
#  kernel    time (us)  est. (us)        bytes  bandwidth  % floor  flops     FLOP/s  flop/B   bound
0  f_g0_mul      25.10      24.60  100,663,296  4.01 TB/s      97%  25.2M  1 TFLOP/s    0.25  memory
   total         25.10      24.60  100,663,296  4.01 TB/s      97%  25.2M  1 TFLOP/s    0.25
memory-bound: 1 of 1 launch, 4.01 TB/s together: 97% of the copy floor
```

A launch is memory-bound when its arithmetic intensity (flops per byte
moved) is below the target's ridge point, `fp32_flops / memory_bandwidth`
of its profile (`analysis/targets.py`): there the copy floor, not the
compute roof, bounds it, and its bandwidth against the floor says how close
it comes. The bytes are the plan's (`report.launch_bytes`: the estimate code
generation recorded, else the bytes of the launch's arguments), the same
figure report.md gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fusec.analysis.diagnostics import counted, escape_controls
from fusec.analysis.program import FunctionProgram
from fusec.analysis.targets import Target
from fusec.compiler.report import launch_bytes


@dataclass(frozen=True)
class Roofs:
    """What a launch is measured against."""

    copy_bandwidth: float  # bytes/s read + written by a device-to-device copy, measured
    compute: float  # FLOP/s: the target's compute roof
    ridge: float  # flop/byte: below it, a launch is memory-bound

    @staticmethod
    def of(target: Target, copy_bandwidth: float) -> Roofs:
        """The measured copy floor with `target`'s compute roof and ridge point."""
        return Roofs(copy_bandwidth, target.fp32_flops,
                     target.fp32_flops / target.memory_bandwidth)


@dataclass(frozen=True)
class ProfileRow:
    """One launch (or the total) as measured."""

    index: int | None  # None: the total
    name: str  # the kernel, or `kernel (cublas_sgemm)` for a library call
    us: float  # measured: median microseconds
    est_us: float  # the cost model's estimate (0: none recorded)
    hbm_bytes: int
    flops: float | None  # None: unknown (no group of the launch's name in the IR)

    @property
    def bandwidth(self) -> float:
        """Bytes per second achieved."""
        return self.hbm_bytes / (self.us * 1e-6) if self.us > 0 else 0.0

    @property
    def flop_rate(self) -> float | None:
        """FLOP/s achieved."""
        if self.flops is None:
            return None
        return self.flops / (self.us * 1e-6) if self.us > 0 else 0.0

    @property
    def intensity(self) -> float | None:
        """Flops per byte moved (None: unknown, or no bytes)."""
        if self.flops is None or self.hbm_bytes <= 0:
            return None
        return self.flops / self.hbm_bytes

    def floor_fraction(self, roofs: Roofs) -> float:
        """Achieved bandwidth over the copy floor."""
        return self.bandwidth / roofs.copy_bandwidth if roofs.copy_bandwidth > 0 else 0.0

    def memory_bound(self, roofs: Roofs) -> bool | None:
        """Intensity below the ridge point (None: intensity unknown)."""
        i = self.intensity
        return None if i is None else i < roofs.ridge


def profile_rows(fp: FunctionProgram, times_us: Sequence[float],
                 flops: Sequence[float | None]) -> list[ProfileRow]:
    """A row per launch of `fp`, with its measured time and flops."""
    rows = []
    for i, (launch, us, f) in enumerate(zip(fp.launches, times_us, flops, strict=True)):
        name = launch.kernel if launch.library is None \
            else f"{launch.kernel} ({launch.library.get('library', 'library call')})"
        rows.append(ProfileRow(i, name, us, launch.est_time_us, launch_bytes(fp, launch), f))
    return rows


def total_row(rows: Sequence[ProfileRow]) -> ProfileRow:
    """The sum of `rows` (flops: of those known; None if none is)."""
    known = [r.flops for r in rows if r.flops is not None]
    return ProfileRow(None, "total", sum(r.us for r in rows), sum(r.est_us for r in rows),
                      sum(r.hbm_bytes for r in rows), sum(known) if known else None)


def memory_bound_total(rows: Sequence[ProfileRow], roofs: Roofs) -> ProfileRow | None:
    """The memory-bound rows together (None when there are none)."""
    bound = [r for r in rows if r.memory_bound(roofs)]
    return total_row(bound) if bound else None


_COLUMNS = ("time (us)", "est. (us)", "bytes", "bandwidth", "% floor", "flops", "FLOP/s",
            "flop/B", "bound")


def si(value: float, unit: str = "") -> str:
    """`4.12 TB/s`, `25.2M`: three significant digits and an SI prefix."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}" if unit else f"{value:g}"
    exponent = _clamped(math.floor(math.log10(abs(value)) / 3))
    if abs(float(f"{value / 1000.0 ** exponent:.3g}")) >= 1000:  # 999.7 rounds to 1.00k
        exponent = _clamped(exponent + 1)
    number, prefix = f"{value / 1000.0 ** exponent:.3g}", _PREFIXES[exponent + 4].strip()
    return f"{number} {prefix}{unit}" if unit else f"{number}{prefix}"


_PREFIXES = "pnum kMGTP"  # 1000**-4 .. 1000**5


def _clamped(exponent: int) -> int:
    return min(max(exponent, -4), 5)


def _cells(row: ProfileRow, roofs: Roofs) -> tuple[str, ...]:
    rate, intensity, bound = row.flop_rate, row.intensity, row.memory_bound(roofs)
    return (f"{row.us:.2f}", f"{row.est_us:.2f}" if row.est_us else "-",
            f"{row.hbm_bytes:,}", si(row.bandwidth, "B/s"), f"{row.floor_fraction(roofs):.0%}",
            si(row.flops) if row.flops is not None else "-",
            si(rate, "FLOP/s") if rate is not None else "-",
            f"{intensity:.3g}" if intensity is not None else "-",
            "" if row.index is None else
            "-" if bound is None else "memory" if bound else "compute")


def render_table(rows: Sequence[ProfileRow], roofs: Roofs, heading: str,
                 target: str) -> list[str]:
    """The lines `fusec run --profile` prints (module docstring)."""
    total = total_row(rows)
    names = [f"{r.index}  {escape_controls(r.name)}" for r in rows]
    width = max([len("#  kernel"), *map(len, names)])
    lines = [heading,
             f"copy floor {si(roofs.copy_bandwidth, 'B/s')} (measured now); compute roof "
             f"{si(roofs.compute, 'FLOP/s')}, ridge {roofs.ridge:.3g} flop/B (target {target})"]
    body = [*zip(names, (_cells(r, roofs) for r in rows), strict=True),
            (f"   {total.name}", _cells(total, roofs))]
    widths = [max(len(head), *(len(cells[k]) for _, cells in body))
              for k, head in enumerate(_COLUMNS)]
    lines.append(f"{'#  kernel':<{width}}  "
                 + "  ".join(f"{h:>{w}}" for h, w in zip(_COLUMNS, widths, strict=True)))
    lines += [(f"{name:<{width}}  " + "  ".join(f"{c:>{w}}" for c, w in
                                                 zip(cells, widths, strict=True))).rstrip()
              for name, cells in body]
    return [*lines, _memory_line(rows, roofs)]


def _memory_line(rows: Sequence[ProfileRow], roofs: Roofs) -> str:
    together = memory_bound_total(rows, roofs)
    if together is None:
        return "memory-bound: none of the launches"
    n = sum(1 for r in rows if r.memory_bound(roofs))
    return (f"memory-bound: {n} of {counted(len(rows), 'launch', 'launches')}, "
            f"{si(together.bandwidth, 'B/s')} together: "
            f"{together.floor_fraction(roofs):.0%} of the copy floor")
