"""PassEnv: a Gymnasium-style environment in which an agent writes passes for a task.

::

    env = PassEnv(EnvConfig(device="cuda", max_steps=50))
    obs = env.reset("tasks/pooling")        # obs.messages: system + task prompt; obs.tools: schemas
    while True:
        call = ToolCall(id, name, arguments_json)               # what the model asked for
        obs, reward, terminated, truncated, info = env.step(call)
        if terminated or truncated:
            break                            # reward: the final reward of the episode

An action is one tool call (:class:`ToolCall`, its arguments the raw JSON the model sent),
or the text of a reply that called no tool. The observation is the list of messages to
append to the conversation (a ``tool`` message answering the call, or a ``user`` message
asking for a tool call). The reward is 0 until the episode ends; then it is the reward of
a fresh evaluation of the submitted pass directory with full timing
(:func:`~passnet.agent.evaluate_pass_dir`: AS when the passes ran, or
:data:`~passnet.agent.MIN_REWARD` when they were rejected or could not be evaluated), or
:data:`~passnet.agent.MIN_REWARD` when the episode ended without a submission (a budget
ran out). Tools are found by lookup in the tool registry: an unknown tool or malformed
arguments are answered with an error and the episode goes on (until
``max_format_errors`` in a row); only the ``submit`` tool submits. ``info`` holds ``tool``,
``error`` (why the call failed, or None), ``evaluation`` (the
:class:`~passnet.agent.Evaluation` of ``pass_evaluator`` and ``submit``), ``as`` and
``es`` (AS and ES_t per t of that evaluation), ``steps`` and ``stop_reason``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from passnet.agent._errors import AgentError
from passnet.agent._evaluator import (
    MIN_REWARD,
    Evaluation,
    evaluate_pass_dir,
    local_executor,
    quick_settings,
)
from passnet.agent._prompt import task_dtypes, task_messages
from passnet.agent._tools import TOOLS, ToolCall, get_tool, parse_call
from passnet.agent._workspace import ToolError, Workspace
from passnet.errors import PassnetError
from passnet.evaluate import EvalSettings
from passnet.runner import Executor
from passnet.task import Task, load_task

__all__ = ["STOP_REASONS", "AgentError", "EnvConfig", "Observation", "PassEnv"]

log = logging.getLogger(__name__)

STOP_REASONS = (
    "submitted",
    "max_steps",
    "max_tokens",
    "max_wall",
    "format_errors",
    "model_error",
)
"""Why an episode ended: the agent submitted; it used up its steps, tokens or wall time;
it sent ``max_format_errors`` invalid actions in a row (malformed calls, unknown tools,
replies without a tool call); the model endpoint kept failing."""


@dataclass(frozen=True)
class EnvConfig:
    """Budgets and evaluation settings of an episode."""

    device: str = "cpu"
    max_steps: int = 50
    """Actions (tool calls and replies without one) before the episode is truncated."""
    max_wall_s: float | None = None
    """Wall seconds before the episode is truncated (checked after each action)."""
    max_format_errors: int = 5
    """Invalid actions in a row (malformed call, unknown tool, no tool call) that end it."""
    final_settings: EvalSettings = field(default_factory=EvalSettings)
    """How ``submit`` evaluates: full timing."""
    eval_settings: EvalSettings | None = None
    """How ``pass_evaluator`` evaluates (None: :func:`quick_settings` of ``final_settings``)."""
    b: float = 0.1
    """The score's b: what a failing graph scores in ES_t (an empty pass directory's AS).
    The reward of a rejected or unevaluable pass, or of no submission, is
    :data:`~passnet.agent.MIN_REWARD`, whatever b is."""
    max_observation_chars: int = 12000
    inspect_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.max_format_errors < 1:
            raise AgentError("max_steps and max_format_errors must be at least 1")
        if self.max_wall_s is not None and self.max_wall_s <= 0:
            raise AgentError("max_wall_s must be positive", option="max_wall_s")

    @property
    def tool_settings(self) -> EvalSettings:
        return self.eval_settings or quick_settings(self.final_settings)


@dataclass(frozen=True)
class Observation:
    """What the agent sees: new messages to append, and (after ``reset``) the tool schemas."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()


