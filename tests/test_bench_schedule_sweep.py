"""`bench/schedule_sweep.py`: every schedule the scheduler offers a group is
timed and listed, the model's marked `*` and the fastest `+`, each with its
fraction of the copy floor. Timed here by a fake timer (the GPU's CUDA events
are the autotuner's, tested in test_autotune), so what is checked is the
table, never a time."""

from __future__ import annotations

from fusec.analysis.program import KernelLaunch
from fusec.bench.schedule_sweep import sweep

MODEL = """
func.func @f(%x: tensor<1x2x21x7xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x11x4xf32> {
  %s = nn.silu %x : tensor<1x2x21x7xf32>
  %c = nn.conv2d %s, %w {strides = [2, 2], pads = [1, 1, 1, 1], groups = 2}
      : (tensor<1x2x21x7xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x11x4xf32>
  func.return %c : tensor<1x2x11x4xf32>
}
"""


class _ByBlocks:
    """Fewer blocks are faster: the tallest tile wins."""

    def time_group(self, source: str, launch: KernelLaunch, arrays: object) -> float:
        return 1.0 + launch.grid[0] * launch.grid[1] * launch.grid[2]


def test_every_candidate_listed_model_and_fastest_marked() -> None:
    lines = sweep("dw", MODEL, set(), "h200", 1e12, _ByBlocks())
    rows = [line for line in lines if line.startswith("g") and not line.startswith("group")]
    assert len(rows) > 3, lines
    assert rows[0][9:11] == "* " or rows[0][9:11] == "*+", rows[0]
    assert sum("+" in r[9:11] for r in rows) == 1
    fastest = next(r for r in rows if "+" in r[9:11])
    times = [float(r.split()[-2]) for r in rows]
    assert float(fastest.split()[-2]) == min(times)
    assert all(r.split()[-1].endswith("%") for r in rows)  # a fraction of the floor each


def test_kinds_filter_leaves_other_groups_out() -> None:
    lines = sweep("dw", MODEL, {"pointwise"}, "h200", 1e12, _ByBlocks())
    assert not [line for line in lines if line.startswith("g") and not line.startswith("group")]
