"""Building, checking and timing candidates: wrong output, rejected flags and compiler crashes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from perftune.targets.flags import Evaluator, Program, bundled, compare_outputs, discover

DATA = Path(__file__).resolve().parent / "data"


def test_compare_outputs_exact_and_with_tolerance() -> None:
    assert compare_outputs("a 1\nb 2\n", "a 1\nb 2\n") is None
    assert compare_outputs("sum 1.000000001", "sum 1.000000002") is not None
    assert compare_outputs("sum 1.000000001", "sum 1.000000002", rel_tol=1e-6) is None
    assert compare_outputs("sum 1.0", "sum 1.1", rel_tol=1e-6) is not None
    assert compare_outputs("ok 1.0", "bad 1.0", rel_tol=1e-6) is not None
    assert compare_outputs("1 2", "1 2 3") is not None


def _kahan(info, tmp_path):  # type: ignore[no-untyped-def]
    program = Program(sources=(str(DATA / "kahan.c"),), run_args=("20000", "3"))
    return Evaluator(program, info)


def test_output_change_is_wrong_output(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ev = _kahan(gcc_info, tmp_path)
    ev.set_reference(["-O2"])
    assert ev.measure(["-O3"]).ok
    fast = ev.measure(["-O3", "-ffast-math"])
    assert fast.status == "wrong-output" and "differs from the -O2 build" in (fast.reason or "")
    assert fast.value is None


def test_rejected_flag_is_recorded_and_avoided(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.targets.flags import FlagInfo

    bogus = FlagInfo("-fperftune-no-such-pass", "bool", (), "disabled")
    info = dataclasses.replace(gcc_info, flags=(*gcc_info.flags, bogus), rejected=dict(gcc_info.rejected))
    ev = _kahan(info, tmp_path)
    ev.set_reference(["-O2"])
    first = ev.measure(["-O3", "-fperftune-no-such-pass"])
    assert first.status == "rejected" and "-fperftune-no-such-pass" in (first.reason or "")
    assert "-fperftune-no-such-pass" in info.rejected
    builds = ev.n_builds
    again = ev.measure(["-O3", "-funroll-loops", "-fperftune-no-such-pass"])
    assert again.status == "rejected" and (again.reason or "").startswith("avoided")
    assert ev.n_builds == builds  # not compiled again
    # A later discovery of the same compiler leaves it out (the cache remembers the rejection).
    assert "-fperftune-no-such-pass" in discover("gcc").rejected


def test_compiler_crash_is_recorded(flags_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    info = discover(str(DATA / "crashing-gcc.sh"))
    assert info.flag("-funroll-all-loops") is not None  # the probe did not see the crash
    ev = _kahan(info, tmp_path)
    ev.set_reference(["-O2"])
    crash = ev.measure(["-O3", "-funroll-all-loops"])
    assert crash.status == "compiler-crash" and "internal compiler error" in (crash.reason or "")
    assert ev.measure(["-O3", "-funroll-loops"]).ok


def test_identical_binaries_are_measured_once(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["hashsort"]
    ev = Evaluator(Program(sources=(str(prog.source),), run_args=prog.small_args), gcc_info)
    ev.set_reference(["-O2"])
    a = ev.measure(["-O3"])
    b = ev.measure(["-O3", "-fpeel-loops"])  # already on at -O3: the same binary
    assert a.ok and b.ok and b.cached and a.binary_hash == b.binary_hash and a.value == b.value


def test_every_bundled_program_builds_and_agrees_with_O2(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    programs = bundled()
    assert len(programs) >= 6
    for prog in programs.values():
        ev = Evaluator(
            Program(sources=(str(prog.source),), run_args=prog.small_args, rel_tol=prog.rel_tol),
            gcc_info,
        )
        ev.set_reference(["-O2"])
        assert ev.reference and ev.reference.strip()
        m = ev.measure(["-O3", "-march=native"], n_runs=1)
        assert m.ok, (prog.name, m.reason)


def test_cpu_clock_times_runs_by_cpu_time(gcc_info) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["graph"]
    ev = Evaluator(Program(sources=(str(prog.source),), run_args=prog.small_args, clock="cpu"), gcc_info)
    ev.set_reference(["-O2"])
    m = ev.measure(["-O3"], n_runs=2)
    assert m.ok and m.value is not None and m.value > 0 and len(m.samples) == 2


def test_a_program_in_a_private_folder_runs_as_root_with_its_input(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Root working in a 0700 folder (/root, mktemp -d): runs start in a read-only copy of the folder,
    with the input the run names, instead of failing before exec."""
    import os

    import pytest

    if os.geteuid() != 0:
        pytest.skip("as non-root, candidates run as perftune's own user and reach the folder")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "sum.c").write_text(
        '#include <stdio.h>\nint main(int c, char **v) { FILE *f = fopen(v[1], "r"); long s = 0, x;\n'
        '  if (!f) return 3; while (fscanf(f, "%ld", &x) == 1) s += x; printf("%ld\\n", s); return 0; }\n'
    )
    (private / "numbers.txt").write_text("1 2 3 4\n")
    (private / "secret.txt").write_text("root only\n")
    os.chmod(private / "secret.txt", 0o600)
    program = Program(sources=("sum.c",), run_args=("numbers.txt",), cwd=str(private))
    ev = Evaluator(program, gcc_info)
    ev.set_reference(["-O2"])
    assert ev.reference is not None and ev.reference.strip() == "10"
    assert ev.measure(["-O3"]).ok
    # The copy keeps file modes: what the candidate could not read in place it cannot read there.
    copy = ev.run_sandbox.reachable(str(private), needed=program.run_args)
    assert copy != str(private)
    assert os.stat(os.path.join(copy, "secret.txt")).st_mode & 0o777 == 0o600


