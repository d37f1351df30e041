"""The cost model: roofline per kernel and dT = T_mem - T_overlap - T_spill."""

from __future__ import annotations

import pytest

from fusec.analysis.cost_model import KernelCost, fusion_gain, parallel_threads
from fusec.analysis.targets import get_target

H200 = get_target("h200")
BIG = H200.max_resident_threads * 4  # enough threads to fill the GPU


def test_kernel_time_memory_and_compute_bound() -> None:
    mem = KernelCost(bytes_moved=int(4.23e9), flops=0.0, parallel=BIG, registers=32)
    assert mem.time(H200) == pytest.approx(1e-3 + H200.launch_overhead)
    comp = KernelCost(bytes_moved=0, flops=50.8e9, parallel=BIG, registers=32)
    assert comp.time(H200) == pytest.approx(1e-3 + H200.launch_overhead)


def test_small_kernels_pay_for_idle_sms() -> None:
    half = KernelCost(int(4.23e9), 0.0, H200.max_resident_threads // 2, 32)
    assert half.idle_time(H200) == pytest.approx(1e-3)


def test_vertical_fusion_saves_the_intermediate_and_a_launch() -> None:
    n = 1 << 26  # f32 elements: 256 MiB
    a = KernelCost(8 * n, n, BIG, 20)  # read x, write t
    b = KernelCost(8 * n, n, BIG, 20)  # read t, write y
    fused = KernelCost(8 * n, 2 * n, BIG, 24)
    gain = fusion_gain(H200, a, b, fused)
    assert gain.saved_bytes == 8 * n and gain.saved_launches == 1
    assert gain.t_mem == pytest.approx(8 * n / H200.memory_bandwidth + H200.launch_overhead)
    assert gain.t_overlap == 0.0 and gain.t_spill == 0.0
    assert gain.delta == pytest.approx(gain.t_mem)
    assert "T_mem" in gain.summary() and gain.summary().startswith("dT = ")


def test_recomputation_is_charged_as_overlap() -> None:
    a = KernelCost(4096, 12 * 4096, 1024, 20)
    b = KernelCost(8 << 28, 1 << 28, BIG, 20)
    fused = KernelCost(8 << 28, (1 << 28) + (12 << 28), BIG, 24)
    gain = fusion_gain(H200, a, b, fused)
    extra = (12 << 28) - 12 * 4096
    assert gain.t_overlap == pytest.approx(extra / H200.fp32_flops)
    assert gain.delta < 0


def test_lost_parallelism_counts_only_when_a_part_filled_the_gpu() -> None:
    few = H200.max_resident_threads // 8
    a = KernelCost(1 << 30, 0.0, BIG, 20)
    b = KernelCost(1 << 20, 0.0, few, 20)
    fused = KernelCost(1 << 30, 0.0, few, 24)
    assert fusion_gain(H200, a, b, fused).t_overlap > 0
    tiny = KernelCost(1 << 10, 0.0, 64, 20)
    assert fusion_gain(H200, tiny, tiny, KernelCost(1 << 10, 0.0, 16, 24)).t_overlap == 0


def test_registers_over_the_budget_cost_spill_traffic() -> None:
    ok = KernelCost(1 << 30, 0.0, BIG, H200.register_budget)
    over = KernelCost(1 << 30, 0.0, BIG, H200.register_budget + 10)
    gain = fusion_gain(H200, ok, KernelCost(0, 0.0, 1, 0, launches=0), over)
    expected = 10 * 4 * 2 * BIG / (H200.memory_bandwidth * H200.local_memory_bandwidth_factor)
    assert gain.t_spill == pytest.approx(expected)


def test_parallelism_per_schedule() -> None:
    assert parallel_threads("pointwise", (1024,), 0, H200) == 256
    assert parallel_threads("reduction", (16, 4096), 4096, H200) == 16 * 1024
    assert parallel_threads("reduction", (16, 64), 64, H200) == 16 * 16
    assert parallel_threads("contraction", (128, 128), 0, H200) == 256
