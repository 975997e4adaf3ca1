"""Measuring kernel configurations: the benchmark process and the compile workers.

The benchmark process owns a private copy of the caller's arguments and runs one candidate at a time:
first launch (correctness against the reference), then samples timed with CUDA events after an L2
flush, replaying a CUDA graph of several launches when the kernel is short. It runs in a spawned child
so that a kernel that faults (which poisons a CUDA context for good) or hangs costs only that child; the
parent records the failure, starts a fresh child and carries on. Compile workers run
``JITFunction.warmup`` on dtypes only, in parallel, filling Triton's on-disk cache ahead of the GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BenchFailure",
    "BenchProcess",
    "InProcessBench",
    "KernelRef",
    "SetupFailure",
    "compile_config",
    "one_line",
]

#: Bytes written between samples to evict the previous run's data from L2 (H200: 60 MiB of L2).
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: A sample lasts at least this long: shorter kernels are replayed several times in one CUDA graph,
#: so that launch overhead and event resolution do not decide between candidates.
MIN_SAMPLE_MS = 1.0
MAX_LAUNCHES_PER_SAMPLE = 200


def one_line(exc: BaseException) -> str:
    """``Type: first meaningful line`` of an exception, at most 300 characters."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and not ln.strip().startswith("^")]
    text = lines[-1] if type(exc).__name__ == "CompilationError" and lines else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {text}"[:300]


class BenchFailure(Exception):
    """A candidate failed; ``status`` is ``"failed"`` or ``"timeout"`` and the message is the reason."""

    def __init__(self, reason: str, status: str = "failed") -> None:
        super().__init__(reason)
        self.status = status


class SetupFailure(BenchFailure):
    """The benchmark process could not start (it cannot import the kernel, say): no candidate's fault."""


@dataclass(frozen=True)
class KernelRef:
    """Where a child process finds the kernel: an attribute of an importable module."""

    module: str
    name: str
    #: Whether the caller's kernel is Triton's interpreter's (decorated under ``TRITON_INTERPRET=1``).
    interpret: bool = False

    def load(self) -> Any:
        """The Triton function (``JITFunction`` or the interpreter's) behind the attribute."""
        obj = getattr(importlib.import_module(self.module), self.name)
        while hasattr(obj, "_perftune_inner"):
            obj = obj._perftune_inner
        return obj


_KERNELS: dict[KernelRef, Any] = {}


@contextlib.contextmanager
def child_env(ref: KernelRef) -> Iterator[None]:
    """``TRITON_INTERPRET`` as the caller's kernel was built, for processes started inside the block.

    Triton reads the variable when a kernel is decorated, and a spawned process inherits the caller's
    environment, not how its kernel was built: a variable set (or cleared) after the kernel's module was
    imported would give the benchmark process the other kind of kernel (a GPU kernel interpreted on the
    CPU, timing out on its first launch). The caller's environment is restored on leaving the block.
    """
    wanted = "1" if ref.interpret else "0"
    before = os.environ.get("TRITON_INTERPRET")
    if (before not in (None, "", "0")) == ref.interpret:
        yield
        return
    os.environ["TRITON_INTERPRET"] = wanted
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before


def _kernel(ref: KernelRef) -> Any:
    if ref not in _KERNELS:
        _KERNELS[ref] = ref.load()
    return _KERNELS[ref]


def compile_config(
    ref: KernelRef,
    arg_spec: Sequence[Any],
    kwargs: Mapping[str, Any],
    meta: Mapping[str, Any],
    grid: tuple[int, ...],
) -> tuple[str, str, float]:
    """Compile one configuration in a worker (no launch): ``("ok" | "failed", reason, seconds)``.

    ``arg_spec`` holds the torch dtype in place of each tensor argument: ``warmup`` compiles for
    dtypes only (pointers assumed 16-byte aligned, as torch allocates them).
    """
    t0 = time.perf_counter()
    try:
        fn = _kernel(ref)
        if hasattr(fn, "warmup"):
            fn.warmup(*arg_spec, grid=grid, **kwargs, **meta)
    except Exception as exc:
        return "failed", "compile: " + one_line(exc), time.perf_counter() - t0
    return "ok", "", time.perf_counter() - t0


