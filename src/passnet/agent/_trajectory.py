"""Trajectories: one JSON line per episode in ``trajectories.jsonl``, and SFT exports.

A line holds exactly::

    {"task", "model", "messages", "tools", "reward", "best_reward", "steps", "tokens",
     "wall_s", "stop_reason", "pass_dir"}

``messages`` is the conversation in the OpenAI chat format (system, user, assistant
messages with ``tool_calls``, ``tool`` messages), ``tools`` the tool schemas, ``reward``
the final reward, ``best_reward`` the best reward of any whole-task evaluation of the
episode, ``steps`` the actions taken, ``tokens`` the tokens the model used, ``pass_dir``
the final files (name → text). Lines are written by the one JSON Lines writer
(:func:`passnet.record.append_jsonl`: whole, fsync'ed lines) and read by the one reader.

:func:`export_trajectories` turns the episodes that earned at least a reward (by default
:data:`DEFAULT_MIN_REWARD`, 0: every episode whose submitted passes ran, none that earned
:data:`~passnet.agent.MIN_REWARD`: rejected, unevaluable, nothing submitted) into a
fine-tuning set: ``openai`` (``{"messages", "tools"}`` per line, OpenAI's chat fine-tuning
format with tools) or ``sharegpt`` (LLaMA-Factory's ShareGPT with ``function_call`` and
``observation`` turns).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from passnet.record import append_jsonl, read_jsonl

__all__ = [
    "DEFAULT_MIN_REWARD",
    "TRAJECTORIES_FILE",
    "Trajectory",
    "append_trajectory",
    "export_trajectories",
    "read_trajectories",
]

log = logging.getLogger(__name__)

TRAJECTORIES_FILE = "trajectories.jsonl"
EXPORT_FORMATS = ("openai", "sharegpt")
DEFAULT_MIN_REWARD = 0.0
"""The export's default threshold: above :data:`~passnet.agent.MIN_REWARD` (-1, what a
rejected, unevaluable or unsubmitted pass earns) and at most any AS (> 0), so it keeps
exactly the episodes whose submitted passes ran."""


@dataclass(frozen=True)
class Trajectory:
    """One episode, as ``trajectories.jsonl`` keeps it."""

    task: str
    """The task folder (absolute)."""
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    reward: float
    best_reward: float
    steps: int
    tokens: int
    wall_s: float
    stop_reason: str
    pass_dir: dict[str, str]

    @property
    def key(self) -> tuple[str, str]:
        """What makes an episode: its task and its model (a resumed run skips these)."""
        return (self.task, self.model)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        """Parse one line; a missing or extra field or a wrong type is a ``ValueError``."""
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            missing, extra = sorted(names - set(data)), sorted(set(data) - names)
            raise ValueError(f"trajectory fields: missing {missing}, unexpected {extra}")
        kinds = {
            "task": str,
            "model": str,
            "messages": list,
            "tools": list,
            "reward": (int, float),
            "best_reward": (int, float),
            "steps": int,
            "tokens": int,
            "wall_s": (int, float),
            "stop_reason": str,
            "pass_dir": dict,
        }
        for name, kind in kinds.items():
            if isinstance(data[name], bool) or not isinstance(data[name], kind):
                raise ValueError(f"trajectory field {name!r} has the wrong type")
        return cls(**data)


def append_trajectory(path: str | Path, trajectory: Trajectory) -> None:
    """Append one episode to a ``trajectories.jsonl`` (whole, fsync'ed line)."""
    append_jsonl(path, trajectory.to_dict())


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Every episode of a ``trajectories.jsonl`` (a missing file: none)."""
    path = Path(path)
    if not path.exists():
        return []
    return read_jsonl(path, Trajectory.from_dict, what="a trajectory")


def _sharegpt(t: Trajectory) -> dict[str, Any]:
    system = ""
    turns: list[dict[str, str]] = []
    for m in t.messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "system":
            system = content
        elif role == "user":
            turns.append({"from": "human", "value": content})
        elif role == "assistant":
            calls = [
                {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                for c in m.get("tool_calls") or []
            ]
            if calls:
                value = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
                turns.append({"from": "function_call", "value": value})
            else:
                turns.append({"from": "gpt", "value": content})
        elif role == "tool":
            if turns and turns[-1]["from"] == "observation":
                turns[-1]["value"] += "\n" + content  # parallel calls: one observation turn
            else:
                turns.append({"from": "observation", "value": content})
    while turns and turns[-1]["from"] in ("human", "observation"):
        turns.pop()  # a training example ends on the assistant's turn
    return {"conversations": turns, "system": system, "tools": json.dumps(t.tools)}


def export_trajectories(
    sources: Iterable[str | Path],
    out: str | Path,
    *,
    min_reward: float = DEFAULT_MIN_REWARD,
    fmt: str = "openai",
) -> int:
    """Write the episodes of ``sources`` (``trajectories.jsonl`` files or folders holding
    one) with ``reward >= min_reward`` to ``out`` in ``fmt``; returns how many."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    out = Path(out)
    if out.exists():
        out.unlink()
    count = 0
    for source in sources:
        path = Path(source)
        path = path / TRAJECTORIES_FILE if path.is_dir() else path
        for t in read_trajectories(path):
            if t.reward < min_reward:
                continue
            line = {"messages": t.messages, "tools": t.tools} if fmt == "openai" else _sharegpt(t)
            append_jsonl(out, line)
            count += 1
    log.info("exported %d trajectories to %s", count, out)
    return count
