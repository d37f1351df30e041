"""`--autotune` times the library call against fusec's own kernel.

Per convolution (cuDNN) and per matmul (cuBLAS) whose library-or-own choice
the cost model made (`--conv`/`--gemm` `auto`; `scheduling/library_tuning.py`),
`tile-and-promote` asks the `ChoiceTuner` of the compile. It builds the
group alone both ways, in scratch modules scheduled as `tile-and-promote`
would with `--conv library` and `--conv fused` (`--gemm` for a matmul): the
library call with the epilogue kernel it needs after it (and a prologue
kernel before it, if any), against the one fused kernel. Per attention that
cuDNN's fused attention can run (`--attention auto`), `fuse-attention` asks
it too: cuDNN's call against fusec's attention kernel, the group alone
scheduled both ways by `tile-and-promote`. Both programs are
timed as whole calls, interleaved, on the same fresh random inputs
(`CallTiming.time_calls`, the whole-call timing of `compiler/whole_call.py`).
The model's choice stays unless the other is faster by more than the noise
margin (`compiler/tuning_decision.py`), as for schedules.

The samples are kept in the tuning cache under the device, the target and
the group's fingerprint (with the family and the options that shape the
library call), so a second compile times nothing. An entry is checked
before use (`read_choice_entry`): anything but what this module writes for
this group (another family, another model choice, a time that is not a
time) is a miss with a warning, and the group is timed again.

Nothing is timed (the model's choice is kept, with a remark) without a GPU,
where the library is not installed, where the timer cannot time whole calls,
or where the library cannot compute the group as a call of its own.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.program import Program
from fusec.analysis.targets import Target
from fusec.compiler.tuning_decision import NOISE_MARGIN, choose
from fusec.compiler.tuning_entry import BadEntry, times_of
from fusec.compiler.tuning_trials import fingerprint, group_name, trial_function
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr
from fusec.runtime.progress import progress_bar
from fusec.runtime.tuning_cache import TuningCache, tuning_key
from fusec.runtime.tuning_timer import CallTiming, GroupTimer
from fusec.scheduling.library_tuning import ChoicePoint

LIBRARY = {"conv": "cuDNN", "gemm": "cuBLAS", "attention": "cuDNN's fused attention"}
OWN = {"conv": "own kernel", "gemm": "fused kernel", "attention": "fusec's attention kernel"}
# what the library variant runs: the call, and the epilogue kernel a conv or GEMM needs
CALL = {"conv": "cuDNN + epilogue", "gemm": "cuBLAS + epilogue",
        "attention": "cuDNN's fused attention"}
_ENTRY_KEYS = {"choice", "group", "model", "own_samples_us", "library_samples_us"}


@dataclass
class ChoiceTuning:
    """What was measured for one library-or-own choice."""

    group: str  # the group's name when the choice was made
    family: str  # "conv", "gemm" or "attention"
    model: str  # the cost model's choice: "library" or "own"
    kept: str  # "library" or "own"
    own_us: float
    library_us: float
    est_own_us: float
    est_library_us: float
    from_cache: bool

    def as_json(self) -> dict[str, Any]:
        """The choice in plan.json's `autotune.library_choices`."""
        return {"group": self.group, "family": self.family, "model": self.model,
                "kept": self.kept, "own_us": round(self.own_us, 3),
                "library_us": round(self.library_us, 3),
                "est_own_us": round(self.est_own_us, 3),
                "est_library_us": round(self.est_library_us, 3),
                "from_cache": self.from_cache}


def choice_fingerprint(point: ChoicePoint) -> str:
    """The group's fingerprint (`tuning_trials.fingerprint`), the family and
    the options that shape the library call."""
    return f"{fingerprint(point.group, 0)}\nlibrary or own {point.family}: {point.settings}"


def _word(library: bool) -> str:
    return "library" if library else "own"


def read_choice_entry(data: object, point: ChoicePoint) -> tuple[list[float], list[float]]:
    """The (own, library) samples a cache entry holds for `point`; raises
    `BadEntry` when it is not what `ChoiceTuner` writes for this choice."""
    if not isinstance(data, dict) or set(data) != _ENTRY_KEYS:
        raise BadEntry(f"not a library-or-own entry: keys {sorted(_ENTRY_KEYS)} expected")
    if data["choice"] != point.family:
        raise BadEntry(f"an entry of a {data['choice']!r:.20} choice, not {point.family!r}")
    if data["model"] != _word(point.model_library):
        raise BadEntry(f"the model chose {_word(point.model_library)}, the entry says "
                       f"{data['model']!r:.20}")
    if not isinstance(data["group"], str):
        raise BadEntry("group must be a string")
    own = times_of(data["own_samples_us"], "own_samples_us")
    library = times_of(data["library_samples_us"], "library_samples_us")
    if not own or not library:
        raise BadEntry("no samples")
    return own, library


