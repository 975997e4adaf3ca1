"""The objective of a task file: build, run (adaptively repeated), check, verify one configuration.

What the worker processes of one run share reaches them through the driver's
:class:`~perftune.drive.EvalContext`: the incumbent (for the sequential test and the adaptive
timeout), and, published by earlier evaluations, whether the metric is deterministic and the
verifier's risk model. The reference outputs of the default configuration, written once before the
search starts, are files of a per-task state directory.

Every measured run of a candidate (warm-ups and repeats) and every run of the reference starts from its
scratch directory as the build step left it (see :mod:`perftune.targets.command._scratch_state`), and
every measured run of a full evaluation passes the cheap output check, not only the first: a candidate
cannot do the work once and replay it fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import shlex
import stat
import statistics
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from perftune._atomic import write_text_atomic
from perftune.drive import ASHA, EvalContext, RunningTrial
from perftune.errors import TaskError
from perftune.measure import (
    BudgetedVerifier,
    CandidateFileError,
    Decision,
    Limits,
    MeasureResult,
    Sandbox,
    Stage,
    StageError,
    StepResult,
    TimingSettings,
    executable_by,
    is_constant,
    measure_adaptively,
    read_for_candidate,
    size_for_candidate,
)
from perftune.targets.command._scratch_state import ScratchError, ScratchState
from perftune.targets.command._specs import TIME_LIKE, FidelitySpec, StepSpec, static_template
from perftune.trial import Pruned, Status, TrialTimeout

__all__ = ["CandidateError", "CommandObjective", "TimingOptions"]

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b", re.IGNORECASE)


class CandidateError(RuntimeError):
    """A candidate failed (build, run, limit, wrong output, verification); ``str()`` is the reason."""


@dataclass(frozen=True)
class TimingOptions:
    """``[timing]``: repeats, sequential test, warm-up, adaptive timeout, core pinning."""

    settings: TimingSettings
    #: The adaptive run limit, a multiple of the incumbent's wall time. None (not set in the task): 3 when
    #: the metric is a time to minimise, off otherwise (a slower run may have the better size or score).
    timeout_factor: float | None = None
    min_timeout_s: float = 1.0
    pin_cpus: tuple[int, ...] | None = None
    repeats: int | None = None  # ``repeats = n``: exactly n runs, whatever the metric

    @classmethod
    def from_table(cls, table: Mapping[str, Any], metric: str) -> TimingOptions:
        kw: dict[str, Any] = {}
        if metric == "file_size":  # deterministic: one run says it all
            kw.update(min_runs=1, max_runs=1, first_runs=1, warmup_runs=0)
        if "repeats" in table:
            n = int(table["repeats"])
            if n < 1:
                raise ValueError(f"repeats must be at least 1, got {n}")
            kw.update(min_runs=n, max_runs=n, first_runs=n)
        for key in ("min_runs", "max_runs", "warmup_runs", "first_runs"):
            if key in table:
                value = table[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"{key} must be a non-negative integer, got {value!r}")
                kw[key] = value
        for key in ("tie", "confidence", "futility_confidence"):
            if key in table:
                kw[key] = float(table[key])
        if "max_runs" in kw and "first_runs" not in kw:
            kw["first_runs"] = kw["max_runs"]
        if "min_runs" in kw and "max_runs" not in kw:
            kw["max_runs"] = max(kw["min_runs"], TimingSettings().max_runs)
        settings = TimingSettings(**kw)
        pin = table.get("pin_cpus")
        if pin is not None and (not isinstance(pin, list) or not all(isinstance(c, int) for c in pin)):
            raise ValueError(f"pin_cpus must be an array of core numbers, got {pin!r}")
        factor = float(table["timeout_factor"]) if "timeout_factor" in table else None
        if factor is not None and factor < 1:
            raise ValueError(f"timeout_factor must be at least 1, got {factor}")
        return cls(
            settings,
            factor,
            float(table.get("min_timeout_s", 1.0)),
            tuple(pin) if pin else None,
            int(table["repeats"]) if "repeats" in table else None,
        )


def _render_value(value: Any, extra: Mapping[str, str]) -> str:
    if isinstance(value, bool):
        if value:
            return extra.get("on", "true")
        return extra.get("off", "false")
    if isinstance(value, tuple):
        return extra.get("sep", ",").join(str(v) for v in value)
    if hasattr(value, "to_json") and not isinstance(value, str | int | float):
        return str(value.to_json())
    return str(value)


class CommandObjective:
    """Measures one configuration of a task file. Picklable; see :class:`~perftune.targets.command.Task`.

    Returns a mapping: ``{<metric>: median of samples, "samples": [...], "wall_time": s, "cpu_time": s,
    "max_rss": KiB, "n_runs": runs incl. warm-up, "verified": 1.0 | 0.0}``.
    """

    def __init__(
        self,
        *,
        task_path: str,
        task_dir: str,
        space: Any,
        render: dict[str, dict[str, Any]],
        build: Any,
        run: Any,
        objective: Any,
        check: Any,
        timing: TimingOptions,
        inputs: tuple[str, ...],
        env: tuple[tuple[str, str], ...],
        cwd: str | None,
        sandbox_options: dict[str, Any],
        state_dir: str,
        fidelity: FidelitySpec | None = None,
    ) -> None:
        self.task_path = task_path
        self.task_dir = task_dir
        self.space = space
        self.render = render
        self.build = build
        self.run = run
        self.objective = objective
        self.check = check
        self.timing = timing
        self.inputs = inputs
        self.env = env
        self.cwd = cwd
        self.sandbox_options = sandbox_options
        self.state_dir = state_dir
        self.fidelity = fidelity
        self.metric = objective.metric
        self.goal = objective.goal
        # Real path -> the staged copy candidates read instead (root, private directories).
        self.staged: dict[str, str] = {}
        # Called directly (no driver, so no context): the incumbent and what was learnt, kept here.
        self._memory: dict[str, Any] = {}
        self._noted_unchecked = False  # this process has looked at _NOTED_UNCHECKED already

    # -- sandbox -------------------------------------------------------------------------------
    def sandbox(self, *, sanitizer: bool = False) -> Sandbox:
        o = self.sandbox_options
        memory = int(o.get("memory_mb", 2048))
        limits = Limits(
            memory_mb=memory * (4 if sanitizer else 1),
            n_procs=int(o.get("processes", 256)),
            disk_mb=int(o.get("disk_mb", 1024)),
            sanitizer=sanitizer,
        )
        return Sandbox(
            limits,
            # Only an explicit `network = true` opens the network; anything else keeps it closed.
            isolate_network=o.get("network", False) is not True,
            isolate_files=bool(o.get("isolate_files", True)),
            scratch_root=o.get("scratch_root"),
            cpu_affinity=self.timing.pin_cpus,
            hide_dirs=[self.state_dir],  # the reference outputs, the incumbent: the tuner's alone
        )

    def check_executables(self, error: Callable[[str, str], TaskError] | None = None) -> None:
        """Raise TaskError naming the key when a step's program cannot be found or executed.

        The programs of ``[build]``, ``[run]`` and ``[check.expensive] build`` are checked, each as
        the candidates will run it; one built by an earlier step (``{scratch}/prog``, or ``./prog`` of a
        run step that runs in the scratch directory after a build) is not. A relative ``./prog`` is looked
        for in the step's working directory when that is a fixed one, then in the task folder.
        ``error(key, message)`` makes the error of a program that exists but cannot run (the task
        loader's names the line too); a program not found is reported as ``FILE: KEY: command not
        found: ...``.

        As root, a task directory or input that the candidates' users cannot reach (a clone in
        ``/root`` or in a ``mktemp -d`` folder) is staged first: see :class:`perftune.measure.Stage`.
        """
        if error is None:
            error = self._error
        sandbox = self.sandbox()
        self._stage_if_unreachable(sandbox)
        path = dict(self.env).get("PATH", os.environ.get("PATH", os.defpath))
        steps: list[tuple[str, StepSpec | None]] = [("build", self.build), ("run", self.run)]
        ex = self.check.expensive
        if ex is not None and ex.build:
            steps.append(("check.expensive.build", StepSpec(tuple(ex.build), ex.build_timeout_s)))
        for section, step in steps:
            if step is None or step.shell:
                continue
            key = f"{section}[0]" if section.startswith("check.") else f"{section}.command[0]"
            program = static_template(step.command[0], self._candidate_task_dir())
            if program is None:  # built by an earlier step, e.g. {scratch}/prog
                continue
            if os.sep in program and not os.path.isabs(program):
                # ./prog: in the step's working directory when it is there at run time, else in the task
                # folder (see _program). A run step may run what a build step makes in its directory.
                places = self._static_places(program, step)
                found_at = next((p for _, p in places if os.path.lexists(p)), None)
                in_scratch = self._fixed_cwd(step) is None  # {scratch}: what is there is made by the build
                if section == "run" and self.build is not None and (found_at is None or in_scratch):
                    continue  # the build may make it where the step runs, and that one comes first
                if found_at is None:
                    looked = " and ".join(self._real(d) or d for d, _ in places)
                    raise self._error(key, f"command not found: {program} (looked in {looked})")
                program = found_at
            if "{" in step.command[0] and self.build is not None and not os.path.lexists(program):
                continue  # {task_dir}/prog: perhaps made by the build step (where it may write there)
            if os.sep in program and os.path.isdir(program):
                raise error(key, f"{self._real(program)} is a directory, not a program")
            if os.sep in program and os.path.isfile(program) and not os.access(program, os.X_OK):
                raise error(
                    key,
                    f"{self._real(program)} is not executable (chmod +x it, or name its interpreter "
                    'first, e.g. command = ["python3", ...])',
                )
            found, problem = sandbox.resolve(program, path, user=self._probe_user(sandbox))
            if found is None:  # the file and key, as before (no line: tests and scripts match this form)
                raise self._error(key, self._real(problem) or f"cannot run {program}")

    def _static_places(self, program: str, step: StepSpec) -> list[tuple[str, str]]:
        """Where a relative ``program`` with a slash may be, as far as is known before any candidate runs,
        as ``(directory, path)``: in the step's working directory when that is a fixed one (not the
        scratch directory, empty before its build), then in the task folder."""
        task_dir = self._candidate_task_dir()
        cwd = self._fixed_cwd(step)
        dirs = [task_dir] if cwd is None else [cwd, task_dir]
        return [(d, os.path.normpath(os.path.join(d, program))) for d in dict.fromkeys(dirs)]

    def _fixed_cwd(self, step: StepSpec) -> str | None:
        """The working directory of ``step`` when it is known before any candidate runs (no placeholder but
        ``{task_dir}``); None for the scratch directory or one a candidate's values render."""
        cwd_t = step.cwd or self.cwd
        task_dir = self._candidate_task_dir()
        cwd = static_template(cwd_t, task_dir) if cwd_t else None
        return None if cwd is None else os.path.normpath(os.path.join(task_dir, cwd))

    def _error(self, key: str, message: str) -> TaskError:
        return TaskError(f"{self.task_path}: {key}: {message}")

    @staticmethod
    def _probe_user(sandbox: Sandbox) -> tuple[int, int] | None:
        """A user with exactly the rights of the candidates (a pool uid owns no file), as root."""
        return sandbox.candidate_user()

    def _stage_if_unreachable(self, sandbox: Sandbox) -> None:
        user = self._probe_user(sandbox)
        if user is None:
            return  # candidates run as perftune's own user: they reach what it reaches
        extra = list(self.check.expensive.inputs) if self.check.expensive else []
        need_tree = not executable_by(self.task_dir, *user)
        # An input in the staged tree comes with it (its directories made 0755); any other is copied alone.
        need_inputs = [
            i
            for i in dict.fromkeys([*self.inputs, *extra])
            if not (need_tree and self._under_task_dir(i)) and not executable_by(os.path.dirname(i), *user)
        ]
        if not (need_tree or need_inputs):
            return
        root = sandbox.root_dir()
        mode = os.stat(root).st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(root, mode | stat.S_IXOTH)
        try:
            stage = Stage.create(root)
            if need_tree:
                self.staged[self.task_dir] = stage.add_tree(self.task_dir)
            for i in need_inputs:
                self.staged[i] = stage.add_file(i)
        except (StageError, OSError) as error:
            raise TaskError(f"{self.task_path}: {error}") from None
        if not executable_by(stage.path, *user):
            raise TaskError(
                f"{self.task_path}: the staged copy {stage.path} is not reachable by the sandbox user "
                "either: set [sandbox] scratch_root (or PERFTUNE_SCRATCH) to a directory it can reach"
            )

    def _under_task_dir(self, path: str) -> bool:
        return path == self.task_dir or path.startswith(self.task_dir.rstrip(os.sep) + os.sep)

    def _candidate_task_dir(self) -> str:
        return self.staged.get(self.task_dir, self.task_dir)

    def _candidate_path(self, path: str) -> str:
        """Where a candidate finds ``path`` (a task file or input): the staged copy when there is one."""
        if path in self.staged:
            return self.staged[path]
        if self.task_dir in self.staged and self._under_task_dir(path):
            return self.staged[self.task_dir] + path[len(self.task_dir) :]
        return path

    def _real(self, text: str | None) -> str | None:
        """``text`` with staged paths shown as the user's own."""
        if text is None:
            return None
        for real, copy in self.staged.items():
            text = text.replace(copy, real)
        return text

    # -- templates -----------------------------------------------------------------------------
    @property
    def pruner(self) -> ASHA | None:
        """The promotion rule of a fidelity parameter: one rung per level but the last (the driver uses it
        when ``run()`` is given no ``pruner``). One bracket and no random starts: a task file's default
        configuration is measured first, as without fidelity (the defaults of ``ASHA`` were measured on
        learning curves, not on ladders of input sizes)."""
        fid = self.fidelity
        return None if fid is None else ASHA(eta=fid.eta, rungs=tuple(range(1, len(fid.levels))),
                                             random_starts=0)

    def _context(self, config: Mapping[str, Any], scratch: str, input_path: str | None) -> dict[str, str]:
        ctx = {name: "" for name in self.space.names}
        if self.fidelity is not None:
            # Full fidelity unless the caller asks for a level: the reference, the checks and the
            # verification all see the program as the user ships it.
            ctx[self.fidelity.name] = _render_value(self.fidelity.levels[-1], {})
        for name, value in config.items():
            ctx[name] = _render_value(value, self.render.get(name, {}))
        ctx["scratch"] = scratch
        ctx["task_dir"] = self._candidate_task_dir()
        real_input = input_path if input_path is not None else (self.inputs[0] if self.inputs else "")
        ctx["input"] = self._candidate_path(real_input) if real_input else ""
        return ctx

    @staticmethod
    def _fill(template: str, ctx: Mapping[str, str]) -> str:
        return template.format_map(ctx)

    def _argv(
        self, command: tuple[str, ...] | str, ctx: Mapping[str, str], *, shell: bool = False
    ) -> list[str] | str:
        """The command with ``ctx`` substituted; with ``shell``, each value as one quoted shell word.

        A value that renders empty stays empty (an inactive flag disappears, as in an argument vector).
        """
        quoted = {k: shlex.quote(v) if v else "" for k, v in ctx.items()} if shell else ctx
        if isinstance(command, str):
            return self._fill(command, quoted)
        out = [(self._fill(t, quoted), self._fill(t, ctx)) for t in command]
        return [a for a, raw in out if raw != ""]  # an element that renders empty is dropped

    def _step_cwd(self, step: Any, ctx: Mapping[str, str], scratch: str) -> str:
        """The working directory of ``step``: its ``cwd``, else the task's, else the scratch directory; a
        relative one is relative to the task folder."""
        cwd_t = step.cwd or self.cwd
        cwd = self._fill(cwd_t, ctx) if cwd_t else scratch
        if not os.path.isabs(cwd):
            cwd = os.path.join(self._candidate_task_dir(), cwd)
        return cwd

    def _output_path(self, template: str, ctx: Mapping[str, str]) -> str:
        """Where a ``[check] files`` entry or the ``[objective] file`` is: a relative path is relative to
        the run step's working directory (the scratch directory unless ``cwd`` says otherwise), where the
        candidate wrote it, never to perftune's own working directory."""
        path = self._fill(template, ctx)
        if os.path.isabs(path):
            return path
        return os.path.join(self._step_cwd(self.run, ctx, ctx["scratch"]), path)

    def _program(self, program: str, cwd: str) -> tuple[str | None, str]:
        """A relative ``argv[0]`` with a slash (``./prog``), resolved: in the step's working directory when
        it is there when the step starts (as a shell would: what the build made there), else in the task
        folder (a script next to the task file). Returns ``(path, "")``, or ``(None, reason)``."""
        in_cwd = os.path.normpath(os.path.join(cwd, program))
        if os.path.lexists(in_cwd):
            return in_cwd, ""
        task_dir = self._candidate_task_dir()
        in_task_dir = os.path.normpath(os.path.join(task_dir, program))
        if os.path.lexists(in_task_dir):
            return in_task_dir, ""
        return None, (f"command not found: {program} (looked in the step's working directory {cwd} and in "
                      f"the task folder {task_dir})")

    def _step(
        self, sandbox: Sandbox, step: Any, ctx: Mapping[str, str], scratch: str, timeout_s: float
    ) -> StepResult:
        env = {k: self._fill(v, ctx) for k, v in self.env}
        env.update({k: self._fill(v, ctx) for k, v in step.env})
        cwd = self._step_cwd(step, ctx, scratch)
        task_dir = self._candidate_task_dir()
        stdin = self._fill(step.stdin, ctx) if step.stdin else None
        if stdin and not os.path.isabs(stdin):
            stdin = os.path.join(task_dir, stdin)
        argv = self._argv(step.command, ctx, shell=step.shell)
        if step.sanitizer and not sandbox.limits.sanitizer:
            # `sanitizer = true` (or -fsanitize in its arguments): an ASan/TSan step reserves terabytes of
            # address space; it gets the limits of the expensive check's sanitizer steps.
            sandbox = self.sandbox(sanitizer=True)
        if isinstance(argv, list) and argv and os.sep in argv[0] and not os.path.isabs(argv[0]):
            program, problem = self._program(argv[0], cwd)
            if program is None:
                return StepResult(argv, Status.FAILED, reason=self._real(problem))
            argv[0] = program
        r = sandbox.run(
            argv, scratch=scratch, cwd=cwd, env=env, timeout_s=timeout_s, stdin_path=stdin, shell=step.shell
        )
        r.reason = self._real(r.reason)
        return r

    def _read_output(self, path: str, scratch: str, *, size_only: bool = False) -> bytes | int:
        """A file the candidate produced, read as :func:`perftune.measure.read_for_candidate` says.

        Raises:
            CandidateFileError: One line: missing, a link out of scratch, a FIFO, unreadable, too large.
        """
        sandbox = self.sandbox()
        user = sandbox.step_user(scratch)
        if size_only:
            return size_for_candidate(path, scratch=scratch, user=user)
        return read_for_candidate(path, scratch=scratch, user=user, max_bytes=sandbox.limits.disk_mb << 20)

    # -- shared state --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(os.path.join(self.state_dir, "lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _read(self, name: str) -> Any:
        try:
            with open(os.path.join(self.state_dir, name)) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def _write(self, name: str, data: Any) -> None:
        write_text_atomic(os.path.join(self.state_dir, name), json.dumps(data))

    def _better(self, a: float, b: float) -> bool:
        return a < b if self.goal == "min" else a > b

    # -- reference -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Build and run the default configuration once: reference outputs, and a metric that parses.

        Raises:
            TaskError: One line naming the task file when the default configuration cannot serve.
        """
        with self._locked():
            if self._read("reference.json") is not None:
                return
            config = self.space.default()
            problem = self.space.why_invalid(config)
            if problem:
                raise TaskError(f"{self.task_path}: space: the default configuration is invalid: {problem}")
            sandbox = self.sandbox()
            ref: dict[str, Any] = {"inputs": {}}
            with sandbox.scratch() as scratch:
                ctx = self._context(config, scratch.path, None)
                if self.build is not None:
                    r = self._step(sandbox, self.build, ctx, scratch.path, self.build.timeout_s)
                    if not r.ok:
                        raise TaskError(
                            f"{self.task_path}: build: the default configuration fails to build: {r.reason}"
                        )
                try:
                    state = ScratchState.record(scratch.path)
                except ScratchError as error:
                    raise TaskError(f"{self.task_path}: build: the default configuration: {error}") from None
                for index, input_path in enumerate(self._reference_inputs()):
                    # Each reference input's run starts from the files the build left, as a candidate's.
                    problem = state.restore() if index else None
                    if problem:
                        raise TaskError(
                            f"{self.task_path}: run: the default configuration, before its run on "
                            f"{os.path.basename(input_path or '')}: {problem} (write outputs to new files)"
                        )
                    ctx = self._context(config, scratch.path, input_path)
                    r = self._step(sandbox, self.run, ctx, scratch.path, self.run.timeout_s)
                    if not r.ok:
                        raise TaskError(
                            f"{self.task_path}: run: the default configuration fails, so no reference "
                            f"output can be produced: {r.reason}"
                        )
                    if r.stdout_truncated and self.check.stdout != "none" and not self._exact_stdout():
                        # Only a hash covers what is not kept, and a hash compares exactly.
                        what = "check.ignore" if self.check.ignore is not None else (
                            f"check.stdout = {self.check.stdout!r}" if self.check.stdout != "exact"
                            else "check.rtol/atol")
                        raise TaskError(
                            f"{self.task_path}: check.stdout: the default configuration prints more than "
                            f"the {len(r.stdout) >> 20} MiB of output perftune keeps, and {what} compares "
                            "what is kept, so the rest would go unchecked: write the output to a file and "
                            "check it with check.files, or compare stdout exactly (check.stdout = "
                            "\"exact\", by hash)"
                        )
                    if index == 0:
                        try:
                            ref["value"] = self._metric(r, ctx, scratch.path)
                        except CandidateError as error:
                            key = {
                                "stdout_regex": "objective.pattern",
                                "stdout_json": "objective.key",
                                "file_size": "objective.file",
                            }.get(self.metric, "objective.metric")
                            raise TaskError(
                                f"{self.task_path}: {key}: on the default configuration's output: {error}"
                            ) from None
                        ref["wall_s"] = r.wall_s
                    ref["inputs"][str(index)] = self._save_outputs(r, ctx, f"ref{index}")
                ctx = self._context(config, scratch.path, None)
                self._run_reference_again(sandbox, state, ctx, scratch.path, ref["inputs"]["0"])
                self._check_default_expensively(config, scratch.path, ref)
            self._write("reference.json", ref)

    def _run_reference_again(
        self, sandbox: Sandbox, state: ScratchState, ctx: Mapping[str, str], scratch: str, ref: dict[str, Any]
    ) -> None:
        """Run the default configuration a second time and compare its output with the reference, as every
        candidate's is: output that differs from run to run (a time, an address, a date) would fail every
        trial, the default's included, and spend the whole budget. One run more; none without a check."""
        if not self.check.active:
            return
        problem = state.restore()
        if problem:
            raise TaskError(
                f"{self.task_path}: run: the default configuration, before its second run: {problem} "
                "(write outputs to new files)"
            )
        r = self._step(sandbox, self.run, ctx, scratch, self.run.timeout_s)
        if not r.ok:
            raise TaskError(f"{self.task_path}: run: the default configuration fails when run a second "
                            f"time: {r.reason}")
        problem = self._cheap_check(r, ctx, ref)
        if problem:
            raise TaskError(
                f"{self.task_path}: check: two runs of the default configuration disagree, so every "
                f"candidate would fail the output check: {problem}; skip the lines that vary (timings) with "
                "check.ignore = '<regex>', compare numbers within a tolerance with check.stdout = "
                '"numeric" and rtol/atol, or turn the comparison off with check.stdout = "none"'
            )

    def _check_default_expensively(
        self, config: Mapping[str, Any], scratch: str, ref: dict[str, Any]
    ) -> None:
        """``[check.expensive]`` on the default configuration, before anything is measured: a check that
        cannot build, or that fails the default itself, would fail every potential winner. Its trial
        does not run the check again (``ref["default_checked"]``), so the run costs no more for it."""
        if self.check.expensive is None:
            return
        problem = self._expensive_check(config, scratch, ref)
        if problem is not None and problem.startswith(_CHECKING_BUILD):
            raise TaskError(f"{self.task_path}: check.expensive.build: the default configuration fails to "
                            f"build with it: {problem[len(_CHECKING_BUILD):]}")
        if problem is not None:
            raise TaskError(f"{self.task_path}: check.expensive: the default configuration fails its own "
                            f"expensive check: {problem}")
        ref["default_checked"] = True

    def _reference_inputs(self) -> list[str | None]:
        extra = list(self.check.expensive.inputs) if self.check.expensive else []
        first: list[str | None] = [self.inputs[0]] if self.inputs else [None]
        return first + [i for i in extra if i not in first]

    def _save_outputs(self, r: StepResult, ctx: Mapping[str, str], tag: str) -> dict[str, Any]:
        saved: dict[str, Any] = {"stdout_sha256": r.stdout_sha256, "stdout_truncated": r.stdout_truncated}
        out_path = os.path.join(self.state_dir, f"{tag}.stdout")
        with open(out_path, "wb") as f:
            f.write(r.stdout)
        saved["stdout"] = out_path
        files = []
        for i, t in enumerate(self.check.files):
            src = self._output_path(t, ctx)
            dst = os.path.join(self.state_dir, f"{tag}.file{i}")
            try:
                data = self._read_output(src, ctx["scratch"])
            except CandidateFileError as error:
                raise TaskError(
                    f"{self.task_path}: check.files[{i}]: the default configuration did not produce "
                    f"{t!r}: {error}"
                ) from None
            with open(dst, "wb") as f:
                f.write(data)  # type: ignore[arg-type]
            files.append(dst)
        saved["files"] = files
        return saved

    def _reference(self) -> dict[str, Any]:
        ref = self._read("reference.json")
        if ref is None:
            self.prepare()
            ref = self._read("reference.json")
        return ref

    # -- metric and checks ---------------------------------------------------------------------
    def _metric(self, r: StepResult, ctx: Mapping[str, str], scratch: str) -> float:
        m = self.metric
        if m == "wall_time":
            return r.wall_s
        if m == "cpu_time":
            return r.cpu_s
        if m == "max_rss":
            return float(r.max_rss_kb)
        if m == "file_size":
            path = self._output_path(self.objective.file, ctx)
            try:
                return float(self._read_output(path, scratch, size_only=True))
            except CandidateFileError as error:
                raise CandidateError(f"output file {path} was not produced ({error})") from None
        text = r.text()
        if m == "stdout_regex":
            matches = list(re.finditer(self.objective.pattern, text, re.MULTILINE))
            if not matches:
                raise CandidateError(
                    f"pattern '{self.objective.pattern}' matches nothing in stdout ({_snippet(text)})"
                )
            last = matches[-1]
            token = last.group(1) if last.re.groups else last.group(0)
            try:
                return _finite(float(token))
            except (TypeError, ValueError):
                raise CandidateError(
                    f"pattern '{self.objective.pattern}' matched {token!r}, not a number"
                ) from None
        too_long = False
        for line in reversed(text.splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            except ValueError:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
                too_long = True
                continue
            value: Any = obj
            for part in self.objective.key.split("."):
                if not isinstance(value, Mapping) or part not in value:
                    value = None
                    break
                value = value[part]
            if isinstance(value, int | float) and not isinstance(value, bool):
                return _finite_json(value)
        why = (f" (a JSON line holds an integer of more than {sys.get_int_max_str_digits()} digits, which is "
               "not a finite number)") if too_long else ""
        raise CandidateError(
            f"no JSON line in stdout has a numeric {self.objective.key!r}{why} ({_snippet(text)})"
        )

    def _compare_text(self, got: str, want: str) -> str | None:
        if self.check.ignore:
            pat = re.compile(self.check.ignore)
            got = "\n".join(line for line in got.splitlines() if not pat.search(line))
            want = "\n".join(line for line in want.splitlines() if not pat.search(line))
        if self._numeric():
            return _compare_numeric(got, want, self.check.rtol, self.check.atol)
        if got != want:
            for i, (a, b) in enumerate(zip(got.splitlines(), want.splitlines(), strict=False), 1):
                if a != b:
                    return f"line {i}: got {a[:80]!r}, expected {b[:80]!r}"
            n_got, n_want = len(got.splitlines()), len(want.splitlines())
            if n_got == n_want:
                return "the outputs differ only in line endings or a trailing newline"
            return f"output has {n_got} lines, the reference {n_want}"
        return None

    def _numeric(self) -> bool:
        """Whether outputs are compared as numbers within ``rtol``/``atol``."""
        return self.check.stdout == "numeric" or bool(self.check.rtol or self.check.atol)

    def _exact_stdout(self) -> bool:
        """Whether stdout is compared byte for byte (then a hash covers what is not kept)."""
        return (self.check.ignore is None and self.check.stdout == "exact"
                and not self.check.rtol and not self.check.atol)

    def _cheap_check(self, r: StepResult, ctx: Mapping[str, str], ref: dict[str, Any]) -> str | None:
        if self.check.stdout != "none":
            truncated = ref["stdout_truncated"] or r.stdout_truncated
            exact = self._exact_stdout()
            if truncated and exact and r.stdout_sha256 != ref["stdout_sha256"]:
                return "stdout differs from the default configuration's"
            if truncated and not exact:
                # The reference was kept whole (prepare refuses one that was not): this one is longer.
                return ("stdout differs from the default configuration's: it is longer than the reference "
                        f"and than the {len(r.stdout) >> 20} MiB perftune keeps")
            # Otherwise compare the outputs, both kept whole.
            with open(ref["stdout"], "rb") as f:
                want = f.read().decode(errors="replace")
            problem = self._compare_text(r.stdout.decode(errors="replace"), want)
            if problem:
                return f"stdout differs from the default configuration's: {problem}"
        for i, t in enumerate(self.check.files):
            path = self._output_path(t, ctx)
            try:
                got = self._read_output(path, ctx["scratch"])
            except CandidateFileError as error:
                return f"output file {t!r} was not produced ({error})"
            assert isinstance(got, bytes)
            with open(ref["files"][i], "rb") as f:
                want_b = f.read()
            if got == want_b:
                continue
            # Compared as stdout is (ignore, numeric tolerance); surrogateescape keeps every byte
            # distinct, so two different binary files never decode to the same text.
            problem = self._compare_text(
                got.decode(errors="surrogateescape"), want_b.decode(errors="surrogateescape")
            )
            if problem is None:  # only lines that `ignore` skips differ, or numbers within the tolerance
                continue
            return f"output file {t!r} differs from the default configuration's: {problem}"
        return None

    # -- the objective -------------------------------------------------------------------------
    def __call__(
        self,
        config: Mapping[str, Any],
        context: EvalContext | None = None,
        *,
        technique: str | None = None,
        trial: RunningTrial | None = None,
    ) -> dict[str, Any]:
        """Measure ``config``; ``context`` is the driver's (see :class:`~perftune.drive.EvalContext`).

        With a fidelity parameter and the driver's ``trial`` handle, ``config`` is measured at each
        level in turn and reported (step ``i`` for level ``i``, from 1); it stops when the handle says
        so. The last level is the full evaluation, with the checks and the incumbent.

        Raises:
            CandidateError: The candidate failed (build, run, limit, wrong output, verification).
            TrialTimeout: A step ran past its timeout.
            Pruned: Not promoted at a level below the last.
        """
        self._note_unchecked_output()
        shared = _Shared(self._memory, context)
        if technique is None and context is not None:
            technique = context.technique
        recorded = [False]  # the verification recorded this candidate in the risk model itself
        try:
            if self.fidelity is not None and trial is not None:
                fid = self.fidelity
                for step, level in enumerate(fid.levels[:-1], 1):
                    low = self._evaluate(config, shared, technique, recorded, level=level)
                    trial.report(step, float(low[self.metric]))
                    if trial.should_prune():
                        raise Pruned(f"{trial.prune_reason} ({fid.name}={level})")
            out = self._evaluate(config, shared, technique, recorded)
            if self.fidelity is not None and trial is not None:
                trial.report(len(self.fidelity.levels), float(out[self.metric]))
        except Pruned:
            raise  # promotion, not a failure: the risk model of the checks learns nothing from it
        except Exception:
            if not recorded[0]:
                self._record_outcome(shared, config, bad=True, technique=technique)
            raise
        self._record_outcome(shared, config, bad=False, technique=technique)
        return out

    def _evaluate(
        self, config: Mapping[str, Any], shared: _Shared, technique: str | None, recorded: list[bool],
        *, level: int | float | None = None,
    ) -> dict[str, Any]:
        # Below full fidelity: no output check (the reference is the full one's), no incumbent (whose
        # samples and time are the full one's), no verification; only the metric, to be promoted or not.
        full = level is None
        ref = self._reference() if full and (self.check.active or self.check.expensive) else None
        sandbox = self.sandbox()
        incumbent = shared.incumbent() if full else None
        keep = bool(self.sandbox_options.get("keep_scratch", False))
        with sandbox.scratch(keep=keep) as scratch:
            ctx = self._context(config, scratch.path, None)
            if not full:
                assert self.fidelity is not None
                ctx[self.fidelity.name] = _render_value(level, {})
            if self.build is not None:
                r = self._step(sandbox, self.build, ctx, scratch.path, self.build.timeout_s)
                if r.status is Status.TIMEOUT:
                    raise TrialTimeout(f"build: {r.reason}")
                if not r.ok:
                    raise CandidateError(f"build: {r.reason}")
            try:
                state = ScratchState.record(scratch.path)
            except ScratchError as error:
                raise CandidateError(f"build: {error}") from None
            timeout = self.run.timeout_s
            adaptive = False
            factor = self.timeout_factor
            if factor is not None and incumbent and incumbent.get("wall_s"):
                limit = max(self.timing.min_timeout_s, factor * incumbent["wall_s"])
                if limit < timeout:
                    timeout, adaptive = limit, True
            walls: list[float] = []
            cpus: list[float] = []
            rss: list[int] = []
            n_runs = 0
            planned = self._planned_runs(shared)
            of = f" of {planned}" if planned else ""
            check = ref is not None and self.check.active

            def run_once() -> float:
                # Warm-ups too: each run starts from the files the build left (a marker or a
                # replaced program of an earlier run is gone, or the trial fails), and each run of a
                # full evaluation passes the cheap check (a later one cannot replay the first's output).
                nonlocal n_runs
                n_runs += 1
                if n_runs > 1:
                    problem = state.restore()
                    if problem:
                        raise CandidateError(f"before run {n_runs}{of}: {problem}")
                r = self._step(sandbox, self.run, ctx, scratch.path, timeout)
                if r.status is Status.TIMEOUT:
                    why = (
                        f" (adaptive limit: {factor:g}x the best time so far)"
                        if adaptive
                        else ""
                    )
                    raise TrialTimeout(f"run: {r.reason}{why}")
                if not r.ok:
                    raise CandidateError(f"run: {r.reason}")
                if check:
                    assert ref is not None
                    problem = self._cheap_check(r, ctx, ref["inputs"]["0"])
                    if problem and n_runs == 1:
                        raise CandidateError(f"wrong output: {problem}")
                    if problem:
                        raise CandidateError(f"wrong output on run {n_runs}{of}: {problem}")
                value = self._metric(r, ctx, scratch.path)
                walls.append(r.wall_s)
                cpus.append(r.cpu_s)
                rss.append(r.max_rss_kb)
                return value

            result = self._measure(config, run_once, incumbent, shared, full=full)
            value = statistics.median(result.samples)
            # The warm-up runs come first; the times describe the measured runs, as the value does.
            n_warm = max(0, len(walls) - len(result.samples))
            walls, cpus, rss = walls[n_warm:] or walls, cpus[n_warm:] or cpus, rss[n_warm:] or rss
            verified = 0.0
            if self.check.expensive is not None and ref is not None:
                problem, verified = self._maybe_verify(
                    config, value, incumbent, technique, scratch.path, ref, shared
                )
                if problem:
                    recorded[0] = True
                    raise CandidateError(f"verification failed: {problem}")
            if full and result.decision is Decision.BETTER:
                shared.offer_incumbent(result.samples, value, statistics.median(walls), self._better)
        metrics = {
            "samples": result.samples,
            "wall_time": statistics.median(walls),
            "cpu_time": statistics.median(cpus),
            "max_rss": float(max(rss)),
            "n_runs": float(result.n_runs),
            "verified": verified,
        }
        # Last: a metric named wall_time, cpu_time or max_rss is the median of its samples, as every metric.
        metrics[self.metric] = value
        return metrics

    @property
    def timeout_factor(self) -> float | None:
        """The adaptive run limit's multiple of the incumbent's wall time, or None (no adaptive limit).

        ``[timing] timeout_factor`` when the task sets it; else 3 for a time to minimise (a run 3x slower
        than the best cannot win) and none for other metrics (a size, a score, a count: a slow run may
        still be the best, and only ``run.timeout_s`` bounds it).
        """
        if self.timing.timeout_factor is not None:
            return self.timing.timeout_factor
        return 3.0 if self.metric in ("wall_time", "cpu_time") and self.goal == "min" else None

    def _planned_runs(self, shared: _Shared) -> int | None:
        """How many runs (warm-ups included) one evaluation makes, when that is known before it starts:
        one for a deterministic metric, ``warmup_runs + n`` for ``repeats = n``; else None."""
        mode = self._mode(shared)
        if mode is True:
            return 1
        s = self.timing.settings
        if mode is False and s.min_runs == s.max_runs == s.first_runs:
            return s.warmup_runs + s.max_runs
        return None

    def _mode(self, shared: _Shared) -> bool | None | str:
        """How to measure this task's metric, as ``measure_adaptively(deterministic=...)`` takes it.

        Returns:
            True (once), False (the sequential test), None (the test, ending on identical samples),
            or ``"detect"``: a value read from stdout whose noise is not known yet.
        """
        declared = self.objective.deterministic
        if declared is not None:
            return declared
        if self.timing.repeats is not None:
            return False  # the user asked for exactly that many runs
        if self.metric == "file_size":
            return True
        if self.metric in TIME_LIKE:
            return None
        known = shared.get(_DETERMINISTIC)
        if known is None:
            return "detect"
        return True if known else None

    def _measure(
        self, config: Mapping[str, Any], run_once: Any, incumbent: Any, shared: _Shared, *, full: bool = True
    ) -> MeasureResult:
        """Run the candidate as often as the metric's noise needs (see :class:`ObjectiveSpec`)."""
        samples = incumbent["samples"] if incumbent else None
        mode = self._mode(shared)
        settings = self.timing.settings
        if mode != "detect":
            return measure_adaptively(run_once, samples, settings, goal=self.goal, deterministic=mode)
        reference = self._read("reference.json")
        if full and reference is not None and "value" in reference \
                and dict(config) == dict(self.space.default()):
            # The reference run of the default configuration is a free second sample of it.
            result = measure_adaptively(run_once, samples, settings, goal=self.goal, deterministic=True)
            same = result.samples[0] == reference["value"]
            shared.set(_DETERMINISTIC, same)
            if same:
                return result
            return measure_adaptively(run_once, samples, settings, goal=self.goal, deterministic=None)
        result = measure_adaptively(run_once, samples, settings, goal=self.goal, deterministic=None)
        if len(result.samples) >= 2:
            shared.set(_DETERMINISTIC, is_constant(result.samples))
        return result

    def observe(self, trial: Any) -> None:
        """Kept for callers of the old driver hook; does nothing.

        The objective records each candidate's outcome in the risk model itself, and shares the model
        through the driver's context.
        """

    def _record_outcome(
        self, shared: _Shared, config: Mapping[str, Any], *, bad: bool, technique: str | None
    ) -> None:
        if self.check.expensive is None:
            return  # only the expensive check reads the risk model
        try:
            encoding = self.space.encode(config)
        except Exception:
            return
        verifier = self._verifier(shared)
        verifier.record(encoding, bad=bad, technique=technique)
        shared.set(_RISK, verifier.to_dict())

    def _verifier(self, shared: _Shared) -> BudgetedVerifier:
        data = shared.get(_RISK)
        budget = self.check.expensive.budget if self.check.expensive else 0.0
        return BudgetedVerifier.from_dict(data) if data else BudgetedVerifier(budget)

    def _maybe_verify(
        self,
        config: Mapping[str, Any],
        value: float,
        incumbent: Any,
        technique: str | None,
        scratch: str,
        ref: dict[str, Any],
        shared: _Shared,
    ) -> tuple[str | None, float]:
        encoding = self.space.encode(config)
        best = incumbent["value"] if incumbent else None
        potential_winner = best is None or self._better(value, best)
        speedup = None
        if best is not None and value > 0 and best > 0:
            speedup = best / value if self.goal == "min" else value / best
        verifier = self._verifier(shared)
        x = verifier.features(encoding, speedup=speedup, technique=technique)
        chosen = verifier.should_check(x)
        shared.set(_RISK, verifier.to_dict())
        if not (chosen or potential_winner):
            return None, 0.0
        if ref.get("default_checked") and dict(config) == dict(self.space.default()):
            problem = None  # checked while preparing, against this very reference
        else:
            problem = self._expensive_check(config, scratch, ref)
        verifier = self._verifier(shared)
        verifier.record(encoding, bad=problem is not None, x=x, checked=True, technique=technique)
        shared.set(_RISK, verifier.to_dict())
        return problem, 1.0

    def verify(self, config: Mapping[str, Any]) -> str | None:
        """The expensive check on ``config`` (builds it afresh); None when it passes or there is none."""
        if self.check.expensive is None:
            # Nothing to check: building the winner again would cost a build, and a transient failure
            # of that build (a full disk, a license server) would throw the winner away.
            return None
        ref = self._reference()
        sandbox = self.sandbox()
        with sandbox.scratch() as scratch:
            ctx = self._context(config, scratch.path, None)
            if self.build is not None:
                r = self._step(sandbox, self.build, ctx, scratch.path, self.build.timeout_s)
                if not r.ok:
                    return f"build: {r.reason}"
            return self._expensive_check(config, scratch.path, ref)

    def _expensive_check(self, config: Mapping[str, Any], scratch: str, ref: dict[str, Any]) -> str | None:
        ex = self.check.expensive
        if ex is None:
            return None
        inputs = self._reference_inputs()
        run_timeout = ex.run_timeout_s or self.run.timeout_s * (10 if ex.build else 2)
        if ex.build is not None:
            sandbox = self.sandbox(sanitizer=ex.sanitizer)
            with sandbox.scratch() as vscratch:
                ctx = self._context(config, vscratch.path, None)
                build = StepSpec(tuple(ex.build), ex.build_timeout_s, sanitizer=ex.sanitizer)
                r = self._step(sandbox, build, ctx, vscratch.path, ex.build_timeout_s)
                if not r.ok:
                    return f"{_CHECKING_BUILD}{r.reason}"
                return self._check_runs(sandbox, config, vscratch.path, inputs, ref, run_timeout, ex.repeats)
        return self._check_runs(self.sandbox(), config, scratch, inputs, ref, run_timeout, ex.repeats)

    def _check_runs(
        self,
        sandbox: Sandbox,
        config: Mapping[str, Any],
        scratch: str,
        inputs: list[str | None],
        ref: dict[str, Any],
        timeout_s: float,
        repeats: int,
    ) -> str | None:
        # The verification's runs are not measured: they run on from what the measured runs left
        # (scratch is not put back), and every one of them is checked, so a replayed output of input 0
        # fails the other inputs, and the repeats show a run that depends on the runs before it.
        for index, input_path in enumerate(inputs):
            ctx = self._context(config, scratch, input_path)
            first_hash = None
            for _ in range(1 + (repeats if index == 0 else 0)):
                r = self._step(sandbox, self.run, ctx, scratch, timeout_s)
                label = f"input {os.path.basename(input_path)}" if input_path else "run"
                if not r.ok:
                    return f"{label}: {r.reason}"
                if self.check.active:
                    problem = self._cheap_check(r, ctx, ref["inputs"][str(index)])
                    if problem:
                        return f"{label}: {problem}"
                if (
                    first_hash is not None
                    and r.stdout_sha256 != first_hash
                    and self.check.stdout == "exact"
                    and not self.check.ignore
                ):
                    return f"{label}: nondeterministic output (differs between repeated runs)"
                first_hash = r.stdout_sha256
        return None

    def _note_unchecked_output(self) -> None:
        """One line on stderr at the first evaluation of a task that compares no output (no ``[check]
        stdout`` or ``files``): a configuration that prints a wrong answer can win then, and the README
        once said every output was checked. Once for all the run's worker processes (a mark in the
        shared state directory); at the first evaluation, not when the task loads, so that a mistake
        found before anything is measured (a store, a budget, a checkpoint) stays one line. An explicit
        ``stdout = "none"`` says it is on purpose: no line."""
        if self._noted_unchecked or self.check.active or self.check.stdout_declared:
            return
        self._noted_unchecked = True
        try:
            with self._locked():
                if self._read(_NOTED_UNCHECKED) is not None:
                    return
                self._write(_NOTED_UNCHECKED, True)
        except OSError:
            pass  # no shared state directory here (a remote worker): this process says it once
        print(f"perftune: note: {self.task_path}: the candidates' output is not checked (the task has no "
              '[check] stdout or files), so a configuration that prints a wrong answer can win; add [check] '
              'stdout = "exact" (or "numeric"), or stdout = "none" to say that is on purpose',
              file=sys.stderr)

    def __repr__(self) -> str:
        return f"CommandObjective({self.task_path!r}, metric={self.metric!r}, goal={self.goal!r})"


_CHECKING_BUILD = "checking build: "  # how a failed build of [check.expensive] starts its reason
_NOTED_UNCHECKED = "noted-unchecked.json"  # in the state directory: the note was printed
_DETERMINISTIC = "command.deterministic"
_RISK = "command.risk"


class _Shared:
    """The run's shared state as one evaluation sees it: the driver's context, or, called directly,
    the objective's own memory (one process, no driver).

    Inside a run, writes are published through the context; the driver merges them when the outcome
    comes back. Evaluations in flight at the same time start from the same snapshot, so with several
    workers the last one collected wins (a risk-model update or a spent credit of the others is lost:
    the expensive check may then run up to ``workers - 1`` times more than its budget).
    """

    def __init__(self, memory: dict[str, Any], context: EvalContext | None) -> None:
        self._memory = memory
        self._context = context
        self._written: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        if key in self._written:
            return self._written[key]
        if self._context is not None:
            return self._context.shared.get(key)
        return self._memory.get(key)

    def set(self, key: str, value: Any) -> None:
        self._written[key] = value
        if self._context is not None:
            self._context.publish(key, value)
        else:
            self._memory[key] = value

    def incumbent(self) -> dict[str, Any] | None:
        """The best so far: ``{"samples", "value", "wall_s"}``, or None."""
        if self._context is None:
            mine: dict[str, Any] | None = self._memory.get("incumbent")
            return mine
        best = self._context.incumbent
        if best is None:
            return None
        return {
            "samples": list(best.samples or (best.value,)),
            "value": best.value,
            "wall_s": best.metrics.get("wall_time"),
        }

    def offer_incumbent(self, samples: list[float], value: float, wall_s: float, better: Any) -> None:
        """Called directly, a measured improvement becomes the incumbent; in a run, the driver's best is."""
        if self._context is not None:
            return
        current = self._memory.get("incumbent")
        if current is None or better(value, current["value"]):
            self._memory["incumbent"] = {"samples": samples, "value": value, "wall_s": wall_s}


def _finite(value: float) -> float:
    # A candidate that prints inf or -inf would beat every honest one; NaN compares with nothing.
    if not math.isfinite(value):
        raise CandidateError(f"objective value {value} is not finite")
    return value


def _finite_json(value: int | float) -> float:
    """A JSON number as a float; an integer too large for one (``1e400`` is inf already) is not finite."""
    try:
        return _finite(float(value))
    except OverflowError:
        digits = str(abs(value))
        shown = f"{'-' if value < 0 else ''}{digits[:6]}...{digits[-3:]} ({len(digits)} digits)"
        raise CandidateError(f"objective value {shown} is not finite") from None


def _snippet(text: str) -> str:
    """The end of a candidate's output for a failure's reason, one line of printable characters (the
    reason is stored and shown: a candidate's escape sequences must not reach a terminal)."""
    text = text.strip()
    if not text:
        return "stdout was empty"
    tail = text[-120:].replace("\n", "\\n")
    return "stdout: " + "".join(c if c.isprintable() else ascii(c)[1:-1] for c in tail)


def _compare_numeric(got: str, want: str, rtol: float, atol: float) -> str | None:
    g_tokens = _NUMBER.split(got)
    w_tokens = _NUMBER.split(want)
    if [t.split() for t in g_tokens] != [t.split() for t in w_tokens]:
        return "the text around the numbers differs"
    g_nums = _NUMBER.findall(got)
    w_nums = _NUMBER.findall(want)
    if len(g_nums) != len(w_nums):
        return f"{len(g_nums)} numbers, the reference has {len(w_nums)}"
    for i, (a_s, b_s) in enumerate(zip(g_nums, w_nums, strict=True)):
        a, b = float(a_s), float(b_s)
        if math.isnan(a) and math.isnan(b):
            continue
        if not math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
            return f"number {i + 1}: {a_s} vs {b_s} (rtol={rtol:g}, atol={atol:g})"
    return None
