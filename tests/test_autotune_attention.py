"""Autotuning contests a fused attention against its three-kernel form (the
groups `form-fusion-groups` makes when `fuse-attention` refuses), with an
injected timer (no GPU): the faster is kept, both times are in report.md,
and the numbers match the reference in the simulator either way."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from codegen_harness import tensor
from test_attention import attention_text
from test_autotune import _check_numbers as check_numbers

from fusec.analysis.program import KernelLaunch
from fusec.compiler.autotune import AutotuneOptions
from fusec.compiler.compile import CompiledArtifacts, compile_model

# masked, two heads, S = 20 (no multiple of any tile)
TEXT = attention_text((1, 2), 20, 8, mask=tensor((20, 20)))


class AttentionTimer:
    """The fused attention kernel costs `fused_us`, every other kernel 1 us."""

    def __init__(self, fused_us: float) -> None:
        self.fused_us = fused_us
        self.kernels: list[str] = []

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        assert launch.kernel in kernel_source
        self.kernels.append(launch.group)
        return self.fused_us if launch.group.startswith("attn") else 1.0


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(tmp_path / "tuning"))


def _compile(timer: AttentionTimer) -> CompiledArtifacts:
    return compile_model(TEXT, fusion=True, target="h200",
                         autotune=AutotuneOptions(timer=timer, device="fake GPU"))


def _check_numbers(art: CompiledArtifacts) -> None:
    check_numbers(art, TEXT, seed=4, rtol=1e-4, atol=1e-5)


def _contest_line(art: CompiledArtifacts) -> str:
    return next(line for line in art.report_md.splitlines()
                if line.startswith("- attn0 (fused attention against its three-kernel form"))


def test_split_form_kept_when_faster() -> None:
    timer = AttentionTimer(fused_us=100.0)
    art = _compile(timer)
    assert any(k.startswith("attn") for k in timer.kernels)
    assert any(not k.startswith("attn") for k in timer.kernels)
    launches = art.plan["functions"]["f"]["launches"]
    assert len(launches) == 3 and not any(e["group"].startswith("attn") for e in launches)
    line = _contest_line(art)
    assert "fused 100.0 us, split 3.0 us (3 kernels): split into" in line, line
    assert "split into 3 kernels by autotuning" in art.report_md
    _check_numbers(art)


def test_fused_kept_when_faster() -> None:
    art = _compile(AttentionTimer(fused_us=0.5))
    launches = art.plan["functions"]["f"]["launches"]
    assert [e["group"] for e in launches] == ["attn0"]
    line = _contest_line(art)
    assert "fused 0.5 us, split 3.0 us (3 kernels): kept fused" in line, line
    _check_numbers(art)
