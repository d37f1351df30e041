"""Per-address CUDA-graph replay on the CPU: which graph a call replays, what
it copies, the LRU and the capture budget, and the fallbacks, with the
CUDA layer (CuPy streams and graphs, numba arrays) replaced by recorders."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.memory_plan import storage_classes, view_roots
from fusec.analysis.program import FunctionProgram, TensorSpec, View
from fusec.runtime.graph_cache import CallCounts, GraphCache, GraphCachePolicy, static_key
from fusec.runtime.graphs import GraphRunner

GPU, OTHER_GPU = 0, 1
_addresses = itertools.count(0x7F00_0000_0000, 0x1000)


class DevArray:
    """A device array known by its CUDA array interface (kind "cai")."""

    def __init__(self, shape: tuple[int, ...] = (2, 4), device: int = GPU) -> None:
        self.ptr = next(_addresses)
        self.device = device
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "version": 3,
                                         "data": (self.ptr, False), "strides": None}


class FakeCuda:
    """CuPy and numba.cuda as the runner uses them; every call recorded."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.devices: dict[int, int] = {}  # address -> device, for pointerGetAttributes
        self.captures = 0
        self.capturing = False
        null = SimpleNamespace(ptr=0, synchronize=lambda: self.events.append(("sync",)))
        fake = self

        class Stream:
            def __init__(self, non_blocking: bool = False) -> None:
                self.ptr = 0x5
                self.recorded: list[Any] = []

            def __enter__(self) -> None:
                return None

            def __exit__(self, *exc: object) -> None:
                return None

            def begin_capture(self) -> None:
                fake.capturing = True
                self.recorded = []

            def end_capture(self) -> Any:
                fake.capturing = False
                fake.captures += 1
                launches = tuple(self.recorded)
                return SimpleNamespace(
                    upload=lambda s: None,
                    launch=lambda s: fake.events.append(("graph", launches)))

            def synchronize(self) -> None:
                return None

        Stream.null = null  # type: ignore[attr-defined]
        self.stream_cls = Stream
        runtime = SimpleNamespace(
            memcpyAsync=lambda dst, src, n, kind, s: self.events.append(("copy", dst, src, n)),
            pointerGetAttributes=self._attributes, deviceSynchronize=lambda: None)
        self.cupy = SimpleNamespace(
            cuda=SimpleNamespace(Stream=Stream, Device=lambda: SimpleNamespace(id=GPU),
                                 runtime=runtime),
            empty=self._cupy_empty)
        self.numba = SimpleNamespace(
            device_array=self._device_array, external_stream=lambda ptr: ("ext", ptr),
            from_cuda_array_interface=lambda d, owner=None, sync=True: SimpleNamespace(
                __cuda_array_interface__=d, ptr=d["data"][0]))

    def _attributes(self, ptr: int) -> Any:
        if ptr not in self.devices:
            raise RuntimeError("cudaErrorInvalidValue")
        return SimpleNamespace(type=2, device=self.devices[ptr])

    def _cupy_empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        ptr = next(_addresses)
        self.devices[ptr] = GPU
        self.events.append(("static", ptr))
        return SimpleNamespace(data=SimpleNamespace(ptr=ptr))

    def _device_array(self, shape: tuple[int, ...], dtype: Any) -> DevArray:
        a = DevArray(tuple(shape))
        self.devices[a.ptr] = GPU
        return a

    def register(self, a: DevArray) -> DevArray:
        self.devices[a.ptr] = a.device
        return a


def _fp(returns_input: bool = False) -> FunctionProgram:
    values = {"v0": TensorSpec((2, 4), "float32"), "v1": TensorSpec((2, 4), "float32"),
              "v2": TensorSpec((2, 4), "float32"), "v3": TensorSpec((8,), "float32")}
    return FunctionProgram(
        name="f", inputs=["v0", "v1"], outputs=["v0" if returns_input else "v3"],
        values=values, launches=[], input_names=["x", "y"],
        views=[View("v3", "v2")])


class FakeExecutor:
    """What the runner reads of an executor; `_bind` and `enqueue` record
    the addresses each launch was bound to."""

    def __init__(self, fake: FakeCuda, fp: FunctionProgram, fail: bool = False) -> None:
        self.fake, self.fp, self.cuda = fake, fp, fake.numba
        self.roots, self.classes = view_roots(fp), storage_classes(fp)
        self.fail = fail
        self.graph: Any = None
        self.graphs = True
        self.plain_calls = 0
        self.counts = CallCounts()

    def _bind(self, storage: dict[str, Any], keep: bool = True) -> tuple[list[Any], list[Any]]:
        assert keep is False
        ptrs = {v: a.__cuda_array_interface__["data"][0] for v, a in storage.items()}
        calls = [("kernel", ptrs)]
        results = [storage[self.roots[v]] for v in self.fp.outputs]
        return calls, results

    def enqueue(self, calls: list[Any], stream: Any, blas: Any = None) -> None:
        assert self.fake.capturing
        if self.fail:
            raise NotImplementedError("calling cuBLAS API during stream capture")
        stream_obj = self.runner.stream
        stream_obj.recorded.extend(tuple(sorted(c[1].items())) for c in calls)

    def __call__(self, inputs: list[Any]) -> list[Any]:
        self.plain_calls += 1
        return ["plain"]


