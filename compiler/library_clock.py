"""A compile on the GPU it targets measures the library call of each
library-or-own convolution choice, instead of trusting its estimate.

The cost model prices cuDNN's convolution from a rate per element type
(`cost_model.conv_choice`), which fits most convolutions and misses some by
several times: a 7x7 stride-2 stem over 3 input channels ran at 0.22 ms in
f16 and 0.36 ms in bf16 on an H100 where the model said 0.11 for both, so
bf16 took cuDNN over fusec's own 0.28 ms kernel. The own kernel's estimate
held within 25% over the convolution sweep (bench/conv_sweep.py). So where
the compile runs on the GPU of its target, with cuDNN and CuPy present,
`tile-and-promote` has each convolution's cuDNN call timed alone on random
operands at its real shapes (`runtime/library_clock.py`, about a
millisecond of GPU time per convolution): the measured call plus the
model's price of the epilogue (and prologue) kernels is weighed against
the own kernel's estimate. Where the two are within `CLOSE` (1.5x) of each
other the estimate's error could decide, so both sides are built and timed
as whole calls, as `--autotune` does (`compiler/library_tuning.py`: the
library call with its epilogue kernel against the own kernel; a few
seconds of kernel builds, once).

- Measurements are kept in the tuning cache (`runtime/tuning_cache.py`),
  keyed by the device, the target, the call (its keys and shapes), the
  fusec version and the clock's method: a second compile times nothing.
- Nothing is measured, and the model decides as on any machine, when the
  compile targets another GPU than the one present (`--target h200` on an
  H100), without CuPy, under `--autotune` (which times both sides whole:
  `compiler/library_tuning.py`), or with `library_timing=False`
  (`fusec --no-library-timing`). A call that cannot be timed (cuDNN refuses
  it) keeps the model's choice, with a remark.
- GEMM and attention choices keep the model's choice: their estimates held
  on every shape measured so far.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import Target
from fusec.runtime.tuning_cache import TuningCache, tuning_key
from fusec.scheduling.library_tuning import ChoicePoint, LibraryCall, LibraryTuner
from fusec.version import __version__

ENTRY_KEY = "library_call_us"
CLOCK_METHOD = "the call alone on random operands, a CUDA graph of a batch replayed, median"
"""How a call is timed (`runtime/library_clock.py`), in every key: a change
of method makes earlier measurements misses."""

CLOSE = 1.5
"""Within this factor of each other, the measured call (with the epilogue's
estimate) and the own kernel's estimate are a close call, decided by timing
both whole."""

CallClock = Callable[[LibraryCall], float]
"""Microseconds per call of a library call (raises to say it cannot be timed)."""


def call_fingerprint(call: LibraryCall) -> str:
    """What a measurement is for: the call's keys and shapes, the fusec
    version and the clock's method."""
    return (f"fusec {__version__}; {CLOCK_METHOD}\nlibrary call: "
            + json.dumps([list(call.keys), [list(s) for s in call.shapes]]))


@dataclass
class MeasuredLibraryCalls:
    """The `LibraryTuner` of a compile on its target's GPU (module docstring).
    `clock` times a call; `device` names the GPU in cache keys (asked at the
    first call to time: a compile without one never loads CuPy for it)."""

    clock: CallClock
    device: Callable[[], str]
    target: Target
    cache: TuningCache | None = None
    # what times both sides whole (the autotuner's `ChoiceTuner`), made on
    # first use; None: the own kernel's estimate decides every call
    both: Callable[[], LibraryTuner] | None = None
    measured: dict[str, float] = field(default_factory=dict)  # by fingerprint, this compile

    def overrules(self, family: str) -> bool:
        """Only convolutions are timed: GEMM and attention choices stay the model's."""
        return family == "conv"

    def choose(self, point: ChoicePoint) -> tuple[bool, str]:
        """Whether `point`'s group takes the library call, and a remark."""
        model = point.model_library
        if not self.overrules(point.family) or not point.available or point.call is None \
                or point.est_call_us <= 0.0:
            return model, ""
        us, source = self._call_us(point.call)
        if us is None:
            return model, f"cuDNN's call could not be timed ({source}); the model's choice kept"
        library_us = point.est_library_us - point.est_call_us + us
        library = library_us < point.est_own_us
        verdict = "the model's choice" if library == model else "the model's choice overruled"
        note = (f"cuDNN's call measured {us:.1f} us{source} (model {point.est_call_us:.1f}): "
                f"library + epilogue {library_us:.1f} us vs own kernel {point.est_own_us:.1f} us "
                f"(model): {'library' if library else 'own'} ({verdict})")
        if self.both is None or max(library_us, point.est_own_us) > \
                CLOSE * min(library_us, point.est_own_us):
            return library, note
        # a close call: the own kernel's estimate is good to 25%, not to 5%
        kept, timed = self.both().choose(replace(point, model_library=library))
        return kept, f"{note}; a close call: {timed}"

    def _call_us(self, call: LibraryCall) -> tuple[float | None, str]:
        """The call's time and where it came from, or None and why not."""
        text = call_fingerprint(call)
        if text in self.measured:
            return self.measured[text], ""
        try:
            key = tuning_key(self.device(), self.target.name, text)
        except FusecError as err:
            return None, err.message
        entry = self.cache.load(key) if self.cache is not None else None
        value = entry.get(ENTRY_KEY) if entry is not None else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                math.isfinite(value) and value > 0:
            self.measured[text] = float(value)
            return float(value), " (from the tuning cache)"
        if entry is not None and self.cache is not None:
            self.cache.warn_ignored(key, f"no finite positive '{ENTRY_KEY}'",
                                    "timing the call again")
        try:
            us = float(self.clock(call))
        except FusecError as err:
            return None, err.message
        self.measured[text] = us
        if self.cache is not None:
            self.cache.store(key, {ENTRY_KEY: us})
        return us, ""


def measured_library_calls(target: Target,
                           cache: TuningCache | None) -> MeasuredLibraryCalls | None:
    """The tuner that measures library calls for a compile for `target`,
    where it can (module docstring); None where the model decides alone."""
    from fusec.runtime.device import gpu_available, simulator_forced

    if simulator_forced() or not gpu_available():
        return None
    from fusec.analysis.targets import get_target

    if get_target("auto").name != target.name or importlib.util.find_spec("cupy") is None:
        return None  # the GPU present is not the one compiled for, or no clock
    from fusec.runtime.library_clock import device_name, time_call

    @functools.cache
    def both() -> LibraryTuner:
        from fusec.compiler.autotune import AutotuneOptions, make_timer
        from fusec.compiler.library_tuning import ChoiceTuner

        options = AutotuneOptions(quiet=True)
        return ChoiceTuner(make_timer(options, target), target, cache, options.noise_margin,
                           quiet=True)

    return MeasuredLibraryCalls(lambda call: time_call(call, target.l2_bytes),
                                functools.cache(device_name), target, cache, both)
