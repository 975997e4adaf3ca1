"""Decisions by cross-validation: the leave-one-kernel-out table for perftune's default search.

The twelve development spaces of ``benchmarks/quality.py`` are five kernel families (one kernel,
several GPUs): the benchmark hub's T4 convolution and dedispersion (A4000, A6000, W6600) and the
Kernel Tuner caches' gemm (RTX 2080 Ti, RTX Titan), pnpoly and convolution (RTX 3060 laptop, RTX
Titan). For the default (tool ``perftune``) and every variant tried (``perftune-exp:...`` tools, or the
ones named with ``--variants``), per family and per budget, the table gives the geometric mean over
the family's spaces of the median over the seeds of best-found / optimum; it reads the runs that
``quality.py`` stored in ``results/quality_raw/`` (run a variant with ``quality.py --tools
perftune-exp:quality_variants:<Class> --seeds 0-9``) and runs nothing itself.

The rule (issue [10]): a variant replaces the default only if, holding out each family in turn, it
is no worse than the default by more than 1% on that family at every budget, and better overall
(lower geomean over all twelve spaces and the four budgets). A variant that wins on one family and
loses on another is not adopted; a variant without runs on every space of every family cannot be
judged. Only seeds that both the default and the variant have are compared. ``--baseline`` names the
default a variant would replace, once a decision has changed what ``perftune`` runs.

Usage::

    .venv/bin/python benchmarks/cv.py --seeds 0-19 [--variants TOOL,...] [--baseline TOOL] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import quality  # noqa: E402  (benchmarks/quality.py: the problems, the raw runs and the scores)

DEFAULT_TOOL = "perftune"
#: The five kernel families: (label, the development spaces of the family).
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("convolution (T4)", ("convolution.A4000", "convolution.A6000", "convolution.W6600")),
    ("dedispersion (T4)", ("dedispersion.A4000", "dedispersion.A6000", "dedispersion.W6600")),
    ("gemm (KT)", ("gemm.RTX_2080_Ti", "gemm.RTX_Titan")),
    ("pnpoly (KT)", ("pnpoly.RTX_3060_laptop", "pnpoly.RTX_Titan")),
    ("convolution (KT)", ("convolution.RTX_3060_laptop", "convolution.RTX_Titan")),
)
TOLERANCE = 0.01  # "no worse within 1%"


def _problems() -> dict[str, Any]:
    return {quality.make_problem_cached(s).name: quality.make_problem_cached(s)
            for s in quality.all_problem_specs() if s["kind"] == "table"}


def _runs(name: str, tool: str, seeds: set[int]) -> dict[int, dict[str, Any]]:
    return {r["seed"]: r for r in quality.load_raw(name, tool) if r["seed"] in seeds and not r.get("error")}


def space_scores(problem: Any, runs: list[dict[str, Any]]) -> dict[int, float]:
    """Median over the runs of best/optimum, per budget."""
    return {b: quality.median_score(problem, runs, b) for b in quality.BUDGETS}


def compare(
    variant: str, seeds: set[int], problems: dict[str, Any], baseline: str = DEFAULT_TOOL
) -> dict[str, Any]:
    """The variant against ``baseline`` (the default it would replace) on the seeds both have, per family
    and budget, and the verdict."""
    out: dict[str, Any] = {"tool": variant, "families": {}, "missing": [], "n_seeds": {}}
    per_space: dict[str, dict[str, dict[int, float]]] = {}
    for _, names in FAMILIES:
        for name in names:
            base = _runs(name, baseline, seeds)
            var = _runs(name, variant, seeds)
            common = sorted(set(base) & set(var))
            out["n_seeds"][name] = len(common)
            if not common:
                out["missing"].append(name)
                continue
            per_space[name] = {
                "default": space_scores(problems[name], [base[s] for s in common]),
                "variant": space_scores(problems[name], [var[s] for s in common]),
            }
    for label, names in FAMILIES:
        if any(n not in per_space for n in names):
            out["families"][label] = None
            continue
        out["families"][label] = {
            who: {b: quality.geomean([per_space[n][who][b] for n in names]) for b in quality.BUDGETS}
            for who in ("default", "variant")
        }
    if out["missing"]:
        out["verdict"], out["reason"] = "not judged", f"no runs on {', '.join(out['missing'])}"
        return out
    losses = [
        f"{label} @{b}: {fam['variant'][b]:.3f} vs {fam['default'][b]:.3f}"
        for label, fam in out["families"].items()
        for b in quality.BUDGETS
        if fam["variant"][b] > fam["default"][b] * (1 + TOLERANCE)
    ]
    overall = {who: quality.geomean([per_space[n][who][b] for n in per_space for b in quality.BUDGETS])
               for who in ("default", "variant")}
    out["overall"] = overall
    if losses:
        out["verdict"], out["reason"] = "rejected", "worse by more than 1% on " + "; ".join(losses)
    elif not overall["variant"] < overall["default"]:
        out["verdict"] = "rejected"
        out["reason"] = f"not better overall ({overall['variant']:.4f} vs {overall['default']:.4f})"
    else:
        out["verdict"] = "adopt"
        out["reason"] = (f"no family worse by more than 1%; overall {overall['variant']:.4f} vs "
                         f"{overall['default']:.4f}")
    return out


def default_table(seeds: set[int], problems: dict[str, Any]) -> list[str]:
    """The shipped default per family and budget (its own seeds), with the spaces' medians."""
    lines = ["| family | spaces | seeds | @25 | @50 | @100 | @200 |", "|---|---|---|---|---|---|---|"]
    for label, names in FAMILIES:
        scores = []
        n_seeds = []
        for name in names:
            runs = list(_runs(name, DEFAULT_TOOL, seeds).values())
            n_seeds.append(len(runs))
            scores.append(space_scores(problems[name], runs) if runs else None)
        if any(s is None for s in scores):
            lines.append(f"| {label} | {len(names)} | - | - | - | - | - |")
            continue
        cells = []
        for b in quality.BUDGETS:
            g = quality.geomean([s[b] for s in scores if s is not None])
            cells.append(f"{g:.3f}")
        seed_cell = f"{min(n_seeds)}-{max(n_seeds)}"
        lines.append(f"| {label} | {len(names)} | {seed_cell} | " + " | ".join(cells) + " |")
    return lines