def _runner(fake: FakeCuda, fp: FunctionProgram | None = None, size: int = 8,
            fail: bool = False) -> tuple[GraphRunner, FakeExecutor]:
    ex = FakeExecutor(fake, fp or _fp(), fail)
    runner = GraphRunner(fake.cupy, ex, GraphCachePolicy(size=size))  # type: ignore[arg-type]
    ex.runner = runner  # type: ignore[attr-defined]
    ex.graph = runner
    return runner, ex


def _graphs(fake: FakeCuda) -> list[dict[str, int]]:
    return [dict(e[1][0]) for e in fake.events if e[0] == "graph"]


def test_device_inputs_are_read_in_place_and_outputs_written_in_place() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake)
    x, y = fake.register(DevArray()), fake.register(DevArray())
    (out,) = runner([x, y])
    assert not [e for e in fake.events if e[0] in ("copy", "static")]  # nothing copied
    (bound,) = _graphs(fake)
    assert bound["v0"] == x.ptr and bound["v1"] == y.ptr  # the caller's addresses
    assert bound["v2"] == out.ptr  # the fresh output (root v2 of the returned view v3)
    assert out.__cuda_array_interface__["shape"] == (8,)


def test_same_addresses_replay_new_addresses_capture_and_no_stale_address() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake)
    x, y = fake.register(DevArray()), fake.register(DevArray())
    runner([x, y])
    runner([x, y])
    # The fresh outputs of the two calls differ (the first is still held),
    # so the second call is a new graph too: outputs never alias.
    assert fake.captures == 2
    x2 = fake.register(DevArray())
    (out,) = runner([x2, y])
    last = _graphs(fake)[-1]
    assert (last["v0"], last["v1"], last["v2"]) == (x2.ptr, y.ptr, out.ptr)
    assert fake.captures == 3
    # A call whose addresses were all seen replays its graph without capturing.
    key = next(iter(runner.cache.entries))
    assert runner.cache.get(key) is not None and fake.captures == 3


def test_a_replayed_key_does_not_capture_again() -> None:
    fake = FakeCuda()
    runner, ex = _runner(fake)
    x, y = fake.register(DevArray()), fake.register(DevArray())
    runner([x, y])
    # An allocator that hands back the block freed by the previous call, as
    # torch's caching allocator does in a loop that drops its results.
    block = fake.register(DevArray((8,)))
    runner._sinks["cai"].fresh = lambda: [(block, block.ptr)]  # type: ignore[method-assign]
    for _ in range(5):
        (out,) = runner([x, y])
        assert out is block
    assert fake.captures == 2 and ex.plain_calls == 0
    assert len(_graphs(fake)) == 6
    # every call replayed a graph that reads and writes in place
    assert ex.counts == CallCounts(replays=6, captures=2)


def test_host_inputs_are_copied_into_static_buffers_and_mixing_works() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake)
    x = np.ones((2, 4), np.float32)
    y = fake.register(DevArray())
    fake.events.clear()
    (out,) = runner([x, y])  # results in y's kind: device arrays
    statics = [e[1] for e in fake.events if e[0] == "static"]
    copies = [e for e in fake.events if e[0] == "copy"]
    assert len(statics) == 1 and copies == [("copy", statics[0], x.ctypes.data, 32)]
    bound = _graphs(fake)[-1]
    assert bound["v0"] == statics[0] and bound["v1"] == y.ptr and bound["v2"] == out.ptr


def test_numpy_only_uses_the_static_graph_with_copies_in_and_out() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake)
    for _ in range(3):
        x, y = np.ones((2, 4), np.float32), np.full((2, 4), 2, np.float32)
        (out,) = runner([x, y])
        assert isinstance(out, np.ndarray) and out.shape == (8,)
    assert fake.captures == 1 and runner.cache.static is not None
    assert not runner.cache.entries  # the static graph is kept outside the LRU
    copies = [e for e in fake.events if e[0] == "copy"]
    assert len(copies) == 9  # two in and one out per call
    assert copies[-1][1] == out.ctypes.data and copies[-1][3] == 32


def test_host_replay_queues_copies_in_then_the_graph_then_copies_out() -> None:
    torch = pytest.importorskip("torch")
    fake = FakeCuda()
    runner, _ = _runner(fake)
    x, y = np.ones((2, 4), np.float32), torch.ones(2, 4)
    runner([x, y])
    fake.events.clear()
    (out,) = runner([x, y])
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"  # the first non-NumPy
    sx, sy = runner.static_in_ptrs
    (graph,) = _graphs(fake)
    assert [e[0] for e in fake.events] == ["copy", "copy", "graph", "copy", "sync"]
    assert fake.events[0] == ("copy", sx, x.ctypes.data, 32)
    assert fake.events[1] == ("copy", sy, y.data_ptr(), 32)
    assert fake.events[3] == ("copy", out.data_ptr(), graph["v2"], 32)
    with pytest.raises(FusecError, match="@f takes 2 input"):
        runner([x])


