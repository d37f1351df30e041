"""Programs that mix several fusion features in one function (RoPE's concat
of computed halves feeding attention, repeat_kv with RoPE and a causal mask,
concats of reduction results, sibling column reductions beside a row
softmax, recomputed chains through f16, bf16 norm backward). Each compiles
through the default pipeline, runs in the simulator on fresh random inputs
against the reference interpreter, and keeps the kernel count it has now
(the programs are in tests/fixtures/feature_interactions/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from codegen_harness import check_program

from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry

PROGRAMS = Path(__file__).resolve().parent / "fixtures" / "feature_interactions"
PIPELINE = default_pipeline(make_registry([]), PipelineOptions(target="h200"))
# One bound per output dtype: f32 keeps f32's, the halves their own roundoff
# (the reference rounds every intermediate, kernels only what they write).
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}

# program: launches. The ideal beside each where it is fewer:
CASES = {
    "rope_attention_causal": 2,  # RoPE group + attention (1 if RoPE ran in the attention's load)
    "gqa_causal_rope_f16": 3,  # q and k RoPE differ in heads, so two groups + attention
    "concat_axis0": 2,  # column sum + the concat's group
    "concat_reduce": 2,  # row max + the concat's group
    "batchnorm_train": 1,  # statistics and normalisation in one per-channel kernel
    "colsum2_softmax": 2,  # both column sums in one kernel + the softmax
    "rmsnorm_bwd_bf16": 2,  # dw (column) + dx (row), both recomputing x * rstd
    "recompute_cast": 3,  # the f16 output, the row-normalised output, the column sum
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_feature_interaction(name: str) -> None:
    text = (PROGRAMS / f"{name}.mlir").read_text()
    seed = int(np.random.default_rng().integers(1 << 30))  # fresh inputs every run
    # The bound is relative to each output's largest magnitude: the backward
    # programs subtract rounded values (RMSNorm's dx = (g - xr * m) * rstd), and
    # an element near zero carries the error of its much larger terms (one seed
    # in about 40 put a 0.15 error, 0.8% of the output's scale, on a -1.56).
    # bf16 outputs come back as float32 values, and an f32 output computed
    # from half values differs from the float64 oracle by the half's roundoff
    # (kernels round a half value where they write it, the oracle only at a
    # cast): the bound of the program's half type.
    half = "bfloat16" if "xbf16>" in text else "float16" if "xf16>" in text else "float32"
    tolerance = dict(TOLERANCE, float32=TOLERANCE[half])
    check_program(text, launches=CASES[name], pipeline=PIPELINE, seed=seed,
                  tolerance=tolerance, relative_to_max=True)
