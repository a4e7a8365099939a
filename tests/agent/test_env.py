"""PassEnv in process: reset, the tools, the reward from the harness, budgets. (No Triton kernel
runs here: the evaluation children of this process may not interpret Triton; the end-to-end
run in test_loop.py does.)"""

from __future__ import annotations

import dataclasses
import json

import pytest

from passnet.agent import (
    MIN_REWARD,
    SYSTEM_PROMPT,
    TOOL_REGISTRY,
    TOOLS,
    AgentError,
    EnvConfig,
    PassEnv,
    ToolCall,
)
from passnet.task import MANIFEST_FILE
from tests.agent.conftest import EXPLOITS, fast_settings

B = 0.1

SIGMOID_PASS = """
import torch
import triton
import triton.language as tl


@triton.jit
def _sigmoid(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, 1.0 / (1.0 + tl.exp(-x)), mask=offs < n)


def fused(x):
    out = torch.empty_like(x)
    _sigmoid[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def pattern(in_0):
    return torch.sigmoid(in_0)


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return fused
"""


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall(f"call_{name}", name, json.dumps(args))


@pytest.fixture
def config() -> EnvConfig:
    return EnvConfig(final_settings=fast_settings(), eval_settings=fast_settings(), max_steps=20)


def test_an_episode_with_the_real_tools_and_the_reward_from_the_harness(mlp_task, config, tmp_path):
    env = PassEnv(config, workdir=tmp_path / "episodes")
    obs = env.reset(mlp_task)
    assert obs.tools == TOOLS and obs.messages[0]["content"] == SYSTEM_PROMPT
    assert "graphs/sadhaklal_mlp-iris  [float32]" in obs.messages[1]["content"]

    obs, reward, terminated, truncated, info = env.step(
        _call("inspect_graph", graph="sadhaklal_mlp-iris")
    )
    text = obs.messages[0]["content"]
    assert obs.messages[0]["tool_call_id"] == "call_inspect_graph"
    assert "relu = torch.relu(linear)  # float32[2, 5]" in text
    assert "Inductor: 3 kernels" in text and (reward, terminated, truncated) == (0.0, False, False)

    env.step(_call("file_editor", command="create", path="Sig.py", file_text=SIGMOID_PASS))
    env.step(_call("file_editor", command="create", path=MANIFEST_FILE, file_text='["Sig"]'))
    obs, _, _, _, info = env.step(_call("pass_evaluator"))
    text = obs.messages[0]["content"]
    assert "Sig: matched nowhere" in text and "the graph never calls torch.sigmoid" in text
    assert info["evaluation"].records[0].status.value == "pass_mismatch"
    assert info["as"] == pytest.approx(B) and info["evaluation"].reward == pytest.approx(B)

    # a cheat is rejected by the harness whatever its files claim about themselves
    cheat = (EXPLOITS / "torch_delegation" / "Cheat.py").read_text()
    env.step(
        _call("file_editor", command="create", path="Cheat.py", file_text=cheat + "\nAS = 99.0\n")
    )
    env.step(_call("file_editor", command="create", path=MANIFEST_FILE, file_text='["Cheat"]'))
    obs, _, _, _, info = env.step(_call("pass_evaluator"))
    assert "pass_rejected" in obs.messages[0]["content"] and info["evaluation"].rejected
    assert info["evaluation"].reward == MIN_REWARD and info["evaluation"].outcome == "rejected"
    assert "reward -1.0000 (a pass was rejected" in obs.messages[0]["content"]
    assert env.best_files is not None  # the best whole-task evaluation's pass_dir is kept

    obs, reward, terminated, truncated, info = env.step(_call("submit"))
    assert terminated and not truncated and info["stop_reason"] == "submitted"
    assert reward == MIN_REWARD and env.final is not None and env.final.rejected
    assert env.best_reward == pytest.approx(B)  # the empty evaluation's, not the cheat's
    assert obs.messages[0]["content"].startswith("final evaluation (submitted)")
    assert (tmp_path / "mlp_task" / "pass_dir" / "Cheat.py").exists() is False
    with pytest.raises(AgentError, match="has ended"):
        env.step(_call("submit"))