class _Bench:
    """The benchmark state: lives in the child (or, for kernels a child cannot import, in-process)."""

    def __init__(self, fn: Any) -> None:
        import torch

        self.torch = torch
        self.fn = fn
        self.prepared: dict[str, Callable[[], float]] = {}
        self.reference: list[Any] | None = None

    def setup(self, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]) -> str:
        torch = self.torch
        self.originals = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        # Tensors passed by keyword are the kernel's arguments as much as positional ones: cloned (the
        # caller's are never written), reset, restored and checked alike.
        self.kw_originals = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        self.kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        self.arg_names = list(options["arg_names"])
        self.reset_to_zero = list(options.get("reset_to_zero") or [])
        self.restore_value = list(options.get("restore_value") or [])
        self.pre_hook = options.get("pre_hook")
        self.post_hook = options.get("post_hook")
        self.tolerance = options.get("tolerance")
        self.cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in [*args, *kwargs.values()])
        self.work = [a.clone() if isinstance(a, torch.Tensor) else a for a in self.originals]
        if self.cuda:
            self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=self._device())
        reference = options.get("reference")
        if reference is not None:
            reference(*self.work, **self.kwargs)
            self._sync()
            self.reference = self._snapshot()
        return torch.cuda.get_device_name() if self.cuda else "interpreter"

    def _device(self) -> Any:
        tensors = [*self.originals, *self.kw_originals.values()]
        return next(a.device for a in tensors if isinstance(a, self.torch.Tensor) and a.is_cuda)

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def _tensors(self) -> list[tuple[str, Any]]:
        """``(name, working tensor)`` of every tensor argument, positional ones first, then by keyword."""
        named = [(n, a) for n, a in zip(self.arg_names, self.work, strict=False)
                 if isinstance(a, self.torch.Tensor)]
        return named + [(k, self.kwargs[k]) for k in self.kw_originals]

    def _snapshot(self) -> list[Any]:
        return [a.clone() for _, a in self._tensors()]

    def _restore(self) -> None:
        for w, o in zip(self.work, self.originals, strict=True):
            if isinstance(w, self.torch.Tensor):
                w.copy_(o)
        for k, o in self.kw_originals.items():
            self.kwargs[k].copy_(o)

    def _launcher(
        self, meta: Mapping[str, Any], grid: tuple[int, ...], config_hook: Any
    ) -> Callable[[], None]:
        named = {**dict(zip(self.arg_names, self.work, strict=False)), **self.kwargs}
        full = {**named, **meta}
        zero = [named[n] for n in self.reset_to_zero if isinstance(named.get(n), self.torch.Tensor)]
        # An in-place kernel (x += ...) would otherwise time launch k on the output of launch k-1; as in
        # Triton, the copy back is inside the timed region, the same for every candidate.
        originals = {**dict(zip(self.arg_names, self.originals, strict=False)), **self.kw_originals}
        restore = [
            (named[n], originals[n])
            for n in self.restore_value
            if isinstance(named.get(n), self.torch.Tensor) and n in originals
        ]
        fn, args, kwargs = self.fn, self.work, self.kwargs

        def launch() -> None:
            for t in zero:
                t.zero_()
            for w, o in restore:
                w.copy_(o)
            if self.pre_hook is not None:
                self.pre_hook(full)
            if config_hook is not None:
                config_hook(full)
            fn[grid](*args, **kwargs, **meta)
            if self.post_hook is not None:
                self.post_hook(full, None)

        return launch

    def compile(self, meta: Mapping[str, Any], grid: tuple[int, ...]) -> None:
        """Compile, and load what the first launch would otherwise load under the run's timeout.

        Triton builds a kernel's launcher (a C extension, with the system's compiler on a cold cache) and
        loads its binary on the first launch; done here, those seconds count against the compile timeout,
        not against the candidate's first launch (whose timeout is for the kernel itself).
        """
        if not hasattr(self.fn, "warmup"):
            return
        kernel = self.fn.warmup(*self.work, grid=grid, **self.kwargs, **meta)
        if self.cuda and kernel is not None:
            if callable(getattr(kernel, "result", None)):
                kernel = kernel.result()  # Triton's asynchronous compile mode
            load = getattr(kernel, "_init_handles", None)  # Triton 3.x; without it, the first launch loads
            if callable(load):
                load()

    def prepare(self, cid: str, meta: Mapping[str, Any], grid: tuple[int, ...], config_hook: Any) -> float:
        """First launch, correctness check and the timer of one candidate; returns one launch's ms."""
        torch = self.torch
        self._restore()
        launch = self._launcher(meta, grid, config_hook)
        t0 = time.perf_counter()
        launch()
        self._sync()
        first_ms = (time.perf_counter() - t0) * 1e3
        outputs = self._snapshot()
        if self.reference is None:
            self.reference = outputs  # the first configuration that runs is the reference of the others
        else:
            self._check(outputs)
        if not self.cuda:

            def run_cpu() -> float:
                t = time.perf_counter()
                launch()
                return (time.perf_counter() - t) * 1e3

            self.prepared[cid] = run_cpu
            return first_ms
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            launch()
        end.record()
        end.synchronize()
        est_ms = start.elapsed_time(end) / 3
        n_launch = max(1, min(MAX_LAUNCHES_PER_SAMPLE, math.ceil(MIN_SAMPLE_MS / max(est_ms, 1e-4))))
        replay = self._graph(launch, n_launch)
        flush = self.flush

        def run_gpu() -> float:
            flush.zero_()
            start.record()
            replay()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / n_launch

        self.prepared[cid] = run_gpu
        return est_ms

    def _graph(self, launch: Callable[[], None], n_launch: int) -> Callable[[], None]:
        torch = self.torch
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                launch()  # Triton binds the kernel on first use, outside the capture
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(n_launch):
                    launch()
            graph.replay()
            self._sync()
            return graph.replay
        except Exception:
            # A hook that synchronises or allocates cannot be captured: launch directly instead.
            self._sync()

            def direct() -> None:
                for _ in range(n_launch):
                    launch()

            return direct

    def _check(self, outputs: Sequence[Any]) -> None:
        assert self.reference is not None
        names = [n for n, _ in self._tensors()]
        for i, (out, ref) in enumerate(zip(outputs, self.reference, strict=True)):
            name = names[i] if i < len(names) else f"tensor argument {i}"
            if out.shape != ref.shape:
                raise BenchFailure(f"wrong result: {name} changed shape")
            if out.numel() == 0 or out.dtype == self.torch.bool or not out.is_floating_point():
                if not self.torch.equal(out, ref):
                    raise BenchFailure(f"wrong result: {name} differs from the reference")
                continue
            tol = self.tolerance if self.tolerance is not None else _default_tolerance(out.dtype, self.torch)
            o, r = out.float(), ref.float()
            err = float((o - r).abs().nan_to_num(nan=math.inf).max())
            scale = float(r.abs().nan_to_num(nan=0.0).max())
            if err > tol * max(scale, 1e-30) and err > 0:
                raise BenchFailure(
                    f"wrong result: {name} differs from the reference by {err:.3g} "
                    f"(tolerance {tol:g} x max |reference| {scale:.3g})"
                )

    def sample(self, cid: str, n: int) -> list[float]:
        run = self.prepared[cid]
        return [run() for _ in range(n)]

    def drop(self, cid: str) -> None:
        self.prepared.pop(cid, None)


