"""`mma_row_<e>` (codegen/mma.py), the call an mma attention kernel makes
per A fragment: its PTX is the PTX of the same products written out one by
one (`ld_pair`, `mma_b_<e>`, `mma_<e>`), so the kernel keeps its
instructions; and the GPT-2 attention kernel `fusec` writes makes one such
call per A fragment of a key step, not four lines per product (numba took
10 s to build that kernel with its 128 products per step written out, the
products being identical).

The PTX comes from numba + NVVM in one subprocess without the simulator (no
GPU needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_attention import attention_text

from fusec.codegen.ptx import kernel_workdir, run_without_simulator
from fusec.compiler.cli import main
from tests.ptx_driver import ptx_driver

FRAGMENTS = 3  # accumulator fragments in the row
STEP, SMALL = 72, 512  # words between B fragments; to the small parts


def _kernel(name: str, element: str, row: bool) -> str:
    """A one-warp kernel: K staged in shared memory, one A fragment times
    `FRAGMENTS` B fragments, through `mma_row_<e>` or written out."""
    lines = [
        "@cuda.jit",
        f"def {name}(b, c):",
        "    lane = cuda.threadIdx.x",
        "    X = cuda.shared.array((1, 1, 8), float32)",
        "    KV = cuda.shared.array(1024, float32, alignment=16)",
        "    for i in range(lane, 1024, 32):",
        "        KV[i] = b[i]",
        "    cuda.syncthreads()",
        f"    A = mma_a_{element}(c[0], c[1], c[2], c[3])",
        "    at = (lane // 4) * 72 + (lane % 4) * 2",
    ]
    values = [f"c{k}" for k in range(4 * FRAGMENTS)]
    lines += [f"    {v} = c[{4 + k}]" for k, v in enumerate(values)]
    if row:
        lines += [f"    acc = ({', '.join(values)})",
                  f"    acc = mma_row_{element}(X, 0, lane, A, KV, at, {STEP}, {SMALL}, acc)",
                  f"    {', '.join(values)} = acc"]
    else:
        for k in range(FRAGMENTS):
            acc = ", ".join(values[4 * k:4 * k + 4])
            lines.append(f"    b0, b1 = ld_pair(KV, at + {k * STEP})")
            if element == "f32":
                lines += [f"    s0, s1 = ld_pair(KV, at + {k * STEP} + {SMALL})",
                          "    B = mma_b_f32s(b0, b1, s0, s1)"]
            else:
                lines.append(f"    B = mma_b_{element}(b0, b1)")
            lines.append(f"    {acc} = mma_{element}(X, 0, lane, A, B, {acc})")
    lines += [f"    c[{4 + k}] = {v}" for k, v in enumerate(values)]
    return "\n".join(lines) + "\n"


_DRIVER = ptx_driver("(types.float32[::1], types.float32[::1])")


def _instructions(ptx: str) -> list[str]:
    """The entry's instructions, registers renamed in order of appearance
    (the two kernels number their virtual registers differently),
    parameters by their number (their names hold the kernel's) and shared
    arrays without theirs."""
    ptx = re.sub(r"\b_Z\w*_param_(\d+)\b", r"param_\1", ptx)
    ptx = re.sub(r"\b_cudapy_smem_\d+\b", "_cudapy_smem", ptx)  # numbered per module
    body = ptx[ptx.index(".entry"):]
    body = body[body.index("{"):]
    names: dict[str, str] = {}
    lines = [line.strip() for line in body.splitlines()
             if line.strip() and not line.strip().startswith((".reg", "//"))]
    return [re.sub(r"%[a-z]+\d+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"),
                   line) for line in lines]


@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
def test_a_row_call_is_the_products_written_out(element: str) -> None:
    from fusec.codegen.kernel_source import kernel_prelude

    kernels = _kernel("by_row", element, True) + "\n\n" + _kernel("written_out", element, False)
    source = kernel_prelude([kernels]) + "\n\n" + kernels
    with kernel_workdir(source, {"by_row": [], "written_out": []}, "fusec-mma-row-") as work:
        run_without_simulator(_DRIVER, work, "(mma rows)")
        by_row = (work / "by_row.ptx").read_text()
        written_out = (work / "written_out.ptx").read_text()
    passes = 3 if element == "f32" else 1
    assert by_row.count("mma.sync.aligned.m16n8k8") == passes * FRAGMENTS
    assert _instructions(by_row) == _instructions(written_out)


def test_gpt2_attention_kernel_makes_one_call_per_a_fragment(
        tmp_path: Path, no_ptxas_probe: None) -> None:
    """B4, 12 heads, S256, head dim 64, causal mask, f32: the tile is 128
    queries x 64 keys; a key step has 8 Q fragments (head dims / 8) and 8 P
    fragments (keys / 8), each times 8 B fragments: 128 products, 16 calls."""
    model = tmp_path / "gpt2_attention.mlir"
    model.write_text(attention_text((4, 12), 256, 64, mask="tensor<256x256xf32>", scale=0.125))
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out), "--target", "h200"]) == 0
    source = (out / "kernels.py").read_text()
    (kernel,) = re.findall(r"\n# tile: 128 queries x 64 keys per block on tensor cores.*?"
                           r"\ndef \w+\(.*?(?=\n\S|\Z)", source, re.S)
    step = kernel.split("for kt in range(")[1]
    assert step.count("mma_row_f32(") == 8 + 8
    assert not re.search(r"\b(mma_f32|mma_b_f32s|ld_pair)\(", kernel)
