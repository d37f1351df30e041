"""A cuDNN convolution stand-in over NumPy for tests of library convolution
launches in the simulator: the runtime hands it NumPy views of the
simulator's arrays and it computes what cuDNN would, in either layout
(`"layout": "nhwc"` launches included), with the reference interpreter's
convolution."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest


def install_fake_cudnn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route `runtime/cudnn_conv`'s calls to NumPy for the test."""
    from fusec.reference.ops import _conv2d  # pyright: ignore[reportPrivateUsage]
    from fusec.runtime import cudnn_conv

    def run_conv(spec: dict[str, Any], args: Sequence[Any], stream_ptr: int) -> None:
        x, w, y = (np.asarray(a) for a in args)
        op = types.SimpleNamespace(strides=spec["strides"], pads=spec["pads"],
                                   dilations=spec["dilations"], groups=spec["groups"],
                                   channels_last=spec.get("layout") == "nhwc")
        if x.dtype == np.float16:  # cuDNN's half convolutions accumulate in f32
            x, w = x.astype(np.float32), w.astype(np.float32)
        y[...] = _conv2d(op, x, w)  # type: ignore[arg-type]

    monkeypatch.setattr(cudnn_conv, "check_conv", lambda spec: None)
    monkeypatch.setattr(cudnn_conv, "prepare_conv", lambda spec, args: None)
    monkeypatch.setattr(cudnn_conv, "run_conv", run_conv)
