from __future__ import annotations

import os
import signal
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import perftune.gym  # noqa: F401 - registers the ids
from perftune.targets.llvm import ACTIONS, ActionError, BenchmarkError, LlvmEnv, LlvmError, StepError
from perftune.targets.llvm._env import AUTOPHASE_NAMES, OBSERVATION_SPACES, opt_program
from perftune.targets.llvm._ir import INSTCOUNT_NAMES

CRC = "benchmark://perftune-v0/crc32"


@pytest.fixture()
def env(loop_ll):  # type: ignore[no-untyped-def]
    e = gymnasium.make("perftune/llvm-ic-v0", benchmark=CRC)
    yield e
    e.close()


def test_ids_are_registered_and_make_returns_the_env_itself() -> None:
    for env_id in (
        "perftune/llvm-v0",
        "perftune/llvm-ic-v0",
        "perftune/llvm-codesize-v0",
        "perftune/llvm-runtime-v0",
    ):
        assert env_id in gymnasium.registry
    e = gymnasium.make("perftune/llvm-v0")
    try:
        assert isinstance(e, LlvmEnv)
        assert e.reward_space_name == "IrInstructionCount"
    finally:
        e.close()


def test_episode_reward_is_compilergyms_ir_instruction_count_oz(env: LlvmEnv) -> None:
    obs, info = env.reset()
    assert env.observation_space.contains(obs) and obs.shape == (len(AUTOPHASE_NAMES),)
    c0, coz = info["instruction_count"], info["instruction_count_oz"]
    assert coz < c0
    total = 0.0
    for flag in ("-mem2reg", "-sroa", "-instcombine", "-simplifycfg", "-gvn", "-adce"):
        obs, reward, terminated, truncated, info = env.step(env.action_space.from_string(flag))
        assert not terminated and not truncated
        assert env.observation_space.contains(obs)
        total += reward
    c = info["instruction_count"]
    assert total == pytest.approx((c0 - c) / max(c0 - coz, 1))
    assert env.episode_reward == pytest.approx(total)
    assert env.actions == [
        env.action_space.from_string(f)
        for f in ("-mem2reg", "-sroa", "-instcombine", "-simplifycfg", "-gvn", "-adce")
    ]


def test_multistep_equals_steps_and_fork_is_independent(env: LlvmEnv) -> None:
    actions = [env.action_space.from_string(f) for f in ("-mem2reg", "-inline", "-instcombine")]
    env.reset()
    _, reward, *_ = env.multistep(actions)
    after = env.instruction_count
    env.reset()
    rewards = [env.step(a)[1] for a in actions]
    assert env.instruction_count == after and sum(rewards) == pytest.approx(reward)
    fork = env.fork()
    try:
        assert fork.instruction_count == after and fork.actions == env.actions
        fork.step(fork.action_space.from_string("-simplifycfg"))
        assert env.instruction_count == after  # the original is untouched
        assert fork.episode_reward >= env.episode_reward - 1e-12
        assert fork.validate(run=False).ok
    finally:
        fork.close()


def test_observations(env: LlvmEnv) -> None:
    env.reset(benchmark=CRC)
    ic = env.observation["InstCount"]
    assert ic.shape == (len(INSTCOUNT_NAMES),) and ic[0] == env.instruction_count
    assert env.observation["IrInstructionCount"] == env.instruction_count
    assert env.observation["IrInstructionCountOz"] < env.instruction_count
    assert "define" in env.observation["Ir"]
    features = env.observation["AutophaseDict"]
    assert features["TotalInsts"] == env.instruction_count
    assert env.observation["ObjectTextSizeBytes"] > env.observation["ObjectTextSizeOz"] > 0
    for name in OBSERVATION_SPACES:
        if name != "Runtime":
            assert OBSERVATION_SPACES[name].contains(env.observation[name]), name


def test_validate_replays_with_opt_and_runs_the_program(env: LlvmEnv) -> None:
    env.reset()
    env.multistep([env.action_space.from_string(f) for f in ("-mem2reg", "-inline", "-gvn", "-loop-unroll")])
    result = env.validate()
    assert result.ok, result.errors
    assert result.output_checked
    assert result.replayed_instruction_count == env.instruction_count
    assert result.commandline.startswith(f"{opt_program()} -passes='function(mem2reg),cgscc(inline)")
    assert opt_program().split("/")[-1].startswith("opt")


