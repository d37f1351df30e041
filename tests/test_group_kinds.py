"""The group-kind registry (analysis/group_kind.py): every built-in kind
implements the whole protocol, an unknown kind is a located error, a lookup
before the built-in kinds are registered says so, and a kind registered from
outside (with a writer) is scheduled, priced and emitted like the built-in
ones (docs/writing-passes.md, "A new group kind")."""

from __future__ import annotations

import inspect

import pytest

from fusec.analysis import group_kind as registry
from fusec.analysis.diagnostics import FusecError, InternalError
from fusec.analysis.group_kind import GroupKind, group_kind, register_kind, registered_kinds
from fusec.analysis.schedule_choice import proposed_schedule
from fusec.analysis.targets import get_target
from fusec.codegen import pointwise, writers
from fusec.codegen.generate import generate_program
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.passes.register_budget import legal_splits
from fusec.scheduling import group_plan
from fusec.scheduling.kinds import register_builtin_kinds
from fusec.scheduling.kinds.pointwise import PointwiseKind
from fusec.scheduling.pointwise_group_plan import plan_pointwise
from fusec.scheduling.register_model import estimate_registers

BUILTIN = ("pointwise", "layout", "reduction", "contraction", "window", "attention")
METHODS = ("merge", "summary_registers", "summary_shared", "kernel_path", "choose",
           "candidates", "registers", "priced_by_schedule", "scheduled_kernel",
           "leaner", "leanest", "may_cross_split")


def program(kind: str) -> str:
    """One group of `kind` holding an exp and a mul."""
    return f"""func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %y = fusion.group (%x) {{name = "g0", kind = "{kind}"}}
      : (tensor<4x8xf32>) -> tensor<4x8xf32> {{
  ^bb0(%a: tensor<4x8xf32>):
    %e = nn.exp %a : tensor<4x8xf32>
    %m = nn.mul %e, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    fusion.yield %m : tensor<4x8xf32>
  }}
  func.return %y : tensor<4x8xf32>
}}
"""


@pytest.fixture(autouse=True)
def _builtin_kinds() -> None:
    # as `compiler.parsing.make_context` does; some tests here look up before parsing
    register_builtin_kinds()


def test_a_lookup_before_the_kinds_are_registered_says_what_was_missed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", {})
    for lookup in (registered_kinds, lambda: registry.find_kind("pointwise"),
                   lambda: group_kind("pointwise")):
        with pytest.raises(InternalError, match=r"no group kind is registered: "
                           r"fusec\.scheduling\.kinds\.register_builtin_kinds\(\)"):
            lookup()
    # the registry of a fresh process is filled by the context every program is read with
    make_context()
    assert tuple(registered_kinds()) == BUILTIN


def test_every_builtin_kind_implements_the_protocol() -> None:
    kinds = registered_kinds()
    assert set(BUILTIN) <= set(kinds)
    declared = {n for n, _ in inspect.getmembers(GroupKind, inspect.isfunction)
                if not n.startswith("_")}
    assert declared == set(METHODS)  # the test follows the protocol
    for name, kind in kinds.items():
        assert kind.name == name
        assert isinstance(kind, GroupKind)
        assert isinstance(kind.sized_for_budget, bool), name
        for method in METHODS:
            ours = inspect.signature(getattr(GroupKind, method))
            theirs = inspect.signature(getattr(type(kind), method))
            assert list(theirs.parameters) == list(ours.parameters), (name, method)


def test_unknown_kind_is_a_located_error() -> None:
    module = parse_module(make_context(), program("bogus"), "bogus.mlir")
    with pytest.raises(FusecError) as err:
        generate_program(module)
    text = err.value.render()
    assert text.startswith("bogus.mlir:2:"), text
    assert 'fusion.group has unknown kind "bogus" (expected one of pointwise, layout' in text


def test_register_kind_refuses_what_is_not_a_kind() -> None:
    with pytest.raises(TypeError, match="does not implement the GroupKind protocol"):
        register_kind(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="registered twice"):
        register_kind(PointwiseKind())


class ToyKind(PointwiseKind):
    """A kind of its own name that schedules and fits the register budget as
    pointwise does (its writer: the pointwise emitter's, registered beside it)."""

    name = "toy"


def test_a_registered_kind_is_scheduled_priced_and_emitted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = {k: v for k, v in registered_kinds().items() if k in BUILTIN}
    monkeypatch.setattr(registry, "_REGISTRY", builtin)
    monkeypatch.setattr(writers, "_REGISTRY", writers.registered_writers())
    assert registry.find_kind("toy") is None
    toy = register_kind(ToyKind())
    writers.register_writer(writers.NumbaWriter("toy", pointwise.emit))
    monkeypatch.setattr(group_plan, "DETAIL_PLANNERS", dict(group_plan.DETAIL_PLANNERS))
    group_plan.register_detail_planner("numba", "toy", plan_pointwise)
    assert group_kind("toy") is toy
    h200 = get_target("h200")
    toy_module = parse_module(make_context(), program("toy"), "toy.mlir")
    pointwise_module = parse_module(make_context(), program("pointwise"), "pw.mlir")
    groups = [next(op for op in m.walk() if isinstance(op, GroupOp))
              for m in (toy_module, pointwise_module)]
    assert proposed_schedule(groups[0], h200) == proposed_schedule(groups[1], h200)
    assert estimate_registers(groups[0], h200) == estimate_registers(groups[1], h200)
    # register-budget asks the kind: no leaner schedule, split where pointwise is
    assert toy.leaner(groups[0], 8, h200) is None and toy.leanest(groups[0], h200) is None
    assert legal_splits(groups[0]) == legal_splits(groups[1]) == [1]
    toy_source = generate_program(toy_module).kernels_source
    pointwise_source = generate_program(pointwise_module).kernels_source
    # the same kernel; only its header comment names the kind
    assert toy_source == pointwise_source.replace("# g0 (pointwise)", "# g0 (toy)")
    assert "def f_g0_exp(" in toy_source
