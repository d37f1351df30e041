"""When a call waits on the host for the stream that produced a device input
(`runtime/executor.needs_sync`): never for one produced on the call's own
stream (the wait would serialise the host with the GPU on every call, and
made the autotuner's whole-call timing measure the host), always for one
from another stream or where the call runs on the default stream."""

from __future__ import annotations

import types
from typing import Any

import pytest

from fusec.runtime.executor import needs_sync


def _array(stream: int | None) -> Any:
    iface = {"shape": (4,), "typestr": "<f4", "data": (1 << 20, False), "version": 3}
    if stream is not None:
        iface["stream"] = stream
    return types.SimpleNamespace(__cuda_array_interface__=iface)


def _stream(pointer: int) -> Any:
    return types.SimpleNamespace(handle=types.SimpleNamespace(value=pointer))


@pytest.mark.parametrize(("produced", "call", "wait"), [
    (0x7F00, 0x7F00, False),  # produced on the call's own stream
    (0x7F00, 0x8F00, True),  # another stream: its work must be done first
    (None, 0x7F00, False),  # no producer stream named
    (1, 0, True),  # the legacy default stream, the call on the default stream
])
def test_a_numba_device_input_waits_only_for_another_stream(produced: int | None, call: int,
                                                      wait: bool) -> None:
    assert needs_sync("cai", _array(produced), _stream(call)) is wait


@pytest.mark.parametrize("kind", ["torch", "cupy", "dlpack-cuda"])
def test_torch_and_cupy_inputs_never_wait(kind: str) -> None:
    assert needs_sync(kind, _array(0x8F00), _stream(0x7F00)) is False