def _default_tolerance(dtype: Any, torch: Any) -> float:
    if dtype in (torch.float16, torch.bfloat16):
        return 2e-2
    if dtype == torch.float32:
        return 1e-3  # TF32 and a different summation order stay well inside this
    return 1e-9


def _serve(conn: Any, ref: KernelRef) -> None:
    """The child's loop: one request, one reply; exceptions become ``("failed", reason)``."""
    bench: _Bench | None = None
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        op = msg[0]
        try:
            if op == "stop":
                return
            if op == "setup":
                bench = _Bench(_kernel(ref))
                conn.send(("ok", bench.setup(msg[1], msg[2], msg[3])))
                del msg  # the caller's tensors (CUDA IPC): only the clones are kept
            elif op == "prepare":
                assert bench is not None
                _, cid, meta, grid, hook = msg
                t0 = time.perf_counter()
                bench.compile(meta, grid)
                conn.send(("compiled", time.perf_counter() - t0))
                conn.send(("ok", bench.prepare(cid, meta, grid, hook)))
            elif op == "reference":
                assert bench is not None
                _, meta, grid, hook = msg
                bench.reference = None
                bench.prepare("__reference__", meta, grid, hook)
                bench.drop("__reference__")
                conn.send(("ok", None))
            elif op == "sample":
                assert bench is not None
                conn.send(("ok", bench.sample(msg[1], msg[2])))
            elif op == "drop":
                assert bench is not None
                bench.drop(msg[1])
                conn.send(("ok", None))
        except BenchFailure as exc:
            conn.send((exc.status, str(exc)))
        except Exception as exc:
            if bench is not None and bench.cuda and _context_lost(exc):
                # A faulted CUDA context cannot run anything again: the parent starts a fresh process.
                conn.send(("lost", one_line(exc)))
                return
            conn.send(("failed", one_line(exc)))


