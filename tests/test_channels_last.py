"""`channels-last`: the convolutions cuDNN computes run in NHWC, with the
layout changes at the graph's edges. On the CPU: the rewrite keeps the
program's numbers (reference interpreter), the transposes left, the plan
the compile writes (cuDNN counted installed), the choice to stay in NCHW
where nothing would be saved, and what happens without cuDNN (nothing
turns; a channels-last convolution of the input runs as fusec's NCHW
kernel, checked in the simulator). The GPU side is
tests/test_gpu_library_conv.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from codegen_harness import check_program

from fusec.analysis.remarks import collect_remarks
from fusec.compiler.cli import main
from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.passes import channels_last, tile_and_promote
from fusec.reference.interpreter import find_function, random_inputs, run_module

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from cnn_program import Net, cnn_text

HEAD = "fold-empty,decompose,sink-transposes,unmerge-broadcasts"


def lone_conv_text(dt: str = "f32", layout: str = "nchw") -> str:
    """`relu(conv(x, w) + b)` with a 3x3 convolution, in either layout."""
    if layout == "nhwc":
        x, w, y, b = "2x9x9x8", "16x3x3x8", "2x9x9x16", "16"
        attrs = ', layout = "nhwc"'
    else:
        x, w, y, b, attrs = "2x8x9x9", "16x8x3x3", "2x16x9x9", "16x1x1", ""
    t = lambda s: f"tensor<{s}x{dt}>"  # noqa: E731
    return (f"func.func @f(%x: {t(x)}, %w: {t(w)}, %b: {t(b)}) -> {t(y)} {{\n"
            f"  %c = nn.conv2d %x, %w {{strides = [1, 1], pads = [1, 1, 1, 1], dilations = "
            f"[1, 1], groups = 1{attrs}}} : ({t(x)}, {t(w)}) -> {t(y)}\n"
            f"  %s = nn.add %c, %b : ({t(y)}, {t(b)}) -> {t(y)}\n"
            f"  %e = nn.relu %s : {t(y)}\n  func.return %e : {t(y)}\n}}\n")


@pytest.fixture
def with_cudnn(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN counted as installed (the compiler never loads it)."""
    monkeypatch.setattr(tile_and_promote, "cudnn_available", lambda: True)
    monkeypatch.setattr(channels_last, "cudnn_available", lambda: True)


def run_passes(text: str, spec: str) -> Any:
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return module


def ops_of(module: Any, kind: type) -> list[Any]:
    return [op for op in module.walk() if isinstance(op, kind)]


def test_the_rewrite_keeps_the_numbers_and_leaves_transposes_at_the_edges(
        with_cudnn: None) -> None:
    text = cnn_text()
    before = parse_module(make_context(), text, "test.mlir")
    after = run_passes(text, f"{HEAD},channels-last{{conv=library}},cse,dce")
    convs = ops_of(after, nn.Conv2dOp)
    assert len(convs) == 8 and all(c.channels_last for c in convs)
    weights = {c.weight for c in convs}
    edges = [t for t in ops_of(after, nn.TransposeOp) if t.results[0] not in weights]
    # the input into NHWC, the stem's result into NCHW for the max pool
    # (read by its batch norm's kernel), the pooled value back into NHWC
    assert len(edges) == 3, [str(t) for t in edges]
    assert {tuple(t.perm) for t in edges} == {(0, 2, 3, 1), (0, 3, 1, 2)}
    # the 7x7 and the two 3x3 weights are transposed; the 1x1 ones reshaped
    assert len([t for t in ops_of(after, nn.TransposeOp) if t.results[0] in weights]) == 3
    mean = ops_of(after, nn.ReduceOp)[0]
    assert list(mean.axes) == [1, 2]  # the global pool reduces NHWC's H and W
    inputs = random_inputs(find_function(before), seed=3)
    want = run_module(before, inputs)[0]
    got = run_module(after, inputs)[0]
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def launches(text: str, **options: Any) -> list[dict[str, Any]]:
    art = compile_model(text, target="h200", schedule=ScheduleOptions(**options))
    return art.plan["functions"]["f"]["launches"]


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
def test_the_plan_calls_cudnn_in_nhwc_with_no_copy_between_convolutions(
        with_cudnn: None, dt: str) -> None:
    got = launches(cnn_text(dt), conv="library")
    convs = [la for la in got if la.get("library", "").startswith("cudnn_conv")]
    assert len(convs) == 8 and all(la["layout"] == "nhwc" for la in convs)
    copies = [la for la in got if la["ops"] == ["nn.transpose"]]
    # the input, the pooled value, three weights: none between convolutions
    assert len(copies) == 5
    first = convs[0]
    x, w, y = (a["view_shape"] for a in first["args"])
    assert (x, w, y) == ([2, 32, 32, 3], [8, 7, 7, 3], [2, 16, 16, 8])