def test_codesize_reward_telescopes() -> None:
    e = gymnasium.make("perftune/llvm-codesize-v0", benchmark=CRC)
    try:
        e.reset()
        total = sum(
            e.step(e.action_space.from_string(f))[1] for f in ("-mem2reg", "-instcombine", "-simplifycfg")
        )
        size0, size_oz = e._baselines.text_o0, e._baselines.text_oz  # type: ignore[attr-defined]
        size = e.observation["ObjectTextSizeBytes"]
        assert total == pytest.approx((size0 - size) / max(size0 - size_oz, 1))
    finally:
        e.close()


def test_bad_input_gives_clear_errors_and_the_env_stays_usable(env: LlvmEnv, tmp_path: Path) -> None:
    with pytest.raises(StepError, match="before reset"):
        LlvmEnv(CRC).step(0)
    env.reset()
    with pytest.raises(ActionError, match="invalid action"):
        env.step(len(ACTIONS))
    with pytest.raises(ActionError, match="no LLVM 14 counterpart"):
        env.step("-prune-eh")
    with pytest.raises(BenchmarkError, match="unknown dataset"):
        env.reset(benchmark="benchmark://cbench-v1/qsort")
    bad = tmp_path / "broken.ll"
    bad.write_text("this is not IR\n")
    with pytest.raises(BenchmarkError, match="cannot parse"):
        env.reset(benchmark=str(bad))
    obs, info = env.reset(benchmark=CRC)  # still usable
    assert env.step(0)[2] is False


