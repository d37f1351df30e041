"""Convolutions with a bias + relu epilogue: fusec's library path (cuDNN),
fusec's own kernel, fusec's choice, cuDNN through PyTorch and inductor, side
by side in one run (GPU).

    python bench/conv_sweep.py [--dtypes f32,f16,bf16] [--only NAME,...]
        [--iters 20] [--repeat 5] [--out bench/results]

Shapes are ResNet/ResNeXt/MobileNet-class layers at batch 32 (1x1, 3x3,
3x3 stride 2, 5x5, 7x7 stride 2 with 3 input channels, grouped,
depthwise). Every column computes `relu(conv(x, w) + b)` in NCHW: fusec
library (`conv="library"`: cuDNN + fusec's epilogue kernel), fusec own
(`conv="fused"`: one window kernel), fusec chosen (`conv="auto"`: the cost
model's pick, named in the table), fusec NHWC (the program written
channels last, `layout = "nhwc"`: cuDNN's NHWC call and the epilogue, on
NHWC tensors), PyTorch eager (cuDNN, NCHW; and channels-last), and
`torch.compile` of the same function. f32 runs with
TF32 off everywhere (`torch.backends.cudnn.allow_tf32 = False`), so every
column computes full f32 products. Output is checked against PyTorch eager
before timing. Times are the median ms per call of CUDA-event loops on
PyTorch's stream; the table goes to stdout and
`OUT/DATE-DEVICE-conv-sweep-COMMIT.md`, with the achieved TFLOP/s of the
library convolution.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
TYPES = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class Conv:
    """One layer: NCHW input, O output channels, a k x k window."""

    name: str
    c: int
    hw: int
    o: int
    k: int
    stride: int = 1
    groups: int = 1
    n: int = 32

    @property
    def pad(self) -> int:
        return self.k // 2

    @property
    def out_hw(self) -> int:
        return (self.hw + 2 * self.pad - self.k) // self.stride + 1

    @property
    def flops(self) -> float:
        return 2.0 * self.n * self.o * self.out_hw ** 2 * (self.c // self.groups) * self.k ** 2


SWEEP = (
    Conv("1x1_256to64_56", 256, 56, 64, 1),
    Conv("1x1_64to256_56", 64, 56, 256, 1),
    Conv("3x3_64_56", 64, 56, 64, 3),
    Conv("3x3_128_28", 128, 28, 128, 3),
    Conv("3x3_256_14_s2", 256, 28, 256, 3, stride=2),
    Conv("5x5_32to64_28", 32, 28, 64, 5),
    Conv("7x7_s2_3to64_224", 3, 224, 64, 7, stride=2),
    Conv("3x3_g32_256_28", 256, 28, 256, 3, groups=32),
    Conv("3x3_dw_256_28", 256, 28, 256, 3, groups=256),
)


def model_text(c: Conv, dt: str, nhwc: bool = False) -> str:
    """`relu(conv(x, w) + b)` in `nn`, NCHW (or written channels last:
    NHWC `x`, OHWI `w`, a `[C]` bias)."""
    def t(*dims: int) -> str:
        return "tensor<" + "x".join(map(str, dims)) + f"x{dt}>"

    x, w = t(c.n, c.c, c.hw, c.hw), t(c.o, c.c // c.groups, c.k, c.k)
    y, b = t(c.n, c.o, c.out_hw, c.out_hw), t(c.o, 1, 1)
    layout = ""
    if nhwc:
        x, w = t(c.n, c.hw, c.hw, c.c), t(c.o, c.k, c.k, c.c // c.groups)
        y, b, layout = t(c.n, c.out_hw, c.out_hw, c.o), t(c.o), ', layout = "nhwc"'
    p = c.pad
    return (f"func.func @f(%x: {x}, %w: {w}, %b: {b}) -> {y} {{\n"
            f"%c = nn.conv2d %x, %w {{strides = [{c.stride}, {c.stride}], pads = [{p}, {p}, {p}, "
            f"{p}], dilations = [1, 1], groups = {c.groups}{layout}}} : ({x}, {w}) -> {y}\n"
            f"%s = nn.add %c, %b : ({y}, {b}) -> {y}\n%o = nn.relu %s : {y}\n"
            f"func.return %o : {y}\n}}\n")


def measure(c: Conv, dt: str, torch: Any, fusec: Any, args: argparse.Namespace) -> list[str]:
    """One table row (cells), every column timed in this process."""
    from run_gpu import _events  # pyright: ignore[reportPrivateUsage]

    from fusec.dialects.element_types import element

    dtype = getattr(torch, element(dt).torch_name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(c.n, c.c, c.hw, c.hw, device="cuda", generator=gen).to(dtype)
    fan_in = (c.c // c.groups) * c.k * c.k
    w = (torch.randn(c.o, c.c // c.groups, c.k, c.k, device="cuda", generator=gen)
         / fan_in ** 0.5).to(dtype)
    b = torch.randn(c.o, 1, 1, device="cuda", generator=gen).to(dtype)

    def eager(x: Any, w: Any, b: Any) -> Any:
        return torch.relu(torch.nn.functional.conv2d(x, w, None, c.stride, c.pad, 1, c.groups)
                          + b)

    want = eager(x, w, b)
    tol = element(dt).tolerance
    times: dict[str, float] = {}
    notes: list[str] = []
    text = model_text(c, dt)
    for label, mode in (("library", "library"), ("own", "fused"), ("chosen", "auto")):
        model = fusec.compile(text, device="gpu", conv=mode, cache=False)
        got = model(x, w, b)
        err = float((got.float() - want.float()).abs().max()) / max(
            1.0, float(want.float().abs().max()))
        if err > tol:
            notes.append(f"{label} err {err:.2g}")
        times[label] = _events(torch, lambda m=model: m(x, w, b), args.iters, args.repeat)
        if label == "chosen":
            lib = any(la.library for la in model.signature.launches)
            notes.append(f"chose {'library' if lib else 'own'}")
    # the program written channels last: cuDNN's NHWC call and the epilogue
    model = fusec.compile(model_text(c, dt, nhwc=True), device="gpu", conv="library",
                          cache=False)
    xn, wn = (v.permute(0, 2, 3, 1).contiguous() for v in (x, w))
    bn = b.reshape(c.o).contiguous()
    got = model(xn, wn, bn).permute(0, 3, 1, 2)
    err = float((got.float() - want.float()).abs().max()) / max(
        1.0, float(want.float().abs().max()))
    if err > tol:
        notes.append(f"NHWC err {err:.2g}")
    times["NHWC"] = _events(torch, lambda: model(xn, wn, bn), args.iters, args.repeat)
    times["eager"] = _events(torch, lambda: eager(x, w, b), args.iters, args.repeat)
    xl = x.contiguous(memory_format=torch.channels_last)
    wl = w.contiguous(memory_format=torch.channels_last)
    times["eager NHWC"] = _events(torch, lambda: eager(xl, wl, b), args.iters, args.repeat)
    torch._dynamo.reset()
    compiled = torch.compile(eager)
    times["inductor"] = _events(torch, lambda: compiled(x, w, b), args.iters, args.repeat)
    best_own = min(times["library"], times["own"])
    cells = [c.name, dt, *(f"{times[k]:.3f}" for k in
                           ("library", "own", "chosen", "NHWC", "eager", "eager NHWC",
                            "inductor")),
             f"{c.flops / (times['library'] * 1e-3) / 1e12:.1f}",
             f"{best_own / times['chosen']:.2f}x", f"{times['eager'] / times['library']:.2f}x",
             f"{times['inductor'] / times['chosen']:.2f}x", "; ".join(notes) or "ok"]
    return cells


HEAD = ("| conv | dtype | fusec library ms | fusec own ms | fusec chosen ms | fusec NHWC ms | "
        "eager ms | eager NHWC ms | inductor ms | library TFLOP/s | chosen vs best of two | "
        "library vs eager | inductor / chosen | notes |")


def main(argv: list[str] | None = None) -> int:
    """Time the sweep; write the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default=",".join(TYPES))
    p.add_argument("--only", default="", help="comma-separated conv names")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    dtypes = [d for d in args.dtypes.split(",") if d]
    if bad := [d for d in dtypes if d not in TYPES]:
        p.error(f"--dtypes: unknown {bad[0]} (known: {', '.join(TYPES)})")
    only = {n for n in args.only.split(",") if n}
    convs = [c for c in SWEEP if not only or c.name in only]
    import torch

    import fusec
    from fusec.bench.commit_id import commit

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.cuda.get_device_name()
    today = datetime.date.today().isoformat()
    lines = [f"# Convolution sweep: {device}, {today}, commit {commit()}", "",
             "relu(conv(x, w) + b), NCHW (fusec NHWC: written channels last), batch 32, "
             "TF32 off; median ms per call.", "",
             HEAD, "|" + "---|" * (HEAD.count("|") - 1)]
    for dt in dtypes:
        for c in convs:
            try:
                cells = measure(c, dt, torch, fusec, args)
            except Exception as err:  # one failing layer must not lose the others
                cells = [c.name, dt, *["-"] * 11, f"FAILED: {type(err).__name__}: {err}"]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{today}-{device.replace(' ', '_')}-conv-sweep-{commit()}.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
