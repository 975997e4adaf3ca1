"""Validation: replay an action sequence with the ``opt`` command line, run runnable programs."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perftune.targets.llvm._commandline import opt_commandline, opt_program, passes_text
from perftune.targets.llvm._datasets import Benchmark
from perftune.targets.llvm._errors import LlvmError
from perftune.targets.llvm._ir import count_instructions
from perftune.targets.llvm._run import build_module, outputs_match, reference_output, run_executable
from perftune.targets.llvm._tools import find_tool

__all__ = ["ValidationResult", "replay_count", "validate_actions"]


@dataclass
class ValidationResult:
    """Outcome of :meth:`~perftune.targets.llvm.LlvmEnv.validate` (and of :func:`validate_actions`).

    Attributes:
        ok: True when every check passed.
        commandline: The ``opt`` command line that replays the episode.
        instruction_count: Count reached by the environment.
        replayed_instruction_count: Count reached by the command line.
        output_checked: Whether the program was run and its output compared with -O0.
        errors: What went wrong, one line each.
        notes: Checks that could not be made (e.g. the -O0 build runs longer than the limit).
    """

    ok: bool
    commandline: str
    instruction_count: int
    replayed_instruction_count: int | None
    output_checked: bool = False
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


def replay_count(bench: Benchmark, actions: Sequence[int], out_ll: Path, *, isolate_steps: bool) -> int:
    """Runs the episode's ``opt`` command line and counts the instructions of its output.

    Raises:
        LlvmError: ``opt`` failed.
    """
    passes = passes_text(actions, isolate_steps=isolate_steps)
    argv = [find_tool("opt"), f"-passes={passes}", str(bench.bitcode), "-o", str(out_ll), "-S"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        first = (result.stderr.strip().splitlines() or ["(no message)"])[0]
        raise LlvmError(f"{bench.uri}: the replay command failed: {first}")
    return count_instructions(out_ll.read_text())


def _replay_chain(bench: Benchmark, actions: Sequence[int], out_ll: Path) -> int:
    """One ``opt`` per pass (use-list order kept between them); returns the final count."""
    from perftune.targets.llvm._actions import ACTIONS
    from perftune.targets.llvm._engine import OptEngine

    engine = OptEngine(timeout_s=600)
    try:
        engine.load(bench.bitcode)
        for action in actions:
            engine.apply(ACTIONS[action].pipeline)
        text = engine.ir()
    except LlvmError as exc:
        raise LlvmError(f"{bench.uri}: the replay chain failed: {exc}") from None
    finally:
        engine.close()
    out_ll.write_text(text)
    return count_instructions(text)


def opt_chain_commandline(actions: Sequence[int], input_path: str, output_path: str = "out.bc") -> str:
    """A shell pipeline of one ``opt`` per pass: exactly the environment's steps."""
    import shlex

    from perftune.targets.llvm._actions import ACTIONS

    opt = opt_program()
    stages = [f"{opt} -passes='{ACTIONS[a].pipeline}' -preserve-bc-uselistorder" for a in actions]
    stages[0] += f" {shlex.quote(input_path)}"
    stages[-1] += f" -o {shlex.quote(output_path)}"
    return " | ".join(stages)


def validate_actions(
    bench: Benchmark, actions: Sequence[int], expected_count: int, *, run: bool = True
) -> ValidationResult:
    """Checks an episode: the ``opt`` replay reaches ``expected_count``; a runnable program's
    optimised build prints what its -O0 build prints.

    The command line is tried as one pipeline first; if reusing analyses across passes changes
    the result, the step-isolated form (``invalidate<all>`` between passes); if state that lives
    as long as the process still changes it (a few instrumentation passes, e.g. -sancov, keep
    such state), a chain of one ``opt`` per pass, which is exactly what a step is. The form
    that reproduces the episode is the one reported.
    """
    errors: list[str] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="perftune-validate-") as tmp:
        out_ll = Path(tmp) / "replay.ll"
        commandline = opt_commandline(actions, str(bench.bitcode))
        replayed: int | None = None
        try:
            replayed = replay_count(bench, actions, out_ll, isolate_steps=False)
            if replayed != expected_count and len(actions) > 1:
                replayed = replay_count(bench, actions, out_ll, isolate_steps=True)
                commandline = opt_commandline(actions, str(bench.bitcode), isolate_steps=True)
            if replayed != expected_count and len(actions) > 1:
                replayed = _replay_chain(bench, actions, out_ll)
                commandline = opt_chain_commandline(actions, str(bench.bitcode))
        except LlvmError as exc:
            errors.append(str(exc))
        if replayed is not None and replayed != expected_count:
            errors.append(
                f"{bench.uri}: the command line gives {replayed} instructions, "
                f"the environment {expected_count}"
            )
        output_checked = False
        if run and bench.runnable and replayed is not None:
            try:
                reference = reference_output(bench)
                if reference.timed_out:
                    notes.append(
                        f"{bench.uri}: output not checked: the -O0 build runs longer than "
                        f"{bench.run_timeout_s:g} s"
                    )
                elif reference.returncode != 0:
                    errors.append(
                        f"{bench.uri}: the -O0 reference build does not run cleanly "
                        f"(exit status {reference.returncode})"
                    )
                else:
                    exe = Path(tmp) / "prog"
                    build_module(out_ll, bench, exe)
                    # A legal sequence may make the program slower than -O0: allow for it.
                    limit = max(bench.run_timeout_s, 5 * reference.elapsed_s)
                    got = run_executable(exe, bench, timeout_s=limit)
                    output_checked = True
                    if got.timed_out:
                        errors.append(f"{bench.uri}: the optimised program timed out")
                    elif got.returncode != reference.returncode:
                        errors.append(
                            f"{bench.uri}: exit status {got.returncode}, -O0 gives {reference.returncode}"
                        )
                    elif not outputs_match(reference.stdout, got.stdout):
                        errors.append(f"{bench.uri}: the output differs from the -O0 build")
            except LlvmError as exc:
                errors.append(str(exc))
    return ValidationResult(
        ok=not errors,
        commandline=commandline,
        instruction_count=expected_count,
        replayed_instruction_count=replayed,
        output_checked=output_checked,
        errors=errors,
        notes=notes,
    )
