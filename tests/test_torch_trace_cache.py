"""The torch backend's trace cache (`importers/torch/trace_cache.py`): a graph
compiled again (after `torch._dynamo.reset()`, or in a new process) with the
cache filled is rebuilt without aot_autograd's trace, and gives eager's
numbers; the graphs whose aot_autograd wrappers do more than a call (buffers
mutated in place, outputs aliasing inputs, autograd) are traced every time.
The traces are counted through `_ForwardCompiler` (aot_autograd's forward
compiler) and the cache's listener."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from fusec.importers.torch import backend, trace_cache  # noqa: E402
from fusec.importers.torch.backend import Backend, fusec_backend  # noqa: E402


class Block(nn.Module):
    """Linear, layer norm, a causal softmax, a cumprod fusec leaves to PyTorch
    (glue between two partitions) and a tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.proj(x))
        scores = h @ h.transpose(-1, -2)
        mask = torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).tril()
        attn = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return torch.tanh(torch.cumprod(attn @ h, dim=-1)) * torch.tensor(0.5)


class Broken(nn.Module):
    """Two graphs: Dynamo breaks the trace at `graph_break`."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x))
        torch._dynamo.graph_break()
        return torch.sigmoid(self.second(y))


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """The cache on, in a folder of its own; its events and the traces, in order."""
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEC_TRACE_CACHE", "1")
    seen: list[tuple[str, str]] = []
    original = backend._ForwardCompiler.__call__

    def traced(self: Any, gm: Any, example_inputs: Any) -> Any:
        seen.append(("traced", ""))
        return original(self, gm, example_inputs)

    monkeypatch.setattr(backend._ForwardCompiler, "__call__", traced)

    def listener(event: str, detail: str) -> None:
        seen.append((event, detail))

    trace_cache.add_listener(listener)
    yield seen
    trace_cache.remove_listener(listener)


def _compile_and_call(module: nn.Module, *inputs: torch.Tensor, grad: bool = False) -> Any:
    torch._dynamo.reset()  # a new compile, as a new process makes
    with torch.set_grad_enabled(grad):
        return torch.compile(module, backend=fusec_backend)(*inputs)


def _kinds(events: list[tuple[str, str]]) -> list[str]:
    return [e for e, _ in events]


def test_a_second_compile_is_rebuilt_without_tracing(events: list[tuple[str, str]]) -> None:
    torch.manual_seed(0)
    module = Block().eval()
    x = torch.randn(1, 6, 8)
    first = _compile_and_call(module, x)
    assert _kinds(events) == ["miss", "traced", "stored"]
    summary = backend.reports()[-1].summary()
    events.clear()
    x = torch.randn(1, 6, 8)  # fresh numbers, same shapes: the same entry
    out = _compile_and_call(module, x)
    assert _kinds(events) == ["hit"]  # no trace
    assert backend.reports()[-1].summary() == summary
    assert "1 left to PyTorch" in summary  # the cumprod, run by the rebuilt glue
    with torch.no_grad():
        expected = module(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    assert not torch.equal(out, first)


def test_a_trace_starts_the_kernel_builders_and_a_hit_does_not(
        events: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.compiler import python_api

    asked: list[str] = []
    monkeypatch.setattr(python_api, "start_kernel_builders", lambda device: asked.append(device))
    module = Block().eval()
    _compile_and_call(module, torch.randn(1, 6, 8))
    assert _kinds(events)[:2] == ["miss", "traced"] and asked == ["auto"]
    events.clear()
    _compile_and_call(module, torch.randn(1, 6, 8))
    assert _kinds(events) == ["hit"] and asked == ["auto"]


def test_another_shape_is_another_entry(events: list[tuple[str, str]]) -> None:
    torch.manual_seed(1)
    module = Block().eval()
    _compile_and_call(module, torch.randn(1, 6, 8))
    events.clear()
    x = torch.randn(2, 5, 8)
    out = _compile_and_call(module, x)
    assert _kinds(events) == ["miss", "traced", "stored"]
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-5)


def test_each_graph_of_a_broken_trace_is_kept(events: list[tuple[str, str]]) -> None:
    torch.manual_seed(2)
    module = Broken().eval()
    _compile_and_call(module, torch.randn(3, 8))
    assert _kinds(events).count("stored") == 2
    events.clear()
    x = torch.randn(3, 8)
    out = _compile_and_call(module, x)
    assert _kinds(events) == ["hit", "hit"]
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-5)


def test_batch_norm_in_training_mode_is_traced_every_time(
        events: list[tuple[str, str]]) -> None:
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()).train()
    reference = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()).train()
    reference.load_state_dict(module.state_dict())
    for _ in range(2):
        x = torch.randn(6, 4)
        out = _compile_and_call(module, x)
        with torch.no_grad():
            expected = reference(x)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        # the running statistics were updated in place, as eager updates them
        torch.testing.assert_close(module[1].running_mean, reference[1].running_mean)
        torch.testing.assert_close(module[1].running_var, reference[1].running_var)
    assert _kinds(events).count("traced") == 2 and "hit" not in _kinds(events)
    assert any(e == "bypass" and "mutates an input" in d for e, d in events)


def test_an_output_aliasing_an_input_is_traced_every_time(
        events: list[tuple[str, str]]) -> None:
    class Aliasing(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.exp(x), x.t()

    for _ in range(2):
        x = torch.randn(3, 5)
        y, view = _compile_and_call(Aliasing(), x)
        torch.testing.assert_close(y, torch.exp(x))
        assert view.data_ptr() == x.data_ptr() and view.shape == (5, 3)
    assert _kinds(events).count("traced") == 2 and "hit" not in _kinds(events)
    assert any(e == "bypass" and "aliases" in d for e, d in events)


def test_autograd_graphs_are_not_kept(events: list[tuple[str, str]]) -> None:
    torch.manual_seed(4)
    module = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    for _ in range(2):
        x = torch.randn(2, 8)
        out = _compile_and_call(module, x, grad=True)
        torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-5)
    assert _kinds(events).count("traced") == 2
    assert ("bypass", "autograd needs a backward graph") in events


def test_a_tampered_entry_is_traced_again(events: list[tuple[str, str]], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(5)
    module = Block().eval()
    _compile_and_call(module, torch.randn(1, 4, 8))
    (entry,) = (tmp_path / "traces").glob("*/*.json")
    entry.write_bytes(entry.read_bytes().replace(b"tanh", b"relu"))
    events.clear()
    capsys.readouterr()
    x = torch.randn(1, 4, 8)
    out = _compile_and_call(module, x)
    assert "ignoring the traced graph" in capsys.readouterr().err
    assert _kinds(events) == ["miss", "traced", "stored"]
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-5)


def test_remarks_and_the_switch_turn_it_off(events: list[tuple[str, str]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    module = nn.Sequential(nn.Linear(8, 8), nn.GELU()).eval()
    x = torch.randn(2, 8)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(module, backend=Backend(remarks=True))(x)
    monkeypatch.setenv("FUSEC_TRACE_CACHE", "0")
    _compile_and_call(module, x)
    assert _kinds(events) == ["traced", "traced"]


def test_a_new_process_reuses_the_trace(tmp_path: Path) -> None:
    script = """
