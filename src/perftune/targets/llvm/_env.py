"""``LlvmEnv``: a Gymnasium environment for LLVM 14 pass ordering, shaped like CompilerGym's.

An episode starts from a benchmark's unoptimised module; each action applies one pass (see
:data:`~perftune.targets.llvm.ACTIONS`). Observations and rewards are chosen by name:

Observations: ``Ir`` (text), ``InstCount`` (70 counts: totals and per-opcode), ``Autophase``
(56 program features), ``IrInstructionCount``, ``IrInstructionCountOz``, ``IrInstructionCountO0``,
``ObjectTextSizeBytes``, ``ObjectTextSizeOz``, ``Runtime`` (seconds, runnable benchmarks). Every one
is also available on demand as ``env.observation["NAME"]``. As in CompilerGym, assigning a name
switches the space (``env.observation_space = "InstCount"``, ``env.reward_space = "Runtime"``);
``env.observation_space`` reads back as the Gymnasium space, ``env.reward_space`` as the name.

Rewards (per step; their sum over an episode telescopes):

- ``IrInstructionCountOz``: ``(C_prev - C) / max(C0 - C_Oz, 1)``, CompilerGym's; an episode total of
  1.0 matches ``opt -Oz`` and more beats it;
- ``IrInstructionCount``: ``C_prev - C``; ``IrInstructionCountNorm``: ``(C_prev - C) / C0``;
- ``ObjectTextSizeOz``: ``(S_prev - S) / max(S0 - S_Oz, 1)`` with S the object ``.text`` bytes;
  ``ObjectTextSizeBytes``: ``S_prev - S``;
- ``Runtime``: ``(T_prev - T) / T0``, the fraction of the unoptimised run time saved.

Example:
    >>> import gymnasium as gym, perftune.gym  # doctest: +SKIP
    >>> env = gym.make("perftune/llvm-ic-v0")  # doctest: +SKIP
    >>> obs, info = env.reset(benchmark="benchmark://perftune-v0/crc32")  # doctest: +SKIP
    >>> obs, reward, terminated, truncated, info = env.step("-mem2reg")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import numbers
import os
import shutil
import string
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("the LLVM environments need gymnasium: pip install 'perftune[gym]'") from exc

import contextlib

from perftune.targets.llvm._actions import ACTIONS, action_index
from perftune.targets.llvm._commandline import opt_commandline, opt_program, passes_text
from perftune.targets.llvm._datasets import Benchmark, get_benchmark
from perftune.targets.llvm._engine import (
    Engine,
    EngineCrash,
    HelperEngine,
    OptEngine,
    PipelineError,
    make_engine,
)
from perftune.targets.llvm._errors import ActionError, BenchmarkError, LlvmError, StepError
from perftune.targets.llvm._ir import INSTCOUNT_NAMES
from perftune.targets.llvm._validate import ValidationResult, validate_actions

__all__ = [
    "AUTOPHASE_NAMES",
    "OBSERVATION_SPACES",
    "REWARD_SPACES",
    "ActionSpace",
    "LlvmEnv",
    "ValidationResult",
    # Re-exported: their old import path (they live in _commandline now).
    "opt_commandline",
    "opt_program",
    "passes_text",
]

AUTOPHASE_NAMES: tuple[str, ...] = (
    "BBNumArgsHi",
    "BBNumArgsLo",
    "onePred",
    "onePredOneSuc",
    "onePredTwoSuc",
    "oneSuccessor",
    "twoPred",
    "twoPredOneSuc",
    "twoEach",
    "twoSuccessor",
    "morePreds",
    "BB03Phi",
    "BBHiPhi",
    "BBNoPhi",
    "BeginPhi",
    "BranchCount",
    "returnInt",
    "CriticalCount",
    "NumEdges",
    "const32Bit",
    "const64Bit",
    "numConstZeroes",
    "numConstOnes",
    "UncondBranches",
    "binaryConstArg",
    "NumAShrInst",
    "NumAddInst",
    "NumAllocaInst",
    "NumAndInst",
    "BlockMid",
    "BlockLow",
    "NumBitCastInst",
    "NumBrInst",
    "NumCallInst",
    "NumGetElementPtrInst",
    "NumICmpInst",
    "NumLShrInst",
    "NumLoadInst",
    "NumMulInst",
    "NumOrInst",
    "NumPHIInst",
    "NumRetInst",
    "NumSExtInst",
    "NumSelectInst",
    "NumShlInst",
    "NumStoreInst",
    "NumSubInst",
    "NumTruncInst",
    "NumXorInst",
    "NumZExtInst",
    "TotalBlocks",
    "TotalInsts",
    "TotalMemInst",
    "TotalFuncs",
    "ArgsPhi",
    "testUnary",
)

_INT_MAX = np.iinfo(np.int64).max


def _int_box(n: int | None) -> spaces.Box:
    shape = () if n is None else (n,)
    return spaces.Box(0, _INT_MAX, shape=shape, dtype=np.int64)


OBSERVATION_SPACES: dict[str, spaces.Space[Any]] = {
    "Ir": spaces.Text(max_length=1 << 30, charset=string.printable),
    "InstCount": _int_box(len(INSTCOUNT_NAMES)),
    "Autophase": _int_box(len(AUTOPHASE_NAMES)),
    "IrInstructionCount": _int_box(None),
    "IrInstructionCountOz": _int_box(None),
    "IrInstructionCountO0": _int_box(None),
    "ObjectTextSizeBytes": _int_box(None),
    "ObjectTextSizeOz": _int_box(None),
    "Runtime": spaces.Box(0.0, np.inf, shape=(), dtype=np.float64),
}

REWARD_SPACES: tuple[str, ...] = (
    "IrInstructionCountOz",
    "IrInstructionCount",
    "IrInstructionCountNorm",
    "ObjectTextSizeOz",
    "ObjectTextSizeBytes",
    "Runtime",
)

DEFAULT_BENCHMARK = "benchmark://perftune-v0/crc32"

# Loading a module and computing observations get at least this long, however short the step
# timeout is (a step timeout of 1 s must not make reset() fail on a large module).
_MIN_ENGINE_TIMEOUT_S = 60.0


def _space_name(value: object, kind: str) -> str:
    """VALUE if it names an observation (KIND "observation") or reward space, else LlvmError."""
    known: Sequence[str] = tuple(OBSERVATION_SPACES) if kind == "observation" else REWARD_SPACES
    if isinstance(value, str) and value in known:
        return value
    raise LlvmError(f"unknown {kind} space {value!r}: expected one of {', '.join(known)}")


#: Observations an engine cannot compute (the opt engine has no Autophase feature extractor).
_UNSUPPORTED: dict[str, frozenset[str]] = {"opt": frozenset({"Autophase"})}


def _check_supported(observation: str, engine: str) -> None:
    """LlvmError when ENGINE cannot compute OBSERVATION (naming the engines that can)."""
    if observation in _UNSUPPORTED.get(engine, frozenset()):
        able = [e for e in ("helper", "opt") if observation not in _UNSUPPORTED.get(e, frozenset())]
        others = [n for n in OBSERVATION_SPACES if n not in _UNSUPPORTED.get(engine, frozenset())]
        raise LlvmError(
            f"observation space {observation!r} needs engine={' or '.join(map(repr, able))}, not "
            f"engine={engine!r}: pass observation_space= one of {', '.join(others)} with engine={engine!r}"
        )


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    """What tells a rewritten module file from the one loaded: (mtime_ns, size, inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LlvmError(f"step_timeout_s must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise LlvmError(f"step_timeout_s must be a positive, finite number of seconds, got {value!r}")
    return seconds


def _engine_timeout(step_timeout_s: float) -> float:
    return max(step_timeout_s, _MIN_ENGINE_TIMEOUT_S)


def _repeats(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise LlvmError(f"runtime_repeats must be an integer >= 1, got {value!r}")
    return int(value)


def _get_benchmark(value: object, what: str) -> Benchmark:
    if not isinstance(value, str | Benchmark | os.PathLike):
        raise BenchmarkError(
            f"{what} must be a benchmark URI, a file path or a Benchmark, got {type(value).__name__} "
            f"{value!r}"
        )
    return get_benchmark(value)


class ActionSpace(spaces.Discrete):
    """``Discrete(118)`` with names: ``flags``, ``from_string("-licm")``, ``to_string(i)``."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(len(ACTIONS), seed=seed)
        self.flags: tuple[str, ...] = tuple(a.flag for a in ACTIONS)
        self.names = self.flags

    def from_string(self, name: str) -> int:
        """Index of ``"-licm"``, ``"licm"`` (raises :class:`ActionError` for an unknown name)."""
        try:
            return action_index(name)
        except ValueError as exc:
            raise ActionError(str(exc)) from None

    def to_string(self, actions: int | Iterable[int]) -> str:
        """The flag(s) of one action or a sequence, space separated."""
        if isinstance(actions, int | np.integer):
            return self.flags[int(actions)]
        return " ".join(self.flags[int(a)] for a in actions)


@dataclass
class _Baselines:
    count_o0: int
    count_oz: int
    text_o0: int | None = None
    text_oz: int | None = None
    runtime_o0: float | None = None


class _Observation:
    """``env.observation["NAME"]``: any observation of the current state, computed on demand."""

    def __init__(self, env: LlvmEnv) -> None:
        self._env = env

    def __getitem__(self, name: str) -> Any:
        return self._env._observe(name)

    def keys(self) -> list[str]:
        return list(OBSERVATION_SPACES)


class LlvmEnv(gymnasium.Env[Any, np.int64]):
    """LLVM 14 pass-ordering environment (see the module docstring).

    Args:
        benchmark: The benchmark of the first episode (URI, path or :class:`Benchmark`);
            ``reset(benchmark=...)`` changes it.
        observation_space: Name of the observation returned by ``reset`` and ``step``; assigning
            a name to ``env.observation_space`` later switches it.
        reward_space: Name of the reward; assigning a name to ``env.reward_space`` later
            switches it (during an episode: from the next step on).
        engine: ``"helper"`` (persistent C++ process, fast) or ``"opt"`` (one process per step).
        step_timeout_s: Seconds (> 0) a pass may run; one running longer ends the episode with an
            error. Loading the module and computing observations get at least 60 s. Assignable.
        runtime_repeats: Runs per ``Runtime`` measurement (median; an integer >= 1). Assignable.
        render_mode: ``"ansi"`` (``render()`` returns the IR) or ``"human"`` (prints a summary).

    Raises:
        LlvmError: An unknown space name, engine or render mode, or a bad ``step_timeout_s`` or
            ``runtime_repeats`` (also when assigned later).
        BenchmarkError: An unknown or broken benchmark.

    After :meth:`close`, every method that needs the module raises :class:`StepError`.

    Example:
        >>> env = LlvmEnv(benchmark="generator://csmith-v0/1")  # doctest: +SKIP
        >>> env.reset()  # doctest: +SKIP
        >>> env.multistep(["-mem2reg", "-instcombine"])  # doctest: +SKIP
        >>> print(env.commandline())  # doctest: +SKIP
    """

    metadata = {"render_modes": ["ansi", "human"]}

    def __init__(
        self,
        benchmark: str | Benchmark | os.PathLike[str] | None = None,
        *,
        observation_space: str = "Autophase",
        reward_space: str = "IrInstructionCountOz",
        engine: str = "helper",
        step_timeout_s: float = 60.0,
        runtime_repeats: int = 3,
        render_mode: str | None = None,
    ) -> None:
        self._closed = False
        self._observation_space_name = _space_name(observation_space, "observation")
        self._reward_space_name = _space_name(reward_space, "reward")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise LlvmError(f"unknown render mode {render_mode!r}: expected 'ansi' or 'human'")
        self._step_timeout_s = _timeout(step_timeout_s)
        self._runtime_repeats = _repeats(runtime_repeats)
        self.action_space = ActionSpace()
        self.render_mode = render_mode
        if engine in _UNSUPPORTED:  # an unknown engine gets make_engine's message below
            _check_supported(self._observation_space_name, engine)
        self.engine_kind = engine
        self.observation = _Observation(self)
        self._benchmark: Benchmark | None = (
            _get_benchmark(benchmark, "benchmark") if benchmark is not None else None
        )
        # The engine's own limit covers loading the module and observations; a pass gets
        # step_timeout_s (given to each apply), so that a short one does not break reset().
        self._engine: Engine = make_engine(engine, timeout_s=_engine_timeout(self._step_timeout_s))
        self._loaded: Benchmark | None = None
        self._loaded_stamp: tuple[int, int, int] | None = None  # _fingerprint of _loaded.bitcode
        self._baselines: _Baselines | None = None
        self._actions: list[int] = []
        self._count = 0
        self._metric: float | None = None  # previous value of the reward's metric
        self._episode_reward = 0.0
        self._done = True
        # Inside the helper's folder, which the helper removes if this process is killed before close().
        engine_dir = getattr(self._engine, "_dir", None) if isinstance(self._engine, HelperEngine) else None
        self._tmp = Path(tempfile.mkdtemp(prefix="perftune-llvmenv-", dir=engine_dir))

    # -- spaces and settings (CompilerGym style: assign a name to switch) -------------------------
    @property
    def observation_space(self) -> spaces.Space[Any]:
        """The Gymnasium space of what ``reset`` and ``step`` return.

        Assigning a name (``env.observation_space = "InstCount"``) switches the observation, as
        in CompilerGym; reading gives the matching space of :data:`OBSERVATION_SPACES`.
        """
        return OBSERVATION_SPACES[self._observation_space_name]

    @observation_space.setter
    def observation_space(self, value: str | spaces.Space[Any]) -> None:
        if isinstance(value, spaces.Space):
            # One of OBSERVATION_SPACES' own objects names itself; any other space is not ours.
            for name, space in OBSERVATION_SPACES.items():
                if space is value:
                    value = name
                    break
        name = _space_name(value, "observation")
        _check_supported(name, getattr(self, "engine_kind", "helper"))
        self._observation_space_name = name

    @property
    def observation_space_name(self) -> str:
        """Name of the observation that ``reset`` and ``step`` return (assignable)."""
        return self._observation_space_name

    @observation_space_name.setter
    def observation_space_name(self, value: str) -> None:
        self.observation_space = value

    @property
    def reward_space(self) -> str:
        """Name of the reward (CompilerGym's ``env.reward_space = NAME`` switches it).

        Switching during an episode takes effect from the next step: its reward is the
        improvement of the new metric over the current module.
        """
        return self._reward_space_name

    @reward_space.setter
    def reward_space(self, value: str) -> None:
        name = _space_name(value, "reward")
        if self._closed or self._loaded is None or self._done or name == self._reward_space_name:
            self._reward_space_name = name
            return
        old = self._reward_space_name
        self._reward_space_name = name
        try:
            if name == "Runtime":
                self._runtime_baseline()
            self._metric = self._reward_metric()
        except BaseException:
            self._reward_space_name = old
            raise

    @property
    def reward_space_name(self) -> str:
        """Same as :attr:`reward_space` (assignable)."""
        return self._reward_space_name

    @reward_space_name.setter
    def reward_space_name(self, value: str) -> None:
        self.reward_space = value

    @property
    def step_timeout_s(self) -> float:
        """Seconds a pass may run before the episode ends with an error (assignable)."""
        return self._step_timeout_s

    @step_timeout_s.setter
    def step_timeout_s(self, value: float) -> None:
        self._step_timeout_s = _timeout(value)
        if isinstance(self._engine, HelperEngine | OptEngine):
            self._engine.timeout_s = _engine_timeout(self._step_timeout_s)

    @property
    def runtime_repeats(self) -> int:
        """Runs per ``Runtime`` measurement, whose median is taken (assignable)."""
        return self._runtime_repeats

    @runtime_repeats.setter
    def runtime_repeats(self, value: int) -> None:
        self._runtime_repeats = _repeats(value)

    # -- properties ------------------------------------------------------------------------------
    @property
    def benchmark(self) -> Benchmark:
        """The benchmark of the current (or next) episode."""
        if self._benchmark is None:
            self._benchmark = get_benchmark(DEFAULT_BENCHMARK)
        return self._benchmark

    @benchmark.setter
    def benchmark(self, value: str | Benchmark | os.PathLike[str]) -> None:
        self._benchmark = _get_benchmark(value, "benchmark")

    @property
    def actions(self) -> list[int]:
        """Actions applied in this episode, in order."""
        return list(self._actions)

    @property
    def episode_reward(self) -> float:
        """Sum of the rewards of this episode."""
        return self._episode_reward

    @property
    def instruction_count(self) -> int:
        """Current ``Module::getInstructionCount()``."""
        return self._count

    @property
    def baselines(self) -> dict[str, float]:
        """Instruction counts of the start (O0) and of ``opt -Oz`` for the current benchmark."""
        b = self._require_baselines()
        return {"IrInstructionCountO0": b.count_o0, "IrInstructionCountOz": b.count_oz}

    # -- episode ---------------------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        benchmark: str | Benchmark | os.PathLike[str] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Starts an episode; ``benchmark=`` (or ``options={"benchmark": ...}``) picks the module."""
        self._check_open()
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        chosen = benchmark if benchmark is not None else (options or {}).get("benchmark")
        # A benchmark given here becomes the environment's only once its module is loaded: a broken
        # one must not make the next plain reset() fail too.
        bench = _get_benchmark(chosen, "benchmark") if chosen is not None else self.benchmark
        self._done = True  # until the new episode is set up: a failed reset leaves none to step
        try:
            self._load(bench)
        except EngineCrash:
            # The helper died since the last episode (killed, out of memory): it has been restarted,
            # and loading is no pass that could crash it again, so one more try starts the episode.
            self._load(bench)
        self._benchmark = bench
        self._actions = []
        self._episode_reward = 0.0
        self._metric = self._reward_metric()
        if self.reward_space_name == "Runtime" and self._baselines is not None:
            self._baselines.runtime_o0 = self._metric
        info = {
            "benchmark": bench.uri,
            "instruction_count": self._count,
            "instruction_count_oz": self._baselines.count_oz if self._baselines else None,
        }
        observation = self._observe(self.observation_space_name)
        self._done = False  # only now: an observation that fails leaves no episode to step
        return observation, info

    def _load(self, bench: Benchmark) -> None:
        """Makes BENCH's unoptimised module current (reusing the loaded one if it is unchanged)."""
        stamp = _fingerprint(bench.bitcode)
        if (
            self._loaded is not None
            and self._loaded.uri == bench.uri
            and self._loaded.bitcode == bench.bitcode
            and stamp is not None
            and stamp == self._loaded_stamp
        ):
            self._count = self._engine.reset()
            return
        self._loaded = None
        self._baselines = None
        self._count = self._engine.load(bench.bitcode)
        self._baselines = _Baselines(count_o0=self._count, count_oz=self._engine.trial("default<Oz>"))
        self._loaded, self._loaded_stamp = bench, stamp

    def _to_index(self, action: Any) -> int:
        if isinstance(action, str):
            return self.action_space.from_string(action)
        if isinstance(action, np.ndarray) and action.shape == ():
            action = action.item()
        if (
            isinstance(action, bool)
            or not isinstance(action, int | np.integer)
            or not 0 <= int(action) < len(ACTIONS)
        ):
            raise ActionError(
                f"invalid action {action!r}: expected an integer in [0, {len(ACTIONS)}) or a flag"
            )
        return int(action)

    def _check_open(self) -> None:
        if self._closed:
            raise StepError("the environment is closed: create a new one")

    def _check_can_step(self) -> None:
        self._check_open()
        if self._loaded is None:
            raise StepError("step() before reset(): call reset() first")
        if self._done:
            raise StepError("step() after the episode ended: call reset() to start a new one")

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Applies one pass. A crashing or hanging pass ends the episode with ``info["error"]``."""
        return self.multistep([action])

    def multistep(self, actions: Sequence[Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Applies several passes, observing once at the end; the reward is their sum."""
        self._check_can_step()
        indices = [self._to_index(a) for a in actions]
        info: dict[str, Any] = {}
        for index in indices:
            try:
                self._count = self._engine.apply(ACTIONS[index].pipeline, timeout_s=self._step_timeout_s)
            except (EngineCrash, PipelineError) as exc:
                self._done = True
                info["error"] = f"{ACTIONS[index].flag}: {exc}"
                info["error_type"] = type(exc).__name__
                break
            self._actions.append(index)
        reward = 0.0
        if not self._done or self._actions:
            new_metric = self._reward_metric()
            reward = self._reward(self._metric, new_metric)
            self._metric = new_metric
        self._episode_reward += reward
        info.update({"instruction_count": self._count, "actions": len(self._actions)})
        observation = self._observe(self.observation_space_name)
        return observation, reward, self._done, False, info

    # -- rewards ---------------------------------------------------------------------------------
    def _reward_metric(self) -> float:
        name = self.reward_space_name
        if name.startswith("IrInstructionCount"):
            return float(self._count)
        if name.startswith("ObjectTextSize"):
            return float(self._engine.text_size())
        return self._runtime()

    def _reward(self, before: float | None, after: float) -> float:
        if before is None:
            return 0.0
        b = self._require_baselines()
        name = self.reward_space_name
        delta = before - after
        if name == "IrInstructionCountOz":
            return delta / max(b.count_o0 - b.count_oz, 1)
        if name == "IrInstructionCountNorm":
            return delta / max(b.count_o0, 1)
        if name == "ObjectTextSizeOz":
            self._text_baselines()
            assert b.text_o0 is not None and b.text_oz is not None
            return delta / max(b.text_o0 - b.text_oz, 1)
        if name == "Runtime":
            return delta / max(b.runtime_o0 or 0.0, 1e-9)
        return delta

    def _require_baselines(self) -> _Baselines:
        if self._baselines is None:
            raise StepError("no episode yet: call reset() first")
        return self._baselines

    def _text_baselines(self) -> None:
        b = self._require_baselines()
        if b.text_o0 is None:
            self._engine.save("__text_baseline")
            self._engine.reset()
            b.text_o0 = self._engine.text_size()
            b.text_oz = self._engine.text_size("default<Oz>")
            self._engine.restore("__text_baseline")

    def _runtime(self) -> float:
        from perftune.targets.llvm._run import runtime_s

        path = self._tmp / "runtime.bc"
        self._engine.write_bitcode(path)
        return runtime_s(path, self._episode_benchmark(), repeats=self._runtime_repeats)

    def _episode_benchmark(self) -> Benchmark:
        """The benchmark whose module is loaded (``env.benchmark = X`` takes effect at the next reset)."""
        self._check_has_episode()
        assert self._loaded is not None
        return self._loaded

    def _runtime_baseline(self) -> None:
        """Measures the unoptimised run time if the episode has none yet (reward switched to Runtime)."""
        b = self._require_baselines()
        if b.runtime_o0 is not None:
            return
        if not self._actions:
            b.runtime_o0 = self._runtime()
            return
        self._engine.save("__runtime_baseline")
        self._engine.reset()
        try:
            b.runtime_o0 = self._runtime()
        finally:
            self._engine.restore("__runtime_baseline")

    # -- observations ----------------------------------------------------------------------------
    def _observe(self, name: str) -> Any:
        self._check_open()
        if self._loaded is None:
            raise StepError("no episode yet: call reset() first")
        if name == "Ir":
            return self._engine.ir()
        if name == "InstCount":
            counts = self._engine.instcount()
            return np.array([counts[k] for k in INSTCOUNT_NAMES], dtype=np.int64)
        if name == "InstCountDict":
            return self._engine.instcount()
        if name == "Autophase":
            features = self._engine.autophase()
            return np.array([features[k] for k in AUTOPHASE_NAMES], dtype=np.int64)
        if name == "AutophaseDict":
            return self._engine.autophase()
        if name == "IrInstructionCount":
            return np.array(self._count, dtype=np.int64)
        if name == "IrInstructionCountOz":
            return np.array(self._require_baselines().count_oz, dtype=np.int64)
        if name == "IrInstructionCountO0":
            return np.array(self._require_baselines().count_o0, dtype=np.int64)
        if name == "ObjectTextSizeBytes":
            return np.array(self._engine.text_size(), dtype=np.int64)
        if name == "ObjectTextSizeOz":
            self._text_baselines()
            return np.array(self._require_baselines().text_oz, dtype=np.int64)
        if name == "Runtime":
            return np.array(self._runtime(), dtype=np.float64)
        raise LlvmError(f"unknown observation {name!r}: expected one of {', '.join(OBSERVATION_SPACES)}")

    # -- CompilerGym-style extras ----------------------------------------------------------------
    def commandline(self, *, isolate_steps: bool = False, input_path: str | None = None) -> str:
        """The ``opt`` command line that replays this episode on the benchmark.

        Args:
            isolate_steps: Put ``invalidate<all>`` between passes, so that each pass sees fresh
                analyses exactly as a step does (only needed in the rare case where reusing
                analyses across passes changes the result).
            input_path: Input file in the command (default: the benchmark's bitcode).
        """
        if input_path is None:
            input_path = str((self._loaded or self.benchmark).bitcode)
        return opt_commandline(self._actions, input_path, isolate_steps=isolate_steps)

    def fork(self) -> LlvmEnv:
        """A new environment in the same state (benchmark, module, actions, rewards so far)."""
        loaded = self._episode_benchmark()
        other = LlvmEnv(
            loaded,
            observation_space=self.observation_space_name,
            reward_space=self.reward_space_name,
            engine=self.engine_kind,
            step_timeout_s=self.step_timeout_s,
            runtime_repeats=self.runtime_repeats,
            render_mode=self.render_mode,
        )
        try:
            other._engine.load(loaded.bitcode)
            other._loaded, other._loaded_stamp = loaded, self._loaded_stamp
            other._baselines = _Baselines(**vars(self._require_baselines()))
            state = self._tmp / "fork.bc"
            self._engine.write_bitcode(state)
            other._count = other._engine.load_state(state)
        except BaseException:
            other.close()
            raise
        other._benchmark = self._benchmark  # a benchmark chosen for the next episode stays chosen
        other._actions = list(self._actions)
        other._metric = self._metric
        other._episode_reward = self._episode_reward
        other._done = self._done
        return other

    def _check_has_episode(self) -> None:
        self._check_open()
        if self._loaded is None:
            raise StepError("no episode yet: call reset() first")

    def validate(self, *, run: bool = True) -> ValidationResult:
        """Replays the episode as an ``opt`` command line and, for runnable benchmarks, runs it.

        Checks that the command line reaches the same instruction count, and (with ``run``)
        that the optimised program prints what the -O0 build prints.
        """
        return validate_actions(self._episode_benchmark(), self._actions, self._count, run=run)

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        self._check_has_episode()
        if self.render_mode == "ansi":
            return self._engine.ir()
        if self.render_mode == "human":
            uri = self._episode_benchmark().uri
            print(
                f"{uri}: {self._count} instructions after {len(self._actions)} actions, "
                f"episode reward {self._episode_reward:.4f}"
            )
        return None

    def close(self) -> None:
        """Stops the engine; the environment cannot be used afterwards (closing again is fine)."""
        self._closed = True
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.close()
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        super().close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()
