"""`--autotune` times cuDNN against fusec's own convolution kernel on the
GPU (`compiler/library_tuning.py`); the CPU side, with a fake timer, is
tests/test_autotune_library.py. bench/autotune_library.py prints the table
for larger layers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fusec.analysis.cudnn_library import cudnn_available
from fusec.compiler.autotune import AutotuneOptions
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.compiled_model import CompiledModel

CONV = """
func.func @f(%x: tensor<8x32x28x28xf32>, %w: tensor<32x32x3x3xf32>, %b: tensor<32x1x1xf32>)
    -> tensor<8x32x28x28xf32> {
  %c = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1],
                         groups = 1} : (tensor<8x32x28x28xf32>, tensor<32x32x3x3xf32>)
                         -> tensor<8x32x28x28xf32>
  %s = nn.add %c, %b : (tensor<8x32x28x28xf32>, tensor<32x1x1xf32>) -> tensor<8x32x28x28xf32>
  %y = nn.relu %s : tensor<8x32x28x28xf32>
  func.return %y : tensor<8x32x28x28xf32>
}
"""


@pytest.mark.gpu
def test_gpu_library_or_own_is_timed_and_the_numbers_match(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not cudnn_available():
        pytest.skip("needs cuDNN")
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(tmp_path))
    art = compile_model(CONV, autotune=AutotuneOptions(top_k=1, quiet=True))
    assert art.tuning is not None
    (choice,) = art.tuning.choices
    assert choice.family == "conv" and choice.library_us > 0 and choice.own_us > 0
    library = any("library" in e for e in art.plan["functions"]["f"]["launches"])
    assert library == (choice.kept == "library")
    model = CompiledModel(art.program, art.memory, art.plan, device="gpu")
    reference = parse_module(make_context(), CONV, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=2)
    expected = run_module(reference, inputs, "f")[0]
    np.testing.assert_allclose(model(*inputs), expected, rtol=1e-3, atol=1e-3)
    again = compile_model(CONV, autotune=AutotuneOptions(top_k=1, quiet=True))
    assert again.tuning is not None and [c.from_cache for c in again.tuning.choices] == [True]
    assert again.plan["functions"]["f"]["launches"] == art.plan["functions"]["f"]["launches"]
