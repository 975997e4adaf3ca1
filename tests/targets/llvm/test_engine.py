from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from perftune.targets.llvm import ACTIONS, EngineCrash, HelperEngine, OptEngine, action_index
from perftune.targets.llvm._engine import PipelineError, elf_text_size
from perftune.targets.llvm._ir import count_instructions, opcode_counts


def _random_actions(seed: int, n: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(a) for a in rng.integers(len(ACTIONS), size=n)]


@pytest.mark.parametrize("which", ["loop", "csmith"])
def test_helper_and_opt_fallback_give_identical_counts(
    helper, loop_ll: Path, csmith_bench, which: str
) -> None:  # type: ignore[no-untyped-def]
    path = loop_ll if which == "loop" else csmith_bench.bitcode
    opt = OptEngine()
    try:
        assert helper.load(path) == opt.load(path)
        # mem2reg first so that the later passes have real work to do
        actions = [action_index("-mem2reg")] + _random_actions(7, 14)
        for a in actions:
            assert helper.apply(ACTIONS[a].pipeline) == opt.apply(ACTIONS[a].pipeline), ACTIONS[a].flag
        assert helper.instcount() == opt.instcount()
        assert helper.trial("default<Oz>") == opt.trial("default<Oz>")
    finally:
        opt.close()


def test_text_counting_matches_llvm(helper, csmith_bench) -> None:  # type: ignore[no-untyped-def]
    helper.load(csmith_bench.bitcode)
    for pipeline in ["verify", "function(mem2reg)", "function(simplifycfg),function(reg2mem)", "default<O2>"]:
        helper.reset()
        count = helper.apply(pipeline)
        ir = helper.ir()
        assert count_instructions(ir) == count
        counts = opcode_counts(ir)
        assert counts == helper.instcount()
        assert counts["TotalInsts"] == count


def test_trial_save_restore_reset(helper, loop_ll: Path) -> None:  # type: ignore[no-untyped-def]
    start = helper.load(loop_ll)
    oz = helper.trial("default<Oz>")
    assert oz < start and helper.count() == start  # trial leaves the module alone
    after = helper.apply("function(mem2reg)")
    helper.save("a")
    helper.mem_save("m")
    helper.apply("function(instcombine)")
    assert helper.restore("a") == after
    helper.apply("function(instcombine)")
    assert helper.mem_restore("m") == after
    assert helper.reset() == start


def test_bad_pipeline_is_a_clear_error_and_the_engine_stays_usable(helper, loop_ll: Path) -> None:  # type: ignore[no-untyped-def]
    start = helper.load(loop_ll)
    with pytest.raises(PipelineError, match="unknown function pass 'frobnicate'"):
        helper.apply("function(frobnicate)")
    assert helper.count() == start


def test_crashed_helper_is_restarted_with_the_module_as_before(loop_ll: Path) -> None:
    engine = HelperEngine()
    try:
        engine.load(loop_ll)
        before = engine.apply("function(mem2reg)")
        pid = engine._proc.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGSEGV)  # what a crashing pass does to the process
        with pytest.raises(EngineCrash, match="crashed"):
            engine.apply("function(instcombine)")
        assert engine._proc.pid != pid  # type: ignore[union-attr]
        assert engine.count() == before  # state rebuilt from the initial module and the history
        assert engine.apply("default<Oz>") < before  # and usable
    finally:
        engine.close()


def test_hanging_pass_times_out_and_the_helper_is_restarted(csmith_bench) -> None:  # type: ignore[no-untyped-def]
    engine = HelperEngine(timeout_s=30)
    try:
        start = engine.load(csmith_bench.bitcode)
        engine.timeout_s = 1e-4  # nothing finishes that fast: the helper is treated as hung
        with pytest.raises(EngineCrash, match="timed out"):
            engine.apply("default<O3>")
        engine.timeout_s = 30
        assert engine.count() == start
    finally:
        engine.close()


def test_missing_file_and_unparsable_ir(helper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from perftune.targets.llvm import BenchmarkError

    bad = tmp_path / "bad.ll"
    bad.write_text("define i32 @f( {\n")
    with pytest.raises(BenchmarkError, match="cannot parse"):
        helper.load(bad)
    with pytest.raises(BenchmarkError, match="cannot parse"):
        OptEngine().load(bad)


def test_object_text_size_agrees_between_engines(helper, loop_ll: Path) -> None:  # type: ignore[no-untyped-def]
    opt = OptEngine()
    try:
        helper.load(loop_ll)
        opt.load(loop_ll)
        assert helper.text_size() == opt.text_size() > 0
        assert helper.text_size("default<Oz>") < helper.text_size()
    finally:
        opt.close()
    with pytest.raises(Exception, match="ELF"):
        elf_text_size(b"not an object")


def test_an_opt_engine_never_closed_leaves_no_folder_behind() -> None:
    import gc

    engine = OptEngine()
    folder = engine._dir
    assert folder.is_dir()
    del engine
    gc.collect()
    assert not folder.exists()
    closed = OptEngine()
    closed.close()
    closed.close()  # twice is fine
    assert not closed._dir.exists()


def test_opt_engine_steps_through_bitcode_that_llvm_14_rereads() -> None:
    # Through text IR with -preserve-ll-uselistorder, LLVM 14 could not re-read this module after
    # -loop-unroll-and-jam ("wrong number of indexes"): the opt engine's episode ended, the helper's did not.
    from perftune.targets.llvm import get_benchmark

    bench = get_benchmark("generator://llvm-stress-v0/3")
    helper, opt = HelperEngine(), OptEngine()
    try:
        assert helper.load(bench.bitcode) == opt.load(bench.bitcode)
        for flag in ("-coro-elide", "-loop-unroll-and-jam", "-simple-loop-unswitch"):
            pipeline = ACTIONS[action_index(flag)].pipeline
            assert opt.apply(pipeline) == helper.apply(pipeline)
        assert opt.instcount() == helper.instcount()
    finally:
        helper.close()
        opt.close()


def test_opt_engine_object_size_leaves_no_files(loop_ll: Path) -> None:
    engine = OptEngine()
    try:
        engine.load(loop_ll)
        before = sorted(os.listdir(engine._dir))
        assert engine.text_size() > 0 and engine.text_size("default<Oz>") > 0
        assert sorted(os.listdir(engine._dir)) == before
    finally:
        engine.close()
