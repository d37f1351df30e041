"""plan.json records each launch's group plan in its stored form: the kind,
the backend and the schedule `tile-and-promote` chose, the same fields as the
group's `schedule` attribute in OUT/model.mlir; a malformed one is refused
with the JSON path of the bad field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.cli import main
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr
from fusec.runtime.plan_schema import check_plan

# A softmax (reduction), a matmul + bias (contraction), a conv + relu
# (window) and an add (pointwise): one group of each kind.
PROGRAM = """
func.func @f(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>,
             %i: tensor<1x3x10x10xf32>, %k: tensor<4x3x3x3xf32>) -> (tensor<8x32xf32>,
             tensor<8x16xf32>, tensor<1x4x8x8xf32>) {
  %s = nn.softmax %x {axis = -1} : tensor<8x32xf32>
  %m = nn.matmul %x, %w : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %y = nn.add %m, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %c = nn.conv2d %i, %k : (tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %r = nn.relu %c : tensor<1x4x8x8xf32>
  func.return %s, %y, %r : tensor<8x32xf32>, tensor<8x16xf32>, tensor<1x4x8x8xf32>
}
"""


def _compiled(tmp_path: Path) -> tuple[dict[str, object], Path]:
    src, out = tmp_path / "m.mlir", tmp_path / "out"
    src.write_text(PROGRAM)
    assert main([str(src), "-o", str(out), "--quiet"]) == 0
    return json.loads((out / "plan.json").read_text()), out


def test_every_launch_records_its_groups_plan(tmp_path: Path) -> None:
    plan, out = _compiled(tmp_path)
    module = parse_module(make_context(), (out / "model.mlir").read_text(), "model.mlir")
    groups = {g.attributes["name"].data: g for g in module.walk()  # type: ignore[union-attr]
              if isinstance(g, GroupOp)}
    launches = plan["functions"]["f"]["launches"]  # type: ignore[index]
    kinds = sorted(launch["plan"]["kind"] for launch in launches)
    assert kinds == ["contraction", "reduction", "window"]
    for launch in launches:
        group = groups[launch["group"]]
        schedule = group.attributes[SCHEDULE_KEY]
        assert isinstance(schedule, ScheduleAttr)
        assert launch["plan"] == {"kind": group.attributes["kind"].data,  # type: ignore[union-attr]
                                  "backend": "numba", "schedule": schedule.as_dict()}


@pytest.mark.parametrize(("bad", "where"), [
    ({"kind": 3, "backend": "numba", "schedule": None}, "plan.kind"),
    ({"kind": "reduction", "schedule": None}, "missing field 'backend'"),
    ({"kind": "reduction", "backend": "numba", "schedule": {"lanes": [1]}},
     "plan.schedule.lanes"),
    ({"kind": "pointwise", "backend": "numba", "schedule": None, "parts": [{"kind": "x"}]},
     "plan.parts[0]"),
])
def test_a_malformed_plan_is_refused_at_its_field(tmp_path: Path, bad: dict[str, object],
                                                  where: str) -> None:
    plan, _ = _compiled(tmp_path)
    plan["functions"]["f"]["launches"][0]["plan"] = bad  # type: ignore[index]
    with pytest.raises(FusecError, match=f"invalid at .*{re.escape(where)}"):
        check_plan(plan, "plan.json", lambda _name: True)
