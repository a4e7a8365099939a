"""trajectories.jsonl: exactly the issue's fields, the one JSONL writer/reader, SFT exports."""

from __future__ import annotations

import json

import pytest

from passnet.agent import (
    MIN_REWARD,
    Trajectory,
    append_trajectory,
    export_trajectories,
    read_trajectories,
)
from passnet.cli import main
from passnet.errors import InputFormatError


def _trajectory(reward: float, task: str = "/tasks/a") -> Trajectory:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Task a: ..."},
        {
            "role": "assistant",
            "content": "thinking",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "final evaluation"},
        {"role": "tool", "tool_call_id": "c2", "content": "not run"},
    ]
    return Trajectory(
        task=task,
        model="m",
        messages=messages,
        tools=[{"type": "function", "function": {"name": "submit"}}],
        reward=reward,
        best_reward=reward,
        steps=1,
        tokens=10,
        wall_s=1.5,
        stop_reason="submitted",
        pass_dir={"sorted_output_pass_rule_names.json": "[]"},
    )


def test_lines_round_trip_and_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    append_trajectory(path, _trajectory(0.5))
    append_trajectory(path, _trajectory(0.1, "/tasks/b"))
    with open(path, "a") as f:
        f.write('{"task": "/tasks/c", "mod')  # a kill mid-write
    assert [t.task for t in read_trajectories(path)] == ["/tasks/a", "/tasks/b"]
    assert read_trajectories(tmp_path / "missing.jsonl") == []


def test_a_line_with_other_fields_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    line = {**_trajectory(0.5).to_dict(), "extra": 1}
    path.write_text(json.dumps(line) + "\n" + json.dumps(_trajectory(0.2).to_dict()) + "\n")
    with pytest.raises(InputFormatError) as info:
        read_trajectories(path)
    assert info.value.context["line"] == "1"


def test_export_filters_by_reward_in_both_formats(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    for reward in (0.05, 0.1, 0.8):
        append_trajectory(path, _trajectory(reward, f"/tasks/{reward}"))
    out = tmp_path / "sft.jsonl"
    assert export_trajectories([tmp_path], out, min_reward=0.1, fmt="openai") == 2
    first = json.loads(out.read_text().splitlines()[0])
    assert first == {"messages": _trajectory(0.1).messages, "tools": _trajectory(0.1).tools}
    assert export_trajectories([path], out, min_reward=0.5, fmt="sharegpt") == 1
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["system"] == "sys"
    assert [t["from"] for t in line["conversations"]] == ["human", "function_call"]
    calls = json.loads(line["conversations"][1]["value"])
    assert [c["name"] for c in calls] == ["submit", "submit"]
    with pytest.raises(ValueError, match="unknown export format"):
        export_trajectories([path], out, min_reward=0, fmt="alpaca")


def test_export_by_default_keeps_every_episode_whose_passes_ran_and_no_other(tmp_path, capsys):
    path = tmp_path / "trajectories.jsonl"
    # rejected / unevaluable / never submitted, then passes that ran: slow honest, empty, fast
    for reward in (MIN_REWARD, 1e-4, 0.1, 1.7):
        append_trajectory(path, _trajectory(reward, f"/tasks/{reward}"))
    out = tmp_path / "sft.jsonl"
    assert export_trajectories([path], out) == 3
    assert main(["agent", "export", str(tmp_path), "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 3
    assert "exported 3 trajectories with reward >= 0" in capsys.readouterr().out
