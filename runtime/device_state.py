"""What the library runners keep per device: one state object per CUDA
device (`per_device`), and a workspace that grows but never moves away
(`Workspace`): a captured CUDA graph keeps the address it recorded, so
every buffer ever handed out stays allocated."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from fusec.runtime.arrays import device_pointer

T = TypeVar("T")
_LOCK = threading.Lock()


class Workspace:
    """Scratch memory for library calls on one device, grown to the largest
    size asked; every buffer allocated stays alive."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []
        self.nbytes = 0

    def pointer(self, nbytes: int) -> int:
        """The address of a workspace of at least `nbytes` (allocated now if
        the current one is smaller: call outside a graph capture); 0 when
        nothing was ever asked."""
        if nbytes > self.nbytes:
            from numba import cuda

            size = max(nbytes, 2 * self.nbytes)
            self.buffers.append(cuda.device_array(size, dtype="uint8"))
            self.nbytes = size
        if not self.buffers:
            return 0
        return device_pointer(self.buffers[-1])


def per_device(states: dict[int, T], make: Callable[[], T]) -> T:
    """The state of the current device in `states`, made by `make` on first
    use (two threads racing keep one)."""
    from numba import cuda

    dev = int(cuda.get_current_device().id)
    with _LOCK:
        state = states.get(dev)
    if state is None:
        made = make()
        with _LOCK:
            state = states.setdefault(dev, made)
    return state
