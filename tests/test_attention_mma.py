"""The tensor-core attention engine (`engine = "mma"`, codegen/attention_mma.py)
and its warp products (codegen/mma.py): the fragment layout in the
simulator and on a GPU, the fused kernel against the reference interpreter
(masks, causal, ragged tiles, cross attention, multi-head views, f16, bf16,
one and two stages, dynamic shared memory), and its PTX."""

from __future__ import annotations

import collections
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from codegen_harness import check_program, compile_text, tensor
from test_attention import GPT2_HEADS, MODELS, attention_text

from fusec.analysis.targets import H200
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.scheduling.attention_schedule import AttentionTile

TAIL = "form-fusion-groups,group-each-op"


def _pipeline(block_q: int = 32, block_k: int = 16, stages: int = 1) -> str:
    return (f"decompose,fold-constants,fuse-attention{{block_q={block_q} block_k={block_k} "
            f"stages={stages} engine=mma}},{TAIL}")


HALF_TOLERANCE = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 4e-2}  # bf16 comes back widened


def test_masked_ragged_one_kernel_on_the_mma_engine() -> None:
    # S = 20: the last query and key tiles are partial; 2 x 2 heads
    program = check_program(attention_text((2, 2), 20, 8, mask=tensor((20, 20))), 1,
                            _pipeline())
    assert "mma_row_f32(" in program.kernels_source


def test_two_stages_and_more_keys_than_queries() -> None:
    check_program(attention_text((1, 2), 9, 16, mask=tensor((1, 1, 9, 37)), skv=37), 1,
                  _pipeline(32, 16, 2))


def test_causal_select_hand_written_softmax() -> None:
    text = attention_text((2,), 18, 8, softmax="hand")
    check_program(text, 1, _pipeline(32, 32))


def test_multi_head_views_of_a_packed_projection() -> None:
    program = check_program(GPT2_HEADS, 2, _pipeline())
    assert "mma_row_f32(" in program.kernels_source


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_operands_on_tensor_cores(dtype: str) -> None:
    text = attention_text((1, 2), 19, 16, mask=tensor((19, 19))).replace("f32>", f"{dtype}>")
    program = check_program(text, 1, _pipeline(), tolerance=HALF_TOLERANCE)
    assert f"mma_row_{dtype}(" in program.kernels_source


@pytest.mark.slow
def test_dynamic_shared_memory_tile() -> None:
    # head dim 128, 64 queries x 32 keys: Q 34 KiB, K 17 KiB, Vᵀ 20 KiB, past 48 KiB
    program = check_program(attention_text((1,), 20, 128), 1, _pipeline(64, 32))
    (launch,) = program.functions["f"].launches
    assert launch.shared_bytes > 48 * 1024


VALUE_DIMS_DIFFER = """\
func.func @f(%q: tensor<2x13x16xf32>, %k: tensor<2x21x16xf32>, %v: tensor<2x21x8xf32>)
    -> tensor<2x13x8xf32> {
  %kt = nn.transpose %k {perm = [0, 2, 1]} : (tensor<2x21x16xf32>) -> tensor<2x16x21xf32>
  %s = nn.matmul %q, %kt : (tensor<2x13x16xf32>, tensor<2x16x21xf32>) -> tensor<2x13x21xf32>
  %c = nn.constant dense<0.25> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<2x13x21xf32>, tensor<f32>) -> tensor<2x13x21xf32>
  %p = nn.softmax %x {axis = -1} : tensor<2x13x21xf32>
  %o = nn.matmul %p, %v : (tensor<2x13x21xf32>, tensor<2x21x8xf32>) -> tensor<2x13x8xf32>
  func.return %o : tensor<2x13x8xf32>
}
"""


def test_value_head_dim_differs_from_the_key_head_dim() -> None:
    # Dv = 8 < D = 16; 13 queries and 21 keys: both tiles partial
    program = check_program(VALUE_DIMS_DIFFER, 1, _pipeline(32, 16))
    assert "mma_row_f32(" in program.kernels_source


HEAD_BIAS = """\
func.func @f(%q: tensor<1x2x40x8xf32>, %k: tensor<1x2x40x8xf32>, %v: tensor<1x2x40x8xf32>,
             %hb: tensor<2x1x1xf32>) -> tensor<1x2x40x8xf32> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<1x2x40x8xf32>) -> tensor<1x2x8x40xf32>
  %s = nn.matmul %q, %kt : (tensor<1x2x40x8xf32>, tensor<1x2x8x40xf32>) -> tensor<1x2x40x40xf32>
  %x = nn.add %s, %hb : (tensor<1x2x40x40xf32>, tensor<2x1x1xf32>) -> tensor<1x2x40x40xf32>
  %p = nn.softmax %x {axis = -1} : tensor<1x2x40x40xf32>
  %o = nn.matmul %p, %v : (tensor<1x2x40x40xf32>, tensor<1x2x40x8xf32>) -> tensor<1x2x40x8xf32>
  func.return %o : tensor<1x2x40x8xf32>
}
"""
"""A per-head bias (ALiBi slopes, a T5 bias) is read at the block's head
coordinate in every key step."""


