"""Discover what the installed compiler offers: optimisation flags, ``--param``s, -march/-mtune values.

Everything comes from the compiler itself (``-Q --help=optimizers``, ``-Q --help=params``,
``-Q --help=target``), parsed for the installed version. Which flags and params the compiler really
accepts is probed once (group testing: one compile for all of them, bisection only where something is
rejected) in the language the sources are in (C or C++), and cached per compiler and language under
``~/.cache/perftune/flags/`` (``$XDG_CACHE_HOME`` honoured). A ``--param``'s default depends on the -O
level and the -march/-mtune: the defaults of every combination the search offers are read as well.

Example:
    >>> info = discover("gcc")  # doctest: +SKIP
    >>> len(info.flags) > 100, info.version  # doctest: +SKIP
    (True, '12.2.0')
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perftune._atomic import write_text_atomic
from perftune.errors import PerftuneError

__all__ = [
    "LANGUAGES",
    "LEVELS",
    "CompilerInfo",
    "FlagInfo",
    "ParamInfo",
    "cache_dir",
    "cxx_sources",
    "discover",
    "language_of",
    "resolve_compiler",
]

# Bumped whenever the parsing or probing below changes, so that stale caches are ignored.
_CACHE_FORMAT = 5

LEVELS = ("3", "2", "1", "s", "fast")
"""The -O levels the search offers (``-O3`` first: the baseline, whose defaults the params' are)."""

LANGUAGES = ("c", "c++")
"""The languages flags are probed in (:func:`language_of`)."""

# Flags listed under --help=optimizers that are not speed knobs for an ordinary build: they need
# profile data, instrument or harden the code, change the ABI or the code model, or only serve
# debugging. Matched by pattern (categories), not an enumerated list of today's flags.
_EXCLUDED_FLAG_PATTERNS = [
    r"-f(no-)?(profile|branch-probabilities|auto-profile|instrument|sanitize|stack-protector|stack-check)",
    r"-f(no-)?(stack-clash|cf-protection|harden|split-stack|trapv|exceptions|non-call-exceptions)",
    r"-f(no-)?(asynchronous-unwind-tables|unwind-tables|pic|PIC|pie|PIE|plt|common|short-|pack-struct)",
    r"-f(no-)?(pcc-struct-return|reg-struct-return|leading-underscore|live-patching|var-tracking)",
    r"-f(no-)?(save-optimization-record|patchable-function-entry|trivial-auto-var-init|delete-dead-exceptions)",
    r"-f(no-)?(tree-parallelize-loops|fold-simple-inlines|handle-exceptions|rtti|threadsafe-statics|strict-enums)",
    r"-f(no-)?(semantic-interposition|keep-|stdarg-opt|zero-initialized-in-bss|sched-stalled-insns)",
    r"-f(no-)?(lifetime-dse|align-)",
    r"-f(no-)?(dump|opt-info|callgraph-info|selective-scheduling|sel-sched)",
]
_EXCLUDED_FLAG_RE = re.compile("|".join(f"(?:{p})" for p in _EXCLUDED_FLAG_PATTERNS))

# --params that tune diagnostics, sanitizers, debug info, LTO partitioning or host memory use rather
# than the generated code.
_EXCLUDED_PARAM_RE = re.compile(
    r"^(analyzer-|asan-|hwasan-|tsan-|ggc-|lto-|cxx-|uninit-|stack-clash-|tm-|openacc-|parloops-|"
    r"max-vartrack-|max-debug-|min-nondebug-|profile-|hash-table-verification|use-canonical-types|"
    r"integer-share-limit|constructive-interference|destructive-interference|min-pagesize|"
    r"graphite-|loop-block-tile-size|max-ssa-name-query-depth|ssa-name-def-chain-limit|"
    r"logical-op-non-short-circuit|cycle-accurate-model|jump-table-max-growth|"
    r"sched-mem-true-dep-cost|sched-spec-prob-cutoff|sms-|selsched-|max-sched-extend|"
    r"max-pending-list-length|ira-max-conflict-table-size|lra-|max-lto-|modref-max-|"
    r"ipa-jump-function-lookups|max-fsm|tracer-min-branch|asan|ranger-|evrp-|threader-|"
    r"vrp1-mode|vrp2-mode|dse-max-object-size|sink-frequency-threshold|ssp-|use-after-scope|max-isl-)"
)

_BOOL_FLAG_RE = re.compile(r"^\s+(-f[A-Za-z0-9][\w+-]*)(?:\s+\[(enabled|disabled)\])?\s*$")
_ENUM_FLAG_RE = re.compile(r"^\s+(-f[A-Za-z0-9][\w+-]*)=\[([\w|.-]+)\]\s+(\S*)\s*$")
_INTRANGE_FLAG_RE = re.compile(r"^\s+(-f[A-Za-z0-9][\w+-]*)=<(-?\d+),(-?\d+)>\s+(\S*)\s*$")
_PARAM_RE = re.compile(r"^\s+--param=([\w.-]+)=(?:<(-?\d+),(-?\d+)>)?\s+(\S*)\s*$")

_PROBE_SOURCE = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
static double work(double *a, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) { a[i] = sin(a[i]) * 1.5 + (i & 3); s += a[i] * a[i]; }
    return s;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    double *a = (double *)calloc((size_t)n, sizeof(double));
    if (!a) return 1;
    for (int i = 0; i < n; i++) a[i] = i * 0.25;
    printf("%.6f\n", work(a, n));
    free(a);
    return 0;
}
"""


@dataclass(frozen=True)
class FlagInfo:
    """One optimisation flag of the compiler.

    Attributes:
        flag: The flag as written on the command line without a value (``-funroll-loops``).
        kind: ``"bool"`` (on/off: ``-fX`` / ``-fno-X``) or ``"enum"`` (``-fX=value``).
        values: For ``enum`` flags, the legal values (strings).
        o3_state: What ``-O3`` does with it: ``"enabled"``, ``"disabled"`` or the enum value.

    Example:
        >>> FlagInfo("-funroll-loops", "bool", (), "disabled").name
        'funroll_loops'
    """

    flag: str
    kind: str
    values: tuple[str, ...] = ()
    o3_state: str = ""

    @property
    def name(self) -> str:
        """The parameter name used in the search space (``-funroll-loops`` -> ``funroll_loops``)."""
        return self.flag.lstrip("-").replace("-", "_").replace("+", "_")


@dataclass(frozen=True)
class ParamInfo:
    """One ``--param`` of the compiler.

    Attributes:
        param: The param name (``max-unroll-times``).
        default: The value the compiler uses when it is not given.
        lo: Smallest legal value.
        hi: Largest legal value.
        range_known: False when the compiler printed no range: ``lo``/``hi`` are then a conservative
            range of a quarter to four times the default, chosen by perftune.

    Example:
        >>> ParamInfo("max-unroll-times", 8, 0, 32, True).name
        'param_max_unroll_times'
    """

    param: str
    default: int
    lo: int
    hi: int
    range_known: bool

    @property
    def name(self) -> str:
        """The parameter name used in the search space."""
        return "param_" + self.param.replace("-", "_").replace(".", "_")


@dataclass(frozen=True)
class CompilerInfo:
    """What one installed compiler offers, as discovered and probed.

    Attributes:
        path: Absolute path of the compiler executable.
        version: Its full version (``12.2.0``).
        version_line: First line of ``--version``.
        machine: Target triple (``-dumpmachine``).
        flags: Accepted optimisation flags.
        params: Accepted ``--param``s with their ranges.
        march: ``-march`` values that this machine can run (``native`` first).
        mtune: ``-mtune`` values worth trying.
        rejected: Flags or params the compiler refused during probing or tuning (with the reason).
        language: ``"c"`` or ``"c++"``: the language the flags were probed in.
        param_defaults: The params' defaults that an -O level, -march and -mtune change from the
            ``-O3`` ones (:attr:`ParamInfo.default`), by ``"level|march|mtune"`` (``"2|default|default"``);
            see :meth:`param_default`.

    Example:
        >>> info = discover("gcc")  # doctest: +SKIP
        >>> info.flag("-funroll-loops").o3_state  # doctest: +SKIP
        'disabled'
    """

    path: str
    version: str
    version_line: str
    machine: str
    flags: tuple[FlagInfo, ...]
    params: tuple[ParamInfo, ...]
    march: tuple[str, ...]
    mtune: tuple[str, ...]
    rejected: dict[str, str] = field(default_factory=dict)
    language: str = "c"
    param_defaults: dict[str, dict[str, int]] = field(default_factory=dict)

    def param_default(self, param: ParamInfo, level: str = "3", march: str = "default",
                      mtune: str = "default") -> int:
        """``param``'s default under ``-O<level>`` and the -march/-mtune value (``"default"``: none given).

        Example:
            >>> info = discover("gcc")  # doctest: +SKIP
            >>> p = info.param("max-inline-insns-auto")  # doctest: +SKIP
            >>> info.param_default(p, "3"), info.param_default(p, "2")  # doctest: +SKIP
            (30, 15)
        """
        return self.param_defaults.get(f"{level}|{march}|{mtune}", {}).get(param.param, param.default)

    def flag(self, flag: str) -> FlagInfo | None:
        """The flag named ``flag`` (``-fX``, ``-fno-X`` and ``-fX=value`` all find ``-fX``)."""
        base = flag.split("=", 1)[0]
        if base.startswith("-fno-"):
            base = "-f" + base[5:]
        for info in self.flags:
            if info.flag == base:
                return info
        return None

    def param(self, name: str) -> ParamInfo | None:
        """The ``--param`` named ``name``."""
        for info in self.params:
            if info.param == name:
                return info
        return None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dictionary (the cache format)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompilerInfo:
        """Inverse of :meth:`to_json`."""
        flags = tuple(
            FlagInfo(f["flag"], f["kind"], tuple(f["values"]), f["o3_state"]) for f in data["flags"]
        )
        params = tuple(ParamInfo(**p) for p in data["params"])
        return cls(
            path=str(data["path"]),
            version=str(data["version"]),
            version_line=str(data["version_line"]),
            machine=str(data["machine"]),
            flags=flags,
            params=params,
            march=tuple(data["march"]),
            mtune=tuple(data["mtune"]),
            rejected=dict(data.get("rejected", {})),
            language=str(data.get("language", "c")),
            param_defaults={str(k): {str(n): int(v) for n, v in d.items()}
                            for k, d in data.get("param_defaults", {}).items()},
        )


def cache_dir() -> Path:
    """Where probe results are cached (``$XDG_CACHE_HOME/perftune/flags`` or ``~/.cache/perftune/flags``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perftune" / "flags"


def resolve_compiler(compiler: str) -> str:
    """Absolute path of ``compiler``; raises PerftuneError with one line when it is not installed."""
    found = shutil.which(compiler)
    if found is None:
        raise PerftuneError(f"compiler {compiler!r} not found: install it or give its path with --compiler")
    return os.path.realpath(found) if os.sep not in compiler else os.path.abspath(compiler)


def _run(cmd: Sequence[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LC_ALL="C", LANG="C")
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, env=env, check=False)


def parse_optimizers(text: str) -> list[FlagInfo]:
    """Parse ``<cc> -O3 -Q --help=optimizers`` into flags (on/off and enumerated ones)."""
    flags: list[FlagInfo] = []
    seen: set[str] = set()
    for line in text.splitlines():
        if "[available in" in line:
            continue
        values: tuple[str, ...]
        m = _BOOL_FLAG_RE.match(line)
        if m:
            flag, state = m.group(1), m.group(2) or ""  # no state: a flag -O3 leaves unset
            kind, values = "bool", ()
        else:
            m = _ENUM_FLAG_RE.match(line)
            if m:
                flag, values, state = m.group(1), tuple(m.group(2).split("|")), m.group(3)
                kind = "enum"
            else:
                m = _INTRANGE_FLAG_RE.match(line)
                if not m:
                    continue
                lo, hi = int(m.group(2)), int(m.group(3))
                if hi - lo > 8:
                    continue
                flag, values, state = m.group(1), tuple(str(v) for v in range(lo, hi + 1)), m.group(4)
                kind = "enum"
        if flag in seen or _EXCLUDED_FLAG_RE.match(flag):
            continue
        seen.add(flag)
        flags.append(FlagInfo(flag, kind, values, state))
    return flags


def parse_params(text: str) -> list[ParamInfo]:
    """Parse ``<cc> -Q --help=params`` (GCC 10+ syntax: ``--param=name=<lo,hi>  default``)."""
    params: list[ParamInfo] = []
    for line in text.splitlines():
        m = _PARAM_RE.match(line)
        if not m:
            continue
        name, lo_s, hi_s, default_s = m.groups()
        if _EXCLUDED_PARAM_RE.match(name):
            continue
        try:
            default = int(default_s)
        except ValueError:
            continue  # an enumerated param (e.g. a mode name): not a number to tune
        if lo_s is not None:
            lo, hi = int(lo_s), int(hi_s)
            if lo == hi or not lo <= default <= hi:
                continue
            params.append(ParamInfo(name, default, lo, hi, True))
        elif default >= 4:
            # No range printed: a conservative quarter-to-four-times band around the default.
            params.append(ParamInfo(name, default, max(1, default // 4), default * 4, False))
        # A param without a range whose default is 0..3 is a mode or a switch we cannot bound: left out.
    return params


def parse_target(text: str) -> tuple[list[str], list[str], str, str]:
    """Parse ``<cc> -Q --help=target``: known -march values, -mtune values, default march, default tune."""
    march: list[str] = []
    mtune: list[str] = []
    lines = text.splitlines()
    default_march = default_tune = ""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("Known valid arguments for -march= option") and i + 1 < len(lines):
            march = lines[i + 1].split()
        elif stripped.startswith("Known valid arguments for -mtune= option") and i + 1 < len(lines):
            mtune = lines[i + 1].split()
        elif re.match(r"^-march=\s", stripped):
            default_march = stripped.split()[-1]
        elif re.match(r"^-mtune=\s", stripped):
            default_tune = stripped.split()[-1]
    return march, mtune, default_march, default_tune


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


# What each x86-64 micro-architecture level needs from the CPU (psABI); used to offer only levels this
# machine can run.
_X86_LEVELS = {
    "x86-64-v2": {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"},
    "x86-64-v3": {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"},
    "x86-64-v4": {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
}


def _march_choices(cc: str, known: list[str], known_tune: list[str]) -> tuple[list[str], list[str]]:
    march: list[str] = []
    mtune: list[str] = []
    if "native" in known:
        march.append("native")
        native = _run([cc, "-march=native", "-Q", "--help=target"])
        _, _, native_arch, native_tune = parse_target(native.stdout)
        if native_arch and native_arch in known and native_arch not in march:
            march.append(native_arch)
        mtune.append("native")
        if native_tune and native_tune in known_tune and native_tune not in mtune:
            mtune.append(native_tune)
    cpu = _cpu_flags()
    needed: set[str] = set()
    for level, features in _X86_LEVELS.items():
        needed |= features
        if level in known and cpu and needed <= cpu:
            march.append(level)
    if "generic" in known_tune and "generic" not in mtune:
        mtune.append("generic")
    return march, mtune


def _param_values(text: str) -> dict[str, int]:
    """Every numeric param's value in ``<cc> -Q --help=params``."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = _PARAM_RE.match(line)
        if m:
            try:
                values[m.group(1)] = int(m.group(4))
            except ValueError:
                continue
    return values


def _param_defaults(cc: str, params: Sequence[ParamInfo], march: Sequence[str],
                    mtune: Sequence[str]) -> dict[str, dict[str, int]]:
    """The params' defaults that differ from the -O3 ones, for each -O level, -march and -mtune the
    search offers (``"level|march|mtune"``; one ``-Q --help=params`` each, a few milliseconds)."""
    combos = [(level, m, t) for level in LEVELS for m in ("default", *march) for t in ("default", *mtune)
              if (level, m, t) != ("3", "default", "default")]

    def read(combo: tuple[str, str, str]) -> dict[str, int]:
        level, m, t = combo
        opts = [f"-O{level}", *([f"-march={m}"] if m != "default" else []),
                *([f"-mtune={t}"] if t != "default" else [])]
        try:
            values = _param_values(_run([cc, *opts, "-Q", "--help=params"]).stdout)
        except (OSError, subprocess.TimeoutExpired):
            return {}  # nothing known: the -O3 defaults stand in
        return {p.param: values[p.param] for p in params if values.get(p.param, p.default) != p.default}

    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        found = list(pool.map(read, combos))
    return {"|".join(combo): diff for combo, diff in zip(combos, found, strict=True) if diff}


# Suffixes gcc compiles as C++, whatever the driver.
_CXX_SUFFIXES = (".cc", ".cp", ".cxx", ".cpp", ".CPP", ".c++", ".C")


def cxx_sources(sources: Sequence[str]) -> bool:
    """Whether any of ``sources`` is C++ (by its suffix, as gcc decides).

    Example:
        >>> cxx_sources(["main.c", "kernel.cpp"]), cxx_sources(["main.c"])
        (True, False)
    """
    return any(str(src).endswith(_CXX_SUFFIXES) for src in sources)


def language_of(compiler: str, sources: Sequence[str] = ()) -> str:
    """``"c++"`` for a C++ driver (``g++``, ``clang++``) or C++ sources (``.cpp``, ``.cc``, ...), else C.

    Example:
        >>> language_of("gcc", ["a.c"]), language_of("gcc", ["a.cpp"]), language_of("g++")
        ('c', 'c++', 'c++')
    """
    return "c++" if "++" in os.path.basename(compiler) or cxx_sources(sources) else "c"


def _accepts(cc: str, options: Sequence[str], workdir: str, language: str = "c") -> tuple[bool, str]:
    src = os.path.join(workdir, "probe.c")
    res = _run([cc, "-x", language, "-O3", *options, "-c", src, "-o", os.path.join(workdir, "probe.o")])
    stderr = res.stderr.strip()
    return res.returncode == 0 and not stderr, stderr


def _probe_group(cc: str, options: list[str], workdir: str, rejected: dict[str, str],
                 language: str = "c") -> list[str]:
    """Return the accepted options, finding rejected ones by bisection (one compile when all pass)."""
    if not options:
        return []
    ok, stderr = _accepts(cc, options, workdir, language)
    if ok:
        return list(options)
    # Most complaints name the option: set those aside and retry the rest in one compile.
    named = [o for o in options if len(options) > 1 and (f"'{o}'" in stderr or f"‘{o}’" in stderr)]
    if named:
        for o in named:
            line = next((ln for ln in stderr.splitlines() if o in ln), stderr)
            rejected[o] = line.strip()[:200]
        return _probe_group(cc, [o for o in options if o not in named], workdir, rejected, language)
    if len(options) == 1:
        rejected[options[0]] = (stderr.splitlines() or ["rejected"])[0][:200]
        return []
    mid = len(options) // 2
    return _probe_group(cc, options[:mid], workdir, rejected, language) + _probe_group(
        cc, options[mid:], workdir, rejected, language
    )


def _cache_key(cc: str, version_line: str, language: str = "c") -> str:
    stat = os.stat(cc)
    text = f"{_CACHE_FORMAT}|{cc}|{version_line}|{stat.st_size}|{int(stat.st_mtime)}|{language}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cache_path(info_or_cc: CompilerInfo | str, language: str | None = None) -> Path:
    """The cache file of a compiler (path or discovered info) and language (the info's, else C)."""
    cc = info_or_cc.path if isinstance(info_or_cc, CompilerInfo) else resolve_compiler(info_or_cc)
    if language is None:
        language = info_or_cc.language if isinstance(info_or_cc, CompilerInfo) else "c"
    version_line = _run([cc, "--version"]).stdout.splitlines()[0]
    return cache_dir() / f"{Path(cc).name}-{_cache_key(cc, version_line, language)}.json"


def remember_rejected(info: CompilerInfo, option: str, reason: str) -> None:
    """Record that the compiler rejected ``option`` so that later runs leave it out of the space."""
    info.rejected[option] = reason
    path = cache_path(info)
    try:
        data = json.loads(path.read_text())
        data.setdefault("rejected", {})[option] = reason
        write_text_atomic(path, json.dumps(data, indent=1))
    except (OSError, ValueError):
        pass  # the cache is an optimisation; a later probe finds the same thing again


def discover(compiler: str = "gcc", *, use_cache: bool = True, language: str | None = None) -> CompilerInfo:
    """Discover and probe ``compiler``'s optimisation flags, params and -march/-mtune values.

    The result is cached per compiler version and language; the cache is rebuilt when the compiler
    changes.

    Args:
        compiler: A name on ``PATH`` or a path.
        use_cache: Read and write the cache (``False`` probes again).
        language: ``"c"`` or ``"c++"``: the language the flags are probed in (that of the sources to
            tune; :func:`language_of`). Default: C++ for a C++ driver (``g++``), else C.

    Raises:
        PerftuneError: The compiler is not installed or does not answer like gcc.
    """
    language = language or language_of(compiler)
    if language not in LANGUAGES:
        raise PerftuneError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
    cc = resolve_compiler(compiler)
    try:
        version_res = _run([cc, "--version"])
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PerftuneError(f"compiler {compiler!r} cannot be run: {error}") from None
    if version_res.returncode != 0 or not version_res.stdout:
        raise PerftuneError(f"compiler {compiler!r} does not answer --version")
    version_line = version_res.stdout.splitlines()[0]
    path = cache_dir() / f"{Path(cc).name}-{_cache_key(cc, version_line, language)}.json"
    if use_cache and path.exists():
        try:
            return CompilerInfo.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable cache: probe again
    version = _run([cc, "-dumpfullversion"]).stdout.strip() or _run([cc, "-dumpversion"]).stdout.strip()
    machine = _run([cc, "-dumpmachine"]).stdout.strip()
    optimizers = _run([cc, "-O3", "-Q", "--help=optimizers"])
    params_text = _run([cc, "-O3", "-Q", "--help=params"])
    if optimizers.returncode != 0 or "-f" not in optimizers.stdout:
        raise PerftuneError(
            f"compiler {compiler!r} does not list its optimisers with -Q --help=optimizers (gcc needed)"
        )
    flags = parse_optimizers(optimizers.stdout)
    params = parse_params(params_text.stdout)
    known_march, known_tune, _, _ = parse_target(_run([cc, "-Q", "--help=target"]).stdout)
    march, mtune = _march_choices(cc, known_march, known_tune)

    rejected: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="perftune-probe-") as workdir:
        Path(workdir, "probe.c").write_text(_PROBE_SOURCE)
        ok, stderr = _accepts(cc, [], workdir, language)
        if not ok:
            what = "C++" if language == "c++" else "C"
            raise PerftuneError(
                f"compiler {compiler!r} cannot compile a small {what} file: {stderr.splitlines()[:1]}"
            )
        # Each flag is probed in the form the search uses: -fX and -fno-X, or -fX=<first value>.
        on = [f.flag for f in flags if f.kind == "bool"]
        off = ["-fno-" + f.flag[2:] for f in flags if f.kind == "bool"]
        enums = [f"{f.flag}={f.values[0]}" for f in flags if f.kind == "enum"]
        accepted = set(_probe_group(cc, on, workdir, rejected, language))
        accepted |= set(_probe_group(cc, off, workdir, rejected, language))
        accepted |= set(_probe_group(cc, enums, workdir, rejected, language))
        kept_flags = []
        for f in flags:
            if (
                f.kind == "bool"
                and f.flag in accepted
                and "-fno-" + f.flag[2:] in accepted
                or f.kind == "enum"
                and f"{f.flag}={f.values[0]}" in accepted
            ):
                kept_flags.append(f)
        # A param is probed at both ends of its range (a range gcc prints but then refuses is dropped).
        kept_params = []
        lo_opts = [f"--param={p.param}={p.lo}" for p in params]
        hi_opts = [f"--param={p.param}={p.hi}" for p in params]
        accepted_params = set(_probe_group(cc, lo_opts, workdir, rejected, language)) | set(
            _probe_group(cc, hi_opts, workdir, rejected, language)
        )
        for p, lo_opt, hi_opt in zip(params, lo_opts, hi_opts, strict=True):
            if lo_opt in accepted_params and hi_opt in accepted_params:
                kept_params.append(p)
        march_ok = [m for m in march if _accepts(cc, [f"-march={m}"], workdir, language)[0]]
        mtune_ok = [m for m in mtune if _accepts(cc, [f"-mtune={m}"], workdir, language)[0]]
    param_defaults = _param_defaults(cc, kept_params, march_ok, mtune_ok)

    info = CompilerInfo(
        path=cc,
        version=version,
        version_line=version_line,
        machine=machine,
        flags=tuple(kept_flags),
        params=tuple(kept_params),
        march=tuple(march_ok),
        mtune=tuple(mtune_ok),
        rejected=rejected,
        language=language,
        param_defaults=param_defaults,
    )
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, json.dumps(info.to_json(), indent=1))
        except OSError:
            pass
    return info
