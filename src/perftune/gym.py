"""Gymnasium environments of perftune; importing this module registers them.

This is the one documented exception to perftune's no-import-side-effects rule, because
Gymnasium users expect ``import perftune.gym`` to make the ids available to ``gymnasium.make``:

=============================  ===============================  ==========================
id                             reward                           observation
=============================  ===============================  ==========================
``perftune/llvm-v0``           ``IrInstructionCount``           ``Autophase``
``perftune/llvm-ic-v0``        ``IrInstructionCountOz``         ``Autophase``
``perftune/llvm-codesize-v0``  ``ObjectTextSizeOz``             ``Autophase``
``perftune/llvm-runtime-v0``   ``Runtime`` (runnable only)      ``Autophase``
=============================  ===============================  ==========================

``gymnasium.make(id)`` returns the :class:`~perftune.targets.llvm.LlvmEnv` itself (the ids are
registered without Gymnasium's order-enforcing and checker wrappers), so CompilerGym-style calls
work: ``env.reset(benchmark=...)``, ``env.multistep``, ``env.fork()``, ``env.validate()``,
``env.observation_space = "InstCount"``, ``env.reward_space = "IrInstructionCount"``. Arguments that
make Gymnasium add a wrapper still do: ``gymnasium.make(id, max_episode_steps=N)`` returns a
``TimeLimit`` around the environment, which has ``reset``/``step`` but not ``multistep``, ``fork``,
``validate`` or the space switching; reach those through ``env.unwrapped``. Other keyword arguments
of ``make`` go to ``LlvmEnv`` (``benchmark=``, ``observation_space=``, ``reward_space=``,
``engine=``, ``step_timeout_s=``, ``runtime_repeats=``, ``render_mode=``). Only the default
``engine="helper"`` computes ``Autophase``: with ``engine="opt"`` pass another observation, e.g.
``gymnasium.make(id, engine="opt", observation_space="InstCount")`` (asking it for ``Autophase``
raises ``LlvmError`` at construction).

Example:
    >>> import gymnasium as gym
    >>> import perftune.gym  # registers the ids
    >>> env = gym.make("perftune/llvm-ic-v0", benchmark="benchmark://perftune-v0/crc32")  # doctest: +SKIP
    >>> observation, info = env.reset()  # doctest: +SKIP
"""

from __future__ import annotations

try:
    import gymnasium
except ModuleNotFoundError as error:
    if error.name != "gymnasium":
        raise  # gymnasium is there but broken: its own message says more than ours would
    raise ImportError("perftune.gym needs gymnasium: pip install 'perftune[gym]'",
                      name="gymnasium") from None

__all__ = ["ENV_IDS", "register_all"]

_ENTRY_POINT = "perftune.targets.llvm._env:LlvmEnv"

ENV_IDS: dict[str, dict[str, str]] = {
    "perftune/llvm-v0": {"reward_space": "IrInstructionCount", "observation_space": "Autophase"},
    "perftune/llvm-ic-v0": {"reward_space": "IrInstructionCountOz", "observation_space": "Autophase"},
    "perftune/llvm-codesize-v0": {"reward_space": "ObjectTextSizeOz", "observation_space": "Autophase"},
    "perftune/llvm-runtime-v0": {"reward_space": "Runtime", "observation_space": "Autophase"},
}


def register_all() -> None:
    """Registers every id of :data:`ENV_IDS` (idempotent)."""
    for env_id, kwargs in ENV_IDS.items():
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point=_ENTRY_POINT,
            kwargs=dict(kwargs),
            order_enforce=False,
            disable_env_checker=True,
        )


register_all()
