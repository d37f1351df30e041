"""Kernel builds for the whole process: each distinct kernel compiled once,
ever, in worker processes that start clean, at once and early.

- **Once.** `kernel_code(unit, signature, cc)` answers a future of the
  kernel's `KernelCode`, keyed by `kernel_key` (the kernel's normalised
  source, argument types, cap, compute capability and versions): the same
  future for every caller in this process (the register probe, the
  runtime, every partition and model), a finished one from the per-user
  kernel cache (`codegen/kernel_cache.py`) when a process before built it,
  else a build in a worker, which stores the result in that cache.
- **Clean workers.** Each worker is `python -m fusec.codegen.build_worker`,
  a plain subprocess talking JSON lines over pipes: it never re-imports the
  caller's `__main__` (what multiprocessing's "spawn" and "forkserver" do
  with a script's main module) and never imports torch, and it runs without
  `NUMBA_ENABLE_CUDASIM`.
- **At once and early.** `start_workers()` starts every worker (one per core
  this process may use, or `$FUSEC_BUILD_WORKERS`) at the same time, without
  waiting for any: each imports numba while the caller goes on (a GPU
  compile calls it when the compile begins, the register probe before its
  first count). They stay for the life of the process; one thread per
  worker feeds it from one queue, so builds run in parallel. At exit their
  stdin is closed: a worker still compiling finishes and stores its kernel
  (for the next compile) and exits; `stop_workers()` stops them at once.
- **Never a hang.** A worker that dies fails its build with the end of its
  stderr (an environmental `BuildFailed`) and is started again once. When
  no process can be started at all, kernels are compiled in this process,
  with a one-line note, where numba's real CUDA target is loaded; in the
  simulator (which compiles nothing) the build fails as environmental.

Every build and cache hit is reported to the functions `add_listener` took
(tests count builds this way) and, when `$FUSEC_BUILD_LOG` names a file,
appended to it as `built KEY KERNEL ASKED DONE` or `cached KEY KERNEL ASKED
DONE` (a compile in another process counted the same way; ASKED and DONE
are the wall-clock times, in Unix seconds, at which the kernel was asked
for and its code was ready: where a first call's seconds go).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any

from fusec.analysis.targets import ptxas_arch_of
from fusec.codegen.kernel_cache import KernelCode, KernelStore, Signature, kernel_key, user_store
from fusec.codegen.kernel_unit import KernelUnit

WORKER_MODULE = "fusec.codegen.build_worker"
WORKERS_ENV = "FUSEC_BUILD_WORKERS"
BUILD_LOG_ENV = "FUSEC_BUILD_LOG"

Listener = Callable[[str, str, str], None]  # (event "built" or "cached", key, kernel label)


class BuildFailed(Exception):
    """A kernel did not compile: numba rejected it (`environmental` False:
    a code-generation bug) or this machine cannot compile (no libNVVM or
    NVRTC, a worker that died, no process to compile in)."""

    def __init__(self, message: str, environmental: bool) -> None:
        super().__init__(message)
        self.message = message
        self.environmental = environmental


@dataclass(frozen=True)
class Built:
    """A kernel's code, and whether it came from the kernel cache (built by
    an earlier process) rather than a worker of this one."""

    code: KernelCode
    cached: bool


def find_ptxas() -> str | None:
    """The ptxas to assemble cubins with: on PATH, else in $CUDA_HOME/bin
    (or $CUDA_PATH/bin); None when there is none."""
    found = shutil.which("ptxas")
    if found:
        return found
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
            return os.path.join(root, "bin", "ptxas")
    return None


def worker_count() -> int:
    """How many workers to start: `$FUSEC_BUILD_WORKERS`, else the cores
    this process may run on."""
    asked = os.environ.get(WORKERS_ENV, "").strip()
    if asked.isdigit() and int(asked) > 0:
        return int(asked)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# --- the workers ---------------------------------------------------------------------------------


class _Worker:
    """One worker process, fed by one thread of the pool."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)
        self.proc: subprocess.Popen[str] | None = None
        self.stderr: IO[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        """Start the process (returns at once: it warms up on its own)."""
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        # a file, not a pipe: a pipe nobody reads could fill and block the worker
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `stop`)
        self.proc = subprocess.Popen(self.command, env=env, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """The worker's reply to `request`; BuildFailed when it died."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            raise BuildFailed(f"a kernel compile worker stopped ({self._tail()})", True)
        try:
            reply = json.loads(line)
        except ValueError:
            raise BuildFailed(f"a kernel compile worker answered {line[:200]!r}", True) \
                from None
        return reply if isinstance(reply, dict) else {"error": "a malformed reply",
                                                      "environment": True}

    def _tail(self) -> str:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        text = ""
        if self.stderr is not None:
            self.stderr.seek(0)
            text = self.stderr.read().decode("utf-8", "replace")
        last = [line for line in text.strip().splitlines() if line.strip()][-1:]
        code = self.proc.returncode if self.proc is not None else None
        return last[0].strip() if last else f"exit status {code}"

    def stop(self, grace_s: float = 5.0) -> None:
        """Close its stdin (an idle worker exits), and kill it if it has not
        exited after `grace_s` seconds (one still compiling)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None


_Job = tuple[dict[str, Any], "Future[dict[str, Any]]"]


class BuildPool:
    """Worker processes serving one queue of requests."""

    def __init__(self, size: int, command: Sequence[str]) -> None:
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._workers = [_Worker(command) for _ in range(size)]
        self._threads: list[threading.Thread] = []
        self._closing = False

    @property
    def size(self) -> int:
        """How many workers serve the queue."""
        return len(self._workers)

    def start(self) -> None:
        """Start every worker at once (OSError when one cannot be started;
        those started are stopped again)."""
        try:
            for worker in self._workers:
                worker.start()
        except OSError:
            for worker in self._workers:
                worker.stop()
            raise
        for worker in self._workers:
            thread = threading.Thread(target=self._serve, args=(worker,), daemon=True,
                                      name="fusec-build")
            thread.start()
            self._threads.append(thread)

    def submit(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        """The future reply to `request`."""
        future: Future[dict[str, Any]] = Future()
        self._jobs.put((request, future))
        return future

    def _serve(self, worker: _Worker) -> None:
        while (job := self._jobs.get()) is not None:
            request, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                if worker.proc is None:
                    raise BuildFailed("a kernel compile worker could not be started again", True)
                future.set_result(worker.ask(request))
            except BuildFailed as err:
                future.set_exception(err)
                worker.stop()
                # restarted once: a worker that cannot live fails fast after
                if worker.restarts < 1 and not self._closing:
                    worker.restarts += 1
                    with contextlib.suppress(OSError):
                        worker.start()

    def leave(self) -> None:
        """Drop the builds not begun and close the workers' stdin, without
        waiting for those still compiling (see `_leave_workers`)."""
        self._closing = True
        self._drain()
        for worker in self._workers:
            proc = worker.proc
            if proc is not None and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()

    def _drain(self) -> None:
        """Fail every build no worker has begun: nobody waits on it forever."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None and job[1].set_running_or_notify_cancel():
                job[1].set_exception(BuildFailed("the kernel compile workers were stopped", True))

    def close(self) -> None:
        """Stop the threads and the workers: builds not yet started fail, and
        a worker still compiling is killed (its kernel is built again by
        whoever needs it next)."""
        self._closing = True
        self._drain()
        for _ in self._threads:
            self._jobs.put(None)
        for worker in self._workers:
            worker.stop(grace_s=0.5)
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()


# --- the process-wide pool and builds ------------------------------------------------------------

class _Build(Future[Built]):
    """A kernel's future code, shared by every caller (`_memo`). A caller
    that no longer needs it may cancel it only while no worker has begun
    its request (the request is cancelled with it): once a worker compiles
    it, the build goes on for whoever asks next, so a cancelled count never
    makes the next caller build the same kernel a second time beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.reply: Future[dict[str, Any]] | None = None

    def cancel(self) -> bool:
        reply = self.reply
        if reply is not None and not reply.cancel():
            return False  # a worker is compiling it, or it is done
        return super().cancel()


_lock = threading.RLock()
_pool: BuildPool | None = None
_pool_problem: str | None = None  # why no pool could be started (then: in this process)
_memo: dict[str, Future[Built]] = {}
_listeners: list[Listener] = []


def worker_command() -> list[str]:
    """How a worker is started."""
    return [sys.executable, "-m", WORKER_MODULE]


def start_workers() -> BuildPool | None:
    """The process's pool, started now if it is not yet (every worker at
    once); None when processes cannot be started (said once on stderr)."""
    global _pool, _pool_problem
    with _lock:
        if _pool is not None or _pool_problem is not None:
            return _pool
        pool = BuildPool(worker_count(), worker_command())
        try:
            pool.start()
        except OSError as err:
            _pool_problem = err.strerror or str(err)
            print(f"fusec: note: cannot start kernel compile workers ({_pool_problem}); "
                  "compiling kernels in this process", file=sys.stderr)
            return None
        _pool = pool
        atexit.register(_leave_workers)
        return pool


def stop_workers() -> None:
    """Stop the workers (at exit; a later build starts new ones)."""
    global _pool, _pool_problem
    with _lock:
        pool, _pool, _pool_problem = _pool, None, None
    if pool is not None:
        pool.close()


def _leave_workers() -> None:
    """At exit: close every worker's stdin and go. An idle worker exits at
    once; one still compiling finishes its kernel, stores it in the cache
    and exits, so the next compile finds it. Builds not begun are dropped."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.leave()


def workers_running() -> bool:
    """Whether this process has started its workers."""
    return _pool is not None


def add_listener(listener: Listener) -> Callable[[], None]:
    """Call `listener(event, key, kernel)` on every build ("built") and cache
    hit ("cached"); returns the function that removes it."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def forget_builds() -> None:
    """Drop this process's memory of built kernels (the kernel cache on disk
    stays): for tests that build the same kernel twice."""
    with _lock:
        _memo.clear()


def _tell(event: str, key: str, label: str, asked: float) -> None:
    for listener in list(_listeners):
        listener(event, key, label)
    path = os.environ.get(BUILD_LOG_ENV)
    if path:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{event} {key} {label or '-'} {asked:.3f} {time.time():.3f}\n")
        except OSError:
            pass


def kernel_code(unit: KernelUnit, signature: Signature, cc: Sequence[int], label: str = "",
                store: KernelStore | bool | None = True) -> Future[Built]:
    """The future code of `unit` for `signature` on `cc` (see the module
    docstring); `label` names the kernel in messages. `store`: the kernel
    cache to read and fill (True: the per-user one, None/False: none)."""
    asked = time.time()
    key = kernel_key(unit, signature, cc)
    cache = user_store() if store is True else (store or None)
    with _lock:
        known = _memo.get(key)
        if known is not None and not known.cancelled() and \
                not (known.done() and known.exception() is not None):
            return known
        future = _Build()
        _memo[key] = future
    if _from_cache(future, cache, key, label or unit.name, label, asked):
        return future
    request = {"source": unit.source, "name": unit.name,
               "signature": [[int(n), str(t)] for n, t in signature],
               "cc": [int(c) for c in cc], "arch": ptxas_arch_of((int(cc[0]), int(cc[1]))),
               "max_registers": unit.max_registers,
               "ptxas": find_ptxas(), "key": key, "label": label,
               "store": str(cache.root) if cache is not None else None}
    pool = start_workers()
    if pool is None:
        _finish(future, _compile_here(request), key, label, asked)
        return future
    reply = pool.submit(request)
    future.reply = reply  # cancelling the build now cancels the request not begun
    reply.add_done_callback(lambda done: _finish(future, done, key, label, asked))
    # a caller that gave up (`cancel`) before the request was attached frees the worker
    future.add_done_callback(lambda done: reply.cancel() if done.cancelled() else None)
    return future


def known_code(unit: KernelUnit, signature: Signature, cc: Sequence[int], label: str = "",
               store: KernelStore | bool | None = True) -> Built | None:
    """The code of `unit` for `signature` on `cc` where this process built
    it or the kernel cache has it; None otherwise, and no build starts."""
    asked = time.time()
    key = kernel_key(unit, signature, cc)
    with _lock:
        known = _memo.get(key)
    if known is not None and known.done() and not known.cancelled() and \
            known.exception() is None:
        return known.result()
    cache = user_store() if store is True else (store or None)
    future: Future[Built] = Future()
    if not _from_cache(future, cache, key, label or unit.name, label, asked):
        return None
    with _lock:
        _memo.setdefault(key, future)
    return future.result()


def _from_cache(future: Future[Built], cache: KernelStore | None, key: str, kernel: str,
                label: str, asked: float) -> bool:
    """Finish `future` with the kernel cache's entry of `key` (reported as
    a cache hit); False, `future` untouched, when it has none."""
    kept = cache.load(key, kernel) if cache is not None else None
    if kept is None:
        return False
    future.set_result(Built(kept, True))
    _tell("cached", key, label, asked)
    return True


def _finish(future: Future[Built], reply: Future[dict[str, Any]], key: str,
            label: str, asked: float) -> None:
    """Turn a worker's reply into `future`'s result (the worker stored it)."""
    if reply.cancelled():
        return
    try:
        answer = reply.result()
    except BuildFailed as err:
        _fail(future, err)
        return
    except Exception as err:  # a bug here must not leave the caller waiting
        _fail(future, BuildFailed(f"{type(err).__name__}: {err}", True))
        return
    if "error" in answer:
        _fail(future, BuildFailed(str(answer["error"]), bool(answer.get("environment", True))))
        return
    try:
        cubin = base64.b64decode(answer["cubin"]) if answer.get("cubin") else None
        code = KernelCode(str(answer["ptx"]), cubin, _count(answer.get("registers")),
                          _count(answer.get("spill_bytes")))
    except (KeyError, ValueError, TypeError) as err:
        _fail(future, BuildFailed(f"a malformed reply ({err})", True))
        return
    _tell("built", key, label, asked)
    if future.set_running_or_notify_cancel():  # else cancelled: kept in the cache all the same
        future.set_result(Built(code, False))


def _fail(future: Future[Built], err: BuildFailed) -> None:
    if future.set_running_or_notify_cancel():
        future.set_exception(err)


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def _compile_here(request: dict[str, Any]) -> Future[dict[str, Any]]:
    """A request compiled in this process (no worker could be started)."""
    done: Future[dict[str, Any]] = Future()
    if simulating():
        done.set_exception(BuildFailed(
            "no kernel compile worker could be started, and numba's simulator in this "
            "process compiles no PTX", True))
        return done
    from fusec.codegen.build_worker import compile_request

    done.set_result(compile_request(request))
    return done


def simulating() -> bool:
    """Whether numba's CUDA target in this process is the simulator."""
    config = sys.modules.get("numba.cuda.core.config")  # decided when numba.cuda was imported
    if config is not None:
        return bool(getattr(config, "ENABLE_CUDASIM", False))
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")
