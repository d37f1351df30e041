"""The executor, the device choice and the `fusec.compile` API, in the
simulator (tiny shapes: it runs kernels in Python)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import fusec
from fusec.analysis.diagnostics import FusecError
from fusec.analysis.memory_plan import MemoryPlan, plan_memory
from fusec.analysis.program import ArgSpec, FunctionProgram, KernelLaunch, Program, TensorSpec, View
from fusec.runtime.device import SIM_NOTICE, gpu_available, select_device
from fusec.runtime.executor import Executor, run_program

KERNELS = '''
from numba import cuda


@cuda.jit
def double(a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] * 2


@cuda.jit
def inc(a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + 1


@cuda.jit
def add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
'''

SPEC = TensorSpec((2, 4), "float32")


def step(kernel: str, reads: list[str], writes: str) -> KernelLaunch:
    args = [ArgSpec(v, (8,), False) for v in reads] + [ArgSpec(writes, (8,), True)]
    return KernelLaunch(kernel, (1, 1, 1), (8, 1, 1), 0, args, ["nn.x"], f"g_{writes}")


def late_read_program() -> Program:
    """t0 = 2x; t1..t3 = +1 each; y = t3 + t0: t0 is read long after it is made,
    while t1..t3 cycle through reused buffers."""
    launches = [step("double", ["x"], "t0"), step("inc", ["t0"], "t1"),
                step("inc", ["t1"], "t2"), step("inc", ["t2"], "t3"),
                step("add", ["t3", "t0"], "y")]
    values = dict.fromkeys(["x", "t0", "t1", "t2", "t3", "y"], SPEC)
    fp = FunctionProgram("f", ["x"], ["x"], ["y"], values, launches)
    return Program(KERNELS, {"f": fp})


def x_input() -> np.ndarray:
    return np.arange(8, dtype=np.float32).reshape(2, 4)


def test_reused_buffers_give_the_right_numbers() -> None:
    program = late_read_program()
    plan = plan_memory(program.functions["f"])
    assert len(plan.buffers) < 4  # buffers really are reused
    (y,) = run_program(program, "f", [x_input()], memory=plan)
    np.testing.assert_array_equal(y, 4 * x_input() + 3)


def test_the_late_read_catches_a_hazard() -> None:
    # A wrong plan that gives t2 the buffer of t0 while t0 is still live: the
    # late read then sees t2's value. This is what planning by liveness prevents.
    program = late_read_program()
    wrong = MemoryPlan([256, 256], {"t0": 0, "t1": 1, "t2": 0, "t3": 1})
    (y,) = run_program(program, "f", [x_input()], memory=wrong)
    assert not np.array_equal(y, 4 * x_input() + 3)


def test_constants_views_and_returned_inputs() -> None:
    values = {"x": SPEC, "c": SPEC, "t": SPEC, "r": TensorSpec((8,), "float32")}
    fp = FunctionProgram("f", ["x"], ["x"], ["r", "x"], values,
                         [step("add", ["x", "c"], "t")], views=[View("r", "t")],
                         constants={"c": np.full((2, 4), 10, np.float32)})
    executor = Executor(Program(KERNELS, {"f": fp}), "f", "sim")
    x = x_input()
    r, x_back = executor([x])
    assert r.shape == (8,)
    np.testing.assert_array_equal(r, (x + 10).reshape(8))
    np.testing.assert_array_equal(x_back, x)
    assert x_back is not x
    uploaded = executor.constants["c"]
    executor([x])
    assert executor.constants["c"] is uploaded  # uploaded once, not per call


def test_device_arrays_come_back_as_device_arrays() -> None:
    from numba import cuda

    (y,) = run_program(late_read_program(), "f", [cuda.to_device(x_input())])
    assert not isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y.copy_to_host(), 4 * x_input() + 3)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([], "takes 1 input(s) (x), got 0"),
        ([np.zeros((4, 2), np.float32)], "input 'x' of @f: expected shape (2, 4), got (4, 2)"),
        ([np.zeros((2, 4), np.float64)], "input 'x' of @f: expected dtype float32, got float64"),
        (["abc"], "input 'x' of @f: expected an array, got str"),
    ],
)
def test_bad_inputs_name_the_argument(inputs: list[np.ndarray], message: str) -> None:
    with pytest.raises(FusecError) as err:
        run_program(late_read_program(), "f", inputs)
    assert message in err.value.message


def test_unknown_function_and_missing_kernel() -> None:
    with pytest.raises(FusecError, match=r"no function @g .*functions: @f"):
        run_program(late_read_program(), "g", [x_input()])
    program = late_read_program()
    program.functions["f"].launches[0].kernel = "nope"
    with pytest.raises(FusecError, match=r"kernels\.py has no kernel 'nope'"):
        run_program(program, "f", [x_input()])


def test_unknown_device_is_an_error() -> None:
    with pytest.raises(FusecError, match="unknown device 'tpu'"):
        select_device("tpu")


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_device_gpu_without_a_gpu_is_an_error() -> None:
    with pytest.raises(FusecError, match="--device gpu"):
        select_device("gpu")


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_auto_picks_the_simulator_with_a_notice_before_numba_cuda_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    code = ("from fusec.runtime.device import select_device\n"
            "print(select_device('auto'), select_device('auto'))\n"
            "from numba.cuda.core import config\n"
            "print(config.ENABLE_CUDASIM)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.split() == ["sim", "sim", "1"]
    assert done.stderr.strip() == SIM_NOTICE  # printed once


TWO_FUNCTIONS = """
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = nn.exp %x : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
func.func @g(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = nn.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %p = nn.mul %s, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %s, %p : tensor<8xf32>, tensor<8xf32>
}
"""


def test_compile_api() -> None:
    model = fusec.compile(TWO_FUNCTIONS, device="sim")
    x = x_input() / 8
    np.testing.assert_allclose(model(x), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(model(x=x), np.exp(x), rtol=1e-6)
    assert model.launches == 1
    assert set(model.plan["functions"]) == {"f", "g"}
    g = model.function("g")
    a, b = np.ones(8, np.float32), np.arange(8, dtype=np.float32)
    s, p = g(a, b)
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(p, (a + b) * b)
    assert g.launches == len(model.plan["functions"]["g"]["launches"])
    assert g.input_names == ["a", "b"]
    assert fusec.compile(TWO_FUNCTIONS, fusion=False, device="sim").function("g").launches == 2
    with pytest.raises(FusecError, match="has no argument 'c'"):
        g(a=a, c=b)
    with pytest.raises(FusecError, match="no function @h"):
        model.function("h")


class CudaAPIError(Exception):
    """Stands in for numba's error of the same name (not importable in the simulator)."""


def test_out_of_memory_is_a_clear_error() -> None:
    executor = Executor(late_read_program(), "f", "sim")
    real = executor.cuda

    class NoMemory:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def device_array(self, *args: object, **kwargs: object) -> None:
            raise CudaAPIError("[CUresult.CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc "
                               "results in CUDA_ERROR_OUT_OF_MEMORY")

    executor.cuda = NoMemory()  # type: ignore[assignment]
    with pytest.raises(FusecError, match="out of GPU memory running @f"):
        executor([x_input()])


def test_non_contiguous_device_input_is_an_error() -> None:
    from numba import cuda

    strided = cuda.to_device(np.zeros((4, 4), np.float32))[:, ::2]
    fp = late_read_program().functions["f"]
    fp.values["x"] = TensorSpec((4, 2), "float32")
    with pytest.raises(FusecError, match="input 'x' of @f must be a C-contiguous"):
        run_program(Program(KERNELS, {"f": fp}), "f", [strided])


def test_low_occupancy_warning_off_unless_the_user_set_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.runtime import device

    monkeypatch.delenv("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", raising=False)
    device.select_device("sim")
    assert os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] == "0"
    monkeypatch.setenv("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "1")
    device.select_device("sim")
    assert os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] == "1"
