from __future__ import annotations

from pathlib import Path

import pytest

from perftune.targets.llvm import BenchmarkError, ToolMissingError, bundled_uris, get_benchmark
from perftune.targets.llvm._tools import find_tool


def test_bundled_suite_has_own_and_flag_target_programs() -> None:
    uris = bundled_uris()
    for name in ("crc32", "nbody", "sieve", "strsearch"):
        assert f"benchmark://perftune-v0/{name}" in uris
    bench = get_benchmark("perftune-v0/sieve")  # short form
    assert bench.uri == "benchmark://perftune-v0/sieve" and bench.runnable and bench.bitcode.exists()
    assert bench.compile_command is not None and "-disable-llvm-passes" in bench.compile_command


def test_csmith_is_compiled_like_compilergym(helper) -> None:  # type: ignore[no-untyped-def]
    bench = get_benchmark("generator://csmith-v0/2")
    assert bench.runnable and bench.source is not None and "csmith" in bench.source.read_text()[:400].lower()
    # -O1 -disable-llvm-passes: unoptimised but without optnone, so passes (and inlining) apply
    start = helper.load(bench.bitcode)
    assert helper.trial("cgscc(inline)") != start
    assert get_benchmark("csmith-v0/2").bitcode == bench.bitcode  # cached


def test_llvm_stress(helper) -> None:  # type: ignore[no-untyped-def]
    bench = get_benchmark("generator://llvm-stress-v0/5")
    assert not bench.runnable
    start = helper.load(bench.bitcode)
    assert start > 0 and helper.trial("default<Oz>") <= start


def test_user_files(tmp_path: Path, loop_c: Path, loop_ll: Path) -> None:
    assert get_benchmark(loop_c).runnable
    assert get_benchmark(f"file://{loop_ll}").bitcode == loop_ll
    with pytest.raises(BenchmarkError, match="no such file"):
        get_benchmark(tmp_path / "missing.c")
    with pytest.raises(BenchmarkError, match="expected a .c, .ll or .bc"):
        (tmp_path / "x.txt").write_text("x")
        get_benchmark(tmp_path / "x.txt")
    broken = tmp_path / "broken.c"
    broken.write_text("int main( {")
    # clang's message names the user's file, not the temporary copy that was compiled.
    with pytest.raises(BenchmarkError, match=f"{broken}: clang-14 cannot compile it: {broken}:1:") as info:
        get_benchmark(broken)
    assert "perftune-cc-" not in str(info.value)
    with pytest.raises(BenchmarkError, match="is a directory; give a .c, .ll or .bc file"):
        get_benchmark(tmp_path)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("benchmark://perftune-v0/nosuch", "unknown program 'nosuch'"),
        ("generator://csmith-v0/abc", "seed must be a non-negative integer"),
        ("benchmark://cbench-v1/qsort", "unknown dataset"),
    ],
)
def test_bad_uris(uri: str, message: str) -> None:
    with pytest.raises(BenchmarkError, match=message):
        get_benchmark(uri)


def test_missing_tool_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    find_tool.cache_clear()
    monkeypatch.setenv("PERFTUNE_CSMITH", "/nonexistent/csmith")
    try:
        with pytest.raises(ToolMissingError, match="csmith: not found .*apt-get install csmith"):
            find_tool("csmith")
        with pytest.raises(ToolMissingError, match="csmith"):
            get_benchmark("generator://csmith-v0/999999")
    finally:
        find_tool.cache_clear()


def test_only_a_c_file_that_defines_main_is_runnable(tmp_path: Path) -> None:
    from perftune.targets.llvm._datasets import defines_main

    library = tmp_path / "lib.c"
    library.write_text("int domain(int x) { return x * 2; }\n/* int main(void) {} */\n")
    program = tmp_path / "prog.c"
    program.write_text("int domain(int x) { return x * 2; }\nint main(void)\n{ return domain(1) - 2; }\n")
    assert not get_benchmark(str(library)).runnable
    assert get_benchmark(str(program)).runnable
    assert not defines_main(b'int main(void);\nconst char *s = "int main() {}";\nint remaining(int x);\n')
    assert defines_main(b"int main(int argc, char *argv[]) { return 0; }")


def test_a_bundled_name_cannot_leave_the_programs_folder() -> None:
    for uri in ("benchmark://perftune-v0/../programs/crc32", "benchmark://perftune-v0/crc32-passes"):
        with pytest.raises(BenchmarkError, match="unknown program"):
            get_benchmark(uri)


def test_the_compile_command_quotes_paths_with_spaces(tmp_path: Path) -> None:
    import shlex

    source = tmp_path / "with space.c"
    source.write_text("int main(void) { return 0; }\n")
    bench = get_benchmark(str(source))
    assert bench.compile_command is not None
    assert shlex.split(bench.compile_command)[-3:] == [str(source), "-o", str(bench.bitcode)]
