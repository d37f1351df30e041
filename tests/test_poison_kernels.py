"""The poisoned-kernel-cache fuzz mode (`fuzz/poison_kernels.py`) on fixed
seeds: every mutated entry is a miss with one warning, the kernel is built
again and the numbers match the reference; with the entry check disabled the
mode reports the entry that was used. Needs ptxas and NVVM (the dev extra's
nvidia-cuda-nvrtc): without them nothing is stored, and the test says so."""

from __future__ import annotations

import pytest

from fusec.codegen.build_pool import find_ptxas
from fusec.fuzz.poison_kernels import poison_kernels

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")


@pytest.mark.slow  # a random program's kernels built with numba and ptxas
@pytest.mark.parametrize("seed", [0, 3])
def test_poisoned_entries_of_a_random_program(seed: int) -> None:
    result = poison_kernels(seed=seed, count=8)
    assert result.category == "ok", result.outcome.detail
    assert "no kernel was stored" not in result.outcome.detail


def test_reports_an_unusable_entry_that_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every entry taken as it is (no digest, format or key check), the
    mode reports the poisoned entry that was used without a warning."""
    import json

    import fusec.codegen.kernel_cache as kernel_cache

    def trusting(raw: bytes, key: str) -> tuple[str, kernel_cache.KernelCode | None]:
        try:
            entry = json.loads(raw)
            return "", kernel_cache.KernelCode(entry["ptx"], None, entry.get("registers"),
                                               entry.get("spill_bytes"))
        except Exception:
            return "unreadable", None

    monkeypatch.setattr(kernel_cache, "_check_entry", trusting)
    result = poison_kernels(seed=0, count=8)
    assert result.category == "error poison-warning new", result.outcome.detail
    assert "used without a warning" in result.outcome.detail
    assert "a character of the PTX changed" in result.outcome.detail
