"""`codegen/branch_locals.distinct_locals`: the second version of a kernel's
passes gets names of its own for what both versions assign."""

from __future__ import annotations

from fusec.codegen.branch_locals import assigned_names, distinct_locals


def test_assigned_names_of_plain_tuple_augmented_and_loop_assignments() -> None:
    lines = ["a = 1", "b, c = f(a)", "  d += a", "for e in range(4):", "x[a] = 2", "g == a"]
    assert assigned_names(lines) == {"a", "b", "c", "d", "e"}


def test_only_shared_names_are_renamed_and_attributes_kept() -> None:
    first = ["x = cuda.threadIdx.x", "acc = x + row"]
    second = ["x = cuda.threadIdx.x + 1", "acc = x * row", "acc = acc + 1", "only = acc"]
    assert distinct_locals(first, second) == [
        "x_u = cuda.threadIdx.x + 1", "acc_u = x_u * row", "acc_u = acc_u + 1", "only = acc_u"]


def test_nothing_shared_leaves_the_lines() -> None:
    assert distinct_locals(["a = 1"], ["b = 2", "c = b"]) == ["b = 2", "c = b"]