class PassEnv:
    """One episode at a time on a task: a private pass directory, the four tools, the reward.

    ``workdir`` holds the episodes' folders (each: ``pass_dir/``, ``evals/NN-*/`` with the
    runner's results, ``best_pass_dir/``); None makes a temporary folder that
    :meth:`close` removes. ``executor`` runs the evaluations (one shared by environments
    that run side by side, so that they take turns on the devices); None makes one
    (:func:`~passnet.agent.local_executor`), which :meth:`close` releases.
    """

    def __init__(
        self,
        config: EnvConfig | None = None,
        *,
        workdir: str | Path | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.config = config or EnvConfig()
        self._own_executor = executor is None
        self.executor = executor or local_executor(self.config.device)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="passnet-env-"))
        self.task: Task | None = None
        self.workspace: Workspace | None = None
        self._episodes = 0
        self._reset_state()

    def _reset_state(self) -> None:
        self.episode_dir: Path | None = None
        self.steps = 0
        self.done = True
        self.stop_reason: str | None = None
        self.reward = 0.0
        self.best_reward: float | None = None
        self.best_files: dict[str, str] | None = None
        self.final: Evaluation | None = None
        self.evaluations: list[Evaluation] = []
        self.dtypes: dict[str, str] = {}
        self._invalid = 0
        self._started = time.monotonic()

    # -- the Gymnasium-style interface ---------------------------------------------------

    def reset(self, task: Task | str | Path, *, name: str | None = None) -> Observation:
        """Start an episode on ``task`` (a :class:`Task` or a task folder); the observation's
        messages are the system prompt and the task, its tools the four schemas. ``name``
        names the episode's folder (default: a counter)."""
        self._reset_state()
        self.task = task if isinstance(task, Task) else load_task(task)
        self._episodes += 1
        self.episode_dir = self.workdir / (name or f"episode-{self._episodes:04d}")
        if self.episode_dir.exists():
            shutil.rmtree(self.episode_dir)
        self.workspace = Workspace.copy_of(self.task.pass_dir, self.episode_dir / "pass_dir")
        self.dtypes = task_dtypes(self.task)
        self.done = False
        messages = task_messages(self.task, self.workspace.files(), self.dtypes, self.config.device)
        return Observation(tuple(messages), TOOLS)

    def step(self, action: ToolCall | str) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Carry out one action; see the module docstring for what comes back."""
        if self.done or self.task is None or self.workspace is None:
            raise AgentError("the episode has ended (or never started): call reset(task)")
        self.steps += 1
        info: dict[str, Any] = {"tool": None, "error": None, "evaluation": None}
        terminated = False
        if isinstance(action, str):
            self._invalid += 1
            info["error"] = "no tool call"
            message = {
                "role": "user",
                "content": "Your reply called no tool. Call one of the tools "
                "(file_editor, inspect_graph, pass_evaluator), or submit when you are done.",
            }
        else:
            call_id = action.id or f"call_{self.steps}"
            info["tool"] = action.name
            args, problem = parse_call(action)
            if problem is not None:
                self._invalid += 1
                info["error"] = problem
                content = f"Error: {problem}"
            else:
                tool = get_tool(action.name)
                assert tool is not None  # parse_call answered unknown names
                self._invalid = 0
                try:
                    content, evaluation = tool().run(self, args)
                except (ToolError, PassnetError, OSError) as exc:
                    # a tool that cannot do what was asked answers so; the episode goes on
                    content, evaluation = f"Error: {exc}", None
                    info["error"] = str(exc)
                info["evaluation"] = evaluation
                terminated = tool.ends_episode
            message = {"role": "tool", "tool_call_id": call_id, "content": self._cap(content)}
        evaluation = info["evaluation"]
        info["as"] = evaluation.as_score if evaluation is not None else None
        info["es"] = evaluation.es if evaluation is not None else {}
        truncated = False
        if terminated:
            self._finish("submitted", self.final.reward if self.final else MIN_REWARD)
        else:
            reason = self._budget_exhausted()
            if reason is not None:
                truncated = True
                self._finish(reason, MIN_REWARD)
        info["steps"] = self.steps
        info["stop_reason"] = self.stop_reason
        reward = self.reward if (terminated or truncated) else 0.0
        return Observation((message,)), reward, terminated, truncated, info

    def submitted_evaluation(self) -> Evaluation:
        """The evaluation of what the ended episode submitted: the submission's final
        evaluation, or, for an episode that ended without one (a budget ran out), a fresh
        evaluation with full timing of the task's pass_dir as given (nothing submitted leaves
        the task as it was). For the latter the episode's pass_dir is restored to the task's
        files (its trajectory keeps what the agent left) and evaluated where the submission
        would have been, into ``evals/NN-unsubmitted``: its records carry the configuration
        a submission's would. The episode's best reward is left as it was."""
        if not self.done or self.task is None or self.workspace is None or not self.episode_dir:
            raise AgentError("the episode has not ended: nothing was submitted yet")
        if self.final is not None:
            return self.final
        root = self.workspace.root
        shutil.rmtree(root)
        self.workspace = Workspace.copy_of(self.task.pass_dir, root)
        index = len(self.evaluations) + 1
        evaluation = evaluate_pass_dir(
            self.task,
            root,
            self.episode_dir / "evals" / f"{index:02d}-unsubmitted",
            settings=self.config.final_settings,
            device=self.config.device,
            executor=self.executor,
            b=self.config.b,
        )
        self.evaluations.append(evaluation)
        return evaluation

    def end(self, stop_reason: str) -> None:
        """End the episode from outside (a token budget, a failing endpoint): truncated,
        reward :data:`~passnet.agent.MIN_REWARD` (nothing submitted)."""
        if stop_reason not in STOP_REASONS:
            raise AgentError(
                f"unknown stop reason {stop_reason!r}; known: {', '.join(STOP_REASONS)}"
            )
        if not self.done:
            self._finish(stop_reason, MIN_REWARD)

    def close(self) -> None:
        """End any episode; release the executor and remove the working folder if this
        environment made them."""
        self.done = True
        if self._own_executor:
            self.executor.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PassEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _finish(self, reason: str, reward: float) -> None:
        self.done = True
        self.stop_reason = reason
        self.reward = reward
        if self.best_reward is None or reward > self.best_reward:
            self.best_reward = reward

    def _budget_exhausted(self) -> str | None:
        if self._invalid >= self.config.max_format_errors:
            return "format_errors"
        if self.steps >= self.config.max_steps:
            return "max_steps"
        wall = self.config.max_wall_s
        if wall is not None and time.monotonic() - self._started > wall:
            return "max_wall"
        return None

    def _cap(self, text: str) -> str:
        limit = self.config.max_observation_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n... ({len(text) - limit} characters cut)"

    # -- what the tools use (passnet.agent._tools) ------------------------------------

    def resolve_graph(self, raw: str) -> tuple[str, Path]:
        """The task's graph entry and folder a tool argument names (its entry, the entry
        without ``graphs/``, its folder name or its index); a :class:`ToolError` otherwise."""
        assert self.task is not None
        entries = list(self.task.graph_entries)
        text = str(raw).strip().rstrip("/")
        for i, entry in enumerate(entries):
            if text in (entry, entry.removeprefix("graphs/"), Path(entry).name, str(i)):
                return entry, self.task.graphs[i]
        raise ToolError(f"no graph {raw!r} in the task; its graphs: {', '.join(entries)}")

    def evaluate(self, settings: EvalSettings, graphs: list[str] | None, kind: str) -> Evaluation:
        """Evaluate the episode's pass directory (``kind``: ``quick`` or ``final``, the name
        of its results folder) and keep the best whole-task evaluation's files."""
        assert self.task is not None and self.workspace is not None and self.episode_dir
        index = len(self.evaluations) + 1
        evaluation = evaluate_pass_dir(
            self.task,
            self.workspace.root,
            self.episode_dir / "evals" / f"{index:02d}-{kind}",
            settings=settings,
            device=self.config.device,
            graphs=graphs,
            executor=self.executor,
            b=self.config.b,
        )
        self.evaluations.append(evaluation)
        if graphs is None and (self.best_reward is None or evaluation.reward > self.best_reward):
            self.best_reward = evaluation.reward
            self.best_files = self.workspace.files()
            best = self.episode_dir / "best_pass_dir"
            shutil.rmtree(best, ignore_errors=True)
            Workspace.copy_of(self.workspace.root, best)
        return evaluation
