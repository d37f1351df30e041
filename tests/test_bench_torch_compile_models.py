"""bench/torch_compile_models.py without a GPU: its arguments, the dtype
conversion, the table of nodes left to PyTorch (grouped by op, with the
reason), and small models through the backend in the simulator
(`--device cpu --small`), in f16 and bf16, against eager in the same dtype.

The real models need transformers (gpt2, llama) and timm or torchvision
(vit); their tests skip where those are missing. The rest needs torch only:
a small module stands in for a model."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fusec.bench import torch_compile_models as bench
from fusec.bench.real_models import Case

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "torch_compile_models.py"


def _torch() -> ModuleType:
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")  # bf16 values in translation (docs/pytorch.md)
    return torch


@pytest.mark.parametrize(("args", "message"), [
    (["--models", "gpt3"], "error: --models: unknown gpt3; expected some of: gpt2, llama"),
    (["--models", "gpt2,resnet5"], "error: --models: unknown resnet5"),
    (["--models", ","], "error: --models: unknown (none given)"),
    (["--dtypes", "f32,f8"], "error: --dtypes: unknown f8; expected some of: f32, f16, bf16"),
    (["--iters", "0"], "error: --iters and --repeat must be at least 1"),
    (["--fusec-options", "{ptxas_wait: 0}"], "error: --fusec-options is not JSON"),
    (["--fusec-options", "[0]"], "error: --fusec-options must be a JSON object"),
])
def test_bad_arguments_are_errors_not_tracebacks(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--small", *args],
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cpu_needs_small() -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--device", "cpu"])
    assert exit_info.value.code == 2


def test_the_dtypes_are_parsed_in_order_once_each() -> None:
    args = bench._parse(["--dtypes", "bf16, f32,bf16", "--models", "llama,gpt2"])
    assert args.dtypes == ["bf16", "f32"]
    assert args.models == ["llama", "gpt2"]
    assert bench._parse([]).dtypes == ["f32", "f16", "bf16"]


def test_fusec_options_are_parsed_into_a_dict() -> None:
    assert bench._parse(["--fusec-options", '{"ptxas_wait": 0}']).fusec_options == {"ptxas_wait": 0}
    assert bench._parse([]).fusec_options == {}


def test_convert_makes_floats_the_dtype_and_keeps_token_ids() -> None:
    torch = _torch()
    nn = torch.nn
    model = nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4))
    model.register_buffer("scale", torch.rand(4))
    ids, x = torch.randint(0, 10, (2, 3)), torch.randn(2, 3, 4)
    for dtype, kind in [("bf16", torch.bfloat16), ("f16", torch.float16),
                        ("f32", torch.float32)]:
        converted, (ids2, x2) = bench.convert(torch, model, (ids, x), dtype)
        assert {p.dtype for p in converted.parameters()} == {kind}
        assert converted.scale.dtype == kind
        assert ids2.dtype == torch.int64 and torch.equal(ids2, ids)
        assert x2.dtype == kind
        assert torch.allclose(x2.float(), x, rtol=1e-2, atol=1e-2)


def _cumprod_model(torch: Any, small: bool) -> Case:
    """A linear layer, two cumprods and a sort: fusec has no cumprod or sort."""
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: Any) -> Any:
            h = self.linear(x)
            values, _ = torch.sort(h, -1)
            return torch.cumprod(torch.cumprod(h, -1) * 2, 0) + values

    torch.manual_seed(0)
    return Case("cumprod_model", Model().eval(), (torch.randn(3, 8),), "3x8")


def _missing(torch: Any, small: bool) -> Case:
    raise ImportError("No module named 'nosuchpackage'")


def _broken(torch: Any, small: bool) -> Case:
    class Broken(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            raise RuntimeError("this model does not run")

    return Case("broken", Broken(), (torch.randn(2),), "2")


def test_nodes_left_to_pytorch_by_op_with_the_reason(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _torch()
    monkeypatch.setitem(bench.BUILDERS, "cumprod_model", _cumprod_model)
    monkeypatch.setitem(bench.BUILDERS, "missing", _missing)
    code = bench.main(["--device", "cpu", "--small", "--models", "cumprod_model,missing",
                       "--dtypes", "bf16,f32"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "missing: skipped (No module named 'nosuchpackage')" in captured.err
    assert "Skipped (package missing): missing (No module named 'nosuchpackage')." in out
    for dtype, tol in [("bf16", "0.04"), ("f32", "0.002")]:
        row = next(line for line in out.splitlines()
                   if line.startswith(f"| cumprod_model | {dtype} | "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        # launches, partitions (graphs), fused, left (glue), agreement, compile seconds
        assert int(cells[2]) >= 1 and cells[3].endswith("(1)")
        assert cells[5] == "4 (1)"  # cumprod, cumprod, sort and the sort's getitem
        assert cells[6].startswith("ok (") and cells[6].endswith(f"<= {tol})")
        reason = "fusec has no translation for aten.cumprod.default"
        assert f"| cumprod_model | {dtype} | aten.cumprod.default | 2 | {reason} |" in out
        assert f"| cumprod_model | {dtype} | aten.sort.default | 1 |" in out
        assert (f"| cumprod_model | {dtype} | getitem | 1 | glue (a view or an output "
                "pick), outside every fusec partition |") in out


def test_a_model_that_fails_is_a_row_and_a_nonzero_exit(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _torch()
    monkeypatch.setitem(bench.BUILDERS, "broken", _broken)
    monkeypatch.setitem(bench.BUILDERS, "cumprod_model", _cumprod_model)
    code = bench.main(["--device", "cpu", "--small", "--models", "broken,cumprod_model",
                       "--dtypes", "f16"])
    out = capsys.readouterr().out
    assert code == 1
    assert "| broken | f16 | 0 | 0 (0) | 0 | 0 (0) | FAILED: RuntimeError: this model " \
           "does not run | - |" in out
    assert "| cumprod_model | f16 | " in out  # the next model still ran


def test_the_timed_table() -> None:
    result = bench.Result("gpt2", "bf16", "B4 S256", "ok (3.0e-03 <= 0.02)", launches=60,
                          partitions=2, graphs=1, fused=400, left=3, glue=1,
                          fallbacks=[("aten.cumprod.default", 2, "no | cumprod")],
                          times={"eager": 3.0, "inductor": 2.0, "fusec": 1.6},
                          seconds={"fusec": 12.34, "inductor": 30.0},
                          calls="2 / 40 (1 copying, 3.0 MB each)")
    lines = bench.report([result], [], timed=True)
    assert ("| gpt2 | bf16 | 3.000 | 2.000 | 1.600 | 1.25x | 2 / 40 (1 copying, 3.0 MB each) | "
            "60 | 2 (1) | 400 | 3 (1) | ok (3.0e-03 <= 0.02) | 12.3, 30.0 |") in lines
    assert "| gpt2 | bf16 | aten.cumprod.default | 2 | no \\| cumprod |" in lines
    header = next(line for line in lines if line.startswith("| model |"))
    rule = lines[lines.index(header) + 1]
    assert header.count("|") == rule.count("|")


def test_call_summary_sums_the_partitions_call_counts() -> None:
    from types import SimpleNamespace

    from fusec.runtime.graph_cache import CallCounts

    def part(counts: CallCounts) -> SimpleNamespace:
        return SimpleNamespace(model=SimpleNamespace(call_counts=lambda: counts))

    graph = SimpleNamespace(fusec_partitions=[
        part(CallCounts(one_by_one=1, replays=9)),
        part(CallCounts(one_by_one=1, replays=9, copying_replays=2, copied_bytes=6 << 20))])
    assert bench.call_summary([graph]) == "2 / 18 (2 copying, 3.0 MB each)"
    assert bench.call_summary([SimpleNamespace(fusec_partitions=[
        part(CallCounts(one_by_one=3))])]) == "3 / 0"


def _imports(name: str) -> bool:
    """Whether `name` imports (installed is not enough: timm needs torchvision)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _real_model_packages(model: str) -> None:
    if model == "vit":
        if not any(_imports(p) for p in ("timm", "torchvision")):
            pytest.skip("vit needs timm or torchvision (timm imports torchvision)")
    elif model in ("convnext", "swin"):
        if not _imports("timm"):
            pytest.skip(f"{model} needs timm (which imports torchvision)")
    else:
        pytest.importorskip("transformers")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("model", ["gpt2", "llama", "vit", "bert", "roberta", "t5_encoder",
                                   "convnext", "swin"])
def test_a_small_real_model_in_half_precision(
        model: str, dtype: str, capsys: pytest.CaptureFixture[str]) -> None:
    _torch()
    _real_model_packages(model)
    code = bench.main(["--device", "cpu", "--small", "--models", model, "--dtypes", dtype])
    out = capsys.readouterr().out
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.startswith(f"| {model} | {dtype} | "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[4]) > 0  # FX nodes fusec ran
    assert cells[6].startswith("ok ("), row
