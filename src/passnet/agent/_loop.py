"""The agent loop: a policy drives :class:`PassEnv` episodes; tasks run side by side; every
finished episode is one line of ``trajectories.jsonl``.

:func:`run_episode` alternates the policy's replies and the environment's steps until the
episode ends (a submission, or a budget: steps and wall time in the environment, tokens
and failing replies here). A reply that is not what the protocol wants is an observation
for the model, never an exception: a malformed call or an unknown tool is answered with
the problem, a reply without a tool call with a request for one; a reply that failed
altogether (the endpoint kept erroring) is tried again, up to ``max_model_errors`` in a
row. :func:`run_agent` runs the episodes of several tasks over ``workers`` threads, all
their evaluations on one shared executor (one slot per device: two episodes never time on
one GPU at once), skips the episodes its output folder already holds (resume), and keeps
each episode's best-scoring pass directory under ``episodes/<name>/best_pass_dir``.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from passnet.agent._env import EnvConfig, PassEnv
from passnet.agent._errors import AgentError
from passnet.agent._evaluator import local_executor
from passnet.agent._policy import Policy
from passnet.agent._tools import ToolCall
from passnet.agent._trajectory import (
    TRAJECTORIES_FILE,
    Trajectory,
    append_trajectory,
    read_trajectories,
)
from passnet.runner import Executor
from passnet.task import Task, load_task

__all__ = ["AgentRunSummary", "episode_name", "run_agent", "run_episode"]

log = logging.getLogger(__name__)


def episode_name(task: Task, model: str) -> str:
    """The folder name of an episode: the task's name and a digest of (task, model)."""
    digest = hashlib.sha256(f"{task.path.resolve()}\0{model}".encode()).hexdigest()[:10]
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', task.name)[:60]}-{digest}"


def run_episode(
    task: Task,
    policy: Policy,
    env: PassEnv,
    *,
    max_tokens: int | None = None,
    max_model_errors: int = 3,
    name: str | None = None,
) -> Trajectory:
    """One episode of ``policy`` on ``task`` in ``env``; returns its trajectory."""
    t0 = time.monotonic()
    policy.start(task)
    obs = env.reset(task, name=name)
    messages: list[dict[str, Any]] = list(obs.messages)
    tools = list(obs.tools)
    tokens = 0
    failures = 0
    calls = 0
    while not env.done:
        wall = env.config.max_wall_s
        if wall is not None and time.monotonic() - t0 > wall:
            env.end("max_wall")
            break
        reply = policy.act(messages, tools)
        tokens += reply.tokens
        if reply.message is None:
            failures += 1
            log.warning(
                "%s: the model's reply failed (%d in a row): %s", task.name, failures, reply.error
            )
            if failures >= max_model_errors:
                env.end("model_error")
            continue
        failures = 0
        message = dict(reply.message)
        raw_calls = list(message.get("tool_calls") or [])
        parsed = []
        for raw in raw_calls:
            calls += 1
            call = ToolCall.from_message(raw)
            if not call.id:
                call = ToolCall(f"call_{calls}", call.name, call.arguments)
            parsed.append(call)
        if parsed:
            message["tool_calls"] = [c.to_message() for c in parsed]
        else:
            message.pop("tool_calls", None)
        messages.append(message)
        actions: list[ToolCall | str] = list(parsed) or [str(message.get("content") or "")]
        for action in actions:
            if env.done:
                # every call of a sent reply gets its answer, so the conversation stays valid
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": action.id if isinstance(action, ToolCall) else "",
                        "content": "not run: the episode has ended",
                    }
                )
                continue
            obs, _reward, _terminated, _truncated, info = env.step(action)
            messages.extend(obs.messages)
            policy.observe(info)
        if not env.done and max_tokens is not None and tokens >= max_tokens:
            env.end("max_tokens")
    assert env.workspace is not None and env.stop_reason is not None
    best = env.best_reward if env.best_reward is not None else env.reward
    return Trajectory(
        task=str(task.path.resolve()),
        model=policy.name,
        messages=messages,
        tools=tools,
        reward=float(env.reward),
        best_reward=float(max(best, env.reward)),
        steps=env.steps,
        tokens=tokens,
        wall_s=round(time.monotonic() - t0, 3),
        stop_reason=env.stop_reason,
        pass_dir=env.workspace.files(),
    )