def test_each_failure_kind_maps_to_one_trial_status() -> None:
    from perftune.targets.flags._evaluate import Measurement
    from perftune.trial import Status

    assert Measurement("ok", value=1.0).trial_status is Status.OK
    assert Measurement("timeout").trial_status is Status.TIMEOUT
    assert Measurement("cancelled").trial_status is Status.CANCELLED
    for kind in ("compile-error", "compiler-crash", "rejected", "run-error", "wrong-output"):
        assert Measurement(kind).trial_status is Status.FAILED, kind


# ------------------------------------------------------------------ what the output check covers


def _program(tmp_path, name: str, body: str, **kw):  # type: ignore[no-untyped-def]
    source = tmp_path / name
    source.write_text("#include <stdio.h>\n#include <time.h>\n" + body)
    return Program(sources=(str(source),), **kw)


# ~4.8 MB of numbers; with -DBAD one line 4.4 MB in (past the 4 MiB kept as text, before the last 64 KiB).
_BIG_OUTPUT = """int main(void) {
    for (long i = 0; i < 700000; i++) {
        long v = i;
#ifdef BAD
        if (i == 650000) v = -1;
#endif
        printf("%ld\\n", v);
    }
    return 0;
}
"""


def test_a_difference_past_the_first_4_mib_of_stdout_is_wrong_output(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ev = Evaluator(_program(tmp_path, "big.c", _BIG_OUTPUT), gcc_info)
    ev.set_reference(["-O2"])
    assert ev.measure(["-O3"], n_runs=1).ok
    bad = ev.measure(["-O3", "-DBAD"], n_runs=1)
    assert bad.status == "wrong-output", bad.reason
    assert "after its first 4 MiB" in (bad.reason or "")


def test_more_than_4_mib_of_stdout_with_a_tolerance_is_refused_in_one_line(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from perftune.errors import PerftuneError

    ev = Evaluator(_program(tmp_path, "big.c", _BIG_OUTPUT, rel_tol=1e-9), gcc_info)
    with pytest.raises(PerftuneError) as err:
        ev.set_reference(["-O2"])
    message = str(err.value)
    assert "\n" not in message and "more than 4 MiB" in message and "tolerance" in message


_STDERR_RESULT = """int main(void) {
    long s = 0;
    for (long i = 0; i < 1000; i++) s += i * i % 7;
#ifdef BAD
    s += 1;
#endif
    fprintf(stderr, "sum %ld\\n", s);
    return 0;
}
"""


def test_a_result_printed_on_stderr_is_checked(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ev = Evaluator(_program(tmp_path, "err.c", _STDERR_RESULT), gcc_info)
    ev.set_reference(["-O2"])
    assert ev.check_stderr and ev.warnings == []
    assert ev.measure(["-O3"], n_runs=1).ok
    bad = ev.measure(["-O3", "-DBAD"], n_runs=1)
    assert bad.status == "wrong-output" and "stderr" in (bad.reason or ""), bad.reason


def test_a_stderr_that_changes_from_run_to_run_is_not_checked_and_said(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    body = """int main(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    printf("42\\n");
    fprintf(stderr, "took %ld ns\\n", (long)t.tv_nsec);
    return 0;
}
"""
    ev = Evaluator(_program(tmp_path, "timed.c", body), gcc_info)
    ev.set_reference(["-O2"])
    assert not ev.check_stderr
    assert len(ev.warnings) == 1
    assert "stderr" in ev.warnings[0] and "changes from run to run" in ev.warnings[0]
    assert ev.measure(["-O3"], n_runs=1).ok


def test_a_program_printing_nothing_is_said_to_be_checked_by_its_exit_code_only(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ev = Evaluator(_program(tmp_path, "quiet.c", "int main(void) { return 0; }\n"), gcc_info)
    ev.set_reference(["-O2"])  # not an error
    assert len(ev.warnings) == 1 and "prints nothing" in ev.warnings[0] and "exit code" in ev.warnings[0]


def test_the_warnings_of_the_reference_reach_the_result(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.targets.flags import tune_flags

    quiet = tmp_path / "quiet.c"
    quiet.write_text("int main(void) { return 0; }\n")
    result = tune_flags([str(quiet)], "", budget=2, info=gcc_info, confirm_runs=2, include_params=False,
                        reduce=False)
    assert any("prints nothing" in note for note in result.notes)


def test_an_infinity_matches_only_the_same_infinity_and_nan_only_nan() -> None:
    for reference, output in (("inf", "-inf"), ("inf", "0"), ("-inf", "12345"),
                              ("result inf", "result 1e-300"), ("1.5", "nan"), ("nan", "1.5"),
                              ("x inf", "x nan")):
        assert compare_outputs(reference, output, rel_tol=1e-6) is not None, (reference, output)
        assert compare_outputs(reference, output, abs_tol=1e300) is not None, (reference, output)
    assert compare_outputs("inf -inf nan", "inf -inf nan", rel_tol=1e-6) is None
    assert compare_outputs("x inf", "x INF", rel_tol=1e-6) is None
    assert compare_outputs("x nan", "x -nan", rel_tol=1e-6) is None  # glibc prints -nan for some NaNs


def test_a_tolerance_applies_to_numbers_glued_to_text_or_punctuation() -> None:
    for reference, output in (("sum=1.0000001", "sum=1.0000002"),
                              ("(1.0000001, 2.0)", "(1.0000002, 2.0)"),
                              ("1.0000001s", "1.0000002s"), ("sum 1.0000001", "sum 1.0000002")):
        assert compare_outputs(reference, output, rel_tol=1e-5) is None, (reference, output)
        assert compare_outputs(reference, output) is not None  # exact
    assert compare_outputs("sum=1.0", "sum=1.1", rel_tol=1e-5) is not None  # beyond the tolerance
    assert compare_outputs("sum=1.0", "total=1.0", rel_tol=1e-5) is not None  # the text differs
    assert compare_outputs("a=1,b=2", "a=1,b=2,c=3", rel_tol=1e-5) is not None
    assert compare_outputs("banana", "banana", rel_tol=1e-5) is None
