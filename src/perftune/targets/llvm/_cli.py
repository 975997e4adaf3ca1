"""Body of ``perftune llvm-passes`` (the click command lives in perftune.cli)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perftune.drive import ProgressLine, ProgressSettings
from perftune.targets.llvm._errors import LlvmError

__all__ = ["llvm_passes"]


def llvm_passes(
    benchmark: str,
    *,
    seconds: float,
    evals: int | None = None,
    search: str,
    length: int,
    engine: str,
    run: bool,
    as_json: bool,
    seed: int,
    emit_json: Callable[[dict[str, Any]], None],
    echo: Callable[..., None],
    progress: ProgressSettings | None = None,
) -> None:
    """Runs :func:`~perftune.targets.llvm.tune_passes` and prints the outcome.

    ``seconds`` is the search time; ``evals``, when given, caps the evaluations as well (every phase
    counts; the validation of the winner does not: docs/llvm-actions.md). With
    ``progress``, a progress line on stderr (the driver's :class:`~perftune.drive.ProgressLine`):
    sequences evaluated (of ``evals``), failures, the lowest instruction count so far, the time left.

    Raises:
        LlvmError: The winning sequence does not validate (the message says why).
    """
    from perftune.targets.llvm._tune import tune_passes

    # The line starts with the search (its first evaluation), as the budget's clock does: preparing the
    # benchmark (the helper's first build, the -O0 reference) is not the budget's, and a line started
    # before it showed "0:17 elapsed, 0:03 left" and then ran 19 s more.
    line: ProgressLine | None = None

    def on_evaluation(n_evaluations: int, best_count: int | None, n_failed: int) -> None:
        nonlocal line
        assert progress is not None
        if line is None:
            line = ProgressLine(evals=evals, seconds=seconds, settings=progress, label="perftune llvm-passes")
        line.update(n_evaluations, best=None if best_count is None else f"{best_count} instructions",
                    failures=n_failed)

    try:
        result = tune_passes(
            benchmark,
            seconds=seconds,
            evals=evals,
            search=search,
            length=length,
            engine=engine,
            seed=seed,
            validate=True,
            run=run,
            on_evaluation=None if progress is None else on_evaluation,
        )
    finally:
        if line is not None:
            line.close()  # the last state, before the result (or the error) is printed
    if as_json:
        emit_json(result.to_json())
    else:
        echo(
            f"{result.benchmark}: {result.n_evaluations} evaluations "
            f"in {result.elapsed_s:.1f} s ({search} search)"
        )
        echo(
            f"instructions: start {result.count_start}, -Oz {result.count_oz}, found {result.count_result} "
            f"(IrInstructionCountOz reward {result.reward:.4f})"
        )
        checks = "replayed with opt" + (", output matches -O0" if result.validation.output_checked else "")
        if result.validation.ok:
            echo(f"validated: {checks}")
        for note in [*result.validation.notes, *result.notes]:
            echo(f"note: {note}")
        if result.n_rejected:
            echo(f"{result.n_rejected} better sequence(s) failed validation (miscompiled or did not replay) "
                 "and were set aside")
        if result.compile_command:
            echo(result.compile_command)
        echo(result.commandline)
    if not result.validation.ok:
        raise LlvmError("validation failed: " + "; ".join(result.validation.errors))
