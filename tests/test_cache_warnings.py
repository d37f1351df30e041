"""Cache warnings are one line each, once per entry: a kernel named with a
newline is escaped, and an entry that several identical groups read is
reported once (found by the fuzzer's poison modes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusec.codegen.kernel_cache import KernelStore
from fusec.runtime.tuning_cache import TuningCache

KEY = "ab" * 32


def test_kernel_warning_escapes_the_kernel_name(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = KernelStore(tmp_path)
    store.path(KEY).parent.mkdir(parents=True)
    store.path(KEY).write_bytes(b"{truncated")
    assert store.load(KEY, "f\nx_g0_exp") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "ignoring kernel cache entry" in err and "'f\\nx_g0_exp'" in err


def test_a_bad_tuning_entry_read_twice_is_reported_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = TuningCache(tmp_path)
    cache.path(KEY).parent.mkdir(parents=True)
    cache.path(KEY).write_bytes(b"\xff\xfe not utf-8")
    assert cache.load(KEY) is None
    assert cache.load(KEY) is None
    err = capsys.readouterr().err
    assert err.count("ignoring the tuning cache entry") == 1, err
