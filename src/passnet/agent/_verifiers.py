"""The adapter for the ``verifiers`` RL framework: ``load_environment`` (optional extra
``passnet[agent-verifiers]``).

Written against verifiers' documented multi-turn interface (``verifiers >= 0.1.10, < 0.4``,
``import verifiers as vf``): a ``vf.MultiTurnEnv`` subclass whose ``setup_state`` starts a
:class:`PassEnv` episode for the rollout's task, whose ``env_response`` answers the
model's tool calls through ``PassEnv.step``, with a ``@vf.stop`` condition for the
episode's end and a ``vf.Rubric`` whose one reward function is the episode's reward.
verifiers is imported only when :func:`load_environment` is called, so passnet works
without it. ``vf.load_environment("passnet.agent", tasks=[...])`` finds this function.

The framework-free part, :class:`EpisodeBridge` (one PassEnv per rollout, synchronous),
is what the verifiers class delegates to; it is tested without verifiers installed.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from passnet.agent._env import EnvConfig, PassEnv
from passnet.agent._evaluator import MIN_REWARD, local_executor
from passnet.agent._prompt import task_dtypes, task_messages
from passnet.agent._tools import TOOLS, ToolCall
from passnet.agent._workspace import Workspace
from passnet.errors import MissingDependency
from passnet.task import Task, load_task

__all__ = ["EpisodeBridge", "dataset_rows", "load_environment", "tool_defs"]

_KEY = "passnet_episode"
_REWARD = "passnet_reward"
VERIFIERS_HINT = (
    "pip install 'passnet[agent-verifiers]'  (verifiers >= 0.1.10, < 0.4, and datasets)"
)


def tool_defs() -> list[dict[str, Any]]:
    """The tools in verifiers' provider-agnostic form: ``{"name", "description", "parameters"}``."""
    return [dict(t["function"]) for t in TOOLS]


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def dataset_rows(tasks: Sequence[Task], config: EnvConfig) -> list[dict[str, Any]]:
    """One row per task: the prompt (system + task message, as ``PassEnv.reset`` makes it)
    and ``info.task``, the task folder."""
    rows = []
    for task in tasks:
        dtypes = task_dtypes(task)
        files = Workspace(task.pass_dir).files()
        rows.append(
            {
                "prompt": task_messages(task, files, dtypes, config.device),
                "info": {"task": str(task.path.resolve())},
                "task": "passnet",
            }
        )
    return rows


class EpisodeBridge:
    """One :class:`PassEnv` episode per rollout, keyed by a string kept in the rollout state."""

    def __init__(self, config: EnvConfig, workdir: str | Path | None = None, jobs: int = 1) -> None:
        self.config = config
        self.workdir = workdir
        self.executor = local_executor(config.device, jobs)  # in this thread, shared by all
        self._envs: dict[str, PassEnv] = {}
        self._lock = threading.Lock()

    def open(self, task: str | Path) -> str:
        """Start an episode on ``task``; returns its key."""
        key = uuid.uuid4().hex
        workdir = Path(self.workdir) / key if self.workdir else None
        env = PassEnv(self.config, workdir=workdir, executor=self.executor)
        env.reset(load_task(task), name="episode")
        with self._lock:
            self._envs[key] = env
        return key

    def respond(self, key: str, assistant: Any) -> list[dict[str, Any]]:
        """The environment's messages answering the assistant message ``assistant``."""
        env = self._envs[key]
        out: list[dict[str, Any]] = []
        calls = [ToolCall.from_message(c) for c in (_field(assistant, "tool_calls") or [])]
        actions: list[ToolCall | str] = list(calls) or [str(_field(assistant, "content") or "")]
        for action in actions:
            if env.done:
                call_id = action.id if isinstance(action, ToolCall) else ""
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": "not run: the episode has ended",
                    }
                )
                continue
            obs, *_ = env.step(action)
            out.extend(obs.messages)
        return out

    def done(self, key: str) -> bool:
        env = self._envs.get(key)
        return env is None or env.done

    def reward(self, key: str) -> float:
        """The episode's reward: final if it ended, else :data:`MIN_REWARD` (not submitted)."""
        env = self._envs.get(key)
        if env is None:
            return MIN_REWARD
        return env.reward if env.done else MIN_REWARD

    def close(self, key: str) -> None:
        with self._lock:
            env = self._envs.pop(key, None)
        if env is not None:
            env.close()


def _require_verifiers() -> tuple[Any, Any]:
    try:
        import verifiers as vf
        from datasets import Dataset
    except ImportError as exc:
        raise MissingDependency(
            f"the verifiers adapter needs verifiers and datasets: {VERIFIERS_HINT}",
            package="verifiers",
        ) from exc
    if not hasattr(vf, "MultiTurnEnv"):
        raise MissingDependency(
            f"this verifiers ({getattr(vf, '__version__', '?')}) has no MultiTurnEnv: {VERIFIERS_HINT}",
            package="verifiers",
        )
    return vf, Dataset


def load_environment(
    tasks: Sequence[str | Path],
    *,
    device: str = "cpu",
    max_steps: int = 50,
    workdir: str | Path | None = None,
    **env_kwargs: Any,
) -> Any:
    """A ``vf.MultiTurnEnv`` over ``tasks`` (task folders): one rollout is one PassEnv episode,
    its reward the episode's (AS of the submitted passes, or :data:`MIN_REWARD`). Extra keyword arguments
    go to the verifiers environment (``system_prompt`` is already in each prompt)."""
    vf, Dataset = _require_verifiers()
    config = EnvConfig(device=device, max_steps=max_steps)
    loaded = [load_task(t) for t in tasks]
    bridge = EpisodeBridge(config, workdir)

    async def passnet_reward(state: Any = None, **_: Any) -> float:
        # kept in the state: the rubric scores after the rollout's cleanup closed the episode
        return float(state.get(_REWARD, MIN_REWARD)) if state else MIN_REWARD

    class PassnetEnv(vf.MultiTurnEnv):
        async def setup_state(self, state: Any, **kwargs: Any) -> Any:
            info = state.get("info") or {}
            state[_KEY] = await asyncio.to_thread(bridge.open, info["task"])
            return state

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            key = state[_KEY]
            reply = await asyncio.to_thread(bridge.respond, key, messages[-1])
            if bridge.done(key):
                state[_REWARD] = bridge.reward(key)
                state["final_env_response"] = reply
            return reply

        @vf.stop
        async def passnet_done(self, state: Any) -> bool:
            return _KEY in state and bridge.done(state[_KEY])

        @vf.cleanup
        async def passnet_close(self, state: Any) -> None:
            if _KEY in state:
                state[_REWARD] = bridge.reward(state[_KEY])
                await asyncio.to_thread(bridge.close, state[_KEY])

    tools: dict[str, Any] = {}
    params = inspect.signature(vf.Environment.__init__).parameters
    if "tool_defs" in params:
        tools["tool_defs"] = tool_defs()
    elif "oai_tools" in params:
        tools["oai_tools"] = list(TOOLS)
    return PassnetEnv(
        dataset=Dataset.from_list(dataset_rows(loaded, config)),
        rubric=vf.Rubric(funcs=[passnet_reward]),
        max_turns=max_steps,
        **tools,
        **env_kwargs,
    )
