"""The docs as a new user reads them: docs/README.md indexes every page, every
list of OUT's files is complete, the README's commands write nothing into the
repository but OUT (`out/`), and writing-passes.md shows the IR after a
plugin pass with a command that prints it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fusec.compiler.compile import OUT_FILES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "README.md")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def _links(doc: Path) -> set[Path]:
    return {(doc.parent / target).resolve() for target in _LINK.findall(doc.read_text())
            if "://" not in target}


def test_docs_readme_indexes_every_page() -> None:
    index = DOCS / "README.md"
    links = _links(index)
    assert {p.resolve() for p in PAGES} <= links, "pages missing from docs/README.md"
    assert all(link.exists() for link in links), [str(p) for p in links if not p.exists()]
    assert index.resolve() in _links(ROOT / "README.md")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_lists_of_out_files_are_complete(doc: Path) -> None:
    """Wherever model.mlir, kernels.py and plan.json are listed together (within
    a few lines), every file of OUT is listed there too."""
    lines = doc.read_text().splitlines()
    for i in range(len(lines)):
        window = "\n".join(lines[max(i - 3, 0):i + 8])
        if all(name in lines[i] for name in ("model.mlir",)) and all(
                name in window for name in ("kernels.py", "plan.json")):
            missing = [name for name in OUT_FILES if name not in window]
            assert not missing, f"{doc.name}:{i + 1} lists OUT without {missing}"


def _sh_commands(doc: Path) -> list[tuple[str, list[str]]]:
    """(the line, its words) of every `fusec` command in the sh blocks of `doc`."""
    commands = []
    for block in _SH_BLOCK.findall(doc.read_text()):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("fusec "):
                commands.append((line, shlex.split(line)))
    return commands


def test_readme_writes_nothing_into_the_repository_but_out() -> None:
    outputs = [cmd[cmd.index("-o") + 1] for _, cmd in _sh_commands(ROOT / "README.md")
               if "-o" in cmd]
    assert outputs
    assert [o for o in outputs if o != "out" and not o.startswith("/tmp/")] == []


def test_writing_passes_prints_the_ir_after_a_plugin_pass(tmp_path: Path) -> None:
    commands = [(line, c) for line, c in _sh_commands(DOCS / "writing-passes.md")
                if "--load-pass-plugin" in c and "-o" not in c
                and any(a.startswith("--print-ir-after=") for a in c)]
    assert commands, "writing-passes.md shows no command printing the IR after a plugin pass"
    line, cmd = commands[0]
    name = next(a.split("=", 1)[1] for a in cmd if a.startswith("--print-ir-after="))
    plugin = Path(cmd[cmd.index("--load-pass-plugin") + 1])
    assert plugin.parent == Path("docs/examples")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PATH=path)
    done = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"// -----// IR Dump After {name} //----- //\nbuiltin.module")
