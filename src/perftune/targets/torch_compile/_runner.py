"""Compile and time torch.compile variants in a fresh process: crashes and hangs are failures, not ours.

One *job* is a model, its inputs and one or more *variants* (an ``options=`` dict of ``torch.compile``
each). A job runs in a process of its own, started with ``spawn`` (never ``fork``: a forked CUDA
context is unusable, and a fresh interpreter is what "compiled in a fresh process" means), in a process
group of its own so that Inductor's compile workers die with it. In that process:

1. the eager model runs once on the inputs under ``torch.no_grad()``: its output is the reference;
2. each variant is compiled by its first call (timed: ``compile_s``) and its output is checked against
   the reference: its NaN and inf elements must be the reference's (in place and sign), and its finite
   elements within the output dtype's tolerance (relative Frobenius error over the finite elements);
3. the variants that passed are timed in interleaved rounds (variant order rotated every round), after
   warm-up calls, so that all of them see the same clocks, power state and caches. On a GPU each sample
   is CUDA events around ``k`` calls (``k`` chosen so that a sample lasts at least ``min_sample_s``:
   launch overhead is part of an end-to-end call, but a timer's resolution should not be); on the CPU,
   ``time.perf_counter``.

The parent waits at most ``timeout_s``; then it kills the process group (TIMEOUT). A process that dies
(a signal, ``os._exit``) fails every variant of its job with the exit reason and the last lines the
process wrote to stderr. The process starts from the caller's settings (:func:`caller_state`), and it
kills itself and its group within a second when the caller is gone (SIGTERM, SIGKILL): no compile or
GPU memory outlives the tuner.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import multiprocessing
import os
import pickle
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perftune.errors import PerftuneError
from perftune.trial import Status

__all__ = ["Job", "TimingPlan", "VariantTiming", "caller_state", "run_job", "tolerance_of"]

# How often a job's process checks that the process that started it is still there.
_WATCH_PARENT_S = 1.0

# Relative Frobenius error ||out - ref|| / ||ref|| allowed per output dtype. Compiled code reorders
# reductions and fuses casts, so results differ from eager by rounding: float32 lands far under 1e-4,
# bf16/fp16 operands between 1e-3 and 1e-2 (tf32 matmuls, if the user enabled them, near 3e-4).
_TOLERANCE = {
    "torch.float64": 1e-9,
    "torch.float32": 1e-4,
    "torch.float16": 1e-2,
    "torch.bfloat16": 2e-2,
}


def tolerance_of(dtype: Any, *, tf32: bool = False) -> float:
    """Relative error a compiled output of ``dtype`` may have against eager (0 for integers and bools).

    Example:
        >>> tolerance_of("torch.bfloat16")
        0.02
    """
    name = str(dtype)
    if name == "torch.float32" and tf32:
        return 1e-3
    return _TOLERANCE.get(name, 0.0)


@dataclass(frozen=True)
class TimingPlan:
    """How variants are timed in their process.

    Attributes:
        n_warmup: Calls after the compiling call and before timing (caches, clocks, autotuning at runtime).
        n_rounds: Interleaved rounds; each gives one sample of every variant.
        min_sample_s: A sample times enough consecutive calls to last at least this long.

    Example:
        >>> TimingPlan(n_rounds=20).n_warmup
        3
    """

    n_warmup: int = 3
    n_rounds: int = 10
    min_sample_s: float = 1e-3

    def __post_init__(self) -> None:
        counts = (self.n_warmup, self.n_rounds)
        counts_ok = all(isinstance(n, int) and not isinstance(n, bool) for n in counts)
        sample_ok = isinstance(self.min_sample_s, int | float) and not isinstance(self.min_sample_s, bool)
        if not (counts_ok and sample_ok) or self.n_warmup < 0 or self.n_rounds < 1 or not (
            0 < self.min_sample_s < math.inf
        ):
            raise PerftuneError(
                "TimingPlan: need integers n_warmup >= 0 and n_rounds >= 1, and a number min_sample_s > 0; "
                f"got {self}"
            )


@dataclass(frozen=True)
class Job:
    """What one fresh process compiles and times.

    Attributes:
        fn: The model (an ``nn.Module``) or function; sent by pickle, so it must be importable.
        inputs: Positional arguments of one call.
        variants: ``(label, options)`` pairs; options ``None`` is plain ``torch.compile``, and the label
            ``"eager"`` with options ``None`` times the model uncompiled.
        device: ``"cpu"`` or ``"cuda"``.
        plan: Warm-up and rounds.
        rtol: Relative error allowed (None: by the output dtype, :func:`tolerance_of`).
        compile_only: Compile and check only, no timing: fills Inductor's on-disk caches, so that a
            later process that times the same settings compiles from them.

    Example:
        >>> job = Job(sum, ([1, 2],), (("eager", None), ("plain", {})), "cpu")
        >>> [label for label, _ in job.variants]
        ['eager', 'plain']
    """

    fn: Any
    inputs: tuple[Any, ...]
    variants: tuple[tuple[str, Mapping[str, Any] | None], ...]
    device: str
    plan: TimingPlan = TimingPlan()
    rtol: float | None = None
    compile_only: bool = False


@dataclass
class VariantTiming:
    """The outcome of one variant in its process.

    Attributes:
        label: The variant's label.
        options: Its ``torch.compile`` options.
        status: OK, FAILED (compile error, wrong output, a crash) or TIMEOUT.
        reason: One line saying why it is not OK.
        compile_s: Wall time of the first (compiling) call.
        samples_s: Seconds per call, one per round.
        rel_error: Largest relative error of its outputs against eager.
        model_failed: The model itself failed when run uncompiled (eager), so every variant fails alike.

    Example:
        >>> VariantTiming("plain", {}, samples_s=[2e-3, 1e-3, 3e-3]).median_s
        0.002
    """

    label: str
    options: dict[str, Any] | None
    status: Status = Status.OK
    reason: str | None = None
    compile_s: float | None = None
    samples_s: list[float] = field(default_factory=list)
    rel_error: float | None = None
    model_failed: bool = False

    @property
    def median_s(self) -> float | None:
        """Median seconds per call (None when it was not timed)."""
        return statistics.median(self.samples_s) if self.samples_s else None


# ------------------------------------------------------------------ in the fresh process


def _leaves(out: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(out)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _relative_error(out: Any, ref: Any, rtol: float | None) -> tuple[float, str | None]:
    import torch

    got, want = _leaves(out), _leaves(ref)
    if len(got) != len(want):
        return math.inf, f"wrong output: {len(got)} tensors, eager gives {len(want)}"
    worst = 0.0
    tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            got_text, want_text = f"{g.dtype}{list(g.shape)}", f"{w.dtype}{list(w.shape)}"
            return math.inf, f"wrong output {i}: {got_text}, eager gives {want_text}"
        tol = rtol if rtol is not None else tolerance_of(w.dtype, tf32=tf32)
        if not (w.is_floating_point() or w.is_complex()):
            if not torch.equal(g, w):
                return math.inf, f"wrong output {i}: differs from eager ({w.dtype} must match exactly)"
            continue
        g64, w64 = g.detach().cpu(), w.detach().cpu()
        if g64.is_complex():
            g64, w64 = torch.view_as_real(g64), torch.view_as_real(w64)
        g64, w64 = g64.double(), w64.double()
        # Non-finite elements must be the same as eager's, in place and sign (masked attention rows,
        # log(0), fp16 overflow give them); the others are compared by their relative error.
        g_inf = torch.where(torch.isinf(g64), g64, 0.0)
        w_inf = torch.where(torch.isinf(w64), w64, 0.0)
        mismatch = (torch.isnan(g64) != torch.isnan(w64)) | (g_inf != w_inf)
        if bool(mismatch.any()):
            n_bad = int(mismatch.sum())
            return math.inf, f"wrong output {i}: {n_bad} element(s) differ from eager in NaN or inf"
        both = torch.isfinite(g64) & torch.isfinite(w64)
        denom = float(torch.linalg.vector_norm(w64[both])) or 1.0
        err = float(torch.linalg.vector_norm(g64[both] - w64[both])) / denom
        if not err <= tol:  # a NaN error (an overflow of the norm) fails too
            return (math.inf if math.isnan(err) else err), (
                f"wrong output {i}: relative error {err:.2e} > {tol:.0e} against eager ({w.dtype})")
        worst = max(worst, err)
    return worst, None


class _ModelFailed(Exception):
    """The uncompiled model raised on the inputs: no variant can be checked against it."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300]