def _context_lost(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(
        s in text for s in ("illegal", "unspecified launch failure", "misaligned", "device-side assert")
    )


class BenchProcess:
    """The parent's handle on the benchmark child: requests with timeouts, restarts after a loss.

    Args:
        ref: Where the child imports the kernel from.
        setup: ``(args, kwargs, options)`` sent to every new child (tensors travel by CUDA IPC or
            shared memory; the child clones them, so a faulty kernel never writes the caller's data).
        compile_timeout_s: Longest a candidate's compilation in the child may take.
        run_timeout_s: Longest one launch or one batch of samples may take.
    """

    def __init__(
        self,
        ref: KernelRef,
        setup: tuple[Sequence[Any], Mapping[str, Any], Mapping[str, Any]],
        *,
        compile_timeout_s: float = 120.0,
        run_timeout_s: float = 10.0,
        start_timeout_s: float = 180.0,
    ) -> None:
        self.ref = ref
        self.setup_payload = setup
        self.compile_timeout_s = compile_timeout_s
        self.run_timeout_s = run_timeout_s
        self.start_timeout_s = start_timeout_s
        self.proc: Any = None
        self.conn: Any = None
        self.device = ""
        self.n_restarts = 0
        #: ``(meta, grid, hook)`` of the configuration whose outputs are the reference, once known.
        self.reference_spec: tuple[Mapping[str, Any], tuple[int, ...], Any] | None = None

    def _start(self) -> None:
        import torch.multiprocessing  # noqa: F401  (registers the CUDA IPC and shared-memory picklers)

        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, self.ref), daemon=True, name="perftune-bench")
        with child_env(self.ref):
            proc.start()  # kept only once started: close() must not join a process that never ran
        self.proc = proc
        child.close()
        self.conn = parent
        self.conn.send(("setup", *self.setup_payload))
        status, value = self._reply(self.start_timeout_s, "starting the benchmark process")
        if status != "ok":
            self.close()
            raise SetupFailure(f"benchmark process setup failed: {value}")
        self.device = value
        if self.reference_spec is not None:
            # A restarted process checks against the same configuration as the one before it.
            self.conn.send(("reference", *self.reference_spec))
            status, value = self._reply(self.compile_timeout_s, "rebuilding the reference")
            if status != "ok":
                raise BenchFailure(f"the reference configuration failed in a fresh process: {value}")

    def _reply(self, timeout_s: float, what: str) -> tuple[str, Any]:
        status, value = self._receive(timeout_s, what)
        if status == "lost":
            self.kill()  # wait for it to go, so that the next candidate gets a fresh process
            return "failed", value
        return status, value

    def _receive(self, timeout_s: float, what: str) -> tuple[str, Any]:
        assert self.conn is not None
        try:
            ready = self.conn.poll(timeout_s)
        except (EOFError, OSError):
            ready = True
        if not ready:
            self.kill()
            raise BenchFailure(f"timeout: {what} took more than {timeout_s:g} s (process killed)", "timeout")
        try:
            return tuple(self.conn.recv())  # type: ignore[return-value]
        except (EOFError, OSError):
            code = None
            if self.proc is not None:
                self.proc.join(timeout=5)
                code = self.proc.exitcode
            self.kill()
            raise BenchFailure(
                f"crashed: the benchmark process died during {what} (exit code {code})"
            ) from None

    def ensure(self) -> None:
        if self.proc is None or not self.proc.is_alive():
            if self.proc is not None:
                self.kill()
                self.n_restarts += 1
            self._start()

    def prepare(self, cid: str, meta: Mapping[str, Any], grid: tuple[int, ...], hook: Any) -> float:
        self.ensure()
        self.conn.send(("prepare", cid, dict(meta), grid, hook))
        status, value = self._reply(self.compile_timeout_s, "compiling")
        if status == "compiled":
            status, value = self._reply(self.run_timeout_s, "the first launch")
        if status != "ok":
            raise BenchFailure(value, status)
        return float(value)

    def sample(self, cid: str, n: int) -> list[float]:
        if self.proc is None or not self.proc.is_alive():
            raise BenchFailure("the benchmark process was restarted: this candidate's timer is gone")
        self.conn.send(("sample", cid, n))
        status, value = self._reply(self.run_timeout_s, "timing")
        if status != "ok":
            raise BenchFailure(value, status)
        return list(value)

    def drop(self, cid: str) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(("drop", cid))
            self._reply(self.run_timeout_s, "dropping a candidate")

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.proc = None
        self.conn = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive() and self.conn is not None:
            try:
                self.conn.send(("stop",))
                self.proc.join(timeout=5)
            except (OSError, ValueError):
                pass
        self.kill()