@pytest.mark.parametrize("tile", ["block_q=32 block_k=16 engine=mma",
                                  "block_q=32 block_k=16 rows=4 cols=2"])
def test_per_head_bias_over_several_key_steps(tile: str) -> None:
    # the head coordinate `b1` was reused for a row's maximum guard, which made
    # it a float from the second key step on (an IndexError in the simulator,
    # a typing error on the GPU)
    pipeline = f"decompose,fold-constants,fuse-attention{{{tile}}},{TAIL}"
    check_program(HEAD_BIAS, 1, pipeline)


SPARE_STAGING_THREADS = """\
func.func @f(%q: tensor<2x2x21x16xf32>, %k: tensor<2x2x64x16xf32>, %v: tensor<2x2x64x8xf32>,
             %m: tensor<1x64xf32>) -> tensor<2x2x21x8xf32> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<2x2x64x16xf32>) -> tensor<2x2x16x64xf32>
  %s = nn.matmul %q, %kt : (tensor<2x2x21x16xf32>, tensor<2x2x16x64xf32>) -> tensor<2x2x21x64xf32>
  %c = nn.constant dense<0.35> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<2x2x21x64xf32>, tensor<f32>) -> tensor<2x2x21x64xf32>
  %y = nn.add %x, %m : (tensor<2x2x21x64xf32>, tensor<1x64xf32>) -> tensor<2x2x21x64xf32>
  %p = nn.softmax %y {axis = -1} : tensor<2x2x21x64xf32>
  %o = nn.matmul %p, %v : (tensor<2x2x21x64xf32>, tensor<2x2x64x8xf32>) -> tensor<2x2x21x8xf32>
  func.return %o : tensor<2x2x21x8xf32>
}
"""


@pytest.mark.slow
def test_spare_staging_threads_read_nothing() -> None:
    # 32 keys x 8 value dims are 64 vectors for 128 threads: the spare ones
    # loaded rows past the last K/V tile (past the end of V in the last head)
    check_program(SPARE_STAGING_THREADS, 1, _pipeline(64, 32))


def test_head_dims_not_a_multiple_of_8_are_refused_with_an_error() -> None:
    from fusec.analysis.diagnostics import FusecError

    with pytest.raises(FusecError, match="multiples of 8"):
        compile_text(attention_text((1,), 12, 4), _pipeline())


def test_schedule_attribute_round_trips_with_its_engine() -> None:
    tile = AttentionTile.mma(64, 32, 2)
    assert tile.problem(H200) is None and tile.threads == 128
    text = str(tile.attr())
    assert 'engine = "mma"' in text and AttentionTile.of(tile.attr()) == tile
    assert 'engine' not in str(AttentionTile(64, 32, 4, 2).attr())  # the default is left out


FRAGMENT_KERNEL = """
@cuda.jit
def fragment_kernel(a, b, c):
    lane = cuda.threadIdx.x
    x = cuda.shared.array((1, 32, 8), float32)
    g = lane // 4
    t2 = (lane % 4) * 2
    fra = FA(a[g, t2], a[g, t2 + 1], a[g + 8, t2], a[g + 8, t2 + 1])
    frb = FB(b[t2, g], b[t2 + 1, g])
    c0, c1, c2, c3 = MMA(x, 0, lane, fra, frb, c[g, t2], c[g, t2 + 1], c[g + 8, t2],
                         c[g + 8, t2 + 1])
    c[g, t2], c[g, t2 + 1], c[g + 8, t2], c[g + 8, t2 + 1] = c0, c1, c2, c3
    c[16 + g, t2] = xor_lanes(x, 0, lane, float32(lane), 1)
"""
"""A one-warp kernel multiplying a 16x8 A by an 8x8 B through the prelude's
helpers `FA`, `FB` and `MMA`, plus a lane exchange (written in the prelude's
namespace, as kernels.py is)."""


