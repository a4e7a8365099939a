"""Site tasks: the subgraphs around a reference pass's matches, cut from the real graphs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from passnet.cli import main
from passnet.data import dev_samples_dir
from passnet.dataset import SubgraphStatus, build_reference_task
from passnet.dataset._sites import _pattern_function, reference_patterns, site_subgraphs
from passnet.errors import PassLoadError, SampleError
from passnet.passes.library import ReferencePass, get_reference_pass, reference_passes
from passnet.sample import load_sample
from passnet.task import load_task

SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"
BERT_TINY = "transformers-auto-model/prajjwal1_bert-tiny"
ROLL_STEM = "vuiseng9_tiny-random-SwinModel_0178-0182"

# Distinct site subgraphs per pass over its source samples (one per canonical hash and sample).
SITE_SUBGRAPHS = {
    "masked_mean_pooling": 1,
    "roll_add_layer_norm": 1,
    "rms_norm": 1,  # five RMSNorms of one shape
    "add_layer_norm": 9,  # per BERT: embeddings add + LN, attention output, feed-forward output
    "linear_bias_gelu": 3,  # the feed-forward sublayer of each BERT
    "scale_mask_softmax": 8,  # four attention shapes in each Swin
}


def test_every_catalog_pass_has_a_site_expectation():
    assert {p.name for p in reference_passes()} == set(SITE_SUBGRAPHS)


def test_patterns_come_from_the_rule_files_source_in_load_order():
    for ref in reference_passes():
        patterns = reference_patterns(ref)
        assert [rule for rule, _ in patterns] == ref.rules
        assert all(p.compute_nodes for _, p in patterns)


def test_the_swin_roll_site_is_cut_out_with_its_two_outputs(tmp_path):
    ref = get_reference_pass("roll_add_layer_norm")
    sites, records = site_subgraphs(
        ref, dev_samples_dir() / SWIN, tmp_path / "sites", root=dev_samples_dir()
    )
    assert len(sites) == 1
    (site,) = sites
    assert site.rule == "FusedRollAddLayerNorm" and len(site.range) == 4
    assert site.nodes == ("roll_1", "view_48", "add_8", "layer_norm_7")
    (record,) = records
    assert record.status is SubgraphStatus.WRITTEN
    assert record.ops == ["torch.roll", "Tensor.view", "operator.add", "F.layer_norm"]
    info = json.loads((Path(record.path) / "graph_net.json").read_text())["subgraph"]
    assert info["kind"] == "pass-site" and info["parent"] == SWIN  # relative to the root
    sample = load_sample(record.path)
    with torch.no_grad():
        outputs = sample.build_module("cpu")(*sample.replay_inputs("cpu", seed=0))
    # the residual sum (the next block's input) and the LayerNorm
    assert [tuple(o.shape) for o in outputs] == [(1, 64, 32), (1, 64, 32)]


def test_sites_follow_the_rule_order_and_repeated_layers_are_written_once(tmp_path):
    # The narrow linear+GELU rule matches inside each feed-forward sublayer, which the
    # first rule already claims; bert-tiny's two layers give one subgraph.
    ref = get_reference_pass("linear_bias_gelu")
    sites, records = site_subgraphs(ref, dev_samples_dir() / BERT_TINY, tmp_path / "sites")
    assert [s.rule for s in sites] == ["FusedFeedForwardAddLayerNorm"] * 2
    assert [r.status for r in records] == [SubgraphStatus.WRITTEN, SubgraphStatus.DUPLICATE]
    assert records[1].duplicate_of == records[0].path


def test_a_sample_the_pass_does_not_match_is_a_sample_error(tmp_path):
    resnet = "torchvision/resnet18"
    ref = ReferencePass("rms_norm", "RMSNorm", (resnet,))
    with pytest.raises(SampleError, match="matches nothing") as info:
        site_subgraphs(ref, dev_samples_dir() / resnet, tmp_path / "sites")
    assert info.value.context["sample"].endswith("resnet18")
    assert not (tmp_path / "sites").exists()


def test_site_task_holds_every_shape_in_every_dtype(tmp_path):
    task = build_reference_task(
        "roll_add_layer_norm",
        tmp_path / "task",
        dtypes=(torch.float32, torch.float16),
        scope="site",
        shape_factors=(2,),
    )
    assert task.name == "reference-roll_add_layer_norm-sites"
    assert [g.name for g in task.graphs] == [
        f"{ROLL_STEM}_float32",
        f"{ROLL_STEM}_float16",
        f"{ROLL_STEM}_S0-2_float32",
        f"{ROLL_STEM}_S0-2_float16",
    ]
    scaled = load_sample(task.graphs[3])
    with torch.no_grad():
        outputs = scaled.build_module("cpu")(*scaled.replay_inputs("cpu", seed=0))
    assert [(tuple(o.shape), o.dtype) for o in outputs] == [((2, 64, 32), torch.float16)] * 2
    assert (task.pass_dir / "FusedRollAddLayerNorm.py").is_file()
    assert task.metadata["scope"] == "site" and task.metadata["shape_factors"] == [2]
    assert [(m["site"], m["shape"], m["dtype"]) for m in task.graph_metadata] == [
        ("0178-0182", "", "float32"),
        ("0178-0182", "", "float16"),
        ("0178-0182", "S0-2", "float32"),
        ("0178-0182", "S0-2", "float16"),
    ]
    assert {m["source"] for m in task.graph_metadata} == {SWIN}


@pytest.mark.parametrize("name", [p.name for p in reference_passes()])
def test_site_tasks_have_the_expected_subgraphs(name, tmp_path):
    task = build_reference_task(
        name, tmp_path / "task", dtypes=(torch.float32,), scope="site", shape_factors=()
    )
    assert len(task.graphs) == SITE_SUBGRAPHS[name]


def test_unknown_scope_is_refused(tmp_path):
    with pytest.raises(ValueError, match="scope must be one of graph, site"):
        build_reference_task("rms_norm", tmp_path / "task", scope="subgraph")
    assert not (tmp_path / "task").exists()


def test_cli_builds_a_site_task_and_refuses_shape_factors_for_whole_graphs(tmp_path, capsys):
    out = tmp_path / "roll"
    argv = ["library", "task", "roll_add_layer_norm", str(out), "--dtypes", "float32"]
    assert main([*argv, "--scope", "site", "--shape-factors"]) == 0
    assert [g.name for g in load_task(out).graphs] == [f"{ROLL_STEM}_float32"]
    assert main([*argv[:3], str(tmp_path / "other"), "--shape-factors", "2"]) == 2
    assert "--shape-factors needs --scope site" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv[:3], str(tmp_path / "x"), "--scope", "site", "--shape-factors", "1"])
    assert "a shape factor is an integer >= 2" in capsys.readouterr().err


def test_a_rule_file_without_a_readable_pattern_is_a_precise_load_error(tmp_path):
    missing = tmp_path / "NoPattern.py"
    missing.write_text("def replacement_args(a):\n    return (a,)\n")
    with pytest.raises(PassLoadError, match="defines no pattern") as info:
        _pattern_function(missing, "p")
    assert info.value.context["file"].endswith("NoPattern.py")
    broken = tmp_path / "Broken.py"
    broken.write_text("def pattern(a):\n    return a +\n")
    with pytest.raises(PassLoadError, match="cannot read the rule"):
        _pattern_function(broken, "p")