def test_lru_evicts_the_least_recently_used_graph() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake, size=2)
    runner.cache.budget = 100.0  # only the LRU is under test here
    y = fake.register(DevArray())
    xs = [fake.register(DevArray()) for _ in range(3)]
    for x in xs:
        runner([x, y])
    assert len(runner.cache.entries) == 2
    assert {k[0][0] for k in runner.cache.entries} == {xs[1].ptr, xs[2].ptr}


def test_addresses_that_never_repeat_fall_back_to_the_static_graph() -> None:
    fake = FakeCuda()
    runner, ex = _runner(fake, size=4)
    for _ in range(20):  # a new input each call: every key misses
        runner([fake.register(DevArray()), fake.register(DevArray())])
    # 4 captures from the budget, then the static graph (one more capture)
    assert fake.captures == 5 and runner.cache.static is not None
    assert ex.plain_calls == 0
    # the static graph copies both inputs in and the output out (32 bytes each)
    assert ex.counts == CallCounts(replays=20, copying_replays=16, copied_bytes=16 * 96,
                                   captures=5)
    last = _graphs(fake)[-1]
    assert last["v0"] in runner.static_in_ptrs and last["v1"] in runner.static_in_ptrs


def test_an_array_on_another_gpu_is_copied_not_read_in_place() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake)
    x = fake.register(DevArray(device=OTHER_GPU))
    y = fake.register(DevArray())
    runner([x, y])
    bound = _graphs(fake)[-1]
    assert bound["v0"] != x.ptr and bound["v0"] in runner.static_in_ptrs
    assert bound["v1"] == y.ptr
    assert ("copy", bound["v0"], x.ptr, 32) in fake.events
    runner([x, y])  # the same key again: the same decision, from the cache
    assert ("copy", bound["v0"], x.ptr, 32) in fake.events[-4:]


def test_an_array_off_the_16_byte_boundary_is_copied_not_read_in_place() -> None:
    """Kernels move 16-byte words without testing addresses
    (runtime/array_alignment.py): a view one element into its buffer is
    read from the static input buffer, which is aligned."""
    fake = FakeCuda()
    runner, _ = _runner(fake)
    x, y = fake.register(DevArray()), fake.register(DevArray())
    x.ptr += 4  # x[1:] of a larger device array
    x.__cuda_array_interface__["data"] = (x.ptr, False)
    fake.devices[x.ptr] = GPU
    runner([x, y])
    bound = _graphs(fake)[-1]
    assert bound["v0"] != x.ptr and bound["v0"] in runner.static_in_ptrs
    assert bound["v0"] % 16 == 0 and bound["v1"] == y.ptr
    assert ("copy", bound["v0"], x.ptr, 32) in fake.events


def test_a_returned_input_is_copied_out_never_written_in_place() -> None:
    fake = FakeCuda()
    runner, _ = _runner(fake, fp=_fp(returns_input=True))
    assert runner.direct_ok is False
    x, y = fake.register(DevArray()), fake.register(DevArray())
    fake.events.clear()
    (out,) = runner([x, y])
    assert fake.events[-2:] == [("copy", out.ptr, x.ptr, 32), ("sync",)]  # from the input
    (key,) = runner.cache.entries
    assert key[1] is None


def test_a_failed_capture_falls_back_to_plain_launches(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    fake = FakeCuda()
    runner, ex = _runner(fake, fail=True)
    got = runner([fake.register(DevArray()), fake.register(DevArray())])
    assert got == ["plain"] and ex.plain_calls == 1
    assert ex.graph is None and ex.graphs is False
    assert "CUDA graph capture of @f failed (NotImplementedError" in capsys.readouterr().err


def test_cache_budget_refills_on_hits_and_caps() -> None:
    cache: GraphCache[str] = GraphCache(1, GraphCachePolicy(size=2, refill_hit=0.5,
                                                            refill_static=0.25))
    assert cache.may_capture()
    cache.put(((1,), None), "a")
    cache.put(((2,), None), "b")
    assert not cache.may_capture()  # two captures spent
    cache.get(((1,), None))
    assert not cache.may_capture()  # half a capture earned back
    cache.get(((2,), None))
    assert cache.may_capture()
    for _ in range(10):
        cache.get(((2,), None))
    assert cache.budget == 2.0  # never above the LRU size
    cache.put(static_key(1), "static")
    assert cache.budget == 2.0 and cache.get(static_key(1)) == "static"
    assert cache.get(((3,), None)) is None


def test_call_counts_add_field_by_field() -> None:
    a = CallCounts(one_by_one=1, replays=9, copying_replays=2, copied_bytes=64, captures=1)
    b = CallCounts(one_by_one=3, replays=1, copying_replays=0, copied_bytes=0, captures=2)
    assert a + b == CallCounts(4, 10, 2, 64, 3)
    assert sum((a, b), CallCounts()) == a + b
