"""The call path in the simulator: the kinds of arrays a model takes and
gives back (CPU torch tensors in and out, DLPack), the graph switch, and
progress bars."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fusec
from fusec.analysis.diagnostics import FusecError
from fusec.runtime import executor as executor_module
from fusec.runtime.arrays import array_kind, result_kind
from fusec.runtime.executor import graph_choice
from fusec.runtime.graph_cache import CallCounts
from fusec.runtime.progress import progress_bar, set_quiet

MODEL = """func.func @f(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = nn.mul %x, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = nn.exp %0 : tensor<2x4xf32>
  func.return %1 : tensor<2x4xf32>
}
"""


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((2, 4)).astype(np.float32),
            rng.standard_normal((2, 4)).astype(np.float32))


@pytest.fixture(scope="module")
def model() -> Any:
    return fusec.compile(MODEL)


def test_cpu_torch_tensors_in_torch_tensors_out(model: Any) -> None:
    torch = pytest.importorskip("torch")
    x, y = _inputs()
    out = model(torch.from_numpy(x), torch.from_numpy(y))
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    assert out.dtype == torch.float32 and tuple(out.shape) == (2, 4)
    np.testing.assert_allclose(out.numpy(), np.exp(x * y), rtol=1e-6)


def test_cpu_torch_tensor_needing_grad_and_non_contiguous_is_copied_in(model: Any) -> None:
    torch = pytest.importorskip("torch")
    x, y = _inputs()
    tx = torch.from_numpy(x.T.copy()).t().requires_grad_(True)  # transposed view
    out = model(tx, torch.from_numpy(y))
    np.testing.assert_allclose(out.numpy(), np.exp(x * y), rtol=1e-6)


def test_cpu_torch_tensor_of_the_wrong_dtype_names_it(model: Any) -> None:
    torch = pytest.importorskip("torch")
    x, y = _inputs()
    with pytest.raises(FusecError, match="input 'x' of @f: expected dtype float32, got float64"):
        model(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(y))
    with pytest.raises(FusecError, match="expected dtype float32, got bfloat16"):
        model(torch.from_numpy(x).to(torch.bfloat16), torch.from_numpy(y))


class _DLPackOnly:
    """A host array that speaks only DLPack."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a
        self.shape, self.dtype = a.shape, a.dtype

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._a.__dlpack_device__()


def test_dlpack_host_arrays_are_accepted(model: Any) -> None:
    x, y = _inputs()
    assert array_kind(_DLPackOnly(x)) == "dlpack-cpu"
    out = model(_DLPackOnly(x), y)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.exp(x * y), rtol=1e-6)


def test_result_kind_is_the_first_non_numpy_input() -> None:
    torch = pytest.importorskip("torch")
    x, _ = _inputs()
    assert result_kind([x, x]) == "numpy"
    assert result_kind([x, torch.from_numpy(x)]) == "torch-cpu"
    assert array_kind(object()) == "other"


def test_not_an_array_is_refused(model: Any) -> None:
    _, y = _inputs()
    with pytest.raises(FusecError, match="input 'x' of @f: expected an array, got str"):
        model("x", y)


def test_graphs_never_in_the_simulator_and_need_cupy(monkeypatch, capsys) -> None:
    assert graph_choice(None, simulator=True) is False
    assert graph_choice(True, simulator=True) is False
    assert graph_choice(False, simulator=False) is False
    try:
        import cupy  # noqa: F401
    except ImportError:
        monkeypatch.setattr(executor_module, "_GRAPH_NOTE_PRINTED", False)
        assert graph_choice(None, simulator=False) is False
        assert graph_choice(None, simulator=False) is False
        err = capsys.readouterr().err
        assert err.count("CUDA graphs are off because CuPy is not installed") == 1
        with pytest.raises(FusecError, match="graphs=True needs CuPy"):
            graph_choice(True, simulator=False)
    else:
        assert graph_choice(None, simulator=False) is True


def test_graphs_option_reaches_the_executor(model: Any) -> None:
    off = fusec.compile(MODEL, graphs=False)
    x, y = _inputs()
    np.testing.assert_allclose(off(x, y), model(x, y))
    assert off.executor.graphs is False and off.executor.graph is None


def test_call_counts_say_how_calls_ran() -> None:
    model = fusec.compile(MODEL, graphs=False)
    assert model.call_counts() == CallCounts()  # nothing ran yet
    x, y = _inputs()
    model(x, y)
    model(x, y)
    counts = model.call_counts()
    assert counts == CallCounts(one_by_one=2)  # the simulator never replays graphs
    model(x, y)
    assert counts.one_by_one == 2  # a copy, not the live record


def test_progress_bar_names_each_kernel_when_asked(monkeypatch, capsys) -> None:
    monkeypatch.setenv("FUSEC_PROGRESS", "1")
    set_quiet(False)  # an earlier `--quiet` job in this process would silence it
    with progress_bar(2, "compiling kernels") as bar:
        bar.advance("f_g0_mul")
        bar.advance("f_g1_exp")
    err = capsys.readouterr().err  # pytest's stderr is no terminal: plain lines
    assert err.splitlines() == ["fusec: compiling kernels: f_g0_mul (1/2)",
                                "fusec: compiling kernels: f_g1_exp (2/2)"]


def test_progress_bar_silent_off_a_terminal_and_when_quiet(monkeypatch, capsys) -> None:
    monkeypatch.delenv("FUSEC_PROGRESS", raising=False)
    with progress_bar(2, "compiling kernels") as bar:  # pytest's stderr is not a TTY
        bar.advance("f_g0_mul")
    monkeypatch.setenv("FUSEC_PROGRESS", "1")
    set_quiet(True)
    try:
        with progress_bar(2, "compiling kernels") as bar:
            bar.advance("f_g0_mul")
    finally:
        set_quiet(False)
    assert capsys.readouterr().err == ""
