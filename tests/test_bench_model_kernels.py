"""bench/model_kernels.py groups a profile's kernels by family and imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import model_kernels  # noqa: E402  (a script beside the benchmarks)


@pytest.mark.parametrize(("name", "expected"), [
    ("sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32",
     "sm#_xmma_fprop_implicit_gemm_tf#f#_tf#f#_f#_nhwckrsc_nchw_tilesize#x#x#"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float>(...)", "void cudnn::ops::nchwToNhwcKernel"),
    ("fusec_unit::fusec_0123456789ab", "fusec fusec_0123456789ab"),
    ("_ZN10fusec_unit18fusec_0123456789abB2v1E5ArrayIfLi1E", "fusec fusec_0123456789ab"),
    ("triton_poi_fused_add_relu_3", "triton_poi_fused_add_relu_#"),
])
def test_kernels_group_by_family(name: str, expected: str) -> None:
    assert model_kernels.family(name) == expected


def test_fusec_kernels_are_named_by_the_kernels_behind_them() -> None:
    names = {"fusec_0123456789ab": "forward_g3_reduce_mean (+11 alike)"}
    assert model_kernels.family("fusec_unit::fusec_0123456789ab", names) == \
        "fusec forward_g3_reduce_mean (+11 alike)"


def test_bad_arguments_are_errors() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "model_kernels.py"), "gpt2", "--iters", "0"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "error: --iters" in out.stderr


def test_host_profile_lists_the_functions_of_most_own_time_per_call() -> None:
    def busy(n: int) -> int:
        return sum(i * i for i in range(n))

    def call(n: int) -> int:
        return busy(n) + len(str(n))

    lines = model_kernels.host_profile(call, (20000,), iters=4, top=3, sync=lambda: None)
    assert lines[1] == "Host profile over 4 calls, by own time:"
    rows = [line for line in lines if line.startswith("| `")]
    assert len(rows) == 3
    assert any("(busy)" in row or "(<genexpr>)" in row for row in rows[:2]), rows
    calls_per_call = {row.split("|")[1].strip(): row.split("|")[2].strip() for row in rows}
    assert all(float(v) >= 1 for v in calls_per_call.values())
