"""The fused attention kernel's fragment loads in the PTX: every Q, K, P and
V fragment of two or more words is read with vector shared loads
(`ld.shared.v2/v4.f32`), never one word at a time, for static and dynamic
shared tiles, one and two stages, head dims 64 and 128 (`codegen/attention.py`
`_unrolled` writes the fragment offsets so that NVVM can prove their
alignment). Compiled to PTX by numba + NVRTC in one subprocess (no GPU)."""

from __future__ import annotations

import re

import pytest
from codegen_harness import compile_text
from test_attention import PIPELINE, attention_text

from fusec.analysis.targets import H200
from fusec.codegen.ptx import kernel_workdir, program_signatures, run_without_simulator
from fusec.scheduling.attention import legal_tiles
from fusec.scheduling.attention_schedule import (
    AttentionShape,
    AttentionTile,
    shared_bytes,
)

# (head dim, tile): static and dynamic, one and two stages, 2-, 4- and 8-word
# fragments. With loop-carried fragment offsets the block_k = 64 and the
# two-stage tiles had 8 to 48 scalar loads each.
TILES = [
    (64, AttentionTile(64, 32, 4, 2, 1)),  # static
    (64, AttentionTile(64, 16, 2, 2, 2)),  # static, two stages
    (64, AttentionTile(128, 64, 4, 4, 1)),  # dynamic (the model's choice)
    (64, AttentionTile(128, 32, 2, 4, 2)),  # dynamic, two stages
    (128, AttentionTile(64, 16, 4, 2, 1)),  # dynamic
]
_DRIVER = r"""
import importlib.util, json, sys
from numba import cuda, types
work = sys.argv[1]
spec = importlib.util.spec_from_file_location("kernels", work + "/kernels.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for name, args in json.load(open(work + "/signatures.json")).items():
    sig = tuple(types.Array(getattr(types, t), ndim, "C") for ndim, t in args)
    ptx, _ = cuda.compile_ptx(getattr(module, name).py_func, sig, cc=tuple(TARGET_CC))
    open(f"{work}/{name}.ptx", "w").write(ptx)
"""


def _spec(t: AttentionTile) -> str:
    return (f"block_q={t.block_q} block_k={t.block_k} rows={t.rows} cols={t.cols} "
            f"stages={t.stages}")


def _ptx() -> dict[tuple[int, AttentionTile], str]:
    """The PTX of each tile's kernel (S = 40, two heads: the fragment loops
    do not depend on the sequence length)."""
    sources: list[str] = []
    signatures: dict[str, object] = {}
    for n, (d, tile) in enumerate(TILES):
        fixed = PIPELINE.replace("fuse-attention", f"fuse-attention{{{_spec(tile)}}}")
        program = compile_text(attention_text((1, 2), 40, d), fixed)
        ((name, sig),) = program_signatures(program).items()
        sources.append(program.kernels_source.replace(name, f"k{n}"))
        signatures[f"k{n}"] = sig
    driver = _DRIVER.replace("tuple(TARGET_CC)", repr(H200.compute_capability))
    with kernel_workdir("\n".join(sources), signatures, "fusec-attn-ptx-") as work:
        run_without_simulator(driver, work, "(attention fragment loads)")
        return {key: (work / f"k{n}.ptx").read_text(encoding="utf-8")
                for n, key in enumerate(TILES)}


def test_the_tiles_are_valid_and_of_each_kind() -> None:
    assert all(tile.problem(H200) is None for _, tile in TILES)
    shape = AttentionShape(96, 512, 512, 64, 64)
    assert AttentionTile(128, 64, 4, 4, 1) in legal_tiles(shape, H200)
    dynamic = {shared_bytes(t, d, d) > H200.static_shared_limit for d, t in TILES}
    assert dynamic == {True, False}
    assert {t.stages for _, t in TILES} == {1, 2}


@pytest.mark.slow
def test_every_fragment_load_is_a_vector_load() -> None:
    for (d, tile), ptx in _ptx().items():
        where = f"D={d} {_spec(tile)}"
        assert not re.findall(r"ld\.shared\.f32", ptx), f"{where}: scalar shared loads"
        vectors = re.findall(r"ld\.shared\.v([24])\.f32", ptx)
        assert vectors, where
        # 2-word fragments (rows or cols 2) are v2 loads, longer ones v4
        assert ("2" in vectors) == (2 in (tile.rows, tile.cols, tile.dims(d))), where
