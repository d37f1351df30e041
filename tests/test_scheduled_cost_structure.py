"""Fusion legality prices a candidate group once per *structure*: the ops,
their types and attributes and how they connect, not which values they are.
A model of N identical layers asks the same questions in every layer; the
number of candidates actually scheduled must not grow with N."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from fusec.analysis import scheduled_cost
from fusec.analysis.scheduled_cost import structure
from fusec.bench.gpt2_program import generate
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module


def _ops(text: str) -> list:  # type: ignore[type-arg]
    module = parse_module(make_context(), text, "t.mlir")
    return [op for op in module.walk() if op.name.startswith("nn.")]


def _program(body: str) -> str:
    return ("func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
            f"{body}\n  func.return %r : tensor<4x8xf32>\n}}")


def test_the_same_block_twice_has_one_structure() -> None:
    ops = _ops(_program(
        "  %a = nn.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n"
        "  %b = nn.exp %a : tensor<4x8xf32>\n"
        "  %c = nn.mul %b, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n"
        "  %r = nn.exp %c : tensor<4x8xf32>"))
    first, second = ops[:2], ops[2:]
    assert structure(first, [first[1].results[0]]) == structure(second, [second[1].results[0]])


@pytest.mark.parametrize("other", [
    "%a = nn.mul %x, %x",          # one value read twice is not two values
    "%a = nn.add %x, %y",          # another op
])
def test_what_changes_the_structure(other: str) -> None:
    base = _ops(_program(
        "  %r = nn.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>"))
    changed = _ops(_program(
        f"  {other.replace('%a', '%r')} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>"))
    assert structure(base, [base[0].results[0]]) != structure(changed, [changed[0].results[0]])


def test_an_attribute_changes_the_structure() -> None:
    def reduce(axis: int) -> list:  # type: ignore[type-arg]
        return _ops(
            "func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
            f"  %r = nn.softmax %x {{axis = {axis}}} : tensor<4x8xf32>\n"
            "  func.return %r : tensor<4x8xf32>\n}")
    a, b = reduce(0), reduce(1)
    assert structure(a, [a[0].results[0]]) != structure(b, [b[0].results[0]])


def _scheduled(monkeypatch: pytest.MonkeyPatch, layers: int) -> int:
    """Candidates fusion legality scheduled compiling `layers` GPT-2 blocks."""
    count = [0]
    detached = scheduled_cost.detached_group

    @contextmanager
    def counted(*args: object, **kwargs: object) -> Iterator[object]:
        count[0] += 1
        with detached(*args, **kwargs) as group:  # type: ignore[arg-type]
            yield group

    with monkeypatch.context() as patch:
        patch.setattr(scheduled_cost, "detached_group", counted)
        compile_model(generate(layers=layers, batch=1, seq=16, dim=64, heads=2))
    return count[0]


def test_repeated_layers_are_priced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    two, four = _scheduled(monkeypatch, 2), _scheduled(monkeypatch, 4)
    assert two > 0
    assert four == two, (two, four)
