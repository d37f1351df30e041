"""`--autotune` against the cost model's library-or-own choice, on a GPU.

Compiles `relu(conv(x, w) + b)` for a few convolution classes where the
model's choice was off on an H100 (bf16 7x7 stride 2 with 3 input channels,
f32 3x3 with 128 channels at 28x28, f16 1x1 256 to 64 channels at 56x56;
batch 32, the shapes of bench/conv_sweep.py) with `--autotune` and the
tuning cache off, so both alternatives are timed (`compiler/library_tuning.py`),
then runs the tuned program against the NumPy reference. Prints per
convolution group: the model's choice, its estimates, the tuned choice and
both measured times.

    python bench/autotune_library.py [--only NAME,...]   # exit status 1 on a failure

Needs a CUDA GPU, cuDNN (`analysis/cudnn_library.py` says where it is
looked for) and, for the matmul of `--gemm`, CuPy; without them every choice
stays the model's, with the reason in the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from conv_sweep import Conv, model_text  # noqa: E402
from library_check import compare  # noqa: E402

CASES = (
    ("bf16", Conv("7x7_s2_3to64_224", 3, 224, 64, 7, stride=2)),
    ("f32", Conv("3x3_128_28", 128, 28, 128, 3)),
    ("f16", Conv("1x1_256to64_56", 256, 56, 64, 1)),
)
HEAD = ("| conv | dtype | group | model's choice | est. library us | est. own us "
        "| library us | own us | tuned choice | check |")


def run_case(dt: str, conv: Conv) -> tuple[list[str], bool]:
    """The table rows of one convolution, and whether its numbers passed."""
    from fusec.analysis.remarks import collect_remarks
    from fusec.compiler.autotune import AutotuneOptions
    from fusec.compiler.compile import compile_model
    from fusec.runtime.compiled_model import CompiledModel

    text = model_text(conv, dt)
    art = compile_model(text, autotune=AutotuneOptions(cache=False, top_k=1, quiet=True))
    model = CompiledModel(art.program, art.memory, art.plan, device="gpu")
    passed, check = compare(model, text, dt, graphs=False)
    choices = art.tuning.choices if art.tuning is not None else []
    rows = [f"| {conv.name} | {dt} | {c.group} | {c.model} | {c.est_library_us:.1f} | "
            f"{c.est_own_us:.1f} | {c.library_us:.1f} | {c.own_us:.1f} | {c.kept} | {check} |"
            for c in choices]
    if not rows:  # nothing timed: say why (the remark of the choice)
        why = [r for r in collect_remarks(art.module) if "autotuning" in r] or ["no choice"]
        rows = [f"| {conv.name} | {dt} | - | - | - | - | - | - | {why[0]} | {check} |"]
    return rows, passed


def main(argv: list[str] | None = None) -> int:
    """Print the table; 1 when a tuned program's numbers were off."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated conv names")
    args = parser.parse_args(argv)
    from fusec.runtime.device import gpu_available

    if not gpu_available():
        print("error: bench/autotune_library.py needs a CUDA GPU", file=sys.stderr)
        return 1
    only = set(filter(None, args.only.split(",")))
    print(HEAD)
    print("|" + "---|" * (HEAD.count("|") - 1))
    ok = True
    for dt, conv in CASES:
        if only and conv.name not in only:
            continue
        rows, passed = run_case(dt, conv)
        ok = ok and passed
        print("\n".join(rows), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
