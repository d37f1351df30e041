"""The roofline SVG writer (`compiler/roofline_svg.py`) on synthetic points:
a valid XML document, both roofs where the numbers put them, each point on
its place (a launch at the copy floor on the memory roof, one at half of it
a factor of two below), launches without flops hollow at the left edge, and
hostile kernel names escaped."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from fusec.compiler.roofline_svg import (
    LogAxes,
    Roof,
    RooflinePoint,
    choose_axes,
    roofline_svg,
)

NS = {"svg": "http://www.w3.org/2000/svg"}
COPY = Roof(4.0e12, "copy 4 TB/s (measured)")
COMPUTE = Roof(50.0e12, "compute 50 TFLOP/s (target h200)")
HOSTILE = 'f_g0_</text><script>alert("x")</script>&amp;\x1b[31m\x00\'<!--'


def _points() -> list[RooflinePoint]:
    return [
        RooflinePoint("at_the_floor", 0.25, COPY.rate, "100% of the copy floor"),
        RooflinePoint("half_the_floor", 2.0, COPY.rate / 2, "50%"),
        RooflinePoint("gemm", 400.0, 40.0e12 / 400.0, "compute-bound"),
        RooflinePoint("transpose", None, COPY.rate / 5, "no flops, 20%"),
        RooflinePoint(HOSTILE, 1.0, 1.0e12, "a name from the user's function <&>"),
    ]


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def _circles(root: ET.Element) -> list[ET.Element]:
    return [g.find("svg:circle", NS) for g in root.iterfind("svg:g", NS)
            if g.get("class") == "point"]  # type: ignore[misc]


def _line(root: ET.Element, cls: str) -> tuple[float, float, float, float]:
    line = next(e for e in root.iterfind("svg:line", NS) if e.get("class") == cls)
    return tuple(float(line.get(k, "nan")) for k in ("x1", "y1", "x2", "y2"))  # type: ignore[return-value]


def _on_line(x: float, y: float, line: tuple[float, float, float, float]) -> float:
    """Signed pixel distance below (positive) the line through `line`."""
    x1, y1, x2, y2 = line
    return y - (y1 + (y2 - y1) * (x - x1) / (x2 - x1))


def test_the_document_is_valid_xml_with_a_title_and_one_point_per_launch() -> None:
    svg = roofline_svg(_points(), COPY, COMPUTE, "fusec roofline: @f on GPU X, 2026-12-06")
    root = _parse(svg)
    assert root.findtext("svg:title", namespaces=NS) == "fusec roofline: @f on GPU X, 2026-12-06"
    assert len(_circles(root)) == len(_points())
    texts = "".join(root.itertext())
    assert "copy 4 TB/s (measured)" in texts and "compute 50 TFLOP/s (target h200)" in texts


def test_roofs_meet_at_the_ridge_and_the_compute_roof_is_flat() -> None:
    points = _points()
    axes = choose_axes(points, COPY, COMPUTE)
    root = _parse(roofline_svg(points, COPY, COMPUTE, "t"))
    memory, compute = _line(root, "roof-memory"), _line(root, "roof-compute")
    ridge = COMPUTE.rate / COPY.rate
    assert memory[0] == pytest.approx(axes.left, abs=0.01)
    assert memory[1] == pytest.approx(axes.y(COPY.rate * axes.x_min), abs=0.01)
    assert memory[2:] == pytest.approx((axes.x(ridge), axes.y(COMPUTE.rate)), abs=0.01)
    assert compute[:2] == pytest.approx(memory[2:], abs=0.01)
    assert compute[1] == compute[3]
    assert compute[2] == pytest.approx(axes.left + axes.width, abs=0.01)
    # A log-log memory roof rises one decade of FLOP/s per decade of intensity.
    decade_x = axes.width / (axes.x_decades[1] - axes.x_decades[0])
    decade_y = axes.height / (axes.y_decades[1] - axes.y_decades[0])
    assert (memory[1] - memory[3]) / decade_y == pytest.approx((memory[2] - memory[0]) / decade_x,
                                                                     rel=1e-4)


def test_points_sit_where_their_numbers_put_them() -> None:
    points = _points()
    axes = choose_axes(points, COPY, COMPUTE)
    root = _parse(roofline_svg(points, COPY, COMPUTE, "t"))
    circles = _circles(root)
    memory = _line(root, "roof-memory")
    decade_y = axes.height / (axes.y_decades[1] - axes.y_decades[0])
    at = {p.label: (float(c.get("cx", "nan")), float(c.get("cy", "nan")))
          for p, c in zip(points, circles, strict=True)}
    assert _on_line(*at["at_the_floor"], memory) == pytest.approx(0, abs=0.02)
    assert _on_line(*at["half_the_floor"], memory) / decade_y == pytest.approx(math.log10(2),
                                                                                 abs=1e-3)
    gemm = at["gemm"]
    assert gemm == pytest.approx((axes.x(400.0), axes.y(40.0e12)), abs=0.01)
    assert gemm[1] > axes.y(COMPUTE.rate)  # below the compute roof
    # No flops: hollow, on the left edge, 20% of the floor below the memory roof.
    transpose = circles[3]
    assert transpose.get("fill") == "white" and circles[0].get("fill") != "white"
    x, y = at["transpose"]
    assert x == pytest.approx(axes.left, abs=0.01)
    assert _on_line(x, y, memory) / decade_y == pytest.approx(math.log10(5), abs=1e-3)
    for _, (x, y) in at.items():
        assert axes.left - 0.01 <= x <= axes.left + axes.width + 0.01
        assert axes.top - 0.01 <= y <= axes.top + axes.height + 0.01


def test_hostile_kernel_names_are_escaped_not_markup() -> None:
    svg = roofline_svg(_points(), COPY, COMPUTE, f"title {HOSTILE}")
    root = _parse(svg)  # one more element or a comment would not parse, or show below
    assert not any(e.tag.endswith("script") for e in root.iter())
    assert "<script>" not in svg and "<!--" not in svg
    labels = [g.findtext("svg:text", namespaces=NS) or "" for g in root.iterfind("svg:g", NS)]
    hostile = labels[4]
    # The name is text, its controls written as Python escapes (XML cannot hold \x00).
    assert hostile == '4 f_g0_</text><script>alert("x")</script>&amp;\\x1b[31m\\x00\'<!--'
    assert "&amp;amp;" in svg  # the user's "&amp;" is text, not an entity
    assert root.findtext("svg:title", namespaces=NS).startswith("title f_g0_</text>")  # type: ignore[union-attr]


def test_axes_cover_every_point_and_both_roofs() -> None:
    tiny = [RooflinePoint("a", 1e-3, 1e6, ""), RooflinePoint("b", 1e5, 1e9, "")]
    axes = choose_axes(tiny, COPY, COMPUTE)
    assert axes.x_decades[0] <= -3 and axes.x_decades[1] >= 5
    assert 10.0 ** axes.y_decades[0] <= 1e3 and 10.0 ** axes.y_decades[1] >= COMPUTE.rate
    only_copies = [RooflinePoint("copy", None, 1e12, "")]
    axes = choose_axes(only_copies, COPY, COMPUTE)
    assert isinstance(axes, LogAxes) and axes.x_min < COMPUTE.rate / COPY.rate


def test_roofs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive roofs"):
        roofline_svg(_points(), Roof(0.0, "copy"), COMPUTE, "t")
