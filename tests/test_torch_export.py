"""`fusec import model.pt2` and `fusec.from_torch`: a torch.export program to
`nn` text that compiles and runs (simulator) as eager PyTorch does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import fusec  # noqa: E402
from fusec.command import main as fusec_main  # noqa: E402
from fusec.importers.torch import TorchImportError, from_torch  # noqa: E402

# torch.export.export/save warn about PyTorch's own deprecated internals.
pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")


class Block(nn.Module):
    """Linear, layer norm, causal attention over two heads."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.proj(x)).view(1, 4, 2, 4).transpose(1, 2)
        return F.scaled_dot_product_attention(h, h, h, is_causal=True)


class Cumulative(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=0)


def _block() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(11)
    module = Block().eval()
    with torch.no_grad():
        module.norm.weight.uniform_(0.5, 1.5)
    return module, torch.randn(1, 4, 8)


def test_from_torch_weights_are_constants() -> None:
    module, x = _block()
    result = fusec.from_torch(module, (x,))
    assert result.inputs == {"x": "x"} and result.params == {}
    assert "nn.layer_norm" in result.text and "nn.constant" in result.text
    model = fusec.compile(result.text)
    with torch.no_grad():
        expected = module(x).numpy()
    np.testing.assert_allclose(model(x.numpy()), expected, rtol=1e-4, atol=1e-5)


def test_fusec_import_pt2_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    module, x = _block()
    torch.export.save(torch.export.export(module, (x,)), tmp_path / "block.pt2")
    out = tmp_path / "block.mlir"
    assert fusec_main(["import", str(tmp_path / "block.pt2"), "-o", str(out),
                       "--params-above", "256"]) == 0
    text = out.read_text(encoding="utf-8")
    # The 8x8 Linear weight (256 bytes) is an argument; the small vectors stay constants.
    assert "%p_proj_weight: tensor<8x8xf32>" in text
    with np.load(tmp_path / "block.params.npz") as npz:
        params = {k: npz[k] for k in npz.files}
    assert list(params) == ["p_proj_weight"]
    np.testing.assert_array_equal(params["p_proj_weight"], module.proj.weight.detach().numpy())
    model = fusec.compile(out)
    with torch.no_grad():
        expected = module(x).numpy()
    np.testing.assert_allclose(model(x.numpy(), params["p_proj_weight"]), expected,
                               rtol=1e-4, atol=1e-5)
    assert "weights are arguments" in capsys.readouterr().err


def test_unsupported_node_is_named() -> None:
    with pytest.raises(TorchImportError, match=r"node 'cumprod' \(aten.cumprod.default\)"):
        from_torch(Cumulative(), (torch.randn(3, 2),))


# PyTorch's own log lines (glog style: `W1205 11:43:39.836000 18785 torch/export/__init__.py:348]
# ...`), which torch.export.load writes, a traceback included, before fusec reports the file.
TORCH_LOG = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")


def _fusec_import(*args: str) -> tuple[int, list[str]]:
    """`fusec import ARGS` as a user runs it: (exit code, fusec's own stderr lines)."""
    script = Path(sys.executable).parent / "fusec"
    done = subprocess.run([str(script), "import", *args], capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.stdout == ""
    return done.returncode, [line for line in done.stderr.splitlines()
                             if not TORCH_LOG.match(line)]


def test_import_of_a_missing_or_bad_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.pt2"
    assert _fusec_import(str(missing)) == (1, [f"error: cannot read '{missing}': no such file"])
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip archive")
    code, lines = _fusec_import(str(bad), "-o", str(tmp_path / "bad.mlir"))
    assert code == 1
    assert len(lines) == 1, lines  # no traceback of fusec's, whatever torch logged first
    assert lines[0].startswith(f"error: '{bad}' is not a program saved by torch.export.save")
    assert not (tmp_path / "bad.mlir").exists()


def test_fusec_import_of_a_bf16_program(tmp_path: Path) -> None:
    """A bf16 program imports as bf16; a bf16 weight above --params-above is
    saved as its float32 values (exact), the runtime's host form of bf16."""
    pytest.importorskip("ml_dtypes")
    module, x = _block()
    module, x = module.to(torch.bfloat16), x.to(torch.bfloat16)
    torch.export.save(torch.export.export(module, (x,)), tmp_path / "block.pt2")
    out = tmp_path / "block.mlir"
    code, lines = _fusec_import(str(tmp_path / "block.pt2"), "-o", str(out),
                                "--params-above", "128")
    assert code == 0, lines
    text = out.read_text(encoding="utf-8")
    assert "%p_proj_weight: tensor<8x8xbf16>" in text and "tensor<1x2x4x4xbf16>" in text
    with np.load(tmp_path / "block.params.npz") as npz:
        weight = npz["p_proj_weight"]
    assert weight.dtype == np.float32
    np.testing.assert_array_equal(weight, module.proj.weight.detach().float().numpy())
    got = fusec.compile(out)(x, weight)
    with torch.no_grad():
        expected = module(x).float().numpy()
    assert got.dtype == torch.bfloat16
    assert np.abs(got.float().numpy() - expected).max() <= 2e-2 * np.abs(expected).max()
