"""Library convolutions (cuDNN) on the CPU: the choice between cuDNN and
fusec's own window kernel, the plan launch it writes, the plan's schema
and loading, and what happens where cuDNN is absent (fusec's own kernel,
with a remark; a plan that needs it fails with a clear error). The GPU side
is tests/test_gpu_library_conv.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fusec.analysis import cudnn_library
from fusec.analysis.cost_model import conv_choice
from fusec.analysis.targets import TARGETS
from fusec.compiler.cli import main
from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.passes import tile_and_promote


def conv_text(dt: str = "f32", n: int = 2, c: int = 8, hw: int = 9, o: int = 16, k: int = 3,
              pads: tuple[int, int, int, int] = (1, 1, 1, 1), stride: int = 1,
              groups: int = 1, epilogue: str = "relu", pool: bool = False) -> str:
    """`epilogue(conv(x, w) + b)` (then a 2x2 max pool when `pool`)."""
    def t(*dims: int) -> str:
        return "tensor<" + "x".join(map(str, dims)) + f"x{dt}>"

    oh = (hw + pads[0] + pads[2] - k) // stride + 1
    ow = (hw + pads[1] + pads[3] - k) // stride + 1
    x, w, y, b = t(n, c, hw, hw), t(o, c // groups, k, k), t(n, o, oh, ow), t(o, 1, 1)
    lines = [f"func.func @f(%x: {x}, %w: {w}, %b: {b}) -> RES {{",
             f"%c = nn.conv2d %x, %w {{strides = [{stride}, {stride}], pads = {list(pads)}, "
             f"dilations = [1, 1], groups = {groups}}} : ({x}, {w}) -> {y}",
             f"%s = nn.add %c, %b : ({y}, {b}) -> {y}",
             f"%e = nn.{epilogue} %s : {y}"]
    res, last = y, "%e"
    if pool:
        res = t(n, o, oh // 2, ow // 2)
        lines.append(f"%p = nn.max_pool2d %e {{kernel = [2, 2], strides = [2, 2], "
                     f"pads = [0, 0, 0, 0]}} : ({y}) -> {res}")
        last = "%p"
    lines += [f"func.return {last} : {res}", "}"]
    return "\n".join(lines).replace("RES", res) + "\n"


def launches(text: str, **options: Any) -> list[dict[str, Any]]:
    art = compile_model(text, target="h200", schedule=ScheduleOptions(**options))
    return art.plan["functions"]["f"]["launches"]


@pytest.fixture
def with_cudnn(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN counted as installed (the compiler never loads it)."""
    monkeypatch.setattr(tile_and_promote, "cudnn_available", lambda: True)


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
def test_library_plan_is_one_cudnn_call_and_the_epilogue(dt: str) -> None:
    got = launches(conv_text(dt, stride=2), conv="library")
    assert len(got) == 2
    lib, epilogue = got
    assert lib["library"] == f"cudnn_conv_{dt}" and lib["kernel"] == lib["library"]
    assert (lib["strides"], lib["pads"], lib["dilations"], lib["groups"]) == (
        [2, 2], [1, 1, 1, 1], [1, 1], 1)
    assert lib["tf32"] is False
    assert [a["value"] for a in lib["args"]] == [lib["x"], lib["w"], lib["y"]]
    assert [a["writes"] for a in lib["args"]] == [False, False, True]
    assert "library" not in epilogue and lib["y"] in [a["value"] for a in epilogue["args"]]
    assert epilogue["ops"] == ["nn.add", "nn.relu"]


def test_tf32_only_for_f32_and_only_when_allowed() -> None:
    assert launches(conv_text("f32"), conv="library", conv_tf32=True)[0]["tf32"] is True
    assert launches(conv_text("f16"), conv="library", conv_tf32=True)[0]["tf32"] is False
    assert launches(conv_text("f32"), conv="library")[0]["tf32"] is False


def test_grouped_and_depthwise_convolutions_go_to_the_library() -> None:
    for groups in (4, 8):
        lib = launches(conv_text(groups=groups), conv="library")[0]
        assert lib["groups"] == groups and lib["library"] == "cudnn_conv_f32"


def test_conv_and_pool_split_into_the_call_and_the_rest() -> None:
    fused = launches(conv_text(pool=True), conv="fused")
    assert len(fused) == 1 and "library" not in fused[0]
    got = launches(conv_text(pool=True), conv="library")
    assert got[0]["library"] == "cudnn_conv_f32"
    assert "library" not in got[-1] and "nn.max_pool2d" in got[-1]["ops"]


