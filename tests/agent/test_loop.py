"""``passnet agent run`` end to end: the real ``openai`` client against a scripted
OpenAI-compatible server on 127.0.0.1, real tasks, the real harness (Triton interpreted on
the CPU). One run covers every scenario (one task each, two episodes at a time); the tests
read its trajectories."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from passnet.agent import MIN_REWARD, TOOL_NAMES, Trajectory, episode_name, read_trajectories
from passnet.passes.integrity import CHECKS, get_check
from passnet.record import read_records
from passnet.score import compute_scores
from passnet.task import MANIFEST_FILE, create_task, load_task
from tests.agent.conftest import EXPLOITS, relu_sample, subprocess_env
from tests.agent.scripted_openai import Reply, ScriptedOpenAI, call
from tests.conftest import DEV, MLP

pytest.importorskip("openai")
pytest.importorskip("triton")

OPT = DEV / "transformers-auto-model" / "opt-tiny-random"
B = 0.1
MAX_STEPS = 6

HONEST_RELU = """\
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def triton_relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def pattern(in_0):
    return torch.nn.functional.relu(in_0, inplace=False)


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return triton_relu
"""

REJECTING = {c.name: c.exploits[0] for c in CHECKS if c.exploits and c.rejects}
"""One exploit per integrity check that ends as pass_rejected (every static rule, the
dispatch guard, the harness's input-mutation and output-alias findings)."""
BY_CORRECTNESS = {
    c.name: c.exploits[0]
    for c in CHECKS
    if c.exploits
    and not c.rejects
    and c.exploits[0] not in REJECTING.values()
    and c.name != "fresh-draw"  # its exploit keeps state: the static layer rejects it first
}
"""Harness mechanisms under which a cheat simply computes wrong outputs."""

PROTOCOL = {
    "malformed": [Reply("", [("file_editor", '{"command": "view", "path": ')])],
    "unknown-tool": [Reply("", [("run_shell", {"cmd": "rm -rf /"})])],
    "no-tool-call": [Reply("I would rather just talk about passes.")],
    "outside": [
        Reply(
            "",
            [
                call("file_editor", command="create", path="../../escape.py", file_text="x = 1\n"),
                call("file_editor", command="create", path="/tmp/passnet_evil.py", file_text="x\n"),
                call("file_editor", command="view", path="pass_dir/../task.json"),
            ],
        ),
        Reply("", [call("submit")]),
    ],
    "never-submits": [Reply("", [call("file_editor", command="view", path=".")])],
    "model-error": [Reply(status=500)],
}
"""Task name -> script of a model that misbehaves (each on the MLP task)."""

EXPECTED_STOP = {
    "malformed": "format_errors",
    "unknown-tool": "format_errors",
    "no-tool-call": "format_errors",
    "outside": "submitted",
    "never-submits": "max_steps",
    "model-error": "model_error",
}


def _files_of(folder: Path) -> list[tuple[str, str]]:
    return [(p.name, p.read_text()) for p in sorted(folder.iterdir()) if p.is_file()]


def _cheat_script(exploit: str) -> list[Reply]:
    """Write the files of a red-team pass folder (``exploits/<name>``), then submit."""
    creates = [
        call("file_editor", command="create", path=name, file_text=text)
        for name, text in _files_of(EXPLOITS / exploit)
    ]
    return [Reply(f"Writing {exploit}.", creates), Reply("", [call("submit")])]


@dataclass
class AgentRun:
    out: Path
    trajectories: dict[str, Trajectory]
    tasks: dict[str, Path]
    server: ScriptedOpenAI
    command: list[str]
    done: subprocess.CompletedProcess[str]

    def records_of_final(self, name: str) -> list[Any]:
        task = load_task(self.tasks[name])
        folder = self.out / "episodes" / episode_name(task, "scripted-model") / "evals"
        (final,) = [p for p in folder.iterdir() if p.name.endswith("-final")]
        return read_records(final / "results.jsonl")


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> AgentRun:
    root = tmp_path_factory.mktemp("agent_run")
    relu = relu_sample(root / "samples" / "relu_x_times_w")
    scripts: dict[str, list[Reply]] = {
        "honest": [
            Reply(
                "A Triton kernel for the two ReLUs.",
                [
                    call("file_editor", command="create", path="FRelu.py", file_text=HONEST_RELU),
                    call(
                        "file_editor", command="create", path=MANIFEST_FILE, file_text='["FRelu"]'
                    ),
                ],
            ),
            Reply("", [call("pass_evaluator")]),
            Reply("Done.", [call("submit")]),
        ],
        **PROTOCOL,
    }
    # the red-team suite's honest pass on its graph: correct, but its interpreted Triton
    # kernel is far slower than eager relu on 64x64 (AS far below b), beside the cheats
    scripts["slow-honest"] = _cheat_script("../honest/triton_relu")
    tasks = {"honest": create_task(root / "honest", [OPT], name="honest").path}
    tasks["slow-honest"] = create_task(root / "slow-honest", [relu], name="slow-honest").path
    for name in PROTOCOL:
        tasks[name] = create_task(root / name, [MLP], name=name).path
    for check, exploit in {**REJECTING, **BY_CORRECTNESS}.items():
        name = f"cheat-{check}"
        tasks[name] = create_task(root / name, [relu], name=name).path
        scripts[name] = _cheat_script(exploit)
    out = root / "out"
    with ScriptedOpenAI(scripts) as server:
        command = [
            sys.executable,
            "-m",
            "passnet.cli",
            "agent",
            "run",
            *map(str, tasks.values()),
            "--model",
            "scripted-model",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "PASSNET_TEST_KEY",
            "--max-steps",
            str(MAX_STEPS),
            "--workers",
            "2",
            "--warmup",
            "1",
            "--trials",
            "3",
            "--eval-warmup",
            "1",
            "--eval-trials",
            "3",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
        env = {**subprocess_env(), "PASSNET_TEST_KEY": "sk-test-key"}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    by_task = {Path(t.task).name: t for t in read_trajectories(out / "trajectories.jsonl")}
    return AgentRun(out, by_task, tasks, server, command, done)


def _tool_texts(t: Trajectory) -> list[str]:
    return [m["content"] for m in t.messages if m["role"] == "tool"]


def test_every_task_ends_in_one_trajectory_line_with_exactly_the_issues_fields(agent_run: AgentRun):
    lines = (agent_run.out / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == len(agent_run.tasks) == len(agent_run.trajectories)
    fields = {
        "task", "model", "messages", "tools", "reward", "best_reward", "steps", "tokens",
        "wall_s", "stop_reason", "pass_dir",
    }  # fmt: skip
    for line in lines:
        assert set(json.loads(line)) == fields


def test_an_honest_triton_pass_scores_above_the_floor(agent_run: AgentRun):
    t = agent_run.trajectories["honest"]
    assert t.stop_reason == "submitted", _tool_texts(t)
    assert t.reward > B, _tool_texts(t)[-1]
    assert t.best_reward >= t.reward
    assert t.model == "scripted-model" and t.steps == 4 and t.tokens == 3 * 120
    assert t.pass_dir["FRelu.py"] == HONEST_RELU
    assert [x["function"]["name"] for x in t.tools] == list(TOOL_NAMES)
    evaluator, final = _tool_texts(t)[-2:]
    assert "FRelu: 2 replacement(s)" in evaluator and "ok" in evaluator
    assert final.startswith("final evaluation (submitted)") and "AS = " in final
    # the conversation is valid OpenAI chat: every tool call is answered by its id
    ids = [c["id"] for m in t.messages for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in t.messages if m["role"] == "tool"]
    assert ids == answered
    best = agent_run.out / "episodes"
    assert any((p / "best_pass_dir" / "FRelu.py").is_file() for p in best.iterdir())


@pytest.mark.parametrize("check", sorted(REJECTING))
def test_a_pass_caught_by_each_rejecting_check_earns_the_minimum(agent_run: AgentRun, check: str):
    t = agent_run.trajectories[f"cheat-{check}"]
    assert t.stop_reason == "submitted"
    assert t.reward == MIN_REWARD, _tool_texts(t)[-1]
    records = agent_run.records_of_final(f"cheat-{check}")
    assert [r.status.value for r in records] == ["pass_rejected"], _tool_texts(t)[-1]
    if get_check(check).layer == "harness":
        assert any(f.startswith(f"{check}: ") for f in records[0].integrity)


def test_an_honest_pass_far_slower_than_eager_earns_more_than_every_rejected_cheat(
    agent_run: AgentRun,
):
    slow = agent_run.trajectories["slow-honest"]
    records = agent_run.records_of_final("slow-honest")
    assert [r.status.value for r in records] == ["ok"], _tool_texts(slow)[-1]
    assert records[0].speedup_e2e is not None and records[0].speedup_e2e < B
    assert 0 < slow.reward < B  # slower than the score's failure penalty, and still it ran
    for check in REJECTING:  # the same graph: every cheat was rejected, and earns less
        assert agent_run.trajectories[f"cheat-{check}"].reward < slow.reward, check


def test_export_by_default_keeps_the_episodes_whose_passes_ran(agent_run: AgentRun, tmp_path):
    out = tmp_path / "default.jsonl"
    cmd = [sys.executable, "-m", "passnet.cli", "agent", "export", str(agent_run.out)]
    done = subprocess.run([*cmd, "--out", str(out)], env=subprocess_env(), capture_output=True)
    assert done.returncode == 0, done.stderr
    ran = [t for t in agent_run.trajectories.values() if t.reward > MIN_REWARD]
    assert len(ran) < len(agent_run.trajectories)  # the rejected cheats are left out
    exported = [json.loads(x)["messages"] for x in out.read_text().splitlines()]
    assert sorted(map(json.dumps, exported)) == sorted(json.dumps(t.messages) for t in ran)


@pytest.mark.parametrize("check", sorted(BY_CORRECTNESS))
def test_a_pass_caught_by_correctness_gets_no_speedup_credit(agent_run: AgentRun, check: str):
    t = agent_run.trajectories[f"cheat-{check}"]
    assert t.stop_reason == "submitted"
    records = agent_run.records_of_final(f"cheat-{check}")
    statuses = {s.value for s in get_check(check).statuses}
    assert [r.status.value for r in records][0] in statuses, _tool_texts(t)[-1]
    report = compute_scores(records, b=B)
    assert report.es[-5] == pytest.approx(B)  # failing at the strict tolerance: b, no speedup
    assert t.reward < agent_run.trajectories["honest"].reward


@pytest.mark.parametrize("name", sorted(PROTOCOL))
def test_a_misbehaving_model_ends_cleanly_with_the_right_stop_reason(
    agent_run: AgentRun, name: str
):
    t = agent_run.trajectories[name]
    assert t.stop_reason == EXPECTED_STOP[name]
    # nothing submitted earns the minimum; "outside" submits an empty pass_dir: AS = b
    assert t.reward == (pytest.approx(B) if name == "outside" else MIN_REWARD)
    texts = _tool_texts(t)
    users = [m["content"] for m in t.messages[2:] if m["role"] == "user"]
    if name == "malformed":
        assert len(texts) == 5 and all("not valid JSON" in x for x in texts)
    elif name == "unknown-tool":
        assert "unknown tool 'run_shell'" in texts[0]
    elif name == "no-tool-call":
        assert len(users) == 5 and "called no tool" in users[0]
    elif name == "outside":
        assert all(x.startswith("Error: refused") for x in texts[:3]), texts
        assert not (agent_run.tasks[name].parent / "escape.py").exists()
        assert not Path("/tmp/passnet_evil.py").exists()
        assert set(t.pass_dir) == {MANIFEST_FILE}
    elif name == "never-submits":
        assert t.steps == MAX_STEPS
    elif name == "model-error":
        assert t.steps == 0 and t.messages[-1]["role"] == "user"


def test_the_client_sent_the_tools_and_the_api_key(agent_run: AgentRun):
    first = agent_run.server.requests[0]
    assert [x["function"]["name"] for x in first["tools"]] == list(TOOL_NAMES)
    assert first["model"] == "scripted-model"
    assert all(h.get("authorization") == "Bearer sk-test-key" for h in agent_run.server.headers)


def test_a_second_run_resumes_without_running_an_episode_again(agent_run: AgentRun):
    before = (agent_run.out / "trajectories.jsonl").read_text()
    env = {**subprocess_env(), "PASSNET_TEST_KEY": "sk-test-key"}
    command = [*agent_run.command]
    command[command.index("--base-url") + 1] = "http://127.0.0.1:9/v1"  # nothing listens
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed: {len(agent_run.tasks)} episode(s)" in done.stdout
    assert (agent_run.out / "trajectories.jsonl").read_text() == before


def test_export_keeps_the_episodes_above_the_reward_as_sft_sets(agent_run: AgentRun, tmp_path):
    honest = agent_run.trajectories["honest"]
    kept = [t for t in agent_run.trajectories.values() if t.reward >= honest.reward]
    base = [sys.executable, "-m", "passnet.cli", "agent", "export", str(agent_run.out)]
    for fmt in ("openai", "sharegpt"):
        out = tmp_path / f"{fmt}.jsonl"
        cmd = [*base, "--min-reward", repr(honest.reward), "--format", fmt, "--out", str(out)]
        done = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(lines) == len(kept)
        if fmt == "openai":
            assert {"messages", "tools"} == set(lines[0])
            assert honest.messages in [line["messages"] for line in lines]
        else:
            task_prompt = honest.messages[1]["content"]
            (line,) = [x for x in lines if x["conversations"][0]["value"] == task_prompt]
            roles = [turn["from"] for turn in line["conversations"]]
            assert roles[0] == "human" and roles[-1] in ("gpt", "function_call")
            assert "function_call" in roles and "observation" in roles
            assert json.loads(line["tools"])[0]["function"]["name"] == "file_editor"
