"""Fixtures of the LLVM target tests: small modules, tool checks, a shared helper engine."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

LOOP_C = r"""
#include <stdio.h>
static int square(int x) { return x * x; }
int table[100];
int main(void) {
    int s = 0;
    for (int i = 0; i < 100; i++) {
        table[i] = square(i);
        for (int j = 0; j < i; j++) s += table[j] % 7;
    }
    switch (s & 3) { case 0: s++; break; case 1: s--; break; default: s *= 2; }
    printf("%d\n", s);
    return 0;
}
"""


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install clang-14 llvm-14-dev csmith libcsmith-dev)")


@pytest.fixture(scope="session")
def loop_c(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llvm") / "loop.c"
    path.write_text(LOOP_C)
    return path


@pytest.fixture(scope="session")
def loop_ll(loop_c: Path) -> Path:
    _need("clang-14")
    out = loop_c.with_suffix(".ll")
    subprocess.run(
        [
            "clang-14",
            "-S",
            "-emit-llvm",
            "-O1",
            "-Xclang",
            "-disable-llvm-passes",
            str(loop_c),
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


@pytest.fixture(scope="session")
def csmith_bench():  # type: ignore[no-untyped-def]
    _need("csmith", "clang-14")
    from perftune.targets.llvm import get_benchmark

    return get_benchmark("generator://csmith-v0/1")


@pytest.fixture(scope="session")
def helper() -> Iterator[object]:
    _need("llvm-config-14", "opt-14")
    from perftune.targets.llvm import HelperEngine

    engine = HelperEngine()
    yield engine
    engine.close()
