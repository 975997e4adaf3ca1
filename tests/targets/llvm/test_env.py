from __future__ import annotations

import os
import signal
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import perftune.gym  # noqa: F401 - registers the ids
from perftune.targets.llvm import ACTIONS, ActionError, BenchmarkError, LlvmEnv, StepError
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