class ChoiceTuner:
    """Decides the library-or-own choices of one compile (module docstring);
    `results` lists what was measured, in the order of the choices."""

    def __init__(self, made: tuple[GroupTimer, str] | None, target: Target,
                 cache: TuningCache | None, margin: float = NOISE_MARGIN,
                 quiet: bool = False) -> None:
        self.timer, self.device = made if made is not None else (None, "")
        self.target = target
        self.cache = cache
        self.margin = margin
        self.quiet = quiet
        self.results: list[ChoiceTuning] = []

    def overrules(self, family: str) -> bool:
        """Every family's choices are timed."""
        return True

    def choose(self, point: ChoicePoint) -> tuple[bool, str]:
        """Whether `point`'s group takes the library call, and a remark."""
        model = point.model_library
        why = self._untimed(point)
        if why:
            return model, (f"autotuning: {why}: nothing to time; the model's choice "
                           f"({_word(model)}) kept")
        key = tuning_key(self.device, self.target.name, choice_fingerprint(point))
        samples = self._cached(key, point)
        from_cache = samples is not None
        if samples is None:
            programs = self._variants(point)
            if programs is None:
                return model, (f"autotuning: {LIBRARY[point.family]} cannot compute the group "
                               f"as a call of its own; the model's choice ({_word(model)}) kept")
            assert isinstance(self.timer, CallTiming)
            with progress_bar(0 if self.quiet else 1, "timing library against own") as bar:
                own, library = self.timer.time_calls(programs)
                bar.advance(group_name(point.group))
            samples = (own, library)
            if self.cache is not None:
                self.cache.store(key, {"choice": point.family, "group": group_name(point.group),
                                       "model": _word(model), "own_samples_us": own,
                                       "library_samples_us": library})
        own, library = samples
        ranked = [library, own] if model else [own, library]  # the model's first
        kept = model != (choose(ranked, self.margin).chosen == 1)
        r = ChoiceTuning(group_name(point.group), point.family, _word(model), _word(kept),
                         float(statistics.median(own)), float(statistics.median(library)),
                         point.est_own_us, point.est_library_us, from_cache)
        self.results.append(r)
        source = " (from the tuning cache)" if from_cache else ""
        verdict = ("the model's choice" if kept == model else
                   f"the model's choice ({r.model}) overruled")
        return kept, (f"autotuning measured{source} {CALL[point.family]} "
                      f"{r.library_us:.1f} us vs {OWN[point.family]} {r.own_us:.1f} us: "
                      f"{r.kept} ({verdict})")

    def _untimed(self, point: ChoicePoint) -> str:
        """Why nothing can be timed for `point`, or ""."""
        if not point.available:
            return f"{LIBRARY[point.family]} is not installed"
        if self.timer is None:
            return "no CUDA GPU"
        if not isinstance(self.timer, CallTiming):
            return "the timer cannot time whole calls"
        return ""

    def _cached(self, key: str, point: ChoicePoint) -> tuple[list[float], list[float]] | None:
        data = self.cache.load(key) if self.cache is not None else None
        if self.cache is None or data is None:
            return None
        try:
            return read_choice_entry(data, point)
        except BadEntry as err:
            self.cache.warn_ignored(key, str(err), "timing the choice again")
            return None

    def _variants(self, point: ChoicePoint) -> list[Program] | None:
        """The group alone as fusec's own kernel and as the library call with
        its epilogue; None when the library variant holds no library call."""
        from fusec.codegen.generate import generate_program

        programs = []
        for mode in ("fused", "library"):
            attr = point.group.attributes.get(SCHEDULE_KEY)
            func = trial_function(point.group, "f", attr if isinstance(attr, ScheduleAttr)
                                  else None)
            module = ModuleOp([func])
            point.schedule_alone(module, mode)
            programs.append(generate_program(module, self.target))
        launches = programs[1].functions["f"].launches
        if not any(la.library is not None for la in launches):
            return None
        return programs

