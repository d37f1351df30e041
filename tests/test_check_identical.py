"""The output-identity check (`bench/check_identical.py`): its corpus, what it
leaves out of plan.json, and that a changed output is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusec.bench import check_identical
from fusec.bench.check_identical import Program, compare, compile_all, corpus, digest_out

ROOT = Path(__file__).resolve().parent.parent


def test_corpus_holds_bench_examples_and_test_programs() -> None:
    names = [p.name for p in corpus()]
    assert len(names) == len(set(names))
    for expected in ("examples/softmax.mlir", "bench/programs/rope.mlir",
                     "tests/fuzz_regressions/item2_max_min_nan.mlir"):
        assert expected in names
    assert any(n.startswith("tests/filecheck/passes/tile_and_promote.mlir#") for n in names)
    assert not any("Output" in n for n in names)


def test_digest_ignores_signature_and_source_path_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "kernels.py").write_text("k = 1\n")
    plan = {"format": "fusec-plan", "source": "/a/b.mlir", "out_hmac_sha256": "00",
            "target": "h200"}
    (out / "plan.json").write_text(json.dumps(plan))
    first = digest_out(out)
    resigned = {**plan, "source": "/c.mlir", "out_hmac_sha256": "ff"}
    (out / "plan.json").write_text(json.dumps(resigned))
    assert digest_out(out) == first
    (out / "plan.json").write_text(json.dumps({**plan, "target": "a100"}))
    assert digest_out(out)["plan.json"] != first["plan.json"]
    assert digest_out(out)["kernels.py"] == first["kernels.py"]


def test_a_changed_kernel_is_named(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "softmax.mlir").read_text()
    saved = compile_all([Program("softmax", text)], tmp_path / "a", jobs=1)
    assert set(saved["softmax"]) == {"kernels.py", "plan.json"}
    again = compile_all([Program("softmax", text)], tmp_path / "b", jobs=1)
    assert compare(saved, again) == []
    other = compile_all([Program("softmax", text.replace("8x64", "8x32"))], tmp_path / "c", jobs=1)
    assert compare(saved, other) == ["softmax: kernels.py, plan.json changed"]


def test_a_rejected_program_is_recorded_by_its_message(tmp_path: Path) -> None:
    bad = Program("bad", "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                         "  %y = nn.exp %x : tensor<4xf32> -> tensor<8xf32>\n"
                         "  func.return %y : tensor<8xf32>\n}\n")
    record = compile_all([bad], tmp_path, jobs=1)["bad"]
    assert record["exit"] != "0" and len(record["stderr"]) == 64


def test_compare_mode_needs_a_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_identical.main(["compare", str(tmp_path / "none.json")]) == 2
    assert "run `save` first" in capsys.readouterr().err
