"""Warm starts: a prior from results on the same space measured elsewhere (other hardware, older code).

A source's absolute values say little about new hardware (another GPU is faster or slower throughout),
but the *order* of configurations often carries over. So each source is reduced to ranks: every
successful configuration gets its percentile rank in that source (0 for the best, 1 for the worst,
ties averaged), and sources are combined by the mean of the ranks each configuration has.

How the prior is used, and why it never outranks a measurement: the ``n_propose`` best-ranked
configurations that are valid in the new space are measured early, right after the default
configuration and the user's seeds. The search itself learns only from what is measured in this run;
the prior decides nothing but which configurations are measured first, and their measured values, good
or bad, are what the search then sees. A misleading prior (reversed ranks) spends ``n_propose``
measurements on poor configurations (tests/drive/test_warm_start.py); a good one gives the search strong
elites to start from (benchmarks/results/transfer.md).

Sources: a :class:`Prior` already read, a :class:`~perftune.drive.Result`, a sequence of
:class:`~perftune.Trial`, a :class:`~perftune.store.Store` (every run of it on this space),
``(store, run)`` for one run (the store a :class:`~perftune.store.Store`, a path or a URL; the run a
name or an id), or a path: a benchmark-hub T4 results file (``*.T4.json[.gz]``), a Kernel Tuner cache
file (``*.json[.gz]`` with a ``cache`` table; failures, whose ``time`` is a string, are left out), a run
exported by ``perftune export --format json`` (``Store.export(run, "json", ...)``: the same ranks as
``(store, run)`` gives) or a store file/URL (every run of it on this space). A source whose parameters
differ from the space's is refused with one line naming them; one with the same parameters but other
ranges or constraints is mapped: its configurations that are valid in the new space are used, the others
dropped (refused when none is left). A whole store skips its runs on this space that have no successful
configuration valid in it (a crashed or failed run; :attr:`Prior.skipped` names them), and is refused only
when none is left.

``warm_start=`` takes a list (or tuple) of sources, or one source. A tuple of two is one
``(store, run)`` source when its first item is a store (a :class:`~perftune.store.Store`, or a path or
URL that is not a ``.json`` file) and its second a run id or a name that is not an existing file nor a
URL: ``("store.db", "fast")`` is run ``fast`` of ``store.db``, while ``("a.T4.json.gz", "b.T4.json.gz")``
and ``("a.db", "b.db")`` (two files) are two sources. ``[("store.db", "fast")]`` is always one run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perftune.errors import PerftuneError
from perftune.trial import Trial

if TYPE_CHECKING:
    from perftune.space import Config, Space

__all__ = ["DEFAULT_N_PROPOSE", "Prior", "WarmStart"]

DEFAULT_N_PROPOSE = 4
"""Prior configurations measured early. On the development spaces (benchmarks/results/transfer.md) the
other GPUs' top 3-5 ranks hold a configuration within 7% of the optimum on five of six spaces; 4 and 8
tie on those five at every budget, and 4 is better on the sixth at 25 measurements (the search's own
design starts sooner) and spends half as much on a misleading prior. Chosen on the same six spaces it
is measured on: there is no held-out check of it."""


@dataclass(frozen=True)
class WarmStart:
    """Sources of a prior and how many of its best-ranked configurations to measure early.

    Attributes:
        sources: What to learn the ranks from (see the module docstring for the kinds).
        n_propose: Best-ranked configurations of the prior measured early (0: none).

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune import tune
        >>> space = Space({"x": Int(0, 20)})
        >>> old = tune(lambda c: abs(c["x"] - 13), space, budget=15, seed=0)
        >>> new = tune(lambda c: 2 * abs(c["x"] - 13), space, budget=3, seed=1,
        ...            warm_start=WarmStart([old], n_propose=2))
        >>> new.best.config["x"]
        13
    """

    sources: Sequence[Any]
    n_propose: int = DEFAULT_N_PROPOSE

    def __post_init__(self) -> None:
        if isinstance(self.n_propose, bool) or not isinstance(self.n_propose, int) or self.n_propose < 0:
            raise PerftuneError(f"warm_start: n_propose must be a non-negative integer, "
                                f"got {self.n_propose!r}")

    @classmethod
    def coerce(cls, value: WarmStart | Sequence[Any] | Any | None) -> WarmStart | None:
        """A :class:`WarmStart` from itself, a list of sources or one source (None stays None).

        A tuple of two is one ``(store, run)`` source or two sources as the module docstring says:
        ``("store.db", "fast")`` is one run, ``("a.T4.json.gz", "b.T4.json.gz")`` two files.
        """
        if value is None or isinstance(value, WarmStart):
            return value
        if isinstance(value, list | tuple) and not _is_one_store_run(value):
            return cls(tuple(value))
        return cls((value,))


@dataclass(frozen=True)
class Prior:
    """Configurations ranked by their mean percentile rank over the sources (0: best everywhere).

    Attributes:
        ranked: Configurations valid in the space, best first.
        rank: Mean percentile rank of each configuration in ``ranked``.
        n_sources: Sources that contributed (each run of a whole store counts as one).
        skipped: Runs of a whole store left out because they have no successful configuration valid
            in the space (a crashed or failed run), as ``"<store>: run '<name>'"``.

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune import Trial, Status
        >>> space = Space({"x": Int(0, 3)})
        >>> old = [Trial(i, space.default().replace(x=i), Status.OK, value=v, loss=v)
        ...        for i, v in enumerate([4.0, 1.0, 3.0])]
        >>> prior = Prior.from_sources([old], space)
        >>> [c["x"] for c in prior.ranked], prior.rank
        ([1, 2, 0], (0.0, 0.5, 1.0))
    """

    ranked: tuple[Config, ...]
    rank: tuple[float, ...]
    n_sources: int
    skipped: tuple[str, ...] = ()

    @classmethod
    def from_sources(cls, sources: Iterable[Any], space: Space) -> Prior:
        """Read every source, check it is of ``space``, and combine their ranks.

        Raises:
            PerftuneError: a source cannot be read, has other parameters, or has no successful
                configuration valid in ``space`` (a whole store: none of its runs on this space has
                one); one line naming the source.
        """
        sums: dict[Config, float] = {}
        counts: dict[Config, int] = {}
        n_sources = 0
        skipped: list[str] = []
        for source in sources:
            for label, losses in _read(source, space, skipped):
                ranks = _percentile_ranks(losses)
                if not ranks:
                    raise PerftuneError(f"warm_start: {label} has no successful configuration valid in "
                                        "this space")
                n_sources += 1
                for config, r in ranks.items():
                    sums[config] = sums.get(config, 0.0) + r
                    counts[config] = counts.get(config, 0) + 1
        mean = {c: sums[c] / counts[c] for c in sums}
        # Ties (and equal means) in the order the configurations were first seen: deterministic.
        ranked = sorted(mean, key=mean.__getitem__)
        return cls(tuple(ranked), tuple(mean[c] for c in ranked), n_sources, tuple(skipped))


def _percentile_ranks(losses: Mapping[Config, float]) -> dict[Config, float]:
    """Percentile rank of each loss (0 best, 1 worst), equal losses sharing their mean rank."""
    n = len(losses)
    if n == 0:
        return {}
    if n == 1:
        return {c: 0.0 for c in losses}
    order = sorted(losses, key=losses.__getitem__)
    ranks: dict[Config, float] = {}
    i = 0
    while i < n:
        j = i
        while j + 1 < n and losses[order[j + 1]] == losses[order[i]]:
            j += 1
        r = (i + j) / 2 / (n - 1)
        for k in range(i, j + 1):
            ranks[order[k]] = r
        i = j + 1
    return ranks


def _is_store(value: Any) -> bool:
    from perftune.store import Store

    return isinstance(value, Store)


def _is_store_run(value: Any) -> bool:
    return (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str | int)
            and not isinstance(value[1], bool) and not isinstance(value[0], Trial))


def _is_one_store_run(value: Any) -> bool:
    """Whether ``value``, given as the whole ``warm_start=``, is one ``(store, run)`` rather than two
    sources: its first item is a store (not a ``.json`` file) and its second cannot be a source."""
    if not _is_store_run(value):
        return False
    store, run = value
    if _is_store(store):
        return True
    if not isinstance(store, str | os.PathLike) or ".json" in Path(store).name:
        return False
    return isinstance(run, int) or not (os.path.isfile(run) or "://" in run)


def _check_names(label: str, names: Iterable[str], space: Space) -> None:
    got, want = set(names), set(space.params)
    if got != want:
        parts = []
        if want - got:
            parts.append("missing " + ", ".join(sorted(want - got)))
        if got - want:
            parts.append("extra " + ", ".join(sorted(got - want)))
        raise PerftuneError(f"warm_start: {label} was measured on another space ({'; '.join(parts)}); "
                            "give results of the same parameters")


def _config(raw: Mapping[str, Any], space: Space) -> Config | None:
    """``raw`` as a configuration of ``space`` (lists as tuples), or None when it is not valid there."""
    from perftune.space import Config

    values = {}
    for name in space.params:
        v = raw[name]
        values[name] = tuple(v) if isinstance(v, list) else v
    config = Config(values)
    return config if space.is_valid(config) else None


def _from_trials(trials: Iterable[Trial], space: Space, label: str) -> dict[Config, float]:
    losses: dict[Config, float] = {}
    checked = False
    for t in trials:
        if not checked:
            _check_names(label, t.config, space)
            checked = True
        if t.loss is None:
            continue
        config = _config(t.config, space)
        if config is not None and (config not in losses or t.loss < losses[config]):
            losses[config] = t.loss
    return losses


def _read(source: Any, space: Space, skipped: list[str]) -> list[tuple[str, dict[Config, float]]]:
    """``(label, losses)`` of each run in ``source``: losses of its successful valid configurations.

    A whole store leaves out its runs without any (their labels go to ``skipped``).
    """
    from perftune.store import Store

    if isinstance(source, Prior):  # read once, used by many runs (its ranks order like losses)
        if source.ranked:
            _check_names("a prior", source.ranked[0], space)
        return [("a prior", {c: r for c, r in zip(source.ranked, source.rank, strict=True)
                             if space.is_valid(c)})]
    trials = getattr(source, "trials", None)  # a Result (or a Tuner); not imported: _tuner imports this
    if isinstance(trials, list) and all(isinstance(t, Trial) for t in trials):
        return [("a result", _from_trials(trials, space, "a result"))]
    if isinstance(source, Store):
        return _from_store(source, None, space, str(source.url), skipped)
    if _is_store_run(source):
        store, run = source
        if isinstance(store, str | os.PathLike):
            from perftune.store import open_store

            try:
                store = open_store(store, must_exist=True)
            except PerftuneError as error:
                raise PerftuneError(f"warm_start: ({str(store)!r}, {run!r}): {error}") from None
        return _from_store(store, run, space, f"run {run!r}", skipped)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_file() and ".json" in path.name:
            return [(path.name, _from_file(path, space))]
        from perftune.store import open_store

        try:
            store = open_store(source, must_exist=True)
        except PerftuneError as error:
            raise PerftuneError(f"warm_start: {source}: not a T4 or Kernel Tuner file nor a store ({error})"
                                ) from None
        return _from_store(store, None, space, str(source), skipped)
    if isinstance(source, Sequence) and all(isinstance(t, Trial) for t in source):
        return [("a list of trials", _from_trials(source, space, "a list of trials"))]
    raise PerftuneError(f"warm_start: cannot read a prior from {type(source).__name__}; give a Result, "
                        "trials, a store, (store, run) or a T4 / Kernel Tuner file")


def _from_store(store: Any, run: str | int | None, space: Space, label: str, skipped: list[str]
                ) -> list[tuple[str, dict[Config, float]]]:
    if run is not None:
        info = store.get_run(run)
        return [(f"run {info.name!r}", _from_trials(store.trials(info.id), space, f"run {info.name!r}"))]
    out = []
    empty = []
    for info in store.list_runs():
        names = (info.space or {}).get("params")
        if info.space_fingerprint != space.fingerprint() and (
                not isinstance(names, Mapping) or set(names) != set(space.params)):
            continue  # a store holds runs of many spaces: take those of this one
        losses = _from_trials(store.trials(info.id), space, f"run {info.name!r}")
        if losses:
            out.append((f"run {info.name!r}", losses))
        else:  # a run that crashed or failed throughout says nothing of the order; the others do
            empty.append(f"run {info.name!r}")
    if not out and not empty:
        raise PerftuneError(f"warm_start: {label} holds no run on this space")
    if not out:
        shown = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
        raise PerftuneError(f"warm_start: {label}: none of its runs on this space has a successful "
                            f"configuration valid in this space ({shown})")
    skipped.extend(f"{label}: {name}" for name in empty)
    return out


def _load_json(path: Path) -> Any:
    """The JSON document of a warm-start file, read in chunks through the size cap of every input file
    (``$PERFTUNE_INPUT_MAX_MB``, default 512 MiB decompressed: :mod:`perftune._jsonfile`): a gzip bomb
    is refused before it is in memory.

    Raises:
        PerftuneError: not a regular file, unreadable, larger than the cap, not UTF-8, not JSON or
            nested too deeply; one line naming the file.
    """
    import json

    from perftune._jsonfile import read_input_text

    try:
        text = read_input_text(path, "warm-start", PerftuneError)
    except PerftuneError as error:
        raise PerftuneError(f"warm_start: {error}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise PerftuneError(f"warm_start: {path}: cannot read it (JSON nested too deeply)") from None
    except ValueError as error:  # not JSON, or an integer of more digits than Python converts
        detail = " ".join(str(error).split())[:300]
        raise PerftuneError(f"warm_start: {path}: cannot read it ({detail})") from None


def _is_perftune_export(doc: Any) -> bool:
    """Whether ``doc`` is a run as ``perftune export --format json`` writes it: ``{"schema", "run",
    "trials"}``."""
    return (isinstance(doc, Mapping) and "schema" in doc and isinstance(doc.get("run"), Mapping)
            and isinstance(doc.get("trials"), list))


def _from_export(doc: Mapping[str, Any], path: Path, space: Space) -> dict[Config, float]:
    """Losses of the successful trials of a run exported by perftune (``perftune export --format json``).

    The trials' losses are those the store holds (the value, negated for a run that maximises it; None for
    a failed or infeasible trial), and each configuration is decoded by the space as the store decodes it:
    the prior is the one ``(store, run)`` gives for the run exported.

    Raises:
        PerftuneError: another export schema, a trial without a configuration, or a configuration of other
            parameters or that cannot be decoded; one line naming the file and the trial.
    """
    import math

    from perftune.space import Config
    from perftune.store import EXPORT_SCHEMA

    label = path.name
    schema = doc.get("schema")
    if isinstance(schema, bool) or schema != EXPORT_SCHEMA:
        raise PerftuneError(f"warm_start: {label}: a perftune export of schema {repr(schema)[:40]}; this "
                            f"perftune reads schema {EXPORT_SCHEMA}")
    losses: dict[Config, float] = {}
    for i, row in enumerate(doc["trials"]):
        where = f"warm_start: {label}: trials[{i}]"
        raw = row.get("config") if isinstance(row, Mapping) else None
        if not isinstance(raw, Mapping):
            raise PerftuneError(f"{where} has no configuration")
        _check_names(label, raw, space)
        loss = row.get("loss")
        if (row.get("status") != "ok" or isinstance(loss, bool) or not isinstance(loss, int | float)
                or not math.isfinite(loss)):
            continue  # a failure, an infeasible trial or one still pending: no rank to learn
        try:
            decoded = Config.from_json(raw, space=space)
        except (PerftuneError, ValueError, TypeError, RecursionError) as error:
            detail = (str(error).splitlines() or [type(error).__name__])[0][:200]
            raise PerftuneError(f"{where}: {detail}") from None
        config = _config(decoded, space)
        if config is not None and (config not in losses or loss < losses[config]):
            losses[config] = float(loss)
    return losses


def _from_file(path: Path, space: Space) -> dict[Config, float]:
    """Losses (times) of a T4 results file, a Kernel Tuner cache file or a run exported by perftune;
    failures left out.

    Every row is checked when the file is read: its parameters (the space's, each a hashable value),
    its ``objectives`` and ``measurements``; a malformed row is one line naming the file and the row.
    """
    import math

    doc = _load_json(path)
    label = f"warm_start: {path.name}"
    rows: list[tuple[dict[str, Any], Any]] = []
    names = list(space.params)

    def param_value(raw: Any, where: str, name: str, depth: int = 0) -> Any:
        # A parameter value as a configuration holds it: hashable (lists as tuples), finite.
        kind = type(raw)
        if kind is str or kind is bool or raw is None or (kind is float and math.isfinite(raw)):
            return raw
        if kind is int and -(2**63) <= raw <= 2**63:
            return raw
        if isinstance(raw, list) and depth < 4 and len(raw) <= 100_000:
            return tuple(param_value(v, where, name, depth + 1) for v in raw)
        what = "a JSON object" if isinstance(raw, Mapping) else f"{type(raw).__name__} value"
        if kind is int:
            what = f"an integer of {raw.bit_length()} bits"
        elif kind is float:
            what = repr(raw)
        elif isinstance(raw, list):
            what = "a list nested too deeply or too long"
        raise PerftuneError(f"{where}: parameter {name!r}: {what} is not a parameter value")

    def parameters(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        missing = [n for n in names if n not in raw]
        if missing:
            raise PerftuneError(f"{where} lacks parameter {', '.join(missing)}")
        return {n: param_value(raw[n], where, n) for n in names}

    if isinstance(doc, Mapping) and isinstance(doc.get("results"), list):  # T4
        for i, r in enumerate(doc["results"]):
            where = f"{label}: results[{i}]"
            conf = r.get("configuration") if isinstance(r, Mapping) else None
            if not isinstance(conf, Mapping):
                raise PerftuneError(f"warm_start: {path.name}: a result has no configuration")
            if i == 0:
                _check_names(path.name, conf, space)
            objectives = r.get("objectives") or ["time"]
            if not isinstance(objectives, list) or not isinstance(objectives[0], str):
                raise PerftuneError(f"{where}: objectives must be a list of measurement names")
            measurements = r.get("measurements") or []
            if not isinstance(measurements, list):
                kind = type(measurements).__name__
                raise PerftuneError(f"{where}: measurements must be a list, not {kind}")
            value = None
            if str(r.get("invalidity", "correct")) == "correct":
                for m in measurements:
                    if isinstance(m, Mapping) and m.get("name") == objectives[0]:
                        value = m.get("value")
            rows.append((parameters(conf, where), value))
    elif isinstance(doc, Mapping) and isinstance(doc.get("cache"), Mapping):  # Kernel Tuner cache
        keys = doc.get("tune_params_keys")
        if isinstance(keys, list):
            _check_names(path.name, [str(k) for k in keys], space)
        entries = [(k, e) for k, e in doc["cache"].items() if isinstance(e, Mapping)]
        if entries:  # a cache entry holds its measurements beside the parameters: only missing ones tell
            _check_names(path.name, [n for n in names if n in entries[0][1]], space)
        for key, entry in entries:
            where = f"{label}: cache entry {key[:100]!r}"
            rows.append((parameters(entry, where), entry.get("time")))
    elif _is_perftune_export(doc):
        return _from_export(doc, path, space)
    else:
        raise PerftuneError(f"warm_start: {path.name}: neither a T4 results file, a Kernel Tuner cache nor a "
                            "run exported by perftune (perftune export --format json)")
    losses: dict[Config, float] = {}
    for conf, value in rows:
        # Failures are strings (Kernel Tuner) or a non-"correct" invalidity (T4): no rank to learn.
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            continue
        try:
            loss = float(value)
        except OverflowError:
            continue  # an integer beyond any float: not a measured time
        config = _config(conf, space)
        if config is not None:
            losses[config] = loss
    return losses
