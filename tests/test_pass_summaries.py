"""`fusec --list-passes` shows each pass's whole summary: every registered
pass has a one-sentence first docstring line, and the listing prints it
(a plugin's summary wrapped over two lines is joined, not cut)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from fusec.compiler.cli import main
from fusec.compiler.registry import XDSL_PASSES, PassRegistry

REGISTRY = PassRegistry()
REGISTRY.load_entry_points()
# A sentence: a capital first (or "xDSL: " and the sentence), a full stop at the end.
SENTENCE = re.compile(r"^(xDSL: [a-z]|[A-Z])[^\n]*\.$")


def _summary(name: str) -> tuple[str, str]:
    """(the docstring's first line, its first paragraph on one line)."""
    doc = XDSL_PASSES.get(name) or inspect.getdoc(REGISTRY.get(name)) or ""
    return doc.split("\n")[0], " ".join(doc.split("\n\n")[0].split())


@pytest.mark.parametrize("name", sorted(REGISTRY.factories))
def test_every_pass_summary_is_one_whole_sentence(name: str) -> None:
    first_line, paragraph = _summary(name)
    assert first_line == paragraph, f"{name}: the summary continues past its first line"
    assert SENTENCE.match(first_line), f"{name}: {first_line!r} is not one sentence"
    assert len(first_line) <= 92, f"{name}: the summary does not fit one source line"


def test_list_passes_prints_the_whole_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-passes"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert rows.keys() == REGISTRY.factories.keys()
    for name, printed in rows.items():
        assert printed == _summary(name)[0], name


def test_a_plugin_summary_wrapped_over_two_lines_is_listed_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugin = tmp_path / "wrapped.py"
    plugin.write_text('''
from xdsl.passes import ModulePass


class Wrapped(ModulePass):
    """Double every constant of the program, then halve it again, which
    changes nothing.

    Details that --list-passes leaves out.
    """

    name = "wrapped"

    def apply(self, ctx, op):
        pass
''')
    assert main(["--list-passes", "--load-pass-plugin", str(plugin)]) == 0
    out = capsys.readouterr().out
    assert ("wrapped              Double every constant of the program, then halve it again, "
            "which changes nothing.\n") in out
    assert "Details" not in out
