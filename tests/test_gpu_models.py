"""Every shared model at full size on a real GPU, fused and unfused, checked
against the float64 reference interpreter (skipped without a CUDA GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.run_command import compare
from fusec.reference.interpreter import find_function, random_inputs, run_function

MODELS = Path(__file__).resolve().parent.parent / "bench" / "models"

# The most launches each model may take with fusion on (the fusion issue's table).
MAX_FUSED_LAUNCHES = {
    "chain16": 1,
    "softmax": 1,
    "add_layernorm_gelu": 1,
    "mlp": 2,
    "attention": 1,
    "inverted_residual": 3,
    "gpt2_block": 10,
}

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", sorted(MAX_FUSED_LAUNCHES))
def test_full_size_model_matches_reference(name: str) -> None:
    import fusec

    path = MODELS / f"{name}.mlir"
    func = find_function(parse_module(make_context(), path.read_text(), str(path)), None)
    inputs = random_inputs(func, seed=1)
    expected = run_function(func, inputs)
    fused = fusec.compile(path, fusion=True, device="gpu")
    unfused = fusec.compile(path, fusion=False, device="gpu")
    # The bound counts generated kernels: where the cost model picks a library
    # GEMM (cuBLAS through CuPy), the call runs beside the epilogue kernel.
    library = sum(1 for launch in fused.signature.launches if launch.library)
    assert fused.launches - library <= MAX_FUSED_LAUNCHES[name]
    assert unfused.launches > fused.launches or fused.launches == 1
    if name == "gpt2_block":
        assert unfused.launches >= 3 * fused.launches
    for model in (fused, unfused):
        got = model(*inputs)
        outs = list(got) if isinstance(got, tuple) else [got]
        for out, ref in zip(outs, expected, strict=True):
            ok, message = compare(np.asarray(out), ref)
            assert ok, f"{name} ({model.launches} launches): {message}"