class InProcessBench:
    """The same requests served in the caller's process (kernels a child cannot import): no isolation."""

    def __init__(self, fn: Any, setup: tuple[Sequence[Any], Mapping[str, Any], Mapping[str, Any]]) -> None:
        self.bench = _Bench(fn)
        self.device = self.bench.setup(*setup)
        self.n_restarts = 0
        self.reference_spec: tuple[Mapping[str, Any], tuple[int, ...], Any] | None = None

    def prepare(self, cid: str, meta: Mapping[str, Any], grid: tuple[int, ...], hook: Any) -> float:
        try:
            self.bench.compile(meta, grid)
            return self.bench.prepare(cid, meta, grid, hook)
        except BenchFailure:
            raise
        except Exception as exc:
            raise BenchFailure(one_line(exc)) from None

    def sample(self, cid: str, n: int) -> list[float]:
        try:
            return self.bench.sample(cid, n)
        except Exception as exc:
            raise BenchFailure(one_line(exc)) from None

    def drop(self, cid: str) -> None:
        self.bench.drop(cid)

    def close(self) -> None:
        self.bench.prepared.clear()


def picklable(obj: Any) -> bool:
    """Whether ``obj`` can travel to a spawned process (module-level functions can, lambdas cannot)."""
    try:
        pickle.dumps(obj)
    except Exception:
        return False
    return True


def n_compile_workers() -> int:
    """All the CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
