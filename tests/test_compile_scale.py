"""Compile time grows linearly with the model: checked by counting work, not
by timing it (the measured numbers live in docs/fusion.md and
`python -m fusec.bench.compile_scale`)."""

from __future__ import annotations

import io

import pytest
from xdsl.printer import Printer
from xdsl.utils.lexer import Span

from fusec.bench.compile_scale import generate
from fusec.compiler.compile import compile_model
from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.nn_base import NNOp

N_OPS = 2000


def test_parsing_never_counts_lines_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # Span.get_location() scans the input from its start: once per op made
    # parsing quadratic. Locations come from precomputed line starts instead.
    def scan(span: Span[str]) -> None:
        raise AssertionError("Span.get_location() called while parsing")

    monkeypatch.setattr(Span, "get_location", scan)
    text = generate(N_OPS)
    module = parse_module(make_context(), text, "scale.mlir")
    ops = [op for op in module.walk() if op.name.startswith("nn.")]
    assert len(ops) == N_OPS
    last = str(ops[-1].location)
    assert f'"scale.mlir":{N_OPS + 1}:3' in last  # line 1 is the func.func header


@pytest.mark.slow
def test_each_op_is_verified_once_per_verification(monkeypatch: pytest.MonkeyPatch,
                                                   no_ptxas_probe: None) -> None:
    calls = 0
    original = NNOp.verify_

    def counting(self: NNOp) -> None:
        nonlocal calls
        calls += 1
        original(self)

    monkeypatch.setattr(NNOp, "verify_", counting)
    artifacts = compile_model(generate(N_OPS), target="h200")
    ops = sum(1 for op in artifacts.module.walk() if isinstance(op, NNOp))
    # The input once, then once after each pass of the pipeline.
    verifications = 1 + len(artifacts.plan["passes"])
    assert ops >= N_OPS
    assert calls <= verifications * ops * 1.1, (calls, verifications, ops)


@pytest.mark.slow
def test_printing_matches_xdsl_and_escapes_strings() -> None:
    artifacts = compile_model(generate(200), target="h200")
    # The remarks (`--remarks-in-ir`) are the strings whose escaping is compared.
    ours = module_to_text(artifacts.module, remarks=True)
    buf = io.StringIO()
    Printer(stream=buf).print_op(artifacts.module)
    assert ours == buf.getvalue().rstrip("\n") + "\n"
    assert "fusion.remarks" in ours


@pytest.mark.slow  # ptxas / a large compile: the slow set (README)
def test_every_launch_carries_its_roofline_estimate() -> None:
    artifacts = compile_model(generate(100), target="h200")
    launches = artifacts.plan["functions"]["scale"]["launches"]
    # max(bytes/BW, flops/peak) + launch: at least h200's 0.8 us launch overhead.
    assert launches and all(la["est_time_us"] >= 0.8 for la in launches)
    assert "| **total** (" in artifacts.report_md


def test_help_and_bad_sizes_exit_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fusec.bench.compile_scale import main

    with pytest.raises(SystemExit) as ok:
        main(["--help"])
    assert ok.value.code == 0
    assert "graph sizes in ops" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["abc"])
    assert bad.value.code == 2
    assert "invalid int value: 'abc'" in capsys.readouterr().err
