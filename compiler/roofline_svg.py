"""A roofline picture of a compiled function's launches as a self-contained
SVG (`fusec run --profile --roofline FILE.svg`), written in plain Python.

```python
svg = roofline_svg([RooflinePoint("f_g0_mul", 0.25, 4.0e12, "25.1 us, 97% of the copy floor")],
                   Roof(4.12e12, "copy 4.12 TB/s (measured)"),
                   Roof(50.8e12, "compute 50.8 TFLOP/s (target h200)"),
                   "fusec roofline: @f on NVIDIA H200 (cc 9.0), 2026-12-06")
```

Both axes are logarithmic, one grid line a decade: arithmetic intensity
(flops per byte moved) across, achieved FLOP/s up. The memory roof is the
measured copy bandwidth times the intensity, the compute roof the target's
FLOP/s; they meet at the ridge point. Each launch is a numbered point with
its name and numbers in a tooltip and in the legend under the plot. A launch
without flops (a copy, a transpose, a gather) has no place on a logarithmic
intensity axis: it is drawn hollow at the left edge, at its bandwidth times
that edge's intensity, so that its distance below the memory roof is still
its fraction of the copy floor.

Every text is escaped (kernel names come from the user's function names),
and characters XML cannot hold are written as Python escapes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from fusec.analysis.diagnostics import escape_controls
from fusec.compiler.profile_table import si

WIDTH = 960
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 90, 30, 60, 60
PLOT_HEIGHT = 520
LEGEND_LINE = 16  # pixels per legend line under the plot
POINT_RADIUS = 5
DECADES_AROUND_RIDGE = 2  # the intensity axis reaches this many decades past the ridge


@dataclass(frozen=True)
class RooflinePoint:
    """One launch: its flops per byte (None or 0: no flops), its achieved
    bandwidth (bytes/s) and a line of numbers for its tooltip and legend."""

    label: str
    intensity: float | None
    bandwidth: float
    detail: str

    @property
    def has_flops(self) -> bool:
        """Whether it has a place on the intensity axis."""
        return self.intensity is not None and self.intensity > 0


@dataclass(frozen=True)
class Roof:
    """A roof's rate (bytes/s for the memory roof, FLOP/s for compute) and label."""

    rate: float
    label: str


@dataclass(frozen=True)
class LogAxes:
    """Decades shown on each axis and the plot's pixel box: where a value goes."""

    x_decades: tuple[int, int]  # log10 of the intensity axis' ends
    y_decades: tuple[int, int]  # log10 of the FLOP/s axis' ends
    left: float = MARGIN_LEFT
    top: float = MARGIN_TOP
    width: float = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    height: float = PLOT_HEIGHT

    @property
    def x_min(self) -> float:
        """The intensity at the left edge."""
        return 10.0 ** self.x_decades[0]

    def x(self, intensity: float) -> float:
        """Pixel column of `intensity`."""
        lo, hi = self.x_decades
        return self.left + (math.log10(intensity) - lo) / (hi - lo) * self.width

    def y(self, rate: float) -> float:
        """Pixel row of `rate` FLOP/s (clamped to the plot: 0 sits on the bottom)."""
        lo, hi = self.y_decades
        level = math.log10(rate) if rate > 0 else lo
        return self.top + self.height - (min(max(level, lo), hi) - lo) / (hi - lo) * self.height


def point_rate(point: RooflinePoint, axes: LogAxes) -> tuple[float, float]:
    """Where `point` is drawn: (intensity, FLOP/s); a point without flops
    at the left edge (module docstring)."""
    intensity = point.intensity if point.has_flops and point.intensity else axes.x_min
    return intensity, intensity * point.bandwidth


def choose_axes(points: Sequence[RooflinePoint], memory: Roof, compute: Roof) -> LogAxes:
    """Whole decades that hold both roofs, the ridge with room on both
    sides, and every point."""
    ridge = compute.rate / memory.rate
    xs = [p.intensity for p in points if p.has_flops and p.intensity]
    lo = math.floor(math.log10(min([*xs, ridge / 10 ** DECADES_AROUND_RIDGE])))
    if any(not p.has_flops for p in points) and xs:
        lo = min(lo, math.floor(math.log10(min(xs))) - 1)  # the edge apart from real points
    hi = math.ceil(math.log10(max([*xs, ridge * 10 ** DECADES_AROUND_RIDGE])))
    x_min = 10.0 ** lo
    rates = [r for p in points if (r := (p.intensity if p.has_flops and p.intensity
                                         else x_min) * p.bandwidth) > 0]
    y_lo = math.floor(math.log10(min([*rates, memory.rate * x_min])))
    y_hi = math.ceil(math.log10(max([*rates, compute.rate * 2])))
    return LogAxes((lo, hi), (y_lo, max(y_hi, y_lo + 1)))


_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def text(value: str) -> str:
    """`value` escaped for SVG text and attribute values."""
    safe = _NOT_XML.sub("\ufffd", escape_controls(value))
    return escape(safe, {'"': "&quot;", "'": "&apos;"})


