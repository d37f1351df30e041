"""Library convolutions (cuDNN) with their epilogue kernel, checked on a GPU.

For every convolution shape (1x1, 3x3, 3x3 stride 2, 5x5, 7x7 stride 2 with
3 input channels, dilated, grouped, depthwise) x epilogue (none, bias, bias +
relu, batch norm + residual + relu, silu, gelu, sigmoid, clamp as relu6) x
f32 / f16 / bf16, it compiles the model with the library forced
(`conv="library"`), checks that the plan calls cuDNN for the convolution
(and at most one kernel after it), runs it, and prints the max error against
the NumPy reference interpreter relative to the element type's tolerance.
One model runs again under CUDA-graph capture. Then a small ResNet per type
(`cnn_program.py`), every convolution on cuDNN in NHWC (`channels-last`),
and once more under graph capture.

    python bench/library_conv_check.py          # exit status 1 on any failure
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from library_check import compare

TYPES = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class Shape:
    """One convolution: NCHW input, O output channels, a k x k window."""

    name: str
    n: int
    c: int
    h: int
    w: int
    o: int
    k: int
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    groups: int = 1

    def out_hw(self) -> tuple[int, int]:
        span = self.dilation * (self.k - 1) + 1
        return ((self.h + 2 * self.pad - span) // self.stride + 1,
                (self.w + 2 * self.pad - span) // self.stride + 1)


SHAPES = (
    Shape("1x1", 2, 32, 14, 14, 64, 1),
    Shape("3x3", 2, 16, 13, 13, 32, 3, pad=1),
    Shape("3x3_s2", 2, 16, 15, 15, 24, 3, stride=2, pad=1),
    Shape("5x5", 2, 8, 12, 12, 16, 5, pad=2),
    Shape("7x7_s2_c3", 2, 3, 32, 32, 16, 7, stride=2, pad=3),
    Shape("3x3_dil2", 2, 16, 17, 17, 16, 3, pad=2, dilation=2),
    Shape("3x3_groups4", 2, 32, 14, 14, 64, 3, pad=1, groups=4),
    Shape("3x3_depthwise", 2, 32, 14, 14, 32, 3, pad=1, groups=32),
)

EPILOGUES = {
    "none": "",
    "bias": "%o = nn.add %c, %b : (Y, B) -> Y",
    "bias_relu": "%s = nn.add %c, %b : (Y, B) -> Y\n%o = nn.relu %s : Y",
    "bn_residual_relu": "%m = nn.mul %c, %g : (Y, B) -> Y\n%s = nn.add %m, %b : (Y, B) -> Y\n"
                        "%t = nn.add %s, %r : (Y, Y) -> Y\n%o = nn.relu %t : Y",
    "silu": "%s = nn.add %c, %b : (Y, B) -> Y\n%o = nn.silu %s : Y",
    "gelu": "%o = nn.gelu %c : Y",
    "sigmoid": "%o = nn.sigmoid %c : Y",
    "relu6": "%o = nn.clamp %c {min = 0.0, max = 6.0} : Y",
}
"""What follows `%c = conv(x, w)` (its result `%o`)."""


def model_text(s: Shape, epilogue: str, dt: str) -> str:
    """`%o = epilogue(conv(x, w))` in `nn`."""
    def t(*dims: int) -> str:
        return "tensor<" + "x".join(map(str, dims)) + f"x{dt}>"

    oh, ow = s.out_hw()
    x, w, y, b = t(s.n, s.c, s.h, s.w), t(s.o, s.c // s.groups, s.k, s.k), \
        t(s.n, s.o, oh, ow), t(s.o, 1, 1)
    body = EPILOGUES[epilogue].replace("Y", y).replace("B", b)
    attrs = (f"strides = [{s.stride}, {s.stride}], pads = [{s.pad}, {s.pad}, {s.pad}, {s.pad}], "
             f"dilations = [{s.dilation}, {s.dilation}], groups = {s.groups}")
    return (f"func.func @f(%x: {x}, %w: {w}, %b: {b}, %g: {b}, %r: {y}) -> {y} {{\n"
            f"%c = nn.conv2d %x, %w {{{attrs}}} : ({x}, {w}) -> {y}\n{body}\n"
            f"func.return {'%c' if epilogue == 'none' else '%o'} : {y}\n}}\n")


def check(s: Shape, epilogue: str, dt: str, graphs: bool = False) -> tuple[bool, str]:
    """Compile, run and compare one case: (passed, a line saying how it went)."""
    import fusec

    text = model_text(s, epilogue, dt)
    model = fusec.compile(text, device="gpu", conv="library", graphs=graphs, cache=False)
    launches = model.signature.launches
    convs = [la for la in launches if la.library and la.library["library"].startswith("cudnn")]
    kernels = 0 if epilogue == "none" else 1
    if len(convs) != 1 or len(launches) != 1 + kernels:
        return False, (f"plan: {len(launches)} launches, {len(convs)} cuDNN; expected 1 cuDNN "
                       f"+ {kernels}")
    return compare(model, text, dt, graphs)


def check_cnn(dt: str, graphs: bool = False) -> tuple[bool, str]:
    """A small ResNet (`cnn_program.cnn_text`) with every convolution on
    cuDNN: compiled channels last (the plan calls cuDNN in NHWC, and no
    transpose sits between two convolutions), run, compared."""
    from cnn_program import cnn_text

    import fusec

    text = cnn_text(dt, n=4, hw=64, w=16)
    model = fusec.compile(text, device="gpu", conv="library", graphs=graphs, cache=False)
    launches = model.signature.launches
    convs = [la for la in launches if la.library and la.library["library"].startswith("cudnn")]
    copies = [la for la in launches if la.library is None and la.ops == ["nn.transpose"]]
    if len(convs) != 8 or any(la.library.get("layout") != "nhwc" for la in convs) or (
            len(copies) != 5):
        return False, (f"plan: {len(convs)} cuDNN calls, layouts "
                       f"{sorted({str(la.library.get('layout')) for la in convs})}, "
                       f"{len(copies)} transposes; expected 8 in NHWC and 5 transposes")
    return compare(model, text, dt, graphs)


def main(argv: list[str] | None = None) -> int:
    """Every case (or those `--dtypes`, `--shapes`, `--epilogues` name); a
    FAIL line for each failure, exit status 1 if any."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default=",".join(TYPES))
    p.add_argument("--shapes", default=",".join(s.name for s in SHAPES))
    p.add_argument("--epilogues", default=",".join(EPILOGUES))
    args = p.parse_args(argv)
    dtypes, shapes, epilogues = (set(a.split(",")) for a in (args.dtypes, args.shapes,
                                                             args.epilogues))
    failed = 0
    cases = [(s, e, dt) for dt in TYPES for s in SHAPES for e in EPILOGUES
             if dt in dtypes and s.name in shapes and e in epilogues]
    runs = [(s, e, dt, False) for s, e, dt in cases] + [(SHAPES[1], "bn_residual_relu", "f16",
                                                          True)]
    for s, e, dt, graphs in runs:
        failed += not _report(f"{s.name} {e} {dt}{' graphs' if graphs else ''}",
                              partial(check, s, e, dt, graphs))
    cnns = [(dt, False) for dt in TYPES if dt in dtypes] + [("f16", True)]
    for dt, graphs in cnns:
        failed += not _report(f"cnn channels-last {dt}{' graphs' if graphs else ''}",
                              partial(check_cnn, dt, graphs))
    print(f"{len(runs) + len(cnns) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _report(name: str, run: Callable[[], tuple[bool, str]]) -> bool:
    """Run one case and print its PASS/FAIL line; whether it passed."""
    try:
        ok, line = run()
    except Exception:  # every failure is reported, none stops the run
        ok, line = False, traceback.format_exc(limit=4).strip().splitlines()[-1]
    print(f"{'PASS' if ok else 'FAIL'} {name}: {line}", flush=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
