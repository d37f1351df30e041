"""The PyTorch models bench/onnx_models.py exports to ONNX, at full or tiny size.

The building blocks are those of the ONNX fixtures
(tests/fixtures/onnx/make_fixtures.py: `InvertedResidual`, its BatchNorm with
random statistics, `GPT2Block`), loaded from that file so that the benchmark
and the CI fixtures describe the same networks. Only the MobileNetV2 stack is
defined here: the fixture's `MobileNetV2Small` has one fixed shape.

Weights are random (seeded). Only the benchmark imports this module
(PyTorch is an optional extra).
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

FIXTURES_SCRIPT = (Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "onnx"
                   / "make_fixtures.py")

# MobileNetV2's inverted-residual stages (expansion t, channels c, repeats n,
# first stride s), as in the paper (Sandler et al. 2018, table 2).
FULL_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)
# Tiny stages for the simulator: still a strided block and a residual block.
SMALL_STAGES: tuple[tuple[int, int, int, int], ...] = ((2, 8, 2, 2),)


@functools.cache
def fixtures() -> ModuleType:
    """tests/fixtures/onnx/make_fixtures.py as a module (loaded by path:
    `tests` is not a package, and its `onnx` folder must not shadow onnx)."""
    spec = importlib.util.spec_from_file_location("fusec_onnx_fixtures", FIXTURES_SCRIPT)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {FIXTURES_SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class MobileNetV2(nn.Module):
    """MobileNetV2-style classifier: strided 3x3 stem, inverted-residual
    stages (1x1 expand, 3x3 depthwise, 1x1 project, BatchNorm, ReLU6,
    residual adds), 1x1 head conv, global average pooling, linear layer."""

    def __init__(self, stages: tuple[tuple[int, int, int, int], ...] = FULL_STAGES,
                 stem: int = 32, head: int = 1280, classes: int = 1000) -> None:
        super().__init__()
        fx = fixtures()
        layers: list[nn.Module] = [nn.Conv2d(3, stem, 3, 2, 1, bias=False), fx._bn(stem),
                                   nn.ReLU6()]
        cin = stem
        for t, c, n, s in stages:
            for i in range(n):
                layers.append(fx.InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, head, 1, bias=False), fx._bn(head), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(head, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


@dataclass(frozen=True)
class TorchModel:
    """A model ready to export: the module (eval mode), an example input and
    how torch.onnx.export should treat it."""

    name: str
    module: nn.Module
    example: torch.Tensor
    fold_constants: bool
    """torch.onnx.export's `do_constant_folding`. Off for MobileNetV2 so that
    the BatchNormalization nodes stay (torch eager runs them too; folding
    would merge them into the convs before fusec sees them). On for GPT-2, so
    that Linear weights are exported pre-transposed: once the weights are
    function arguments, an unfolded Transpose would be a kernel per call."""
    size: str
    """The shape, for the table titles."""


def mobilenet_v2(small: bool = False) -> TorchModel:
    """Full size: batch 32 at 224x224, the paper's stages, 1000 classes."""
    torch.manual_seed(0)
    if small:
        module = MobileNetV2(SMALL_STAGES, stem=8, head=16, classes=10)
        example, size = torch.randn(1, 3, 8, 8), "N1 8x8, 2 blocks"
    else:
        module = MobileNetV2()
        example, size = torch.randn(32, 3, 224, 224), "N32 224x224, 17 blocks"
    return TorchModel("mobilenet_v2", module.eval(), example, False, size)


def gpt2_block(small: bool = False) -> TorchModel:
    """Full size: B8 S512 D768, 12 heads (as bench/models/gpt2_block.mlir,
    but with GPT-2's exact-erf GELU and a masked_fill causal mask)."""
    torch.manual_seed(1)
    b, s, d, h = (1, 4, 16, 2) if small else (8, 512, 768, 12)
    module = fixtures().GPT2Block(d, h, s)
    return TorchModel("gpt2_block", module.eval(), torch.randn(b, s, d), True,
                      f"B{b} S{s} D{d} H{h}")


MODELS = {"mobilenet_v2": mobilenet_v2, "gpt2_block": gpt2_block}
