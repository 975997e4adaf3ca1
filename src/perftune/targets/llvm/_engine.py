"""Engines that hold a module and apply pass pipelines to it.

Two implementations with one interface:

- :class:`HelperEngine`: a persistent C++ process linked against libLLVM-14 (``_helper.cpp``), the
  module stays in memory, a step costs a few milliseconds;
- :class:`OptEngine`: one ``opt -passes=...`` process per step on a bitcode file, no compiler needed.

Both run every step with fresh analysis managers, like one ``opt`` invocation per step, so they
give identical instruction counts (tests/targets/llvm/test_engine.py checks it).

A pass that crashes or hangs raises :class:`EngineCrash`; the engine is then restarted and holds
the module as it was before the failing step.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import struct
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

from perftune.targets.llvm._errors import BenchmarkError, LlvmError
from perftune.targets.llvm._ir import count_instructions, opcode_counts
from perftune.targets.llvm._tools import find_tool, helper_binary

__all__ = ["Engine", "EngineCrash", "HelperEngine", "OptEngine", "make_engine"]


class EngineCrash(LlvmError):
    """A pass crashed or exceeded its time limit; the engine was restarted."""


class PipelineError(LlvmError, ValueError):
    """The pipeline text is not understood by LLVM (unknown pass, bad nesting)."""


#: The first bytes of a bitcode file: raw, and in the wrapper some Darwin tools write.
_BITCODE_MAGIC = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")


def check_module_file(path: str | os.PathLike[str]) -> None:
    """BenchmarkError if PATH is a ``.bc`` file that is not bitcode (LLVM would parse it as text)."""
    if os.fspath(path).lower().endswith(".bc"):
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError as exc:
            raise BenchmarkError(f"{os.fspath(path)}: cannot read it: {exc.strerror}") from None
        if head not in _BITCODE_MAGIC:
            raise BenchmarkError(f"{os.fspath(path)}: not LLVM bitcode (it does not start with "
                                 "'BC\\xc0\\xde'); give a .bc file written by clang -emit-llvm or opt, "
                                 "or textual IR as .ll")


def _printable(text: str) -> str:
    """TEXT with control characters and undecodable bytes shown as escapes (messages stay one line)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class Engine:
    """Common interface; see the module docstring."""

    name = "engine"

    def load(self, path: str | os.PathLike[str]) -> int:
        """Makes the module in PATH (.ll or .bc) current and initial; returns its instruction count."""
        raise NotImplementedError

    def apply(self, pipeline: str, *, timeout_s: float | None = None) -> int:
        """Runs PIPELINE on the current module; returns the new instruction count.

        ``timeout_s`` overrides the engine's time limit for this step (EngineCrash past it).
        """
        raise NotImplementedError

    def trial(self, pipeline: str, *, timeout_s: float | None = None) -> int:
        """Instruction count PIPELINE would give, leaving the current module unchanged.

        ``timeout_s`` as for :meth:`apply`.
        """
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError

    def instcount(self) -> dict[str, int]:
        raise NotImplementedError

    def autophase(self) -> dict[str, int]:
        raise NotImplementedError

    def text_size(self, pipeline: str | None = None) -> int:
        """``.text`` bytes of the object code of the current module (after PIPELINE, on a copy)."""
        raise NotImplementedError

    def write_bitcode(self, path: str | os.PathLike[str]) -> None:
        raise NotImplementedError

    def ir(self) -> str:
        raise NotImplementedError

    def save(self, name: str) -> None:
        raise NotImplementedError

    def restore(self, name: str) -> int:
        raise NotImplementedError

    def reset(self) -> int:
        """Back to the module given to :meth:`load`."""
        raise NotImplementedError

    def load_state(self, path: str | os.PathLike[str]) -> int:
        """Makes the module in PATH current, keeping the initial module of :meth:`load`."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class HelperEngine(Engine):
    """The persistent C++ helper process.

    Example:
        >>> engine = HelperEngine()  # doctest: +SKIP
        >>> engine.load("prog.ll"), engine.apply("function(sroa)")  # doctest: +SKIP
        (812, 455)
    """

    name = "helper"

    def __init__(self, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="perftune-llvm-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._initial = self._dir / "initial.bc"
        self._saved: dict[str, Path] = {}
        self._base: Path | None = None  # file the current module derives from ...
        self._history: list[str] = []  # ... by applying these pipelines
        self._closed = False
        self._start()

    # -- process management ------------------------------------------------------------------
    def _start(self) -> None:
        binary = helper_binary()
        self._stderr = open(self._dir / "stderr.txt", "wb")  # noqa: SIM115 - lives as long as the process
        self._proc = subprocess.Popen(
            # The helper removes _dir if this process dies without closing the engine (stdin's EOF).
            [str(binary), str(self._dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            bufsize=0,
        )
        self._buffer = b""
        self._read_line(max(self.timeout_s, 60.0))  # the "ready" banner

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
            self._proc = None
        if getattr(self, "_stderr", None) is not None:
            self._stderr.close()

    def _stderr_tail(self) -> str:
        try:
            lines = (self._dir / "stderr.txt").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        # LLVM's crash handler prints "Stack dump:" and frames; the useful line comes before it.
        useful = [line for line in lines if line and not line.startswith((" ", "#", "Stack dump", "0."))]
        return useful[-1] if useful else (lines[0] if lines else "")

    def _read_line(self, timeout_s: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    raise TimeoutError
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")

    def _command(self, line: str, *, timeout_s: float | None = None) -> str:
        """Sends one command; returns the text after "ok". Restarts the helper on a crash or hang."""
        if self._closed or self._proc is None or self._proc.stdin is None:
            what = "closed" if self._closed else "not running (its restart failed)"
            raise LlvmError(f"the LLVM helper engine is {what}: make a new one (command: {line[:200]})")
        try:
            self._proc.stdin.write((line + "\n").encode())
            self._proc.stdin.flush()
            reply = self._read_line(self.timeout_s if timeout_s is None else timeout_s)
        except (TimeoutError, EOFError, BrokenPipeError) as exc:
            if isinstance(exc, TimeoutError):
                what = f"timed out after {self.timeout_s if timeout_s is None else timeout_s:g} s"
            else:
                tail = self._stderr_tail()
                what = "crashed" + (f": {tail}" if tail else "")
            self._recover()
            raise EngineCrash(f"LLVM helper {what} (command: {line[:200]})") from None
        if reply.startswith("ok"):
            return reply[3:]
        message = reply[4:] if reply.startswith("err ") else reply
        raise PipelineError(message)

    def _recover(self) -> None:
        # Restart and rebuild the module as it was before the failing command: reload the file it
        # derives from and replay the (deterministic) pipelines applied since.
        self._kill()
        self._start()
        # Replaying is not the step that failed: give it a generous limit.
        limit = max(self.timeout_s, 120.0)
        if self._base is not None:
            self._command(f"load {self._base}", timeout_s=limit)
            for pipeline in self._history:
                self._command(f"apply {pipeline}", timeout_s=limit)
        elif self._initial.exists():
            # The module came from an in-memory snapshot, which died with the process.
            self._command(f"load {self._initial}", timeout_s=limit)
            self._base, self._history = self._initial, []

    # -- Engine interface ----------------------------------------------------------------------
    def load(self, path: str | os.PathLike[str]) -> int:
        check_module_file(path)
        try:
            count = int(self._command(f"load {os.fspath(path)}"))
        except PipelineError as exc:
            raise BenchmarkError(f"{os.fspath(path)}: cannot parse LLVM IR: {_printable(str(exc))}") from None
        self._saved.clear()
        self._command("clear")
        self._command(f"write {self._initial}")
        self._base, self._history = self._initial, []
        return count

    def apply(self, pipeline: str, *, timeout_s: float | None = None) -> int:
        count = int(self._command(f"apply {pipeline}", timeout_s=timeout_s))
        self._history.append(pipeline)
        return count

    def trial(self, pipeline: str, *, timeout_s: float | None = None) -> int:
        return int(self._command(f"trial {pipeline}", timeout_s=timeout_s))

    def count(self) -> int:
        return int(self._command("count"))

    def instcount(self) -> dict[str, int]:
        return _parse_kv(self._command("instcount"))

    def autophase(self) -> dict[str, int]:
        return _parse_kv(self._command("autophase"))

    def text_size(self, pipeline: str | None = None) -> int:
        cmd = f"textsize-of {pipeline}" if pipeline else "textsize"
        try:
            return int(self._command(cmd))
        except PipelineError as exc:
            raise LlvmError(f"object code size: {exc}") from None

    def write_bitcode(self, path: str | os.PathLike[str]) -> None:
        self._command(f"write {os.fspath(path)}")

    def ir(self) -> str:
        target = self._dir / "ir.ll"
        self._command(f"writell {target}")
        return target.read_text()

    def save(self, name: str) -> None:
        target = self._dir / f"saved-{len(self._saved)}.bc"
        self._command(f"write {target}")
        self._saved[name] = target

    def restore(self, name: str) -> int:
        if name not in self._saved:
            raise LlvmError(f"no saved module named {name!r}")
        return self._reload(self._saved[name])

    def reset(self) -> int:
        return self._reload(self._initial)

    def load_state(self, path: str | os.PathLike[str]) -> int:
        own = self._dir / f"state-{len(self._saved)}-{len(self._history)}.bc"
        shutil.copyfile(path, own)
        return self._reload(own)

    # In-memory snapshots (fast; lost if the helper crashes, then EngineCrash says so).
    def mem_save(self, name: str) -> None:
        """Keeps an in-memory copy of the current module under NAME (no file is written)."""
        self._command(f"save {name}")

    def mem_restore(self, name: str) -> int:
        """Makes the in-memory copy NAME current; returns its instruction count."""
        # The module no longer derives from base + history: record it by a file only if a
        # crash happens (then the snapshot is gone and the caller starts over from reset()).
        count = int(self._command(f"restore {name}"))
        self._base, self._history = None, []
        return count

    def mem_drop(self, name: str) -> None:
        self._command(f"drop {name}")

    def _reload(self, path: Path) -> int:
        count = int(self._command(f"load {path}"))
        self._base, self._history = path, []
        return count

    def close(self) -> None:
        self._closed = True
        if self._proc is not None and self._proc.poll() is None and self._proc.stdin is not None:
            try:
                self._proc.stdin.write(b"quit\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=5)
            except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
                pass
        self._kill()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


class OptEngine(Engine):
    """One ``opt`` process per step; the module lives in a bitcode file.

    Each step reads and writes bitcode with ``-preserve-bc-uselistorder``, so that it sees the module
    exactly as an in-memory pipeline would (passes walk use lists); the text IR that counts are taken
    from is only written, never read back (LLVM 14 cannot always re-read text with use-list orders).

    Example:
        >>> engine = OptEngine()  # doctest: +SKIP
        >>> engine.load("prog.ll"), engine.apply("function(sroa)")  # doctest: +SKIP
        (812, 455)
    """

    name = "opt"

    def __init__(self, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._opt = find_tool("opt")
        self._dir = Path(tempfile.mkdtemp(prefix="perftune-llvm-opt-"))
        # Removed when the engine is collected or the interpreter exits, if close() was never called.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        self._current = self._dir / "current.bc"
        self._initial = self._dir / "initial.bc"
        self._text: str | None = None  # text IR of _current, written on demand
        self._saved: dict[str, Path] = {}
        self._n = 0

    def _check_open(self) -> None:
        if not self._cleanup.alive:  # close() removed the folder the module lives in
            raise LlvmError("the opt engine is closed: make a new one")

    def _opt_process(self, argv: list[str], pipeline: str, timeout_s: float | None) -> str:
        """Runs opt with ARGV; returns its stdout (EngineCrash on a crash or hang, else PipelineError)."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            result = subprocess.run([self._opt, *argv], capture_output=True, timeout=limit)
        except subprocess.TimeoutExpired:
            raise EngineCrash(
                f"opt timed out after {limit:g} s (passes: {pipeline[:200]})"
            ) from None
        if result.returncode != 0:
            stderr = result.stderr.decode(errors="replace")
            lines = [s for s in stderr.strip().splitlines() if s and not s.startswith((" ", "#"))]
            message = _printable(lines[0] if lines else f"exit status {result.returncode}")
            if result.returncode < 0 or "Stack dump" in stderr:
                raise EngineCrash(f"opt crashed: {message} (passes: {pipeline[:200]})")
            raise PipelineError(message.removeprefix(f"{self._opt}: "))
        return result.stdout.decode(errors="replace")

    def _run_opt(self, src: Path, pipeline: str, dst: Path, timeout_s: float | None = None) -> None:
        self._opt_process([f"-passes={pipeline}", str(src), "-preserve-bc-uselistorder", "-o", str(dst)],
                          pipeline, timeout_s)

    def _next(self, suffix: str = ".bc") -> Path:
        self._n += 1
        return self._dir / f"m{self._n}{suffix}"

    def _text_of(self, path: Path) -> str:
        return self._opt_process(["-S", str(path), "-o", "-"], "(print)", None)

    def _current_text(self) -> str:
        self._check_open()
        if self._text is None:
            self._text = self._text_of(self._current)
        return self._text

    def _set_current(self, path: Path) -> int:
        os.replace(path, self._current)
        self._text = None
        return self.count()

    def load(self, path: str | os.PathLike[str]) -> int:
        self._check_open()
        check_module_file(path)
        try:
            self._run_opt(Path(path), "verify", self._initial)
        except PipelineError as exc:
            raise BenchmarkError(f"{os.fspath(path)}: cannot parse LLVM IR: {exc}") from None
        self._saved.clear()
        shutil.copyfile(self._initial, self._dir / "load.bc")
        return self._set_current(self._dir / "load.bc")

    def apply(self, pipeline: str, *, timeout_s: float | None = None) -> int:
        self._check_open()
        out = self._next()
        try:
            self._run_opt(self._current, pipeline, out, timeout_s)
        except BaseException:
            out.unlink(missing_ok=True)
            raise
        return self._set_current(out)

    def trial(self, pipeline: str, *, timeout_s: float | None = None) -> int:
        self._check_open()
        out = self._next()
        try:
            self._run_opt(self._current, pipeline, out, timeout_s)
            return count_instructions(self._text_of(out))
        finally:
            out.unlink(missing_ok=True)

    def count(self) -> int:
        return count_instructions(self._current_text())

    def instcount(self) -> dict[str, int]:
        return opcode_counts(self._current_text())

    def autophase(self) -> dict[str, int]:
        raise LlvmError("the Autophase observation needs the LLVM helper (engine='helper')")

    def text_size(self, pipeline: str | None = None) -> int:
        self._check_open()
        src = self._current
        temporary: list[Path] = []
        try:
            if pipeline:
                src = self._next()
                temporary.append(src)
                self._run_opt(self._current, pipeline, src)
            obj = self._next(".o")
            temporary.append(obj)
            result = subprocess.run(
                [find_tool("llc"), "-filetype=obj", str(src), "-o", str(obj)],
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
            )
            if result.returncode != 0:
                raise LlvmError(f"llc failed: {result.stderr.strip().splitlines()[:1]}")
            return elf_text_size(obj.read_bytes())
        finally:
            for path in temporary:
                path.unlink(missing_ok=True)

    def write_bitcode(self, path: str | os.PathLike[str]) -> None:
        self._check_open()
        shutil.copyfile(self._current, path)

    def ir(self) -> str:
        return self._current_text()

    def save(self, name: str) -> None:
        self._check_open()
        target = self._dir / f"saved-{len(self._saved)}.bc"
        shutil.copyfile(self._current, target)
        self._saved[name] = target

    def restore(self, name: str) -> int:
        self._check_open()
        if name not in self._saved:
            raise LlvmError(f"no saved module named {name!r}")
        out = self._next()
        shutil.copyfile(self._saved[name], out)
        return self._set_current(out)

    def reset(self) -> int:
        self._check_open()
        out = self._next()
        shutil.copyfile(self._initial, out)
        return self._set_current(out)

    def load_state(self, path: str | os.PathLike[str]) -> int:
        self._check_open()
        out = self._next()
        self._run_opt(Path(path), "verify", out)
        return self._set_current(out)

    def close(self) -> None:
        self._cleanup()


def elf_text_size(data: bytes) -> int:
    """Total size of the ``.text`` sections of a 64-bit little-endian ELF object."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise LlvmError("object code size: not a 64-bit ELF object")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        (name,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, offset, size

    _, str_off, _ = section(shstrndx)
    total = 0
    for i in range(shnum):
        name_off, _, size = section(i)
        end = data.index(b"\0", str_off + name_off)
        name = data[str_off + name_off : end].decode()
        if name == ".text" or name.startswith(".text."):
            total += size
    return total


def _parse_kv(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in text.split():
        key, _, value = item.partition("=")
        out[key] = int(value)
    return out


def make_engine(kind: str = "helper", *, timeout_s: float = 60.0) -> Engine:
    """``"helper"`` (fast, builds the C++ helper on first use) or ``"opt"`` (one process per step)."""
    if kind == "helper":
        return HelperEngine(timeout_s=timeout_s)
    if kind == "opt":
        return OptEngine(timeout_s=timeout_s)
    raise LlvmError(f"unknown engine {kind!r}: expected 'helper' or 'opt'")