def _execute(job: Job) -> list[VariantTiming]:
    import copy

    import torch

    torch.manual_seed(0)
    cuda = job.device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    results: list[VariantTiming] = []
    callables: dict[str, Callable[..., Any]] = {}
    with torch.no_grad():
        try:
            reference = job.fn(*job.inputs)
            sync()
        except Exception as exc:
            raise _ModelFailed(_one_line(exc)) from None
        for label, options in job.variants:
            vt = VariantTiming(label, dict(options) if options is not None else None)
            results.append(vt)
            try:
                if label == "eager" and options is None:
                    fn = job.fn
                else:
                    # Each variant compiles its own copy: Dynamo caches compiled code per module object.
                    model = copy.deepcopy(job.fn) if isinstance(job.fn, torch.nn.Module) else job.fn
                    fn = torch.compile(model, options=dict(options) if options else None)
                t0 = time.perf_counter()
                out = fn(*job.inputs)
                sync()
                vt.compile_s = time.perf_counter() - t0
                vt.rel_error, problem = _relative_error(out, reference, job.rtol)
                del out
                if problem is not None:
                    vt.status, vt.reason = Status.FAILED, problem
                    continue
                if job.compile_only:
                    continue
                for _ in range(job.plan.n_warmup):
                    fn(*job.inputs)
                sync()
            except Exception as exc:  # a variant that does not compile or run fails alone
                vt.status, vt.reason = Status.FAILED, _one_line(exc)
                continue
            callables[label] = fn
        ok = [vt for vt in results if vt.status is Status.OK and not job.compile_only]
        calls = {vt.label: _calls_per_sample(callables[vt.label], job, sync) for vt in ok}
        for r in range(job.plan.n_rounds):
            shift = r % len(ok) if ok else 0
            for vt in ok[shift:] + ok[:shift]:
                vt.samples_s.append(_sample(callables[vt.label], job, calls[vt.label], sync))
    return results


