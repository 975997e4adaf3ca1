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