def _load_average() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _variant_tools() -> list[str]:
    tools: set[str] = set()
    for _, names in FAMILIES:
        for name in names:
            folder = quality.RAW / name
            if folder.is_dir():
                tools.update(quality.tool_of(p) for p in folder.glob("perftune-exp_*.jsonl.gz"))
    return sorted(tools)


def report(seeds_text: str, variants: list[str], notes: dict[str, str], baseline: str = DEFAULT_TOOL) -> str:
    seeds = set(quality.parse_seeds(seeds_text))
    problems = _problems()
    lines = [
        "# Decisions by cross-validation: leave one kernel family out",
        "",
        f"- Command: `python benchmarks/cv.py {' '.join(sys.argv[1:])}` (reads `quality_raw/`; the runs "
        "themselves are `quality.py`'s).",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; machine: {platform.node()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, load average {_load_average()} "
        "(shared; the table is computed from stored runs and does not depend on it).",
        f"- Seeds considered: {seeds_text}. Cells: geomean over the family's spaces of the median over the "
        "seeds of best-found / optimum (1.000 = the optimum).",
        "- Rule: a variant replaces the default only if, on each of the five families and at each budget, "
        "it is no worse than the default by more than 1%, and its geomean over all twelve spaces and the "
        "four budgets is lower. Variants are compared with the default on the seeds both have.",
        "",
        "## The default that ships (`perftune`, `perftune.search.StagedBandit`)",
        "",
        *default_table(seeds, problems),
        "",
        "## Variants tried",
        "",
        f"Each against `{baseline}`" + (" (the default before the decisions below; its runs are kept "
                                        "under that name in `quality_raw/`)." if baseline != DEFAULT_TOOL
                                        else "."),
        "",
    ]
    results = [compare(v, seeds, problems, baseline) for v in variants]
    lines += ["| variant | what it changes | seeds per space | verdict | why |", "|---|---|---|---|---|"]
    for r in results:
        counts = [c for c in r["n_seeds"].values() if c]
        seed_cell = f"{min(counts)}-{max(counts)}" if counts else "0"
        lines.append(f"| `{r['tool']}` | {notes.get(r['tool'], '')} | {seed_cell} | {r['verdict']} | "
                     f"{r['reason']} |")
    for r in results:
        lines += ["", f"### `{r['tool']}` against `{baseline}`, per family ({baseline} / variant)", "",
                  "| family | @25 | @50 | @100 | @200 |", "|---|---|---|---|---|"]
        for label, fam in r["families"].items():
            if fam is None:
                lines.append(f"| {label} | not run | | | |")
                continue
            cells = []
            for b in quality.BUDGETS:
                d, v = fam["default"][b], fam["variant"][b]
                mark = ""
                if v > d * (1 + TOLERANCE):
                    mark = " **worse**"
                elif v < d * (1 - TOLERANCE):
                    mark = " better"
                cells.append(f"{d:.3f} / {v:.3f}{mark}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    notes_file = HERE / "results" / "cv_notes.md"  # hand-written findings, kept next to the tables
    if notes_file.exists():
        lines += ["", notes_file.read_text().rstrip()]
    return "\n".join(lines) + "\n"


def _notes_of(variants: list[str]) -> dict[str, str]:
    """The first line of each variant class's docstring (``perftune-exp:<module>:<Class>``)."""
    import importlib

    notes: dict[str, str] = {}
    for tool in variants:
        if tool == DEFAULT_TOOL:
            notes[tool] = ("perftune's default as it ships, judged against the former default named by "
                           "--baseline (see the notes for the decision that made it the default).")
            continue
        parts = tool.split(":")
        if len(parts) != 3:
            continue
        try:
            cls = getattr(importlib.import_module(parts[1]), parts[2])
        except (ImportError, AttributeError):
            continue
        doc = next((c.__doc__ for c in cls.__mro__ if c.__doc__), "")  # generated classes have none
        first_paragraph = doc.strip().split("\n\n")[0]
        notes[tool] = " ".join(first_paragraph.split()).replace("|", "/")
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0-19", help="seeds to use, e.g. 0-9 or 0-19 (default 0-19)")
    parser.add_argument("--variants", default="",
                        help="comma-separated tools to judge (default: every perftune-exp tool with runs)")
    parser.add_argument("--baseline", default=DEFAULT_TOOL,
                        help="the default the variants would replace (default: perftune, as it is now)")
    parser.add_argument("--out", default=str(HERE / "results" / "cv.md"))
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v] or _variant_tools()
    text = report(args.seeds, variants, _notes_of(variants), args.baseline)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
