"""The library policy: reference passes retrieved by their pattern operations, real episodes."""

from __future__ import annotations

import json

import torch

from passnet.agent import (
    EnvConfig,
    LibraryPolicy,
    candidate_passes,
    needed_rules,
    pattern_ops,
    run_agent,
)
from passnet.dataset import build_reference_task
from passnet.passes.library import get_reference_pass
from tests.agent.conftest import fast_settings


def test_pattern_ops_reads_the_calls_of_the_pattern_function_only():
    ref = get_reference_pass("rms_norm")
    assert pattern_ops(ref.rule_files()[0]) == {"to", "pow", "mean", "rsqrt"}


def test_a_kept_rule_brings_the_sibling_rules_it_imports():
    ref = get_reference_pass("scale_mask_softmax")
    assert needed_rules(ref, ["FusedScaleMaskSoftmaxDropout"]) == [
        "FusedScaleMaskSoftmaxDropout",
        "FusedScaleMaskSoftmax",
    ]
    assert needed_rules(get_reference_pass("add_layer_norm"), ["FusedAddLayerNorm"]) == [
        "FusedAddLayerNorm"
    ]


def test_candidates_are_the_reference_passes_whose_operations_the_graphs_contain(tmp_path):
    task = build_reference_task("masked_mean_pooling", tmp_path / "t", dtypes=[torch.float32])
    names = [ref.name for ref in candidate_passes(task)]
    assert "masked_mean_pooling" in names
    assert "rms_norm" not in names and "roll_add_layer_norm" not in names


def test_without_a_fitting_pass_it_submits_none_and_earns_the_floor(mlp_task, tmp_path):
    config = EnvConfig(final_settings=fast_settings(), eval_settings=fast_settings())
    summary = run_agent([mlp_task.path], LibraryPolicy, tmp_path / "out", config=config)
    (t,) = summary.trajectories
    assert t.model == "library" and t.stop_reason == "submitted" and summary.failed == []
    assert abs(t.reward - 0.1) < 1e-9 and t.tokens == 0
    calls = [c["function"] for m in t.messages for c in m.get("tool_calls", [])]
    assert [c["name"] for c in calls] == ["inspect_graph", "file_editor", "submit"]
    assert json.loads(calls[1]["arguments"])["file_text"] == "[]\n"
    # resumable: a second run skips the task
    again = run_agent([mlp_task.path], LibraryPolicy, tmp_path / "out", config=config)
    assert again.skipped == 1 and again.trajectories == []
