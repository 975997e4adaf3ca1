"""Benchmarks: the modules an episode starts from.

URIs follow CompilerGym's shape:

- ``benchmark://perftune-v0/NAME``: runnable C programs bundled with perftune (``programs/`` of this
  package and of the gcc-flags target), compiled with clang-14;
- ``generator://csmith-v0/SEED``: a random C program from csmith, compiled like CompilerGym does
  (``-O1 -Xclang -disable-llvm-passes``, so the IR is unoptimised but inlinable); runnable;
- ``generator://llvm-stress-v0/SEED``: a random IR module from llvm-stress-14; not runnable;
- ``file:///path/x.c`` (or a bare path) to a ``.c``, ``.ll`` or ``.bc`` file of yours.

The short forms ``perftune-v0/NAME``, ``csmith-v0/SEED`` and ``llvm-stress-v0/SEED`` work too. Other
text of that shape (``DATASET-vN/...``, such as CompilerGym's ``cbench-v1/crc32``) that is not a path
names a dataset perftune does not have: it gets the "unknown dataset" error of its URI form.
Compiled bitcode is cached in ``~/.cache/perftune/llvm-benchmarks/``.

Example:
    >>> from perftune.targets.llvm import get_benchmark
    >>> bench = get_benchmark("benchmark://perftune-v0/crc32")  # doctest: +SKIP
    >>> bench.runnable, bench.bitcode.suffix  # doctest: +SKIP
    (True, '.bc')
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from perftune.targets.llvm._errors import BenchmarkError
from perftune.targets.llvm._tools import cache_dir, find_tool

__all__ = [
    "BUNDLED_PROGRAMS",
    "Benchmark",
    "bundled_uris",
    "csmith_uris",
    "get_benchmark",
]

_HERE = Path(__file__).parent
_OWN_PROGRAMS = _HERE / "programs"
_FLAGS_PROGRAMS = _HERE.parent / "flags" / "programs"  # issue [5]'s programs, read only

#: Bundled programs and the arguments used when running them (small inputs: validation runs
#: them at -O0 and optimised).
BUNDLED_PROGRAMS: dict[str, tuple[str, ...]] = {
    # this package's programs
    "crc32": ("256", "4"),
    "nbody": ("64", "200"),
    "sieve": ("2000000",),
    "strsearch": ("512",),
    # the gcc-flags target's programs
    "fft": ("12", "2"),
    "graph": ("20000", "4", "4"),
    "hashsort": ("50000", "2"),
    "matmul": ("64", "2"),
    "raytrace": ("64", "48"),
    "stencil": ("64", "10"),
}


@dataclass(frozen=True)
class Benchmark:
    """A module to start an episode from.

    Attributes:
        uri: Its URI (``benchmark://perftune-v0/crc32``, ``generator://csmith-v0/3``, ``file:///...``).
        bitcode: Path of the unoptimised module (``.bc`` or ``.ll``).
        source: The C source, when there is one.
        runnable: Whether it has a ``main`` that can be run to check the output.
        run_args: Command-line arguments for a run.
        link_flags: Extra linker flags for a runnable build.
        run_timeout_s: Limit for one run of the program.
        compile_command: For C sources, the clang command that produces ``bitcode``.
    """

    uri: str
    bitcode: Path
    source: Path | None = None
    runnable: bool = False
    run_args: tuple[str, ...] = ()
    link_flags: tuple[str, ...] = ("-lm",)
    run_timeout_s: float = 30.0
    compile_command: str | None = None

    def __str__(self) -> str:
        return self.uri


def bundled_uris() -> list[str]:
    """URIs of the bundled runnable programs that are present."""
    return [
        f"benchmark://perftune-v0/{name}" for name in BUNDLED_PROGRAMS if _bundled_source(name) is not None
    ]


def csmith_uris(seeds: range | list[int]) -> list[str]:
    """``generator://csmith-v0/SEED`` for each seed."""
    return [f"generator://csmith-v0/{seed}" for seed in seeds]


def _bundled_source(name: str) -> Path | None:
    for directory in (_OWN_PROGRAMS, _FLAGS_PROGRAMS):
        path = directory / f"{name}.c"
        if path.is_file():
            return path
    return None


def _benchmark_cache() -> Path:
    path = cache_dir() / "llvm-benchmarks"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _clang_version() -> str:
    return subprocess.run([find_tool("clang"), "--version"], capture_output=True, text=True).stdout


_C_FLAGS = ("-xc", "-O1", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-w")


def compile_command(source: Path | str, output: str, extra: tuple[str, ...] = ()) -> str:
    """The clang-14 command line that turns a C file into a benchmark's bitcode."""
    return shlex.join(["clang-14", *_C_FLAGS, *extra, str(source), "-o", output])


#: Comments, string and character literals of C source (blanked out before looking for ``main``).
_C_NOISE = re.compile(rb'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
#: A definition of ``main``: the name, its parameter list (one level of nested parentheses), a body.
_MAIN_DEFINITION = re.compile(rb"(?<![\w$])main\s*\((?:[^()]|\([^()]*\))*\)\s*\{")


def defines_main(source: bytes) -> bool:
    """Whether C SOURCE defines a ``main`` function (a declaration, a call or ``domain()`` does not count)."""
    return _MAIN_DEFINITION.search(_C_NOISE.sub(b" ", source)) is not None


def _compile_c(source_text: bytes, name: str, extra: tuple[str, ...] = (), shown: str | None = None) -> Path:
    """Compiles C source to unoptimised (but inlinable) bitcode, cached by content; ``shown`` is the
    source's name in clang's messages (the user's file, not the temporary copy compiled)."""
    clang = find_tool("clang")
    flags = (*_C_FLAGS, *extra)
    key = hashlib.sha256(source_text + " ".join(flags).encode() + _clang_version().encode()).hexdigest()[:20]
    out = _benchmark_cache() / f"{name}-{key}.bc"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(prefix="perftune-cc-") as tmp:
        src = Path(tmp) / "input.c"
        src.write_bytes(source_text)
        part = Path(tmp) / "out.bc"
        result = subprocess.run([clang, *flags, str(src), "-o", str(part)], capture_output=True, text=True)
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["(no message)"])[0]
            first = first.replace(str(src), shown or name)
            raise BenchmarkError(f"{shown or name}: clang-14 cannot compile it: {first}")
        os.replace(part, out)
    return out


def _csmith(seed: int) -> Benchmark:
    csmith = find_tool("csmith")
    include = _csmith_include()
    uri = f"generator://csmith-v0/{seed}"
    cached_c = _benchmark_cache() / f"csmith-{seed}.c"
    if not cached_c.exists():
        with tempfile.TemporaryDirectory(prefix="perftune-csmith-") as tmp:
            out = Path(tmp) / "prog.c"
            result = subprocess.run(
                [csmith, "--seed", str(seed), "--output", str(out)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if result.returncode != 0 or not out.exists():
                raise BenchmarkError(f"{uri}: csmith failed: {result.stderr.strip()[:200]}")
            os.replace(out, cached_c)
    bitcode = _compile_c(cached_c.read_bytes(), f"csmith-{seed}", ("-I", include))
    return Benchmark(
        uri,
        bitcode,
        source=cached_c,
        runnable=True,
        link_flags=(),
        run_timeout_s=10.0,
        compile_command=compile_command(cached_c, str(bitcode), ("-I", include)),
    )


def _csmith_include() -> str:
    for candidate in ("/usr/include/csmith", "/usr/local/include/csmith", "/usr/include/csmith-2.3.0"):
        if os.path.isfile(os.path.join(candidate, "csmith.h")):
            return candidate
    raise BenchmarkError("csmith.h not found: install libcsmith-dev (apt-get install libcsmith-dev)")


def _llvm_stress(seed: int) -> Benchmark:
    tool = find_tool("llvm-stress")
    out = _benchmark_cache() / f"llvm-stress-{seed}.ll"
    if not out.exists():
        part = out.with_suffix(f".{os.getpid()}.part")
        result = subprocess.run(
            [tool, "-seed", str(seed), "-size", "200", "-o", str(part)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise BenchmarkError(
                f"generator://llvm-stress-v0/{seed}: llvm-stress failed: {result.stderr[:200]}"
            )
        os.replace(part, out)
    return Benchmark(f"generator://llvm-stress-v0/{seed}", out)


def _seed(uri: str, text: str) -> int:
    if not text.isdigit():
        raise BenchmarkError(f"{uri}: the seed must be a non-negative integer")
    return int(text)


def _user_file(uri: str, path: Path) -> Benchmark:
    if path.is_dir():
        raise BenchmarkError(f"{uri}: is a directory; give a .c, .ll or .bc file")
    if not path.is_file():
        raise BenchmarkError(f"{uri}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".c":
        source = path.read_bytes()
        bitcode = _compile_c(source, path.stem, shown=str(path))
        return Benchmark(
            uri,
            bitcode,
            source=path,
            runnable=defines_main(source),
            compile_command=compile_command(path, str(bitcode)),
        )
    if suffix in (".ll", ".bc"):
        return Benchmark(uri, path)
    raise BenchmarkError(f"{uri}: expected a .c, .ll or .bc file")


#: The short form of a dataset's URI: ``DATASET-vN/`` then the benchmark (``cbench-v1/crc32``).
_SHORT_FORM = re.compile(r"[A-Za-z][\w.-]*-v\d+/")


def _unknown_dataset(text: str) -> BenchmarkError:
    return BenchmarkError(
        f"{text}: unknown dataset (expected benchmark://perftune-v0/NAME, generator://csmith-v0/SEED, "
        "generator://llvm-stress-v0/SEED or a .c/.ll/.bc file)"
    )


def get_benchmark(uri: str | Benchmark | os.PathLike[str]) -> Benchmark:
    """Resolves a benchmark URI (see the module docstring), compiling or generating it if needed.

    Raises:
        BenchmarkError: Unknown dataset or program, bad seed, missing file, compile failure.
        ToolMissingError: clang-14, csmith or llvm-stress-14 is not installed.
    """
    if isinstance(uri, Benchmark):
        return uri
    text = os.fspath(uri)
    if not text.strip():
        raise BenchmarkError("the benchmark is empty: expected a benchmark URI or a .c/.ll/.bc file")
    for short in ("perftune-v0/", "csmith-v0/", "llvm-stress-v0/"):
        if text.startswith(short) and not os.path.exists(text):
            scheme = "benchmark" if short == "perftune-v0/" else "generator"
            text = f"{scheme}://{text}"
    if "://" not in text:
        if _SHORT_FORM.match(text) and not os.path.exists(text) and not os.path.isdir(text.partition("/")[0]):
            # Another dataset's short form (CompilerGym's cbench-v1/crc32), not a file: a folder of
            # that name would make it a path, and then "no such file" is the right answer.
            raise _unknown_dataset(text)
        return _user_file(text, Path(text))
    parsed = urlparse(text)
    dataset, _, rest = (parsed.netloc + parsed.path).partition("/")
    if parsed.scheme == "file":
        return _user_file(text, Path(unquote(parsed.path)))
    if parsed.scheme == "benchmark" and dataset == "perftune-v0":
        # Only a program's own name: "../x" or "a/b" must not reach the file system or the cache.
        source = _bundled_source(rest) if rest in BUNDLED_PROGRAMS else None
        if source is None:
            known = ", ".join(n for n in BUNDLED_PROGRAMS if _bundled_source(n) is not None)
            raise BenchmarkError(f"{text}: unknown program {rest!r} (perftune-v0 has: {known})")
        bitcode = _compile_c(source.read_bytes(), rest)
        return Benchmark(
            text,
            bitcode,
            source=source,
            runnable=True,
            run_args=BUNDLED_PROGRAMS[rest],
            compile_command=compile_command(source, str(bitcode)),
        )
    if parsed.scheme == "generator" and dataset == "csmith-v0":
        return _csmith(_seed(text, rest))
    if parsed.scheme == "generator" and dataset == "llvm-stress-v0":
        return _llvm_stress(_seed(text, rest))
    raise _unknown_dataset(text)