def test_a_lone_convolution_stays_nchw(with_cudnn: None) -> None:
    """Turned alone it would leave two transposes, which cuDNN's NCHW call
    does itself."""
    got = launches(lone_conv_text(), conv="library")
    assert len(got) == 2 and "layout" not in got[0] and got[0]["library"] == "cudnn_conv_f32"


def test_without_cudnn_nothing_turns() -> None:
    module = run_passes(cnn_text(), f"{HEAD},channels-last{{conv=library}}")
    assert not any(c.channels_last for c in ops_of(module, nn.Conv2dOp))
    assert not ops_of(module, nn.TransposeOp)


def test_conv_fused_turns_nothing(with_cudnn: None) -> None:
    module = run_passes(cnn_text(), f"{HEAD},channels-last{{conv=fused}}")
    assert not any(c.channels_last for c in ops_of(module, nn.Conv2dOp))


@pytest.mark.parametrize("spec", ["channels-last", "channels-last{conv=fused}"])
def test_a_channels_last_convolution_without_cudnn_is_written_back(
        spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if "fused" in spec:  # even with cuDNN there
        monkeypatch.setattr(channels_last, "cudnn_available", lambda: True)
    module = run_passes(lone_conv_text(layout="nhwc"), spec)
    assert not ops_of(module, nn.Conv2dOp)[0].channels_last


def test_a_channels_last_convolution_runs_as_fusecs_nchw_kernel() -> None:
    # the input's and the weight's transposes, the convolution with its
    # epilogue, the result's transpose back; numbers in the simulator
    check_program(lone_conv_text(layout="nhwc"), launches=4,
                  pipeline="channels-last,form-fusion-groups,group-each-op")


def test_a_channels_last_convolution_left_to_fusecs_kernel_is_an_error(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(lone_conv_text(layout="nhwc"))
    rc = main([str(src), "-o", str(tmp_path / "out"), "-p",
               "form-fusion-groups,group-each-op,tile-and-promote"])
    err = capsys.readouterr().err
    assert rc != 0 and "m.mlir:2:" in err
    assert 'a channels-last convolution (layout = "nhwc") runs only as a cuDNN call' in err
    assert not (tmp_path / "out").exists()


def test_the_reference_computes_channels_last_as_its_nchw_twin() -> None:
    nhwc = parse_module(make_context(), lone_conv_text(layout="nhwc"), "a.mlir")
    nchw = parse_module(make_context(), lone_conv_text(), "b.mlir")
    x, w, b = random_inputs(find_function(nhwc), seed=5)
    got = run_module(nhwc, [x, w, b])[0]
    want = run_module(nchw, [x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2),
                             b.reshape(16, 1, 1)])[0]
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("change", "message"), [
    (('layout = "nhwc"', 'layout = "nchwc"'), 'unknown layout "nchwc"'),
    (("16x3x3x8", "16x8x3x3"), "weight has 3 input channels per group, expected 8"),
])
def test_the_verifier_checks_channels_last_shapes(change: tuple[str, str], message: str,
                                                  tmp_path: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(lone_conv_text(layout="nhwc").replace(*change))
    assert main([str(src), "-o", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "m.mlir:2:" in err and message in err


def test_where_a_transpose_must_stop_the_numbers_hold(with_cudnn: None) -> None:
    """Two convolutions, then a residual of the program's (an NCHW input the
    transpose cannot pass without a copy) and a sum over the channels that
    drops them: both read the NHWC result transposed, numbers unchanged."""
    net = Net("f32", 2)
    x = net.arg(2, 8, 12, 12)
    r = net.arg(2, 16, 12, 12)
    y = net.bn(net.conv(x, 8, 12, 16, 3)[0], 16, 12)
    y = net.op(f"nn.sigmoid {net.conv(y, 16, 12, 16, 3)[0]} : {net.t(2, 16, 12, 12)}")
    t = net.t(2, 16, 12, 12)
    y = net.op(f"nn.add {y}, {r} : ({t}, {t}) -> {t}")
    s = net.op(f"nn.reduce_sum {y} {{axes = [1]}} : ({t}) -> {net.t(2, 12, 12)}")
    text = net.text(s, net.t(2, 12, 12))
    before = parse_module(make_context(), text, "test.mlir")
    after = run_passes(text, f"{HEAD},channels-last{{conv=library}},cse,dce")
    assert all(c.channels_last for c in ops_of(after, nn.Conv2dOp))
    add = ops_of(after, nn.AddOp)[-1]
    assert tensor_shape(add.results[0]) == (2, 16, 12, 12)  # computed NCHW
    inputs = random_inputs(find_function(before), seed=4)
    np.testing.assert_allclose(run_module(after, inputs)[0], run_module(before, inputs)[0],
                               rtol=1e-9, atol=1e-9)


def test_one_by_one_convolutions_alone_stay_nchw(with_cudnn: None) -> None:
    """cuDNN runs a 1x1 convolution on NCHW tensors as a GEMM, with no copy
    for channels last to save."""
    net = Net("f32", 2)
    x = net.arg(2, 8, 12, 12)
    y = net.bn(net.conv(x, 8, 12, 16, 1)[0], 16, 12)
    y = net.bn(net.conv(y, 16, 12, 16, 1)[0], 16, 12)
    module = run_passes(net.text(y, net.t(2, 16, 12, 12)),
                        f"{HEAD},channels-last{{conv=library}}")
    assert not any(c.channels_last for c in ops_of(module, nn.Conv2dOp))
    assert "kept in NCHW" in " ".join(collect_remarks(module))


def test_the_conv_sweep_writes_each_layer_in_both_layouts() -> None:
    from conv_sweep import Conv, model_text

    c = Conv("3x3_s2_g2", 8, 9, 12, 3, stride=2, groups=2, n=2)
    nchw = parse_module(make_context(), model_text(c, "f32"), "a.mlir")
    nhwc = parse_module(make_context(), model_text(c, "f32", nhwc=True), "b.mlir")
    x, w, b = random_inputs(find_function(nchw), seed=6)
    want = run_module(nchw, [x, w, b])[0]
    got = run_module(nhwc, [x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1), b.reshape(12)])[0]
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)


def test_the_channels_last_plan_runs_and_matches_the_reference(
        with_cudnn: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole small ResNet in the simulator, cuDNN's NHWC calls computed
    by NumPy (tests/fake_cudnn.py), every kernel fusec's."""
    from fake_cudnn import install_fake_cudnn

    from fusec.runtime.executor import run_program

    install_fake_cudnn(monkeypatch)
    text = cnn_text(n=1, hw=16, w=4)
    art = compile_model(text, target="h200", schedule=ScheduleOptions(conv="library"))
    launches = art.plan["functions"]["f"]["launches"]
    assert sum(la.get("layout") == "nhwc" for la in launches) == 8
    module = parse_module(make_context(), text, "test.mlir")
    inputs = random_inputs(find_function(module), seed=7)
    want = run_module(module, inputs)[0]
    got = run_program(art.program, "f", inputs, device="sim", memory=art.memory["f"])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_f64_convolutions_stay_nchw(with_cudnn: None) -> None:
    module = run_passes(cnn_text("f64"), f"{HEAD},channels-last{{conv=library}}")
    assert not any(c.channels_last for c in ops_of(module, nn.Conv2dOp))