def roofline_svg(points: Sequence[RooflinePoint], memory: Roof, compute: Roof,
                 title: str) -> str:
    """The SVG document (module docstring)."""
    if memory.rate <= 0 or compute.rate <= 0:
        raise ValueError("a roofline needs positive roofs")
    axes = choose_axes(points, memory, compute)
    height = MARGIN_TOP + PLOT_HEIGHT + MARGIN_BOTTOM + LEGEND_LINE * (len(points) + 2)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{text(title)}</title>",
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text class="title" x="{WIDTH / 2:.1f}" y="28" text-anchor="middle" '
        f'font-size="15">{text(title)}</text>',
        *_grid(axes),
        *_roofs(axes, memory, compute),
        *(_point(i, p, axes) for i, p in enumerate(points)),
        *_legend(points, axes),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def _grid(axes: LogAxes) -> list[str]:
    """The plot's frame, a grid line and a label per decade, the axis titles."""
    left, top, right = axes.left, axes.top, axes.left + axes.width
    bottom = top + axes.height
    out = [f'<rect class="plot" x="{left}" y="{top}" width="{axes.width}" '
           f'height="{axes.height}" fill="none" stroke="black"/>']
    for k in range(axes.x_decades[0], axes.x_decades[1] + 1):
        x = axes.x(10.0 ** k)
        out += [f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>',
                f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">'
                f"{text(_decade(k))}</text>"]
    for k in range(axes.y_decades[0], axes.y_decades[1] + 1):
        y = axes.y(10.0 ** k)
        out += [f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#ddd"/>',
                f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{text(_decade(k, 'FLOP/s'))}</text>"]
    out += [f'<text x="{left + axes.width / 2:.1f}" y="{bottom + 40}" text-anchor="middle">'
            "arithmetic intensity (flop per byte moved)</text>",
            f'<text x="18" y="{top + axes.height / 2:.1f}" text-anchor="middle" '
            f'transform="rotate(-90 18 {top + axes.height / 2:.1f})">achieved FLOP/s</text>']
    return out


def _decade(k: int, unit: str = "") -> str:
    """`0.01`, `1`, `1000` across; `1 TFLOP/s` up."""
    return si(10.0 ** k, unit) if unit else f"{10.0 ** k:g}"


def _roofs(axes: LogAxes, memory: Roof, compute: Roof) -> list[str]:
    """The memory roof up to the ridge, the compute roof after it; labelled."""
    x_max = 10.0 ** axes.x_decades[1]
    ridge = compute.rate / memory.rate
    x0, y0 = axes.x(axes.x_min), axes.y(memory.rate * axes.x_min)
    xr, yr = axes.x(ridge), axes.y(compute.rate)
    x1 = axes.x(x_max)
    angle = math.degrees(math.atan2(yr - y0, xr - x0))
    return [
        f'<line class="roof-memory" x1="{x0:.2f}" y1="{y0:.2f}" x2="{xr:.2f}" y2="{yr:.2f}" '
        'stroke="#1f5fa8" stroke-width="2"/>',
        f'<line class="roof-compute" x1="{xr:.2f}" y1="{yr:.2f}" x2="{x1:.2f}" y2="{yr:.2f}" '
        'stroke="#a83a1f" stroke-width="2"/>',
        f'<text x="{x0 + 8:.1f}" y="{y0 - 8:.1f}" fill="#1f5fa8" '
        f'transform="rotate({angle:.2f} {x0 + 8:.1f} {y0 - 8:.1f})">{text(memory.label)}</text>',
        f'<text x="{x1 - 6:.1f}" y="{yr - 8:.1f}" fill="#a83a1f" text-anchor="end">'
        f"{text(compute.label)}</text>",
    ]


def _point(index: int, p: RooflinePoint, axes: LogAxes) -> str:
    """A numbered marker with a tooltip; hollow without flops."""
    intensity, rate = point_rate(p, axes)
    cx, cy = axes.x(intensity), axes.y(rate)
    fill = "#333" if p.has_flops else "white"
    return (f'<g class="point"><circle cx="{cx:.2f}" cy="{cy:.2f}" r="{POINT_RADIUS}" '
            f'fill="{fill}" stroke="#333"><title>{text(f"{index}: {p.label}: {p.detail}")}'
            f'</title></circle><text x="{cx + POINT_RADIUS + 2:.1f}" y="{cy - 4:.1f}">'
            f"{index} {text(p.label)}</text></g>")


def _legend(points: Sequence[RooflinePoint], axes: LogAxes) -> list[str]:
    """One line per point under the plot, and what a hollow point means."""
    first = axes.top + axes.height + MARGIN_BOTTOM
    out = [f'<text class="legend" x="{axes.left}" y="{first + LEGEND_LINE * index:.1f}">'
           f"{index}: {text(p.label)}: {text(p.detail)}</text>"
           for index, p in enumerate(points)]
    if any(not p.has_flops for p in points):
        last = first + LEGEND_LINE * len(points)
        out.append(f'<text x="{axes.left}" y="{last:.1f}" fill="#555">hollow: no flops '
                   "(data movement), drawn at the left edge at its fraction of the copy "
                   "roof</text>")
    return out
