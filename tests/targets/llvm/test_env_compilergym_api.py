"""CompilerGym idioms on ``LlvmEnv``: switching spaces by assigning a name, settings assigned after
creation, and one clear error for misuse (closed environment, bad arguments)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import perftune.gym  # noqa: F401 - registers the ids
from perftune.targets.llvm import BenchmarkError, LlvmEnv, LlvmError, StepError
from perftune.targets.llvm._env import AUTOPHASE_NAMES, OBSERVATION_SPACES
from perftune.targets.llvm._ir import INSTCOUNT_NAMES

CRC = "benchmark://perftune-v0/crc32"


@pytest.fixture()
def env(loop_ll):  # type: ignore[no-untyped-def]
    # loop_ll: skips when clang-14 is missing, as the other environment tests do.
    e = gymnasium.make("perftune/llvm-ic-v0", benchmark=CRC)
    yield e
    e.close()


def test_assigning_an_observation_space_name_switches_what_reset_and_step_return(env: LlvmEnv) -> None:
    obs, _ = env.reset()
    assert obs.shape == (len(AUTOPHASE_NAMES),)
    env.observation_space = "InstCount"
    assert env.observation_space is OBSERVATION_SPACES["InstCount"]
    assert isinstance(env.observation_space, gymnasium.spaces.Box)
    assert env.observation_space_name == "InstCount"
    obs, *_ = env.step("-mem2reg")
    assert obs.shape == (len(INSTCOUNT_NAMES),) and env.observation_space.contains(obs)
    assert obs[0] == env.instruction_count
    obs, _ = env.reset()
    assert obs.shape == (len(INSTCOUNT_NAMES),)
    env.observation_space_name = "IrInstructionCount"
    assert env.observation_space is OBSERVATION_SPACES["IrInstructionCount"]
    assert int(env.step("-sroa")[0]) == env.instruction_count
    # One of the space objects themselves is accepted too (it names itself).
    env.observation_space = OBSERVATION_SPACES["Autophase"]
    assert env.observation_space_name == "Autophase"


def test_an_unknown_observation_space_name_raises_and_changes_nothing(env: LlvmEnv) -> None:
    env.reset()
    expected = "unknown observation space 'Inst2vec': expected one of Ir, InstCount, Autophase"
    with pytest.raises(LlvmError, match=expected):
        env.observation_space = "Inst2vec"
    with pytest.raises(LlvmError, match="unknown observation space"):
        env.observation_space = gymnasium.spaces.Discrete(3)
    with pytest.raises(LlvmError, match="unknown observation space"):
        env.observation_space_name = None
    assert env.observation_space is OBSERVATION_SPACES["Autophase"]
    assert env.step("-mem2reg")[0].shape == (len(AUTOPHASE_NAMES),)


def test_assigning_a_reward_space_name_switches_the_reward_from_the_next_step(env: LlvmEnv) -> None:
    env.reset()
    assert env.reward_space == env.reward_space_name == "IrInstructionCountOz"
    _, r_oz, *_ = env.step("-mem2reg")
    assert 0 < r_oz < 1
    env.reward_space = "IrInstructionCount"
    assert env.reward_space_name == "IrInstructionCount"
    before = env.instruction_count
    _, reward, *_ = env.step("-instcombine")
    assert reward == before - env.instruction_count and reward > 1
    # Switching mid-episode starts the new metric from the current module.
    env.reward_space_name = "ObjectTextSizeBytes"
    size = int(env.observation["ObjectTextSizeBytes"])
    _, reward, *_ = env.step("-simplifycfg")
    assert reward == size - int(env.observation["ObjectTextSizeBytes"])
    with pytest.raises(LlvmError, match="unknown reward space 'Nope': expected one of IrInstructionCountOz"):
        env.reward_space = "Nope"
    assert env.reward_space == "ObjectTextSizeBytes"
    # Between episodes, the next reset starts with the new reward.
    env.reward_space = "IrInstructionCountNorm"
    env.reset()
    c0 = env.instruction_count
    _, reward, *_ = env.step("-mem2reg")
    assert reward == pytest.approx((c0 - env.instruction_count) / c0)


def test_step_timeout_assigned_after_creation_is_used_and_a_short_one_does_not_break_reset(
    env: LlvmEnv,
) -> None:
    env.reset()
    env.step_timeout_s = 1e-6
    assert env.step_timeout_s == 1e-6
    _, reward, terminated, _, info = env.step("-mem2reg")
    assert terminated and "timed out" in info["error"] and reward == 0.0
    env.reset()  # loading the module is not a pass: the short step limit does not apply
    env.step_timeout_s = 60
    assert env.step("-mem2reg")[2] is False


def test_check_env_passes_after_switching_the_observation_space() -> None:
    from gymnasium.utils.env_checker import check_env

    e = LlvmEnv(CRC)
    try:
        e.observation_space = "InstCount"
        check_env(e, skip_render_check=True)
    finally:
        e.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step_timeout_s": -1}, "step_timeout_s must be a positive, finite number of seconds, got -1"),
        ({"step_timeout_s": 0}, "step_timeout_s must be a positive"),
        ({"step_timeout_s": float("nan")}, "step_timeout_s must be a positive"),
        ({"step_timeout_s": float("inf")}, "step_timeout_s must be a positive"),
        ({"step_timeout_s": "5"}, "step_timeout_s must be a number of seconds, got '5'"),
        ({"runtime_repeats": 0}, r"runtime_repeats must be an integer >= 1, got 0"),
        ({"runtime_repeats": 2.5}, r"runtime_repeats must be an integer >= 1, got 2.5"),
        ({"runtime_repeats": True}, r"runtime_repeats must be an integer >= 1"),
        ({"observation_space": "Nope"}, "unknown observation space 'Nope'"),
        ({"reward_space": None}, "unknown reward space None"),
    ],
)
def test_bad_arguments_give_one_clear_error_at_construction(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(LlvmError, match=message):
        LlvmEnv(CRC, **kwargs)
    with pytest.raises(LlvmError, match=message):
        gymnasium.make("perftune/llvm-runtime-v0", **kwargs)  # type: ignore[arg-type]


def test_bad_settings_assigned_later_give_the_same_errors(env: LlvmEnv) -> None:
    with pytest.raises(LlvmError, match="step_timeout_s must be a positive"):
        env.step_timeout_s = -1
    with pytest.raises(LlvmError, match="runtime_repeats must be an integer >= 1"):
        env.runtime_repeats = 0
    assert env.step_timeout_s == 60.0 and env.runtime_repeats == 3


def test_a_benchmark_of_the_wrong_type_gives_one_clear_error(env: LlvmEnv) -> None:
    with pytest.raises(BenchmarkError, match="benchmark must be a benchmark URI, a file path or a Benchmark"):
        LlvmEnv(123)
    with pytest.raises(BenchmarkError, match="got int 123"):
        env.reset(benchmark=123)
    with pytest.raises(BenchmarkError, match="got int 7"):
        env.reset(options={"benchmark": 7})
    assert isinstance(env.reset()[0], np.ndarray)  # still usable


def test_using_the_environment_after_close_raises_a_step_error() -> None:
    e = LlvmEnv(CRC, render_mode="ansi")
    e.reset()
    e.step("-mem2reg")
    e.close()
    e.close()  # closing again is fine
    for call in (
        lambda: e.step(0),
        lambda: e.multistep(["-sroa"]),
        lambda: e.reset(),
        lambda: e.observation["InstCount"],
        lambda: e.render(),
        lambda: e.fork(),
    ):
        with pytest.raises(StepError, match="the environment is closed: create a new one"):
            call()
    assert "mem2reg" in e.commandline()  # needs no engine


def test_render_before_reset_says_to_reset_first() -> None:
    e = LlvmEnv(CRC, render_mode="ansi")
    try:
        with pytest.raises(StepError, match="no episode yet: call reset"):
            e.render()
        e.reset()
        assert "define" in (e.render() or "")
    finally:
        e.close()


def test_max_episode_steps_gives_a_time_limit_wrapper_whose_unwrapped_is_the_env() -> None:
    w = gymnasium.make("perftune/llvm-ic-v0", benchmark=CRC, max_episode_steps=2)
    try:
        assert not isinstance(w, LlvmEnv) and isinstance(w.unwrapped, LlvmEnv)
        w.reset()
        w.unwrapped.observation_space = "InstCount"
        assert w.observation_space is OBSERVATION_SPACES["InstCount"]  # the wrapper reads it through
        assert w.step(0)[0].shape == (len(INSTCOUNT_NAMES),)
        assert w.step(0)[3] is True  # truncated at max_episode_steps
    finally:
        w.close()
