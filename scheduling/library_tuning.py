"""Where `--autotune` may overrule the cost model's library-or-own choice.

`tile-and-promote` decides per convolution (`scheduling/conv_choice.py`) and
per matmul (`scheduling/gemm_choice.py`) between a library call (cuDNN,
cuBLAS) followed by an epilogue kernel and fusec's own fused kernel, by the
cost model; `fuse-attention` (`passes/fuse_attention.py`) decides per
attention between cuDNN's fused attention and fusec's attention kernel.
While a compile with `--autotune` runs its pipeline, a `LibraryTuner` is
active (`tuning_library_choices`); each chooser in `auto`
mode then hands it the `ChoicePoint` (the group as it saw it, before any
split, the model's choice and estimates, and how to schedule that group
alone either way) and takes the tuner's answer instead of the model's
(`compiler/library_tuning.py` times both on the device). `--conv`,
`--gemm` and `--attention` given as `library` or `fused` are never
overruled, and without an active tuner (every compile without `--autotune`) nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from xdsl.dialects.builtin import ModuleOp

from fusec.dialects.fusion import GroupOp


@dataclass(frozen=True)
class LibraryCall:
    """A choice's library call alone, as the plan will launch it: the
    launch's keys without value names (`codegen/library_conv.py`: library,
    strides, pads, ...) and its operands' shapes in launch order (x, w, y),
    enough to time the call on random data (`compiler/library_clock.py`)."""

    keys: tuple[tuple[str, object], ...]
    shapes: tuple[tuple[int, ...], ...]

    def spec(self) -> dict[str, object]:
        """The keys as the launch's dictionary."""
        return dict(self.keys)


@dataclass(frozen=True)
class ChoicePoint:
    """One library-or-own decision the cost model made."""

    family: str  # "conv" (cuDNN), "gemm" (cuBLAS) or "attention" (cuDNN's SDPA)
    group: GroupOp  # as the chooser saw it: nothing split off yet
    model_library: bool  # the cost model's choice
    est_library_us: float
    est_own_us: float
    available: bool  # whether the library is there to call
    settings: str  # the chooser's options that shape the library call (TF32, epilogue)
    # Schedule a scratch module holding a copy of `group` as `tile-and-promote`
    # would with the family's mode set to "library" or "fused".
    schedule_alone: Callable[[ModuleOp, str], None]
    # The library call alone and the part of `est_library_us` it is (the rest:
    # the epilogue's and prologue's kernels); None where it cannot be timed alone.
    call: LibraryCall | None = None
    est_call_us: float = 0.0


class LibraryTuner(Protocol):
    """What decides a `ChoicePoint` by measurement (`--autotune`, or the
    timed library calls of a compile on its GPU)."""

    def choose(self, point: ChoicePoint) -> tuple[bool, str]:
        """Whether to take the library call, and a remark ("" for none)."""
        ...

    def overrules(self, family: str) -> bool:
        """Whether a measurement may overrule the cost model's choices of
        `family` ("conv", "gemm", "attention"): where not, the passes before
        the choice may plan on the model's (`scheduling/library_plan.py`)."""
        ...


_TUNER: ContextVar[LibraryTuner | None] = ContextVar("fusec_library_tuner", default=None)


def active_tuner() -> LibraryTuner | None:
    """The tuner of the compile running now, or None (no `--autotune`)."""
    return _TUNER.get()


@contextmanager
def tuning_library_choices(tuner: LibraryTuner | None) -> Iterator[None]:
    """Make `tuner` decide the library-or-own choices of the passes run
    inside the block (None: the cost model decides, as always)."""
    token = _TUNER.set(tuner)
    try:
        yield
    finally:
        _TUNER.reset(token)


def tuned_choice(tuner: LibraryTuner | None, mode: str, point: Callable[[], ChoicePoint],
                 add_remark: Callable[[str], None]) -> bool | None:
    """The tuner's answer for the point `point()` makes, when there is a
    tuner and the mode is `auto` (its remark given to `add_remark`); None
    when the model's choice stands untouched."""
    if tuner is None or mode != "auto":
        return None
    library, note = tuner.choose(point())
    if note:
        add_remark(note)
    return library
