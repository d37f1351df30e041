"""A GPT-2-shaped `nn` program of N layers (default 12, B4 S256 D768, 12 heads,
random weights passed as arguments): the large program the front end's
compile time is measured on (docs/running.md, "Compile time").

    python -m fusec.bench.gpt2_program > gpt2_12.mlir            # 12 layers
    python -m fusec.bench.gpt2_program --layers 2 --batch 1 --seq 16 --dim 64 --heads 2

Each layer is bench/models/gpt2_block.mlir's block (pre-norm attention with a
causal mask, then the GELU MLP), its weights named per layer.
"""

from __future__ import annotations

import argparse
import sys


def generate(layers: int = 12, batch: int = 4, seq: int = 256, dim: int = 768,
             heads: int = 12) -> str:
    """The program's text: `@gpt2(%x, %causal_mask, weights of each layer)`."""
    if dim % heads:
        raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
    b, s, d, h, hd, f = batch, seq, dim, heads, dim // heads, 4 * dim

    def t(*shape: int) -> str:
        return f"tensor<{'x'.join(str(n) for n in shape)}xf32>"

    act, scores, split, mask = t(b, s, d), t(b, h, s, s), t(b, h, s, hd), t(s, s)
    args = [f"%x: {act}", f"%causal_mask: {mask}"]
    body: list[str] = []
    x = "%x"
    for i in range(layers):
        w = {"ln1_g": t(d), "ln1_b": t(d), "w_qkv": t(d, 3 * d), "b_qkv": t(3 * d),
             "w_out": t(d, d), "b_out": t(d), "ln2_g": t(d), "ln2_b": t(d),
             "w_fc": t(d, f), "b_fc": t(f), "w_proj": t(f, d), "b_proj": t(d)}
        args += [f"%{name}{i}: {ty}" for name, ty in w.items()]
        v = f"%l{i}_"

        def op(n: int, text: str, _v: str = v) -> None:
            body.append(f"  {_v}{n} = {text}")

        op(0, f"nn.layer_norm {x}, %ln1_g{i}, %ln1_b{i} {{axis = -1, epsilon = 1.0e-05}} : "
              f"({act}, {t(d)}, {t(d)}) -> {act}")
        op(1, f"nn.matmul {v}0, %w_qkv{i} : ({act}, {t(d, 3 * d)}) -> {t(b, s, 3 * d)}")
        op(2, f"nn.add {v}1, %b_qkv{i} : ({t(b, s, 3 * d)}, {t(3 * d)}) -> {t(b, s, 3 * d)}")
        for k, n in enumerate((3, 6, 9)):
            op(n, f"nn.slice {v}2 {{starts = [0, 0, {k * d}], limits = [{b}, {s}, {(k + 1) * d}]}}"
                  f" : ({t(b, s, 3 * d)}) -> {act}")
            op(n + 1, f"nn.reshape {v}{n} : ({act}) -> {t(b, s, h, hd)}")
            op(n + 2, f"nn.transpose {v}{n + 1} {{perm = [0, 2, 1, 3]}} : ({t(b, s, h, hd)}) -> "
                      f"{split}")
        op(12, f"nn.transpose {v}8 {{perm = [0, 1, 3, 2]}} : ({split}) -> {t(b, h, hd, s)}")
        op(13, f"nn.matmul {v}5, {v}12 : ({split}, {t(b, h, hd, s)}) -> {scores}")
        op(14, f"nn.constant dense<{hd ** -0.5!r}> : tensor<f32>")
        op(15, f"nn.mul {v}13, {v}14 : ({scores}, tensor<f32>) -> {scores}")
        op(16, f"nn.add {v}15, %causal_mask : ({scores}, {mask}) -> {scores}")
        op(17, f"nn.softmax {v}16 {{axis = -1}} : {scores}")
        op(18, f"nn.matmul {v}17, {v}11 : ({scores}, {split}) -> {split}")
        op(19, f"nn.transpose {v}18 {{perm = [0, 2, 1, 3]}} : ({split}) -> {t(b, s, h, hd)}")
        op(20, f"nn.reshape {v}19 : ({t(b, s, h, hd)}) -> {act}")
        op(21, f"nn.matmul {v}20, %w_out{i} : ({act}, {t(d, d)}) -> {act}")
        op(22, f"nn.add {v}21, %b_out{i} : ({act}, {t(d)}) -> {act}")
        op(23, f"nn.add {v}22, {x} : ({act}, {act}) -> {act}")
        op(24, f"nn.layer_norm {v}23, %ln2_g{i}, %ln2_b{i} {{axis = -1, epsilon = 1.0e-05}} : "
               f"({act}, {t(d)}, {t(d)}) -> {act}")
        op(25, f"nn.matmul {v}24, %w_fc{i} : ({act}, {t(d, f)}) -> {t(b, s, f)}")
        op(26, f"nn.add {v}25, %b_fc{i} : ({t(b, s, f)}, {t(f)}) -> {t(b, s, f)}")
        op(27, f"nn.gelu {v}26 {{approximate = \"tanh\"}} : {t(b, s, f)}")
        op(28, f"nn.matmul {v}27, %w_proj{i} : ({t(b, s, f)}, {t(f, d)}) -> {act}")
        op(29, f"nn.add {v}28, %b_proj{i} : ({act}, {t(d)}) -> {act}")
        op(30, f"nn.add {v}29, {v}23 : ({act}, {act}) -> {act}")
        x = f"{v}30"
    head = f"func.func @gpt2({', '.join(args)}) -> {act} {{"
    return "\n".join([head, *body, f"  func.return {x} : {act}", "}", ""])


def main(argv: list[str] | None = None) -> int:
    """Print the program (or write it to `-o FILE`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    a = ap.parse_args(argv)
    try:
        text = generate(a.layers, a.batch, a.seq, a.dim, a.heads)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
