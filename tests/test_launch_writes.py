"""plan.json's per-argument `writes` says what each launch writes: a split's
second kernel (split-KV attention's combine, a split reduction's final pass)
only reads the workspaces the first wrote; a one-kernel split reduction both
reads and writes its partials and arrival counters. Checked against the
kernels' own text: an argument marked read-only is never stored to, and one
marked written is."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from fusec.compiler.compile import CompiledArtifacts, compile_model
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import tensor
from tests.test_attention import PIPELINE, attention_text

SPLIT_KV = PIPELINE.replace("fuse-attention",
                            "fuse-attention{block_q=1 block_k=8 rows=1 cols=2 splits=3}")


def _softmax_columns() -> str:
    t = tensor((40, 3))
    return (f"func.func @f(%x: {t}) -> {t} {{\n  %y = nn.softmax %x {{axis = 0}} : {t}\n"
            f"  func.return %y : {t}\n}}\n")


def _column_sum() -> str:
    t, r = tensor((600, 8)), tensor((1, 8))
    return (f"func.func @f(%x: {t}) -> {r} {{\n  %s = nn.reduce_sum %x {{axes = [0], "
            f"keepdims = true}} : ({t}) -> {r}\n  func.return %s : {r}\n}}\n")


def _stored(kernel: ast.FunctionDef) -> set[str]:
    """Names the kernel stores into (`a[i] = ...`, `a[i] += ...`) or updates
    atomically (`cuda.atomic.add(a, ...)`)."""
    out: set[str] = set()
    for node in ast.walk(kernel):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "atomic"):
            targets = [ast.Subscript(node.args[0])]
        out |= {t.value.id for t in targets
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
    return out


def _launches(art: CompiledArtifacts) -> list[tuple[dict[str, Any], dict[str, bool]]]:
    """Each launch of plan.json with `writes` per kernel parameter name, after
    checking those against what the kernel's text stores."""
    kernels = {f.name: f for f in ast.parse(art.program.kernels_source).body
               if isinstance(f, ast.FunctionDef)}
    out: list[tuple[dict[str, Any], dict[str, bool]]] = []
    for launch in art.plan["functions"]["f"]["launches"]:
        kernel = kernels[launch["kernel"]]
        names = [a.arg for a in kernel.args.args]
        writes = {n: bool(a["writes"]) for n, a in zip(names, launch["args"], strict=True)}
        stored = _stored(kernel)
        assert {n for n, w in writes.items() if w} == stored & set(names), \
            (launch["kernel"], writes, stored)
        out.append((launch, writes))
    return out


def _workspace_writes(art: CompiledArtifacts) -> list[tuple[str, list[bool]]]:
    return [(la["kernel"], [a["writes"] for a in la["args"] if a["value"].startswith("w")])
            for la, _ in _launches(art)]


def test_split_kv_combine_only_reads_the_partials() -> None:
    art = compile_model(attention_text((2, 2), 1, 4, skv=37), pipeline=SPLIT_KV)
    assert _workspace_writes(art) == [("f_attn0_matmul_partials", [True, True]),
                                      ("f_attn0_matmul", [False, False])]


def test_split_passes_final_kernel_only_reads_the_partials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(
        fill_threads=512, block_threads=32, min_split_elems=2, shared_budget=0))
    art = compile_model(_softmax_columns())
    kernels = _workspace_writes(art)
    assert len(kernels) == 2 and kernels[0][0].endswith("_partials"), kernels
    assert kernels[0][1] and all(kernels[0][1]), kernels
    assert kernels[1][1] == [False] * len(kernels[0][1]), kernels


def test_one_kernel_split_writes_its_partials_and_counters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS",
                        ReductionOptions(fill_threads=4096, min_split_elems=4))
    art = compile_model(_column_sum(), pipeline="group-each-op")
    assert _workspace_writes(art) == [("f_g0_reduce_sum", [True, True])]
