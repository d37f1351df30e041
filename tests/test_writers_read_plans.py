"""The writers write the plan they are given: no module of codegen/ but the
two that drive code generation imports a planner (a function that analyses a
group's IR or chooses a schedule). Code generation (`codegen/generate.py`)
and the register probe (`codegen/kernel_probe.py`) build each group's plan
(`scheduling/group_plan.group_plan`) and hand it to the writer; a writer that
called a planner itself would decide again what the plan already holds.
Writers may still call the pure rules on numbers that the register model
shares with them (`window_plan.pass_scheme`, `attention_schedule.padded`):
those derive layout from the plan's fields, they choose nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import fusec

CODEGEN = Path(fusec.__file__).parent / "codegen"

DRIVERS = frozenset({"generate.py", "kernel_probe.py"})
"""The modules that build plans and hand them to the writers."""

PLANNERS = frozenset({
    # analyses of a group's IR
    "analyze", "analyze_group", "find_pattern", "layout_ops", "collapsed", "has_views",
    "split_conv_pool", "online_pair", "segmented_concat", "split_launches",
    # plans and schedules chosen or read off the group
    "plan_group", "planned_group", "plan_index", "plan_schedule", "from_attr",
    "group_schedule", "recorded_plan", "checked_tile", "tile_of", "choose_tile",
    "vector_width", "flat_vector", "shared_tile", "grid_stride_launch", "ensure_schedules",
    "proposed_schedule", "mma_problem", "decode_head_problem", "check_plan",
    # the plan itself
    "group_plan", "plan_rows", "plan_gemm", "plan_attention", "plan_window", "plan_pointwise",
    "plan_layout",
})


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fusec."):
            names.update(alias.name for alias in node.names)
    return names


def test_no_writer_imports_a_planner() -> None:
    found = {path.name: sorted(_imported(path) & PLANNERS)
             for path in sorted(CODEGEN.glob("*.py")) if path.name not in DRIVERS}
    assert {name: planners for name, planners in found.items() if planners} == {}


def test_the_drivers_build_the_plans() -> None:
    for name in DRIVERS:
        assert "group_plan" in _imported(CODEGEN / name), name


def test_the_planner_names_exist() -> None:
    # a renamed planner would leave this list guarding nothing
    import importlib
    import pkgutil

    import fusec.analysis
    import fusec.scheduling

    defined: set[str] = set()
    for package in (fusec.scheduling, fusec.analysis):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            defined.update(n for n in vars(module) if callable(getattr(module, n)))
    assert defined >= PLANNERS, sorted(PLANNERS - defined)