import sys, torch
from fusec.importers.torch import backend, trace_cache
events = []
trace_cache.add_listener(lambda event, _detail: events.append(event))
torch.manual_seed(int(sys.argv[1]))
module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
torch.manual_seed(0)
module.load_state_dict({k: torch.randn_like(v) for k, v in module.state_dict().items()})
x = torch.randn(3, 8)
with torch.no_grad():
    out = torch.compile(module.eval(), backend=backend.fusec_backend)(x)
    err = (out - module(x)).abs().max().item()
print("RESULT", ",".join(events), err)
"""
    env = {**os.environ, "FUSEC_CACHE_DIR": str(tmp_path), "FUSEC_TRACE_CACHE": "1",
           "FUSEC_PROGRAM_CACHE": "1"}
    results = []
    for seed in (1, 2):  # other inputs each time
        proc = subprocess.run([sys.executable, "-c", script, str(seed)], env=env,
                              capture_output=True, text=True, check=False, timeout=300)
        line = next((s for s in proc.stdout.splitlines() if s.startswith("RESULT")), None)
        assert line is not None, proc.stderr[-2000:]
        results.append(line.split()[1:])
    assert results[0][0] == "miss,stored" and results[1][0] == "hit"
    assert all(float(err) < 1e-4 for _, err in results)