@dataclass
class AgentRunSummary:
    """What :func:`run_agent` did."""

    trajectories: list[Trajectory] = field(default_factory=list)
    """The episodes of this run, in the order they finished."""
    skipped: int = 0
    """Episodes the output folder already held (resumed runs skip them)."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(task, error) of episodes that could not run to the end."""
    out_dir: Path = field(default_factory=Path)


def run_agent(
    tasks: Sequence[str | Path | Task],
    make_policy: Callable[[], Policy],
    out_dir: str | Path,
    *,
    config: EnvConfig | None = None,
    workers: int = 1,
    jobs: int = 1,
    max_tokens: int | None = None,
    max_model_errors: int = 3,
    executor: Executor | None = None,
    finished: Callable[[Task], bool] | None = None,
    keep: Callable[[Task, PassEnv], None] | None = None,
) -> AgentRunSummary:
    """Run one episode per task (``make_policy()`` makes each episode's policy) and append
    the trajectories to ``out_dir/trajectories.jsonl``; tasks already there for this policy's
    model are skipped. ``jobs``: evaluation slots of the shared executor (on CUDA: GPUs).
    Every task (a folder, or a loaded :class:`~passnet.task.Task`) is loaded before any
    episode starts (a broken one stops the run).

    Two hooks serve runs that keep more than trajectories (a benchmark row:
    :func:`~passnet.agent.run_agent_split`): a task whose trajectory is there is skipped
    only where ``finished(task)`` also holds, and ``keep(task, env)`` is called in the
    episode's thread when its episode has ended, before its trajectory is appended (an
    exception there fails the episode, whose trajectory is then not appended: a rerun runs
    it again)."""
    loaded = [t if isinstance(t, Task) else load_task(t) for t in tasks]
    config = config or EnvConfig()
    if workers < 1:
        raise AgentError("--workers must be at least 1", option="workers")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / TRAJECTORIES_FILE
    model = make_policy().name
    done = {t.key for t in read_trajectories(path)}
    todo = [
        t
        for t in loaded
        if (str(t.path.resolve()), model) not in done or (finished and not finished(t))
    ]
    summary = AgentRunSummary(skipped=len(loaded) - len(todo), out_dir=out)
    if summary.skipped:
        log.info("resuming: %d of %d episodes already in %s", summary.skipped, len(loaded), path)
    if not todo:
        return summary
    own = executor is None
    # made here, before any thread: local_executor also loads the compiler registry's
    # plugins once (its lazy loading is not safe against two threads at once)
    executor = executor or local_executor(config.device, jobs)
    lock = threading.Lock()

    def episode(task: Task) -> Trajectory:
        env = PassEnv(config, workdir=out / "episodes", executor=executor)
        trajectory = run_episode(
            task,
            make_policy(),
            env,
            max_tokens=max_tokens,
            max_model_errors=max_model_errors,
            name=episode_name(task, model),
        )
        if keep is not None:
            keep(task, env)
        with lock:
            append_trajectory(path, trajectory)
        log.info(
            "%s: %s after %d steps, reward %.4f (best %.4f)",
            task.name,
            trajectory.stop_reason,
            trajectory.steps,
            trajectory.reward,
            trajectory.best_reward,
        )
        return trajectory

    threads = cf.ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {threads.submit(episode, task): task for task in todo}
        for future in cf.as_completed(futures):
            task = futures[future]
            try:
                summary.trajectories.append(future.result())
            except Exception as exc:  # noqa: BLE001 - one broken episode must not end the others
                log.exception("%s: the episode failed", task.name)
                summary.failed.append((str(task.path), f"{type(exc).__name__}: {exc}"))
    except BaseException:
        # Ctrl-C (or SIGTERM): the episodes not yet started are cancelled, not run one by
        # one; those under way end first, and what they keep is kept
        threads.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        threads.shutdown(wait=True)
        if own:
            executor.close()
    return summary