def _sample(fn: Callable[..., Any], job: Job, k: int, sync: Callable[[], None]) -> float:
    import torch

    if job.device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn(*job.inputs)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / k
    t0 = time.perf_counter()
    for _ in range(k):
        fn(*job.inputs)
    sync()
    return (time.perf_counter() - t0) / k


def _calls_per_sample(fn: Callable[..., Any], job: Job, sync: Callable[[], None]) -> int:
    k = 1
    while k < 1 << 16:
        if _sample(fn, job, k, sync) * k >= job.plan.min_sample_s:
            return k
        k *= 4
    return k


def _apply_state(state: Mapping[str, Any]) -> None:
    """Put the caller's settings (:func:`caller_state`) into this fresh process, before anything compiles."""
    import torch

    with contextlib.suppress(Exception):
        torch.set_num_threads(int(state["threads"]))
    # The precision first: it sets the TF32 flags, which the caller may have set apart from it.
    with contextlib.suppress(Exception):
        torch.set_float32_matmul_precision(state["matmul_precision"])
    with contextlib.suppress(Exception):
        torch.backends.cuda.matmul.allow_tf32 = bool(state["cuda_matmul_allow_tf32"])
    with contextlib.suppress(Exception):
        torch.backends.cudnn.allow_tf32 = bool(state["cudnn_allow_tf32"])
    for module_name, patch in state.get("configs", {}).items():
        module = importlib.import_module(module_name)
        for key, value in patch.items():
            with contextlib.suppress(Exception):
                setattr(module, key, value)


def _watch_parent(parent_pid: int) -> None:
    """Kill this process and its compile workers once the parent is gone (a SIGTERM or SIGKILL of the
    tuner must not leave a compile or a process holding GPU memory behind)."""
    own_group = os.getpgid(0) == os.getpid()
    while True:
        time.sleep(_WATCH_PARENT_S)
        if os.getppid() != parent_pid:
            if own_group:
                with contextlib.suppress(OSError):
                    os.killpg(0, signal.SIGKILL)
            os._exit(1)


