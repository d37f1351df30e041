"""The arithmetic of `fusec run --profile`'s table (`compiler/profile_table.py`)
and the flops it counts per launch (`compiler/launch_flops.py`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fusec.analysis.targets import get_target
from fusec.compiler.compile import compile_model
from fusec.compiler.launch_flops import launch_flops
from fusec.compiler.profile_table import (
    ProfileRow,
    Roofs,
    memory_bound_total,
    profile_rows,
    render_table,
    si,
    total_row,
)

ROOFS = Roofs(copy_bandwidth=4.0e12, compute=50.0e12, ridge=12.5)

# 2·4·16·32 = 4096 flops in the matmul, then 4·32 for the bias add.
MATMUL = """
func.func @f(%x: tensor<4x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = nn.matmul %x, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %1 = nn.add %0, %b : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  func.return %1 : tensor<4x32xf32>
}
"""


def _row(us: float, nbytes: int, flops: float | None, index: int | None = 0) -> ProfileRow:
    return ProfileRow(index, "k", us, 1.0, nbytes, flops)


def test_bandwidth_floor_fraction_and_rates() -> None:
    row = _row(us=25.0, nbytes=100_000_000, flops=25_000_000)
    assert row.bandwidth == pytest.approx(4.0e12)
    assert row.floor_fraction(ROOFS) == pytest.approx(1.0)
    assert row.flop_rate == pytest.approx(1.0e12)
    assert row.intensity == pytest.approx(0.25)
    slow = _row(us=100.0, nbytes=100_000_000, flops=0.0)
    assert slow.floor_fraction(ROOFS) == pytest.approx(0.25)
    assert slow.intensity == 0.0 and slow.memory_bound(ROOFS) is True


def test_memory_bound_against_the_ridge() -> None:
    assert _row(10.0, 1000, 12_000.0).memory_bound(ROOFS) is True  # 12 flop/B < 12.5
    assert _row(10.0, 1000, 13_000.0).memory_bound(ROOFS) is False
    assert _row(10.0, 1000, None).memory_bound(ROOFS) is None  # flops unknown
    assert _row(10.0, 0, 5.0).intensity is None  # no bytes


def test_the_ridge_is_the_targets() -> None:
    h200 = get_target("h200")
    roofs = Roofs.of(h200, copy_bandwidth=3.9e12)
    assert roofs.copy_bandwidth == 3.9e12 and roofs.compute == h200.fp32_flops
    assert roofs.ridge == pytest.approx(h200.fp32_flops / h200.memory_bandwidth)


def test_totals_sum_time_bytes_and_known_flops() -> None:
    rows = [_row(10.0, 4_000_000, 1e6, 0), _row(30.0, 8_000_000, None, 1),
            _row(20.0, 1_000, 1e9, 2)]
    total = total_row(rows)
    assert total.us == 60.0 and total.est_us == 3.0 and total.hbm_bytes == 8_001_000 + 4_000_000
    assert total.flops == 1e6 + 1e9
    assert total.bandwidth == pytest.approx(12_001_000 / 60e-6)
    memory = memory_bound_total(rows, ROOFS)  # the first only: unknown and compute excluded
    assert memory is not None and memory.us == 10.0 and memory.hbm_bytes == 4_000_000
    assert total_row([_row(1.0, 1, None)]).flops is None
    assert memory_bound_total([rows[2]], ROOFS) is None


def test_rendered_table() -> None:
    rows = [ProfileRow(0, "f_g0_mul", 25.0, 24.6, 100_000_000, 25e6),
            ProfileRow(1, "f_g1_matmul (cublas_sgemm)", 400.0, 0.0, 50_331_648, 1.7e10)]
    lines = render_table(rows, ROOFS, "profile of @f on GPU X", "h200")
    assert lines[0] == "profile of @f on GPU X"
    assert lines[1] == ("copy floor 4 TB/s (measured now); compute roof 50 TFLOP/s, "
                        "ridge 12.5 flop/B (target h200)")
    header, first, second, total, memory = lines[2:]
    assert header.split()[:4] == ["#", "kernel", "time", "(us)"]
    assert first.split() == ["0", "f_g0_mul", "25.00", "24.60", "100,000,000", "4", "TB/s",
                             "100%", "25M", "1", "TFLOP/s", "0.25", "memory"]
    assert second.split()[-1] == "compute" and " - " in second  # no estimate recorded
    assert total.split()[:3] == ["total", "425.00", "24.60"]
    assert memory == "memory-bound: 1 of 2 launches, 4 TB/s together: 100% of the copy floor"
    # The columns line up under their headers.
    assert len({len(line) for line in (header, first)}) == 1


def test_si_prefixes() -> None:
    assert si(4.12e12, "B/s") == "4.12 TB/s"
    assert si(999.7) == "1k"
    assert si(2.5e-7, "s") == "250 ns"
    assert si(0.0, "B/s") == "0 B/s"


def test_flops_per_launch_from_the_groups(tmp_path: Path) -> None:
    path = tmp_path / "m.mlir"
    path.write_text(MATMUL)
    unfused = compile_model(path, fusion=False, target="h200")
    fp = unfused.program.functions["f"]
    assert [la.ops for la in fp.launches] == [["nn.matmul"], ["nn.add"]]
    assert launch_flops(unfused.module, fp) == [2 * 4 * 16 * 32, 4 * 32]
    fused = compile_model(path, fusion=True, target="h200")
    fp = fused.program.functions["f"]
    assert launch_flops(fused.module, fp) == [2 * 4 * 16 * 32 + 4 * 32]
    # A group run as two launches counts its flops once; a launch of no group's name: unknown.
    twice = dataclasses.replace(fp, launches=[*fp.launches, fp.launches[0],
                                              dataclasses.replace(fp.launches[0], group="g99")])
    assert launch_flops(fused.module, twice) == [4224, 0.0, None]
    assert launch_flops(None, fp) == [None]
    rows = profile_rows(fp, [10.0], launch_flops(fused.module, fp))
    assert rows[0].hbm_bytes == fp.launches[0].hbm_bytes > 0
    assert rows[0].est_us == fp.launches[0].est_time_us
