"""The poisoned-tuning-cache fuzz mode (`fuzz/poison_tuning.py`) on a fixed
seed: every mutated entry compiles, warns when illegal and matches the
reference; with the entry check disabled it reports the failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusec.fuzz.poison_tuning import poison_tuning

PROGRAM = Path(__file__).parent / "fixtures" / "fuzz" / "poison_tuning_program.mlir"


@pytest.mark.slow
def test_poisoned_entries_of_a_random_program() -> None:
    result = poison_tuning(seed=14, count=8)
    assert result.category == "ok", result.outcome.detail


def test_reports_an_illegal_entry_that_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every well-typed schedule let through (no candidate check, as
    before), the fuzz mode reports the poisoned entry that was used."""
    import fusec.compiler.tuning_entry as tuning_entry

    monkeypatch.setattr(tuning_entry, "refusal", lambda attr, choices: None)
    monkeypatch.setattr(tuning_entry, "_canonical", lambda attr, choices: attr)
    # A fixed program (the generator's seed 14 before nn.sin/nn.cos joined
    # it), so a change of the generator cannot make this control pass; the
    # mutations of seed 8 hit a schedule its groups use (seed 12's did until
    # the pointwise schedule gained a field, `gather_parts`, which moved the
    # draws; before that, since group-each-op moves a reshape of an input out
    # of its group, seed 14's no longer did); its 4-D batch norm is written
    # as the primitives decompose made of it before the per-channel algebra
    # moved into the kernel applying it, so the groups, and the entries the
    # seed poisons, stay those of the control
    result = poison_tuning(seed=8, count=8, text=PROGRAM.read_text())
    assert result.category == "error poison-warning new", result.outcome.detail
    assert "block = 9223372036854775808" in result.outcome.detail