def _child(conn: Any, payload: bytes, stderr_path: str, state: Mapping[str, Any], parent_pid: int) -> None:
    # Own process group: the parent kills Inductor's compile workers together with this process.
    with contextlib.suppress(OSError):
        os.setsid()
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    fd = os.open(stderr_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        import torch

        _apply_state(state)
        job = torch.load(io.BytesIO(payload), weights_only=False)
        conn.send(("ok", _execute(job)))
    except _ModelFailed as exc:
        conn.send(("model-failed", str(exc)))
    except BaseException as exc:  # the whole job failed in a way the parent should report, not crash on
        conn.send(("error", _one_line(exc)))
    finally:
        conn.close()


# ------------------------------------------------------------------ in the caller's process


def caller_state() -> dict[str, Any]:
    """The settings of this process that change how a compiled model runs, for :func:`run_job`'s process.

    A fresh interpreter starts from torch's defaults; what the caller changed is carried over: the
    Inductor and Dynamo config values that differ from their defaults (those that can be pickled), the
    number of CPU threads, the float32 matmul precision and the TF32 flags. So the defaults a space reads
    here (:func:`perftune.torch.inductor_default`) are the ones the candidates are compiled against.

    Example:
        >>> caller_state()["threads"] >= 1  # doctest: +SKIP
        True
    """
    import torch

    state: dict[str, Any] = {"threads": torch.get_num_threads()}
    with contextlib.suppress(Exception):
        state["matmul_precision"] = torch.get_float32_matmul_precision()
    with contextlib.suppress(Exception):
        state["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    with contextlib.suppress(Exception):
        state["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    configs: dict[str, dict[str, Any]] = {}
    for module_name in ("torch._inductor.config", "torch._dynamo.config"):
        module = importlib.import_module(module_name)
        entries = getattr(module, "_config", {})
        patch: dict[str, Any] = {}
        for key, value in module.get_config_copy().items():
            entry = entries.get(key)
            try:
                if entry is not None and value == entry.default:
                    continue
                pickle.dumps(value)
            except Exception:  # a value that cannot be compared or sent (a custom pass object) stays here
                continue
            patch[key] = value
        configs[module_name] = patch
    state["configs"] = configs
    return state


# ------------------------------------------------------------------ in the caller's process


def serialize(job: Job) -> bytes:
    """The job as bytes for the fresh process (``torch.save``: tensors keep their device).

    Raises:
        PerftuneError: The model or inputs cannot be pickled (a lambda, a local class).
    """
    import torch

    buf = io.BytesIO()
    try:
        torch.save(job, buf)
    except Exception as exc:
        raise PerftuneError(
            f"tune_compile: the model cannot be sent to a fresh process ({_one_line(exc)}); define it (and "
            "its class) at module level, not as a lambda or inside a function"
        ) from None
    return buf.getvalue()


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "did not exit"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _tail(path: str, n_lines: int = 2) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n_lines:])[:300]


def run_job(job: Job, *, timeout_s: float, state: Mapping[str, Any] | None = None) -> list[VariantTiming]:
    """Run ``job`` in a fresh process; every variant comes back with a status, even when the process dies.

    The process starts from this process's settings (:func:`caller_state`), and it ends itself when
    this process is gone (killed, or ended by a signal), with the compile workers it started.

    Args:
        job: The model, inputs and variants.
        timeout_s: Wall-clock limit for the whole process (import, compiles, timing).
        state: The settings to start from (default: :func:`caller_state` now).

    Returns:
        One :class:`VariantTiming` per variant, in order. When the model itself fails uncompiled, every
        variant fails with ``model_failed`` set.
    """
    payload = serialize(job)
    state = dict(state) if state is not None else caller_state()
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    with tempfile.NamedTemporaryFile("w", prefix="perftune-compile-", suffix=".log", delete=False) as log:
        stderr_path = log.name
    proc = ctx.Process(target=_child, args=(sender, payload, stderr_path, state, os.getpid()), daemon=True)
    t0 = time.monotonic()
    killed = False
    try:
        proc.start()
        sender.close()
        message: tuple[str, Any] | None = None
        status, reason = Status.FAILED, ""
        if receiver.poll(timeout_s):
            try:
                message = receiver.recv()
            except EOFError:  # the process died before it could answer
                proc.join(5.0)
                reason = f"the compile process crashed ({_exit_reason(proc.exitcode)})"
        else:
            status = Status.TIMEOUT
            reason = f"no result after {time.monotonic() - t0:.0f} s (timeout {timeout_s:g} s): killed"
        if message is not None:
            proc.join(10.0)  # let it exit on its own; then its compile workers go with its group
        _kill(proc)
        killed = True
        if message is not None and message[0] == "ok":
            return list(message[1])
        if message is not None and message[0] == "model-failed":
            reason = f"the model itself fails uncompiled (eager): {message[1]}"
            return [VariantTiming(label, dict(opts) if opts else None, Status.FAILED, reason,
                                  model_failed=True) for label, opts in job.variants]
        if message is not None:
            reason = f"the compile process failed: {message[1]}"
        tail = _tail(stderr_path)
        if tail and status is not Status.TIMEOUT:
            reason += f"; stderr: {tail}"
        return [
            VariantTiming(label, dict(opts) if opts else None, status, reason) for label, opts in job.variants
        ]
    finally:
        if proc.pid is not None and not killed:  # an exception (Ctrl-C, SystemExit): it must not outlive us
            _kill(proc)
        receiver.close()
        with contextlib.suppress(OSError):
            os.unlink(stderr_path)


def _kill(proc: Any) -> None:
    if proc.pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.join(5.0)
    if proc.is_alive():
        proc.kill()
        proc.join(5.0)