def test_asymmetric_padding_stays_fusec_s_own(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(conv_text(pads=(0, 0, 1, 1)))
    assert main([str(src), "-o", str(tmp_path / "out"), "--conv", "library",
                 "--remarks"]) == 0
    err = capsys.readouterr().err
    assert "--conv library: asymmetric padding [0, 0, 1, 1]; fusec's own kernel" in err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert all("library" not in la for la in plan["functions"]["f"]["launches"])


def test_a_prologue_fused_into_the_conv_becomes_its_own_kernel_before_the_call() -> None:
    text = """func.func @f(%x: tensor<2x8x9x9xf32>, %s: tensor<8x1x1xf32>, %w: tensor<16x8x3x3xf32>,
    %b: tensor<16x1x1xf32>) -> tensor<2x16x9x9xf32> {
  %a = nn.add %x, %s : (tensor<2x8x9x9xf32>, tensor<8x1x1xf32>) -> tensor<2x8x9x9xf32>
  %r = nn.silu %a : tensor<2x8x9x9xf32>
  %c = nn.conv2d %r, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}
    : (tensor<2x8x9x9xf32>, tensor<16x8x3x3xf32>) -> tensor<2x16x9x9xf32>
  %o = nn.add %c, %b : (tensor<2x16x9x9xf32>, tensor<16x1x1xf32>) -> tensor<2x16x9x9xf32>
  func.return %o : tensor<2x16x9x9xf32>
}
"""
    own = launches(text, conv="fused")
    assert [la["ops"] for la in own] == [["nn.add", "nn.silu", "nn.conv2d", "nn.add"]]
    got = launches(text, conv="library")
    assert [la["ops"] for la in got] == [["nn.add", "nn.silu"], ["nn.conv2d"], ["nn.add"]]
    assert got[1]["library"] == "cudnn_conv_f32" and got[1]["x"] in [
        a["value"] for a in got[0]["args"] if a["writes"]]


def test_a_tensor_past_cudnn_s_32_bit_strides_stays_fusec_s_own(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(conv_text(n=1, c=2, hw=32768, o=2, k=1, pads=(0, 0, 0, 0)))
    assert main([str(src), "-o", str(tmp_path / "out"), "--conv", "library", "--remarks"]) == 0
    assert "2^31 elements or more" in capsys.readouterr().err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert all("library" not in la for la in plan["functions"]["f"]["launches"])


def test_fused_mode_never_calls_the_library(with_cudnn: None) -> None:
    assert all("library" not in la for la in launches(conv_text("f16", c=64, o=64, hw=28),
                                                       conv="fused"))


def test_auto_prices_a_big_half_conv_to_the_library_and_a_tiny_one_to_fusec(
        with_cudnn: None) -> None:
    big = launches(conv_text("f16", n=32, c=256, hw=28, o=256), conv="auto")
    assert big[0].get("library") == "cudnn_conv_f16"
    tiny = launches(conv_text("f32", n=1, c=3, hw=8, o=4, groups=1), conv="auto")
    assert all("library" not in la for la in tiny)


def test_without_cudnn_auto_keeps_the_own_kernel_with_a_remark(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tile_and_promote, "cudnn_available", lambda: False)
    src = tmp_path / "m.mlir"
    src.write_text(conv_text("f16", n=32, c=256, hw=28, o=256))
    assert main([str(src), "-o", str(tmp_path / "out"), "--remarks"]) == 0
    assert "own (cuDNN is not installed)" in capsys.readouterr().err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert all("library" not in la for la in plan["functions"]["f"]["launches"])


def test_without_cudnn_the_own_kernel_matches_the_reference(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(conv_text(hw=7, c=3, o=5))
    assert main(["run", str(src), "--check"]) == 0, capsys.readouterr().err


def test_a_plan_calling_cudnn_fails_clearly_where_it_is_absent(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "m.mlir"
    src.write_text(conv_text(hw=7, c=3, o=5))
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--conv", "library"]) == 0
    capsys.readouterr()
    code = main(["run", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "cuDNN, which is not installed here" in err and "--conv fused" in err


def test_plan_loading_keeps_the_conv_keys(tmp_path: Path) -> None:
    from fusec.runtime.compiled_model import read_out

    src = tmp_path / "m.mlir"
    src.write_text(conv_text("f16"))
    out = tmp_path / "out"
    assert main([str(src), "-o", str(out), "--conv", "library"]) == 0
    program, _, _ = read_out(out)
    lib = next(la for la in program.functions["f"].launches if la.library)
    assert lib.library == {k: v for k, v in json.loads((out / "plan.json").read_text())[
        "functions"]["f"]["launches"][0].items() if k in lib.library}
    assert set(lib.library) == {"library", "x", "w", "y", "strides", "pads", "dilations",
                                "groups", "tf32"}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("pads", [1, 0, 0, 0], "pads symmetrically"),
    ("strides", [1], "expected a list of 2 integers"),
    ("groups", 0, "groups"),
    ("tf32", "yes", "tf32"),
])
def test_schema_refuses_a_tampered_conv_launch(key: str, value: Any, message: str) -> None:
    from fusec.analysis.diagnostics import FusecError
    from fusec.runtime.plan_schema import check_plan

    art = compile_model(conv_text(), target="h200", schedule=ScheduleOptions(conv="library"))
    plan = json.loads(json.dumps(art.plan))
    plan["functions"]["f"]["launches"][0][key] = value
    with pytest.raises(FusecError, match=message):
        check_plan(plan, "plan.json", lambda name: True)


def test_cost_model_library_wins_dense_half_and_loses_small_depthwise() -> None:
    target = TARGETS["h200"]
    n, c, hw, o = 32, 256, 28, 256
    flops = 2.0 * n * o * hw * hw * c * 9
    io = 2 * (n * c * hw * hw + o * c * 9 + n * o * hw * hw)
    dense = conv_choice(target, flops, io, 2 * n * o * hw * hw, 2 * o, 0.8, "auto", True, "f16")
    assert dense.library and dense.t_library < dense.t_own
    dw_flops = 2.0 * n * c * hw * hw * 9
    dw_io = 4 * (2 * n * c * hw * hw + c * 9)
    dw = conv_choice(target, dw_flops, dw_io, 4 * n * c * hw * hw, 4 * c, 0.8, "auto", True,
                     "f32", group_outputs=1)
    assert not dw.library
    absent = conv_choice(target, flops, io, 2 * n * o * hw * hw, 0, 0.8, "auto", False, "f16")
    assert not absent.library and absent.reason == "cuDNN is not installed"


def test_cost_model_prices_dense_f32_without_tf32_as_measured() -> None:
    """TF32 off, batch 32, on an H100 (bench/conv_sweep.py): cuDNN ran a 3x3
    conv of 128 channels at 28x28 in 0.141 ms, fusec's own kernel in 0.259;
    a 3x3 conv of 64 channels at 56x56 in 0.271 against 0.234. The model
    chose the own kernel for both while it priced cuDNN's FMA rate at half."""
    target = TARGETS["h100"]

    def choice(c: int, hw: int) -> bool:
        n = 32
        flops = 2.0 * n * c * hw * hw * c * 9
        out = 4 * n * c * hw * hw
        io = 2 * out + 4 * c * c * 9
        return conv_choice(target, flops, io, out, 4 * c, target.own_conv_flops_fraction,
                           "auto", True, "f32", group_outputs=c).library

    assert choice(128, 28)
    assert not choice(64, 56)


def test_find_cudnn_honours_the_switch_and_the_simulator(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lib = tmp_path / "libcudnn.so.9"
    lib.write_bytes(b"")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    for env, want in ((str(lib), str(lib)), ("0", None), (str(tmp_path / "none.so"), None)):
        monkeypatch.setenv(cudnn_library.ENV, env)
        cudnn_library.find_cudnn.cache_clear()
        assert cudnn_library.find_cudnn() == want
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.setenv(cudnn_library.ENV, str(lib))
    cudnn_library.find_cudnn.cache_clear()
    assert cudnn_library.find_cudnn() is None
    cudnn_library.find_cudnn.cache_clear()



def test_library_launches_carry_their_estimated_time_and_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.scheduling import gemm_choice

    conv = launches(conv_text("f16", n=4, c=8, hw=9, o=16), conv="library")[0]
    assert conv["hbm_bytes"] == 2 * (4 * 8 * 9 * 9 + 16 * 8 * 3 * 3 + 4 * 16 * 9 * 9)
    assert conv["est_time_us"] > 0
    monkeypatch.setattr(gemm_choice, "library_available", lambda: True)
    t = "tensor<3x64x32xf32>", "tensor<32x16xf32>", "tensor<3x64x16xf32>"
    text = (f"func.func @f(%x: {t[0]}, %w: {t[1]}) -> {t[2]} {{\n"
            f"%m = nn.matmul %x, %w : ({t[0]}, {t[1]}) -> {t[2]}\nfunc.return %m : {t[2]}\n}}\n")
    gemm = launches(text, gemm="library")[0]
    assert gemm["library"] == "cublas_sgemm"
    assert gemm["hbm_bytes"] == 4 * (3 * 64 * 32 + 32 * 16 + 3 * 64 * 16)
    assert gemm["est_time_us"] > 0
