"""Every shell and Python snippet of README.md and docs/*.md runs, as written,
from the repository root (of a copy, so the outputs the snippets write land
there and not in the checkout).

- ```sh blocks run with bash, stopping at the first failing command;
  ```python blocks run with the test's Python.
- An HTML comment on the line before a block says how the test treats it:
  `<!-- snippet: skip REASON -->` (skipped, with the reason),
  `<!-- snippet: needs-gpu -->`, `<!-- snippet: needs-module NAME -->` (skipped
  without a CUDA GPU / without the module), `<!-- snippet: excerpt PATH -->`
  (the block is part of the file PATH, which is itself tested; checked to
  appear there word for word).
- Output samples are ```text blocks (not run); an unlabelled block that looks
  like a command is an error, so a new snippet cannot slip past this test.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
_MARK = re.compile(r"<!--\s*snippet:\s*(?P<kind>[\w-]+)\s*(?P<arg>.*?)\s*-->")
_COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "Output", ".venv", "out",
                                      "*.egg-info", ".pytest_cache", ".ruff_cache")


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it is, its language, its marker and its text."""

    doc: Path
    line: int
    lang: str
    mark: str
    arg: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def snippets(doc: Path) -> list[Snippet]:
    """The fenced blocks of `doc`, with the marker on the line before each."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out: list[Snippet] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = len(m["indent"]), i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        mark = _MARK.search(lines[start - 1]) if start > 0 else None
        out.append(Snippet(doc, start + 1, m["lang"], mark["kind"] if mark else "",
                           mark["arg"] if mark else "", "\n".join(body) + "\n"))
        i += 1
    return out


ALL = [s for doc in DOCS for s in snippets(doc)]
RUN = [s for s in ALL if s.lang in RUNNABLE]


def test_unlabelled_blocks_are_not_commands() -> None:
    commands = ("fusec ", "python ", "python3 ", "pip ", "$ ")
    bad = [s.id for s in ALL if s.lang == ""
           and s.text.lstrip().startswith(commands)]
    assert not bad, f"label these blocks sh (run) or text (output): {bad}"


def test_markers_are_known() -> None:
    kinds = {"", "skip", "needs-gpu", "needs-module", "excerpt"}
    assert {s.mark for s in ALL} <= kinds
    assert all(s.arg for s in ALL if s.mark in ("skip", "needs-module", "excerpt"))


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository, copied once for all snippets (they share outputs, as a
    reader following a page in order does)."""
    dest = tmp_path_factory.mktemp("docs") / "repo"
    shutil.copytree(ROOT, dest, ignore=_COPY_IGNORE)
    return dest


def _skip_reason(s: Snippet) -> str | None:
    if s.mark == "skip":
        return s.arg
    if s.mark == "needs-gpu":
        from fusec.runtime.device import gpu_available

        simulated = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
        return None if gpu_available() and not simulated else "needs a CUDA GPU"
    if s.mark == "needs-module" and importlib.util.find_spec(s.arg) is None:
        return f"needs the optional module {s.arg}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("snippet", RUN, ids=[s.id for s in RUN])
def test_snippet_runs(snippet: Snippet, repo_copy: Path) -> None:
    if snippet.mark == "excerpt":
        source = (ROOT / snippet.arg).read_text(encoding="utf-8")
        assert snippet.text.strip() in source, f"{snippet.id} is not in {snippet.arg}"
        return
    reason = _skip_reason(snippet)
    if reason:
        pytest.skip(reason)
    env = dict(os.environ)
    if RUNNABLE[snippet.lang] == "sh":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", snippet.text]
    else:
        cmd = [sys.executable, "-c", snippet.text]
    proc = subprocess.run(cmd, cwd=repo_copy, env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    assert proc.returncode == 0, (
        f"{snippet.id} failed ({proc.returncode}):\n{snippet.text}\n"
        f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    assert "Traceback" not in proc.stderr, proc.stderr