def _fragment_kernel(helpers: tuple[str, str, str]):  # type: ignore[no-untyped-def]
    from fusec.codegen.kernel_source import KERNEL_PRELUDE
    from fusec.codegen.mma import MMA_PRELUDE

    text = FRAGMENT_KERNEL
    for name, helper in zip(("FA", "FB", "MMA"), helpers, strict=True):
        text = text.replace(name, helper)
    space: dict[str, object] = {}
    exec(compile(KERNEL_PRELUDE + MMA_PRELUDE + text, "fragment_kernel", "exec"), space)
    return space["fragment_kernel"], space["cuda"]


def _check_fragments(element: str, device: str) -> None:
    from fusec.codegen.mma import mma_helpers

    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = np.zeros((24, 8), np.float32)
    c[:16] = rng.standard_normal((16, 8))
    if element != "f32":  # values the half type holds exactly
        dtype = np.float16 if element == "f16" else np.float32
        a, b = (x.astype(dtype).astype(np.float32) for x in (a, b))
        if element == "bf16":
            a, b = ((x.view(np.uint32) & 0xFFFF0000).view(np.float32) for x in (a, b))
    want = a.astype(np.float64) @ b + c[:16]
    kernel, cuda = _fragment_kernel(mma_helpers(element))
    if device == "gpu":
        dc = cuda.to_device(c)
        kernel[1, 32](cuda.to_device(a), cuda.to_device(b), dc)
        c = dc.copy_to_host()
    else:
        kernel[1, 32](a, b, c)
    np.testing.assert_allclose(c[:16], want, rtol=1e-5, atol=1e-5)
    assert list(c[16, 0:8:2]) == [1, 0, 3, 2]  # lane 4g + t reads lane (4g + t) ^ 1


@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
def test_fragment_layout_in_the_simulator(element: str) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("the simulator check runs where numba simulates the GPU")
    _check_fragments(element, "sim")


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:.*Grid size 1")  # one warp is the point
@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
def test_fragment_layout_on_the_gpu(element: str) -> None:
    _check_fragments(element, "gpu")


def _forced(text: str, tile: str) -> str:
    ctx = make_context()
    module = parse_module(ctx, text, "attention.mlir")
    spec = f"decompose,fold-constants,fuse-attention{{{tile}}}"
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return str(module)


def _full_size_ptx(tile: str) -> tuple[Any, Any, dict[str, Any]]:
    """attention.mlir compiled with the mma `tile`: the program, its launch
    and `compile_program_ptx`'s counts and PTX of the kernel."""
    from fusec.codegen.ptx import compile_program_ptx

    text = _forced((MODELS / "attention.mlir").read_text(), tile)
    program = compile_text(text, f"{TAIL},register-budget,tile-and-promote")
    (launch,) = program.functions["attention"].launches
    return program, launch, compile_program_ptx(program)[launch.kernel]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.slow
def test_full_size_ptx_splits_staged_operands_once_per_block() -> None:
    program, launch, info = _full_size_ptx("block_q=64 block_k=32 stages=1 engine=mma")
    ptx = info["ptx"]
    assert info["spill_bytes"] == 0
    assert abs(info["registers"] - launch.est_registers) <= 0.25 * info["registers"]
    # per key step of 32 keys: QK 8 x 4 products, PV 4 x 8, three TF32 each
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 3 * 64
    # Q, K and V are split where they are staged, once per block: the
    # products' fragments of them take no conversion; only P's values are
    # split in the warps (4 x 4 per step). Splitting every fragment in each
    # warp took 2 * (32 + 64 + 16 + 64) conversions per step (Q 8 x 4 values,
    # K 32 x 2, P, V 32 x 2; x2: big and small)
    source = program.kernels_source.split(f"def {launch.kernel}(")[1]
    # (the B fragments of split K and V are made in `mma_row_f32`: a row per
    # A fragment, 8 of Q and 4 of P)
    assert source.count("mma_a_f32(") == 4 and "mma_b_f32(" not in source
    assert source.count("mma_row_f32(") == 8 + 4 and source.count("mma_a_f32s(") == 8
    assert ptx.count("cvt.rna.tf32.f32") < (32 + 64 + 16 + 64)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.slow
def test_full_size_ptx_loads_q_fragments_whole_and_stages_k_as_vectors() -> None:
    # Q is kept in fragment order: an A fragment (and its small parts) is
    # one 16-byte load per 8 head dims, already in register order (row-major
    # Q took two 8-byte loads per part and ptxas moved every fragment into
    # place before each product); K's staged rows go as 16-byte stores.
    program, launch, info = _full_size_ptx("block_q=128 block_k=32 stages=1 engine=mma")
    ptx = info["ptx"]
    assert ptx.count("ld.shared.v4.") == 2 * 64 // 8  # big and small parts, 8 dims each
    assert ptx.count("st.shared.v4.") >= 2  # K's big and small parts
    # the additive mask's loads come before the step's products
    source = program.kernels_source.split(f"def {launch.kernel}(")[1]
    step = source.split("for kt in range(")[1]
    assert -1 < step.index("in2[") < step.index("mma_row_f32(")
    assert "in2[numba.uint64(" in step  # indexed unsigned


