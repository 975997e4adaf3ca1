"""tune_compile: search torch.compile/Inductor settings on the user's model and inputs, then confirm.

1. Check the input: a callable, tensors on one device kind, picklable (each candidate runs in a fresh
   process, which receives the model by pickle).
2. Search the Inductor settings (:func:`compile_space`) with :class:`perftune.Tuner`: the default
   configuration (plain ``torch.compile``) comes first, ``mode="max-autotune"`` second, then the search.
   Each candidate is compiled, checked against eager and timed in its own fresh process; a crash, a hang
   (``timeout_s``), a compile error or a wrong output is a failed trial with its reason. With
   ``workers > 1``, a batch of candidates is first compiled and checked in parallel processes (which fill
   Inductor's on-disk caches), then each survivor is timed alone in a fresh process that compiles from
   those caches: the compiles overlap, the timings never do.
3. Confirm: plain ``torch.compile``, ``mode="max-autotune"`` (its real options) and the best candidates
   of the search are compiled in one more fresh process and timed interleaved, round by round; the
   fastest there wins, and its speedups over the two baselines come with confidence intervals
   (:func:`perftune.measure.speedup_ci`). A winner is never a setting slower than plain
   ``torch.compile``: if nothing beats it, plain ``torch.compile`` is the answer. When the confirmation
   process times out or crashes (or plain ``torch.compile`` fails in it), the search's ranking is the
   answer, unconfirmed, with a note: what was measured is never lost.

Example:
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())  # doctest: +SKIP
    >>> result = tune_compile(model, (torch.randn(32, 64),), budget=4)  # doctest: +SKIP
    >>> y = result.compiled(torch.randn(32, 64))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from perftune.drive import Budget, Tuner
from perftune.errors import PerftuneError
from perftune.measure import SpeedupCI, speedup_ci
from perftune.space import Config, Space
from perftune.targets.torch_compile._runner import (
    Job,
    TimingPlan,
    VariantTiming,
    caller_state,
    run_job,
    serialize,
)
from perftune.targets.torch_compile._space import (
    check_space,
    compile_space,
    mode_options,
    options_of,
    require_torch,
)
from perftune.trial import Status, Trial

__all__ = ["CompileResult", "tune_compile"]

DEFAULT = "torch.compile"
MAX_AUTOTUNE = "max-autotune"
EAGER = "eager"


@dataclass
class CompileResult:
    """The outcome of :func:`tune_compile`.

    Attributes:
        best_settings: The winning Inductor options, only those that differ from their values in this
            process (torch's defaults unless changed; ``{}``: plain ``torch.compile`` won); pass them as
            ``torch.compile(model, options=...)``.
        best_config: The winning configuration of the space (every tuned setting).
        compiled: ``torch.compile(model, options=best_settings)`` in this process (compiles on first call).
        device: ``"cpu"`` or ``"cuda"``.
        speedup_vs_default: Winner over plain ``torch.compile``, from the interleaved confirmation.
        speedup_vs_max_autotune: Winner over ``mode="max-autotune"`` (None when max-autotune failed).
        speedup_vs_eager: Winner over the uncompiled model (None when the confirmation run failed).
        time_s: Median seconds per call of the winner (confirmation run).
        final: Every variant of the confirmation run (samples, compile time, error against eager).
        trials: The search's trials, failures included, with reasons.
        note: Why a number is missing or less certain (None when all is well).
        run_id: The search's run in the store (``perftune show RUN``), when a store was given.

    Example:
        >>> result = tune_compile(model, (x,), budget=4)  # doctest: +SKIP
        >>> torch.compile(model, options=result.best_settings or None)  # doctest: +SKIP
    """

    best_settings: dict[str, Any]
    best_config: Config
    compiled: Callable[..., Any]
    device: str
    speedup_vs_default: SpeedupCI | None
    speedup_vs_max_autotune: SpeedupCI | None
    speedup_vs_eager: SpeedupCI | None
    time_s: float
    final: list[VariantTiming]
    trials: list[Trial]
    note: str | None = None
    run_id: int | None = None

    @property
    def failures(self) -> list[tuple[dict[str, Any], str, str]]:
        """``(options, status, reason)`` of every failed trial of the search."""
        out = []
        for t in self.trials:
            if t.status is not Status.OK:
                out.append((options_of(t.config), t.status.value, t.reason or t.status.value))
        return out

    def summary(self) -> str:
        """A few lines for a terminal."""
        lines = [f"best settings ({self.device}): {self.best_settings or 'plain torch.compile'}",
                 f"  {self.time_s * 1e3:.3f} ms per call"]
        baselines = (("torch.compile", self.speedup_vs_default),
                     ("max-autotune", self.speedup_vs_max_autotune), ("eager", self.speedup_vs_eager))
        for name, ci in baselines:
            lines.append(f"  vs {name}: {ci if ci is not None else 'n/a'}")
        n_failed = len(self.failures)
        lines.append(f"  {len(self.trials)} candidates, {n_failed} failed")
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


def _device_of(fn: Any, inputs: Sequence[Any]) -> str:
    import torch

    devices = {x.device.type for x in inputs if isinstance(x, torch.Tensor)}
    if not devices:
        raise PerftuneError("tune_compile: example_inputs hold no tensor (give the tensors of one real call)")
    if isinstance(fn, torch.nn.Module):
        devices |= {p.device.type for p in fn.parameters()} | {b.device.type for b in fn.buffers()}
    if len(devices) > 1:
        raise PerftuneError(
            f"tune_compile: model and inputs are on several devices {sorted(devices)}; use one"
        )
    device = devices.pop()
    if device not in ("cpu", "cuda"):
        raise PerftuneError(f"tune_compile: device {device!r} is not supported (cpu or cuda)")
    return device


def _inputs_tuple(example_inputs: Any) -> tuple[Any, ...]:
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, list | tuple):
        return tuple(example_inputs)
    raise PerftuneError(
        "tune_compile: example_inputs must be a tensor or a tuple of arguments, "
        f"got {type(example_inputs).__name__}"
    )


def _projected(space: Space, options: Mapping[str, Any]) -> Config:
    """The space's default with ``options`` applied where the space has them (others have no effect here).

    A conditional setting that becomes active (``when="max_autotune"``) takes its default value.
    """
    base = dict(space.default())
    base.update({k: v for k, v in options.items() if k in space.params})
    for _ in range(len(space.params)):
        added = False
        for name, param in space.params.items():
            when = getattr(param, "when", None)
            if name in base or when is None or when.text not in base:
                continue
            if base[when.text]:
                base[name] = options.get(name, param.default_value())
                added = True
        if not added:
            break
    config = space.repair(base, 0)
    if config is None:
        raise PerftuneError(f"tune_compile: no valid configuration of the space holds {dict(options)}")
    return config


def _ask_batch(tuner: Tuner, n: int) -> list[Trial]:
    batch: list[Trial] = []
    while len(batch) < n and (trial := tuner.ask()) is not None:
        batch.append(trial)
    return batch


def _ci(baseline: VariantTiming, winner: VariantTiming) -> SpeedupCI | None:
    if baseline.status is not Status.OK or not baseline.samples_s:
        return None
    return speedup_ci(baseline.samples_s, winner.samples_s)


def tune_compile(
    fn_or_module: Any,
    example_inputs: Any,
    *,
    budget: Budget | int | str = 10,
    space: Space | None = None,
    timeout_s: float = 600.0,
    seed: int | None = 0,
    store: Any = None,
    plan: TimingPlan | None = None,
    final_plan: TimingPlan | None = None,
    n_finalists: int = 2,
    rtol: float | None = None,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> CompileResult:
    """Tune the torch.compile/Inductor settings of a model on its real inputs.

    Args:
        fn_or_module: An ``nn.Module`` or a function of tensors; it must be importable by a fresh
            process (defined at module level; its class too).
        example_inputs: The positional arguments of one real call (a tensor or a tuple); their device
            (``cpu`` or ``cuda``) chooses the space and the timer.
        budget: Candidates to measure (plain ``torch.compile`` and max-autotune included), a duration
            (``"10m"``) or a :class:`perftune.drive.Budget`.
        space: The settings to search (default: :func:`compile_space` for the device); parameter names
            are Inductor config keys.
        timeout_s: Limit per fresh process (compile and timing); past it the candidate is a TIMEOUT. The
            confirmation process gets it for each of its variants, scaled by how many more calls
            ``final_plan`` makes than ``plan``.
        seed: Seed of the search (None: a fresh one).
        store: A store or URL where the search is recorded (``perftune show`` reads it).
        plan: Warm-up and interleaved rounds per candidate in the search.
        final_plan: Warm-up and rounds of the confirmation run.
        n_finalists: Best candidates of the search carried into the confirmation run.
        rtol: Relative error allowed against eager (default by output dtype: see ``tolerance_of``).
        workers: Candidates compiled at the same time, each in its own process (their timing is
            always one at a time); 1 compiles each candidate in the process that times it.
        progress: Called with one line after each candidate.

    Returns:
        A :class:`CompileResult`.

    Raises:
        PerftuneError: Bad input (arguments, the space's keys and value types: checked before anything
            runs), the model itself fails uncompiled, or plain ``torch.compile`` fails on it (the search
            stops at once). A confirmation process that fails does not raise: the result is then the
            search's, and ``note`` says so.
    """
    if not callable(fn_or_module):
        raise PerftuneError(
            f"tune_compile: fn_or_module must be a module or a function, got {fn_or_module!r}"
        )
    if isinstance(timeout_s, bool) or not (isinstance(timeout_s, int | float) and 0 < timeout_s < math.inf):
        raise PerftuneError(
            f"tune_compile: timeout_s must be a positive number of seconds, got {timeout_s!r}"
        )
    if isinstance(n_finalists, bool) or not isinstance(n_finalists, int) or n_finalists < 1:
        raise PerftuneError(f"tune_compile: n_finalists must be a positive integer, got {n_finalists!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PerftuneError(f"tune_compile: workers must be a positive integer, got {workers!r}")
    for name, value in (("plan", plan), ("final_plan", final_plan)):
        if value is not None and not isinstance(value, TimingPlan):
            raise PerftuneError(f"tune_compile: {name} must be a TimingPlan or None, got {value!r}")
    if rtol is not None and (isinstance(rtol, bool) or not isinstance(rtol, int | float)
                             or not 0 <= rtol < math.inf):
        raise PerftuneError(f"tune_compile: rtol must be None or a finite number >= 0, got {rtol!r}")
    if space is not None and not isinstance(space, Space):
        raise PerftuneError(f"tune_compile: space must be a perftune Space, got {type(space).__name__}")
    torch = require_torch()

    inputs = _inputs_tuple(example_inputs)
    device = _device_of(fn_or_module, inputs)
    if device == "cuda" and not torch.cuda.is_available():
        raise PerftuneError("tune_compile: the inputs are on cuda but this process sees no CUDA device")
    serialize(Job(fn_or_module, inputs, (), device))  # fail now, with one line, if it cannot travel
    space = space if space is not None else compile_space(device)
    check_space(space)  # an unknown key or a wrongly typed value would fail every candidate alike
    plan = plan or TimingPlan(min_sample_s=2e-3 if device == "cpu" else 1e-3)
    final_plan = final_plan or TimingPlan(n_warmup=5, n_rounds=20, min_sample_s=plan.min_sample_s)
    say = progress or (lambda line: None)
    ma_options = mode_options("max-autotune", device)
    ma_config = _projected(space, ma_options)
    default_config = space.default()
    # The settings of this process (Inductor config, threads, matmul precision) hold in every fresh one.
    state = caller_state()

    def run(job: Job, limit_s: float = timeout_s) -> list[VariantTiming]:
        return run_job(job, timeout_s=limit_s, state=state)

    tuner = Tuner(space, seed=seed, budget=budget, seeds=[ma_config], store=store,
                  name="tune_compile", settings={"target": "torch_compile", "device": device})
    # A seeded run applies results in ticket order: never more tickets in flight than its lag allows.
    batch_size = min(workers, max(1, tuner.lag)) if tuner.deterministic else workers
    while batch := _ask_batch(tuner, batch_size):
        precompiled: list[VariantTiming | None] = [None] * len(batch)
        if workers > 1:
            jobs = [Job(fn_or_module, inputs, ((f"trial-{t.id}", options_of(t.config)),), device, plan, rtol,
                        compile_only=True) for t in batch]
            with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
                precompiled = [r[0] for r in pool.map(run, jobs)]
        for trial, pre in zip(batch, precompiled, strict=True):
            options = options_of(trial.config)
            if pre is not None and pre.status is not Status.OK:
                vt = pre
            else:
                [vt] = run(Job(fn_or_module, inputs, ((f"trial-{trial.id}", options),), device, plan, rtol))
            if vt.status is not Status.OK:
                tuner.tell(trial, error=vt.reason, status=vt.status)
                say(f"[{trial.id}] {vt.status.value}: {vt.reason}  {options or 'default'}")
                # Failures that every candidate would share end the search at once.
                if vt.model_failed:
                    raise PerftuneError(f"tune_compile: {vt.reason}")
                if trial.config == default_config:
                    raise PerftuneError(f"tune_compile: plain torch.compile fails on this model: {vt.reason}")
                continue
            # The cold compile is the parallel one when there was one (the timing process hit its cache).
            compile_s = float((pre.compile_s if pre is not None else vt.compile_s) or 0.0)
            # The value is the median time per call; compile time is a metric beside it, never the objective.
            tuner.tell(trial, float(vt.median_s or 0.0), samples=vt.samples_s,
                       metrics={"compile_s": compile_s})
            say(f"[{trial.id}] {(vt.median_s or 0.0) * 1e3:.3f} ms  compile {compile_s:.1f} s  "
                f"{options or 'default'}")
    trials = list(tuner.trials)
    ok = [t for t in trials if t.status is Status.OK and t.value is not None]
    ranked = sorted(ok, key=lambda t: float(t.value or 0.0))
    finalists = [t.config for t in ranked if t.config not in (default_config, ma_config)][:n_finalists]
    variants: list[tuple[str, Mapping[str, Any] | None]] = [
        (EAGER, None), (DEFAULT, {}), (MAX_AUTOTUNE, ma_options),
    ]
    labels = {DEFAULT: default_config, MAX_AUTOTUNE: ma_config}
    for i, config in enumerate(finalists):
        variants.append((f"candidate-{i + 1}", options_of(config)))
        labels[f"candidate-{i + 1}"] = config
    say(f"confirming {len(variants)} variants interleaved in one fresh process")
    final = run(Job(fn_or_module, inputs, tuple(variants), device, final_plan, rtol),
                _confirmation_timeout_s(timeout_s, len(variants), plan, final_plan))
    by_label = {vt.label: vt for vt in final}
    base = by_label[DEFAULT]
    if base.status is not Status.OK:
        # The search's measurements stand; only their confirmation is missing.
        if all(vt.status is base.status and vt.reason == base.reason for vt in final):
            what = "timed out" if base.status is Status.TIMEOUT else "failed"
            why = f"the confirmation process {what} ({base.reason})"
        else:
            why = f"plain torch.compile failed in the confirmation run ({base.reason})"
        say(f"{why}: the result is the search's, unconfirmed")
        return _unconfirmed(trials, default_config, ma_config, why, final, fn_or_module, device,
                            tuner.run_id)
    note = None
    timed = [vt for vt in final if vt.status is Status.OK and vt.label != EAGER]
    winner = min(timed, key=lambda vt: vt.median_s or float("inf"))
    if winner.label != DEFAULT and speedup_ci(base.samples_s, winner.samples_s).lo <= 1.0:
        # Not surely faster than plain torch.compile: keep the simpler answer.
        note = (f"{winner.label} was fastest ({winner.median_s:.3g} s) but not surely faster than plain "
                f"torch.compile; kept plain torch.compile")
        winner = base
    ma = by_label[MAX_AUTOTUNE]
    if ma.status is not Status.OK:
        note = ((note + "; ") if note else "") + f"max-autotune failed: {ma.reason}"
    eager = by_label[EAGER]
    best_config = labels[winner.label]
    best_settings = dict(winner.options or {})
    compiled = torch.compile(fn_or_module, options=best_settings or None)
    return CompileResult(
        best_settings=best_settings,
        best_config=best_config,
        compiled=compiled,
        device=device,
        speedup_vs_default=speedup_ci(base.samples_s, winner.samples_s),
        speedup_vs_max_autotune=_ci(ma, winner),
        speedup_vs_eager=_ci(eager, winner),
        time_s=float(winner.median_s or 0.0),
        final=final,
        trials=trials,
        note=note,
        run_id=tuner.run_id,
    )


def _confirmation_timeout_s(
    timeout_s: float, n_variants: int, plan: TimingPlan, final_plan: TimingPlan
) -> float:
    """The confirmation process's limit: a search candidate's ``timeout_s`` for each of its variants, scaled
    by how many more calls each variant makes there than a candidate of the search.

    Example:
        >>> search, final = TimingPlan(n_warmup=3, n_rounds=10), TimingPlan(n_warmup=5, n_rounds=21)
        >>> _confirmation_timeout_s(60.0, 5, search, final)
        600.0
    """
    per_variant = (final_plan.n_warmup + final_plan.n_rounds) / (plan.n_warmup + plan.n_rounds)
    return timeout_s * n_variants * max(1.0, per_variant)


def _unconfirmed(
    trials: list[Trial], default_config: Config, ma_config: Config, why: str, final: list[VariantTiming],
    fn_or_module: Any, device: str, run_id: int | None,
) -> CompileResult:
    """The result from the search alone, when the confirmation run gave no baseline to compare with."""
    import torch

    ok = {t.config: t for t in trials if t.status is Status.OK and t.value is not None and t.samples}
    default = ok[default_config]  # the search stops when plain torch.compile fails
    best = min(ok.values(), key=lambda t: float(t.value or 0.0))
    note = f"{why}; the result is the search's ranking (each candidate timed in its own process), unconfirmed"
    if best.config != default_config and speedup_ci(default.samples, best.samples).lo <= 1.0:
        note += "; the fastest was not surely faster than plain torch.compile: kept plain torch.compile"
        best = default
    ma = ok.get(ma_config)
    best_settings = options_of(best.config)
    return CompileResult(
        best_settings=best_settings,
        best_config=best.config,
        compiled=torch.compile(fn_or_module, options=best_settings or None),
        device=device,
        speedup_vs_default=speedup_ci(default.samples, best.samples),
        speedup_vs_max_autotune=speedup_ci(ma.samples, best.samples) if ma is not None else None,
        speedup_vs_eager=None,
        time_s=float(best.value or 0.0),
        final=final,
        trials=trials,
        note=note,
        run_id=run_id,
    )