def test_invalid_actions_in_a_row_end_the_episode(mlp_task, config, tmp_path):
    env = PassEnv(
        EnvConfig(final_settings=config.final_settings, max_format_errors=3), workdir=tmp_path
    )
    env.reset(mlp_task)
    _, _, _, truncated, info = env.step("no tool call, just words")
    assert not truncated and info["error"] == "no tool call"
    env.step(ToolCall("x", "file_editor", "{broken"))
    env.step(_call("file_editor", command="view", path="/etc/passwd"))  # a valid call: resets
    env.step(ToolCall("y", "nope", "{}"))
    env.step("words")
    obs, reward, terminated, truncated, info = env.step(ToolCall("z", "file_editor", "[]"))
    assert truncated and not terminated and info["stop_reason"] == "format_errors"
    assert reward == MIN_REWARD and env.steps == 6


def test_the_step_budget_truncates_with_the_floor_reward(mlp_task, config, tmp_path):
    env = PassEnv(EnvConfig(final_settings=config.final_settings, max_steps=2), workdir=tmp_path)
    env.reset(mlp_task)
    assert env.step(_call("file_editor", command="view", path="."))[3] is False
    _, reward, terminated, truncated, info = env.step(
        _call("file_editor", command="view", path=".")
    )
    assert truncated and not terminated and info["stop_reason"] == "max_steps"
    assert reward == MIN_REWARD and env.final is None


def test_end_from_outside_names_a_known_reason(mlp_task, config, tmp_path):
    env = PassEnv(config, workdir=tmp_path)
    env.reset(mlp_task)
    with pytest.raises(AgentError, match="unknown stop reason"):
        env.end("bored")
    env.end("max_tokens")
    assert env.done and env.stop_reason == "max_tokens" and env.reward == MIN_REWARD


def test_a_graph_name_the_task_lacks_is_a_tool_error_listing_the_graphs(mlp_task, config, tmp_path):
    env = PassEnv(config, workdir=tmp_path)
    env.reset(mlp_task)
    obs, _, _, _, info = env.step(_call("inspect_graph", graph="resnet"))
    assert "no graph 'resnet'" in obs.messages[0]["content"]
    assert "graphs/sadhaklal_mlp-iris" in info["error"]


def test_reset_offers_each_registered_tools_schema(mlp_task, config, tmp_path):
    env = PassEnv(config, workdir=tmp_path)
    obs = env.reset(mlp_task)
    assert obs.tools == tuple(TOOL_REGISTRY.get(n).schema() for n in TOOL_REGISTRY.names())


def test_an_unknown_tool_is_an_error_observation_and_never_a_submission(mlp_task, config, tmp_path):
    env = PassEnv(dataclasses.replace(config, max_format_errors=10), workdir=tmp_path)
    env.reset(mlp_task)
    for name in ("submit_now", "Submit", "", "passnet.agent._tools:Submit"):
        obs, reward, terminated, truncated, info = env.step(ToolCall("u", name, "{}"))
        (message,) = obs.messages
        assert message["role"] == "tool" and message["tool_call_id"] == "u"
        assert message["content"].startswith(f"Error: unknown tool {name!r}")
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["error"] and info["evaluation"] is None
    assert not env.done and env.final is None and env.evaluations == []
    # malformed arguments of a known tool: an error too, and the episode goes on
    obs, _, terminated, truncated, info = env.step(ToolCall("m", "submit", "{not json"))
    assert "not valid JSON" in obs.messages[0]["content"] and not (terminated or truncated)
    assert env.final is None and env.evaluations == []
    # a valid call after them still works
    obs, _, terminated, _, _ = env.step(_call("file_editor", command="view", path="."))
    assert not terminated and MANIFEST_FILE in obs.messages[0]["content"]