def test_crash_ends_the_episode_with_the_error_in_info_and_env_recovers(env: LlvmEnv) -> None:
    env.reset()
    env.step(env.action_space.from_string("-mem2reg"))
    before = env.instruction_count
    os.kill(env._engine._proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    obs, reward, terminated, truncated, info = env.step(env.action_space.from_string("-instcombine"))
    assert terminated and "crashed" in info["error"] and reward == 0.0
    assert env.instruction_count == before
    with pytest.raises(StepError, match="after the episode ended"):
        env.step(0)
    env.reset()
    assert env.step(env.action_space.from_string("-mem2reg"))[2] is False


def test_options_benchmark_and_seed(env: LlvmEnv, loop_c: Path) -> None:
    obs, info = env.reset(seed=3, options={"benchmark": str(loop_c)})
    assert info["benchmark"] == str(loop_c)
    a = env.action_space.sample()
    env.reset(seed=3)
    assert env.action_space.sample() == a
    assert isinstance(obs, np.ndarray)


def test_gymnasium_env_checker_passes() -> None:
    from gymnasium.utils.env_checker import check_env

    e = LlvmEnv(CRC)
    try:
        check_env(e, skip_render_check=True)
    finally:
        e.close()


def test_opt_engine_env_matches_helper_env() -> None:
    a, b = (
        LlvmEnv(CRC, engine="helper", observation_space="InstCount"),
        LlvmEnv(CRC, engine="opt", observation_space="InstCount"),
    )
    try:
        a.reset()
        b.reset()
        for flag in ("-mem2reg", "-inline", "-instcombine", "-licm"):
            oa, ra, *_ = a.step(flag)
            ob, rb, *_ = b.step(flag)
            assert ra == rb and (oa == ob).all()
    finally:
        a.close()
        b.close()


def test_chain_command_line_reproduces_the_steps(env: LlvmEnv, tmp_path: Path) -> None:
    import subprocess

    from perftune.targets.llvm._ir import count_instructions
    from perftune.targets.llvm._tools import find_tool
    from perftune.targets.llvm._validate import opt_chain_commandline

    env.reset()
    env.multistep(["-mem2reg", "-sancov", "-instcombine", "-sancov", "-simplifycfg"])
    out = tmp_path / "out.bc"
    command = opt_chain_commandline(env.actions, str(env.benchmark.bitcode), str(out))
    opt = find_tool("opt")
    subprocess.run(["bash", "-c", command], check=True)
    text = subprocess.run(
        [opt, "-passes=verify", str(out), "-S", "-o", "-"], capture_output=True, text=True, check=True
    ).stdout
    assert count_instructions(text) == env.instruction_count


def test_opt_engine_refuses_autophase_at_construction_and_runs_with_another_observation() -> None:
    for env_id in perftune.gym.ENV_IDS:  # every registered id defaults to Autophase
        with pytest.raises(LlvmError, match=r"'Autophase' needs engine='helper', not engine='opt'"):
            gymnasium.make(env_id, engine="opt")
    e = gymnasium.make("perftune/llvm-ic-v0", engine="opt", observation_space="InstCount")
    try:
        with pytest.raises(LlvmError, match="'Autophase' needs engine='helper'"):
            e.observation_space = "Autophase"
        obs, info = e.reset(benchmark=CRC)
        assert obs.shape == (len(INSTCOUNT_NAMES),) and info["instruction_count"] > 0
    finally:
        e.close()


def test_a_reset_that_fails_leaves_no_episode_to_step(env: LlvmEnv, tmp_path: Path) -> None:
    library = tmp_path / "lib.ll"  # no main: not runnable, so a Runtime observation fails
    library.write_text("define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n")
    env.reset()
    env.step("-mem2reg")
    env.observation_space = "Runtime"
    with pytest.raises(LlvmError, match="not runnable"):
        env.reset(benchmark=str(library))
    with pytest.raises(StepError, match="after the episode ended"):
        env.step(0)


def test_after_choosing_the_next_benchmark_the_episode_still_describes_its_module(env: LlvmEnv) -> None:
    env.reset()
    env.multistep(["-mem2reg", "-instcombine"])
    crc32_bitcode = str(env.benchmark.bitcode)
    count = env.instruction_count
    env.benchmark = "benchmark://perftune-v0/sieve"  # for the next reset
    assert crc32_bitcode in env.commandline()
    assert env.validate().ok
    fork = env.fork()
    try:
        assert fork.instruction_count == count
        assert crc32_bitcode in fork.commandline() and fork.validate().ok
        assert fork.reset()[1]["benchmark"] == "benchmark://perftune-v0/sieve"  # the choice is kept
    finally:
        fork.close()
    assert env.reset()[1]["benchmark"] == "benchmark://perftune-v0/sieve"


def test_reset_reloads_a_module_file_rewritten_on_disk(env: LlvmEnv, tmp_path: Path) -> None:
    path = tmp_path / "user.ll"
    path.write_text("define i32 @f(i32 %x) {\n  ret i32 %x\n}\n")
    assert env.reset(benchmark=str(path))[1]["instruction_count"] == 1
    path.write_text("define i32 @f(i32 %x) {\n  %a = add i32 %x, 1\n  %b = mul i32 %a, 3\n  ret i32 %b\n}\n")
    assert env.reset(benchmark=str(path))[1]["instruction_count"] == 3
    assert env.reset()[1]["instruction_count"] == 3
    env.step("-instcombine")
    assert env.validate(run=False).ok


def test_reset_works_after_the_helper_died_between_episodes(env: LlvmEnv) -> None:
    env.reset()
    env.step("-mem2reg")
    os.kill(env._engine._proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    env._engine._proc.wait()  # type: ignore[attr-defined]
    obs, info = env.reset()
    assert info["instruction_count"] == 333 and env.step("-mem2reg")[2] is False


def test_a_failed_reset_with_a_new_benchmark_keeps_the_previous_one(env: LlvmEnv, tmp_path: Path) -> None:
    bad = tmp_path / "broken.ll"
    bad.write_text("this is not IR\n")
    env.reset()
    with pytest.raises(BenchmarkError, match="cannot parse"):
        env.reset(benchmark=str(bad))
    assert env.benchmark.uri == CRC
    assert env.reset()[1]["benchmark"] == CRC


@pytest.mark.parametrize("engine", ["helper", "opt"])
def test_a_bc_file_that_is_not_bitcode_gets_a_one_line_error(tmp_path: Path, engine: str) -> None:
    garbage = tmp_path / "garbage.bc"
    garbage.write_bytes(b"\x00\x01garbage\xff\xfe\n\x07more\n")
    e = LlvmEnv(CRC, engine=engine, observation_space="InstCount")
    try:
        with pytest.raises(BenchmarkError) as info:
            e.reset(benchmark=str(garbage))
    finally:
        e.close()
    message = str(info.value)
    assert "not LLVM bitcode" in message and message.isprintable() and "\n" not in message


def test_terminated_async_workers_leave_no_temporary_folders(tmp_path: Path, monkeypatch) -> None:
    import tempfile
    import time

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # for workers that start afresh ...
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # ... and forked ones
    venv = gymnasium.make_vec("perftune/llvm-ic-v0", num_envs=2, vectorization_mode="async")
    venv.reset(seed=1)
    venv.step(venv.action_space.sample())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("perftune-llvm-")]
    venv.close(terminate=True)
    deadline = time.monotonic() + 10
    while any(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p.name for p in tmp_path.iterdir()] == []
