"""The verifiers adapter: its framework-free bridge (what the vf.MultiTurnEnv subclass delegates
to) and the precise error without verifiers. verifiers itself is not installed here (it
pins openai < 3 and brings a large stack), so the vf class is exercised on a machine with it."""

from __future__ import annotations

import importlib.util
import json

import pytest

from passnet.agent import MIN_REWARD, TOOLS, EnvConfig, load_environment
from passnet.agent._verifiers import EpisodeBridge, dataset_rows, tool_defs
from passnet.errors import MissingDependency
from passnet.task import MANIFEST_FILE
from tests.agent.conftest import fast_settings


def test_tool_defs_are_the_schemas_in_the_provider_agnostic_form():
    defs = tool_defs()
    assert [d["name"] for d in defs] == [t["function"]["name"] for t in TOOLS]
    assert all(set(d) == {"name", "description", "parameters"} for d in defs)


def test_rows_hold_the_prompt_reset_makes_and_the_task(mlp_task):
    config = EnvConfig()
    (row,) = dataset_rows([mlp_task], config)
    assert row["info"] == {"task": str(mlp_task.path.resolve())}
    assert row["prompt"][0]["role"] == "system"
    assert "Task mlp:" in row["prompt"][1]["content"]


def test_the_bridge_runs_an_episode_from_assistant_messages(mlp_task, tmp_path):
    bridge = EpisodeBridge(EnvConfig(final_settings=fast_settings()), tmp_path)
    key = bridge.open(mlp_task.path)
    view = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {
                    "name": "file_editor",
                    "arguments": json.dumps({"command": "view", "path": MANIFEST_FILE}),
                },
            }
        ],
    }
    (answer,) = bridge.respond(key, view)
    assert answer == {"role": "tool", "tool_call_id": "a", "content": "     1\t[]"}
    assert not bridge.done(key) and bridge.reward(key) == MIN_REWARD  # nothing submitted
    (nudge,) = bridge.respond(key, {"role": "assistant", "content": "hmm"})
    assert nudge["role"] == "user"
    submit = {
        "role": "assistant",
        "tool_calls": [{"id": "b", "function": {"name": "submit", "arguments": "{}"}}],
    }
    (final,) = bridge.respond(key, submit)
    assert final["content"].startswith("final evaluation (submitted)")
    assert bridge.done(key) and bridge.reward(key) == pytest.approx(0.1)  # empty pass_dir: b
    bridge.close(key)
    assert bridge.done(key)


@pytest.mark.skipif(
    importlib.util.find_spec("verifiers") is not None, reason="verifiers is installed"
)
def test_without_verifiers_load_environment_says_how_to_install_it(mlp_task):
    with pytest.raises(MissingDependency, match=r"passnet\[agent-verifiers\]"):
        load_environment([mlp_task.path])
