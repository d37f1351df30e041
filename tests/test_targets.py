"""Hardware profiles: names, limits, `auto`, and the roofline they feed."""

from __future__ import annotations

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import TARGETS, get_target, resolve_target


def test_known_profiles_have_sane_limits() -> None:
    assert set(TARGETS) == {"h200", "h100", "a100", "rtx4090", "orin"}
    for t in TARGETS.values():
        assert t.register_budget <= t.max_registers_per_thread == 255
        assert t.shared_memory_per_block <= t.shared_memory_per_sm
        assert t.max_threads_per_block <= t.max_threads_per_sm
        assert t.launch_overhead < t.python_launch_overhead


def test_h200_carries_the_measured_numbers() -> None:
    h200 = get_target("h200")
    assert h200.memory_bandwidth == 4.23e12
    assert h200.fp32_flops == 50.8e12
    assert h200.sms == 132 and h200.l2_bytes == 60 * 2**20
    assert h200.launch_overhead == 0.8e-6 and h200.python_launch_overhead == 20e-6


def test_names_are_case_insensitive() -> None:
    assert get_target("H100") is TARGETS["h100"]


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(FusecError, match="unknown target 'v100'; known targets: h200, h100, "
                       "a100, rtx4090, orin, auto"):
        get_target("v100")


def test_auto_without_a_gpu_falls_back_to_h200_with_a_note() -> None:
    target, note = resolve_target("auto")
    if note is None:  # a machine with a GPU: the profile was read from it
        assert target.name == "auto"
        return
    assert target is TARGETS["h200"]
    assert note == "no GPU found; target 'auto' uses the h200 profile"


def test_kernel_time_is_a_roofline_plus_launch() -> None:
    t = get_target("h200")
    memory_bound = t.kernel_time(bytes_moved=4.23e9, flops=1.0)
    assert memory_bound == pytest.approx(1e-3 + t.launch_overhead)
    compute_bound = t.kernel_time(bytes_moved=1.0, flops=50.8e9, launches=2)
    assert compute_bound == pytest.approx(1e-3 + 2 * t.launch_overhead)


def test_the_embedded_part_is_slower_than_the_datacenter_parts() -> None:
    orin, h200 = get_target("orin"), get_target("h200")
    assert orin.memory_bandwidth < h200.memory_bandwidth / 10
    assert orin.sms < h200.sms
