"""`fusec run OUT` / `fusec.load_out` on an OUT that was damaged or edited:
one clear error naming the file (and the JSON path of a bad plan field),
never an internal error, never a file read from outside OUT; kernels.py must
match the digest plan.json records, and the OUT must carry the signature of
this user's key (an OUT another user compiled, or a forged one, runs only
when trusted explicitly)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.analysis.diagnostics import FusecError
from fusec.compiler.cli import main

MODEL = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %c = nn.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %0 = nn.mul %x, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = nn.exp %0 : tensor<4x8xf32>
  %2 = nn.neg %1 : tensor<4x8xf32>
  %3 = nn.reshape %2 : (tensor<4x8xf32>) -> tensor<32xf32>
  func.return %3 : tensor<32xf32>
}
"""

Plan = dict[str, Any]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out), "--no-fusion"]) == 0
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["run", *argv, "--device", "sim"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


def edit_plan(out: Path, change: Callable[[Plan], object]) -> None:
    plan = json.loads((out / "plan.json").read_text())
    change(plan)
    (out / "plan.json").write_text(json.dumps(plan))


def fn(plan: Plan) -> Plan:
    return plan["functions"]["f"]


def _set(d: Any, key: Any, value: Any) -> None:
    d[key] = value


@pytest.mark.parametrize(
    ("change", "where", "what"),
    [
        (lambda p: _set(fn(p)["launches"][0]["grid"], 0, -1),
         "$.functions.f.launches[0].grid[0]", "between 1 and 2147483647, got -1"),
        (lambda p: _set(fn(p)["launches"][0]["grid"], 2, 70000),
         "$.functions.f.launches[0].grid[2]", "between 1 and 65535, got 70000"),
        (lambda p: _set(fn(p)["launches"][0]["block"], 0, 2048),
         "$.functions.f.launches[0].block[0]", "got 2048"),
        (lambda p: _set(fn(p)["launches"][0]["args"][0], "view_shape", [3]),
         "$.functions.f.launches[0].args[0].view_shape", "does not hold the 32 elements"),
        (lambda p: _set(fn(p)["launches"][0]["args"][0], "value", "v99"),
         "$.functions.f.launches[0].args[0].value", "unknown value 'v99'"),
        (lambda p: _set(fn(p)["outputs"][0], "value", "nope"),
         "$.functions.f.outputs[0].value", "unknown value 'nope'"),
        (lambda p: _set(fn(p)["values"]["v0"], "dtype", "object"),
         "$.functions.f.values.v0.dtype", "unknown element type 'object'"),
        (lambda p: _set(fn(p)["values"]["v0"], "shape", [4, "8"]),
         "$.functions.f.values.v0.shape[1]", "expected an integer, got '8'"),
        (lambda p: _set(fn(p)["launches"][0]["args"][0], "writes", "no"),
         "$.functions.f.launches[0].args[0].writes", "expected true or false"),
        (lambda p: fn(p)["views"].append({"value": "v4", "source": "v5"}),
         "$.functions.f.views", "form a cycle"),
        (lambda p: _set(fn(p)["memory"]["buffers"][0], "bytes", 4),
         "$.functions.f.memory.assignment.v2", "buffer 0 has 4 bytes"),
        (lambda p: _set(fn(p)["memory"]["assignment"], "v2", 7),
         "$.functions.f.memory.assignment.v2", "between 0 and 1, got 7"),
        (lambda p: _set(p, "kernels_sha256", "xyz"), "$.kernels_sha256", "64 lowercase hex"),
        (lambda p: _set(p, "out_hmac_sha256", 7), "$.out_hmac_sha256", "expected a string"),
        (lambda p: _set(p, "out_hmac_sha256", "ab"), "$.out_hmac_sha256", "64 lowercase hex"),
        (lambda p: _set(p, "kernels_store", {"ab/c.json": "z"}), "$.kernels_store['ab/c.json']",
         "64 lowercase hex"),
        (lambda p: p.pop("kernels_sha256"), "$", "missing field 'kernels_sha256'"),
        (lambda p: _set(p, "functions", []), "$.functions", "expected an object, got a list"),
    ],
)
def test_a_bad_plan_field_is_named_with_its_path(
    out: Path, capsys: pytest.CaptureFixture[str], change: Callable[[Plan], object],
    where: str, what: str,
) -> None:
    edit_plan(out, change)
    code, err = run(capsys, str(out))
    assert code == 1
    assert f"plan.json' is invalid at {where}: " in err and what in err, err


def test_deeply_nested_plan_json(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (out / "plan.json").write_text("[" * 100_000 + "]" * 100_000)
    code, err = run(capsys, str(out))
    assert code == 1 and "plan.json' is corrupt (nested too deeply)" in err


@pytest.mark.parametrize(("array", "said"), [
    (np.ones(9, np.float32), "is float32 [9], but plan.json says float32 [8]"),
    (np.ones(8, np.float64), "is float64 [8], but plan.json says float32 [8]"),
])
def test_a_constant_of_the_wrong_shape_or_dtype(
    out: Path, capsys: pytest.CaptureFixture[str], array: np.ndarray, said: str,
) -> None:
    np.savez(out / "constants.npz", c0=array)
    code, err = run(capsys, str(out))
    assert code == 1 and "constants.npz': array 'c0'" in err and said in err, err


@pytest.mark.parametrize("name", ["../elsewhere.npz", "/tmp/elsewhere.npz", "sub/c.npz", ".."])
def test_constants_file_outside_out_is_refused(
    out: Path, capsys: pytest.CaptureFixture[str], name: str,
) -> None:
    edit_plan(out, lambda p: _set(p, "constants_file", name))
    code, err = run(capsys, str(out))
    assert code == 1
    assert f"is invalid at $.constants_file: {name!r} is not a file name inside" in err


@pytest.mark.parametrize("name", ["constants.npz", "plan.json", "kernels.py", "model.mlir"])
def test_a_link_leading_out_of_out_is_refused(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
) -> None:
    outside = tmp_path / f"outside-{name}"
    (out / name).rename(outside)  # the same content: only where it lives is wrong
    (out / name).symlink_to(outside)
    code, err = run(capsys, str(out))
    assert code == 1 and f"{name}' is a link that leads outside" in err, err


def test_a_link_inside_out_is_followed(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (out / "constants.npz").rename(out / "c.npz")
    (out / "constants.npz").symlink_to("c.npz")
    code, _ = run(capsys, str(out))
    assert code == 0


def test_modified_kernels_are_refused_unless_trusted(
    out: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    kernels = out / "kernels.py"
    kernels.write_text(kernels.read_text() + "\n# edited\n")
    code, err = run(capsys, str(out))
    assert code == 1
    assert "kernels.py' does not match the sha256 digest recorded in plan.json" in err
    assert "--trust-modified-kernels" in err
    with pytest.raises(FusecError, match="does not match the sha256 digest"):
        fusec.load_out(out, device="sim")
    code, _ = run(capsys, str(out), "--trust-modified-kernels", "--check")
    assert code == 0
    model = fusec.load_out(out, device="sim", trust_modified_kernels=True)
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(model(x), -np.exp(x * np.arange(1, 9, dtype=np.float32))
                               .reshape(32), rtol=1e-5)


def test_the_plan_records_the_digest_of_kernels_py(out: Path) -> None:
    import hashlib

    plan = json.loads((out / "plan.json").read_text())
    assert plan["kernels_sha256"] == hashlib.sha256((out / "kernels.py").read_bytes()).hexdigest()


# --- the signature of the user's key ------------------------------------------------------

# Appended to kernels.py by a forger: proof that the file ran if `ran` appears.
PAYLOAD = "\nimport pathlib as _p\n_p.Path({path!r}).write_text('ran')\n"


def forge_kernels(out: Path, proof: Path) -> None:
    """Edit kernels.py and rewrite plan.json's sha256 to match, as anyone who
    can write to a shared OUT could."""
    import hashlib

    kernels = out / "kernels.py"
    kernels.write_text(kernels.read_text() + PAYLOAD.format(path=str(proof)))
    digest = hashlib.sha256(kernels.read_bytes()).hexdigest()
    edit_plan(out, lambda p: _set(p, "kernels_sha256", digest))


def expected(x: np.ndarray) -> np.ndarray:
    return -np.exp(x * np.arange(1, 9, dtype=np.float32)).reshape(32)


def test_an_untouched_out_runs(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "out_hmac_sha256" in json.loads((out / "plan.json").read_text())
    code, _ = run(capsys, str(out), "--check")
    assert code == 0
    x = np.random.default_rng(11).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(fusec.load_out(out, device="sim")(x), expected(x), rtol=1e-5)


def test_a_forged_out_is_refused_and_runs_nothing(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    proof = tmp_path / "proof"
    forge_kernels(out, proof)
    code, err = run(capsys, str(out))
    assert code == 1
    assert "was not written by your fusec, or was changed after compiling" in err, err
    assert "--trust-modified-kernels" in err
    with pytest.raises(FusecError, match="signature does not match your key"):
        fusec.load_out(out, device="sim")
    assert not proof.exists()
    code, _ = run(capsys, str(out), "--trust-modified-kernels")  # the user's own choice
    assert code == 0 and proof.read_text() == "ran"


def test_a_forged_plan_is_refused(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = json.loads((out / "plan.json").read_text())["functions"]["f"]["launches"][0]["grid"]
    edit_plan(out, lambda p: _set(fn(p)["launches"][0], "grid", [grid[0] + 1, *grid[1:]]))
    code, err = run(capsys, str(out))
    assert code == 1 and "signature does not match your key" in err


def test_forged_constants_are_refused(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.savez(out / "constants.npz", c0=np.full(8, 3.0, np.float32))
    code, err = run(capsys, str(out))
    assert code == 1 and "signature does not match your key" in err


def test_an_out_compiled_under_another_key_runs_only_when_trusted(
    out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FUSEC_CONFIG_DIR", str(tmp_path / "colleague"))
    assert main([str(tmp_path / "model.mlir"), "-o", str(tmp_path / "theirs")]) == 0
    monkeypatch.setenv("FUSEC_CONFIG_DIR", str(tmp_path / "me"))
    assert main([str(tmp_path / "model.mlir"), "-o", str(tmp_path / "mine")]) == 0
    code, err = run(capsys, str(tmp_path / "theirs"))
    assert code == 1
    assert "was not written by your fusec" in err and "--trust-modified-kernels" in err, err
    code, err = run(capsys, str(tmp_path / "theirs"), "--trust-modified-kernels", "--check")
    assert code == 0, err
    x = np.random.default_rng(12).standard_normal((4, 8)).astype(np.float32)
    model = fusec.load_out(tmp_path / "theirs", device="sim", trust_modified_kernels=True)
    np.testing.assert_allclose(model(x), expected(x), rtol=1e-5)
    assert run(capsys, str(tmp_path / "mine"))[0] == 0


def test_an_out_when_the_user_has_no_key_is_refused(
    out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FUSEC_CONFIG_DIR", str(tmp_path / "fresh"))
    code, err = run(capsys, str(out))
    assert code == 1 and "you have no key" in err and "--trust-modified-kernels" in err, err
    assert not (tmp_path / "fresh").exists()  # reading never makes a key


def test_an_unsigned_out_is_refused(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_plan(out, lambda p: p.pop("out_hmac_sha256"))
    code, err = run(capsys, str(out))
    assert code == 1 and "carries no signature of your fusec" in err, err


def test_a_kept_kernel_added_to_a_signed_out_is_ignored(
    out: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    entry = out / "kernels" / "ab" / ("ab" + "0" * 62 + ".json")
    entry.parent.mkdir(parents=True)
    entry.write_text('{"format": "fusec-kernel"}')
    code, err = run(capsys, str(out), "--check")
    assert code == 0
    assert f"ignoring the kept kernels in '{out / 'kernels'}'" in err, err