def test_early_score_lines_are_those_needing_no_raw_score() -> None:
    from fusec.codegen.attention_mma import _early_scores

    lines = ["kc0_0 = k0 + t2", "a2_0_0 = in2[kc0_0]", "v3 = (s0_0 * 0.125)",
             "w = a2_0_0 * 2.0", "x0_0 = float32(v3 + w)"]
    early, late = _early_scores(lines)
    assert early == ["kc0_0 = k0 + t2", "a2_0_0 = in2[kc0_0]", "w = a2_0_0 * 2.0"]
    assert late == ["v3 = (s0_0 * 0.125)", "x0_0 = float32(v3 + w)"]
    # anything but plain assignments stays where it was
    guarded = ["a = in2[k0]", "if a > 0:", "    b = s0_0"]
    assert _early_scores(guarded) == ([], guarded)


def test_q_slots_once_per_vector_and_step_names_assigned_once() -> None:
    """Q's staged vector lands at fixed distances from its first slot: one
    slot expression per vector (numba types each), not one per element and
    part; the numbers are checked by the simulator tests above."""
    from fusec.codegen.attention_mma import _slot_steps

    program = compile_text(GPT2_HEADS, _pipeline())
    stage = program.kernels_source.split("# Q, once")[1].split("for kt in range(")[0]
    assert stage.count("qd_q = ") == 1 and stage.count("Qt[qd_q") == 8  # 4 elements x 2 parts
    # every name of the kernel is assigned in one place, but for the running
    # max, sum and accumulators the key loop carries and the shared arrays
    # the simulator declares apart
    at = program.kernels_source.index("# Q, once")
    start = program.kernels_source.rindex("\ndef ", 0, at)
    ends = [program.kernels_source.find(m, at) for m in ("\n@", "\ndef ")]
    kernel = program.kernels_source[start:min([e for e in ends if e > 0] or [None])]
    targets = collections.Counter(
        t.strip() for line in kernel.splitlines()
        for head in [re.match(r"\s*for (\w+) in |\s*([\w, ]+?) = ", line)] if head
        for t in (head.group(1) or head.group(2)).split(","))
    assert {t for t, n in targets.items() if n > 1} <= {
        "SM", "Qt", "KV", "X", "l0", "l1", "m0", "m1", "oacc"}
    # the step's scores, their sums and probabilities are each assigned once
    # (numba's SSA reconstruction takes a pass over the kernel per name
    # assigned twice)
    step = program.kernels_source.split("for kt in range(")[1]
    targets = [t.strip() for line in step.splitlines() if " = " in line
               for t in line.split(" = ")[0].split(",")]
    names = [t for t in targets if re.fullmatch(r"(s|p)\d+_\d|sacc\d*", t)]
    assert names and len(names) == len(set(names))
    # a distance that changes with the row is no distance
    assert _slot_steps("r * numba.uint64(4) + c", ["r * numba.uint64(4) + c",
                                                   "r * r + c"], 8, 8) is None
    assert _slot_steps("r * numba.uint64(4) + c", ["r * numba.uint64(4) + c",
                                                   "r * numba.uint64(4) + c + 3"], 8, 8) == [0, 3]

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_full_size_attention_on_tensor_cores(dtype: str) -> None:
    import sys

    import fusec
    from fusec.compiler.run_command import compare
    from fusec.reference.interpreter import find_function, random_inputs, run_function

    sys.path.insert(0, str(MODELS.parent))
    from half_precision import retype

    text = retype((MODELS / "attention.mlir").read_text(), dtype)
    func = find_function(parse_module(make_context(), text, "attention.mlir"), None)
    inputs = random_inputs(func, seed=3)
    expected = run_function(func, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        forced = Path(tmp) / "attention.mlir"
        forced.write_text(_forced(text, "block_q=64 block_k=64 stages=2 engine=mma"))
        model = fusec.compile(forced, fusion=True, device="gpu")
    assert model.launches == 1
    # bf16 comes back as f32 values: compared at bf16's tolerance
    ok, message = compare(np.asarray(model(*inputs)), expected[0],
                          "bfloat16" if dtype == "bf16" else None)
    assert ok, message
