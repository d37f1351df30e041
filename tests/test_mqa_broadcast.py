"""Multi-query attention written with an explicit `nn.broadcast_to` of K and V
over the heads (`k.expand(B, H, S, D)`): the fused attention reads K and V
through the broadcast (stride 0 over the heads) in place, one kernel on every
engine, where each broadcast used to be a copy kernel of its own."""

from __future__ import annotations

import pytest
from codegen_harness import check_program, tensor

from fusec.analysis.strided_view import StridedView

FUSED = "decompose,fold-constants,fuse-attention{},form-fusion-groups,group-each-op"


def mqa_text(b: int, h: int, s: int, skv: int, d: int, kv_shape: tuple[int, ...] | None = None,
             mask: bool = False) -> str:
    """`@f(q, k, v)`: K and V of `kv_shape` (default [b, 1, skv, d]) broadcast to
    [b, h, skv, d]; scaled, optionally masked, softmax, @ V."""
    kv_shape = kv_shape or (b, 1, skv, d)
    q, kv0, kv = tensor((b, h, s, d)), tensor(kv_shape), tensor((b, h, skv, d))
    kt, sc = tensor((b, h, d, skv)), tensor((b, h, s, skv))
    args = f"%q: {q}, %k: {kv0}, %v: {kv0}" + (f", %m: {tensor((s, skv))}" if mask else "")
    lines = [
        f"func.func @f({args}) -> {q} {{",
        f"  %kb = nn.broadcast_to %k : ({kv0}) -> {kv}",
        f"  %vb = nn.broadcast_to %v : ({kv0}) -> {kv}",
        f"  %kt = nn.transpose %kb {{perm = [0, 1, 3, 2]}} : ({kv}) -> {kt}",
        f"  %s = nn.matmul %q, %kt : ({q}, {kt}) -> {sc}",
        "  %c = nn.constant dense<0.25> : tensor<f32>",
        f"  %x = nn.mul %s, %c : ({sc}, tensor<f32>) -> {sc}",
    ]
    x = "%x"
    if mask:
        lines.append(f"  %xm = nn.add %x, %m : ({sc}, {tensor((s, skv))}) -> {sc}")
        x = "%xm"
    lines += [f"  %p = nn.softmax {x} {{axis = -1}} : {sc}",
              f"  %o = nn.matmul %p, %vb : ({sc}, {kv}) -> {q}",
              f"  func.return %o : {q}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("options", [
    "block_q=16 block_k=16 rows=2 cols=2",  # SIMT
    "block_q=32 block_k=32 engine=mma",
    pytest.param("engine=decode threads=64 cols=2 splits=1", marks=pytest.mark.slow),
], ids=["simt", "mma", "decode"])
def test_mqa_broadcast_is_read_in_place(options: str) -> None:
    decode = "decode" in options
    s, d = (1, 32) if decode else (20, 8)  # 20: ragged query and key tiles
    program = check_program(mqa_text(1, 3, s, 24, d, mask=not decode), 1,
                            FUSED.replace("{}", "{" + options + "}"))
    source = program.kernels_source
    assert "broadcast_to" not in "".join(la.kernel for la in program.functions["f"].launches)
    assert "in0[" in source or "in1[" in source


def test_mqa_broadcast_on_the_default_schedule() -> None:
    # the model's own tile, K and V each a single head shared by 4
    check_program(mqa_text(2, 4, 16, 16, 8), 1, FUSED.replace("{}", ""))


def test_kv_broadcast_over_new_leading_dimensions() -> None:
    # one K/V [S, D] for every batch entry and head
    check_program(mqa_text(2, 3, 12, 12, 8, kv_shape=(12, 8)), 1, FUSED.replace("{}", ""))


def test_broadcast_view_strides() -> None:
    view = StridedView.contiguous((2, 1, 5, 4)).broadcast((3, 2, 6, 5, 4))
    assert view.shape == (3, 2, 6, 5, 4)
    assert view.strides == (0, 20, 0, 4, 1)
    # merging a broadcast dimension with its neighbour is not a strided view
    assert view.reshape((3, 12, 5, 4)) is None
