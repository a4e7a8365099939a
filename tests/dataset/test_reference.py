"""Reference tasks: the real source samples in fp32/fp16/bf16, the pass installed, entry.sh."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from passnet.data import dev_samples_dir
from passnet.dataset import build_reference_task, dtype_variant, rewrite_dtype_literals
from passnet.errors import SampleError
from passnet.sample import load_sample
from passnet.task import TaskError

T5 = "transformers-auto-model/google/t5-efficient-large-el2"
SPLADE = "transformers-auto-model/splade-mini"


def test_rewrite_dtype_literals_renames_fp32_dtypes_the_mask_fill_value_and_float_calls():
    def f(x, y, z, m, w):
        a = x.to(torch.float32)
        b = torch.zeros(x.size(0), dtype=torch.float)
        c = y.to(torch.float16)
        d = z.masked_fill(m, -3.4028234663852886e38)
        e = w.float()
        g = x.to(torch.float64)
        return a, b, c, d, e, g

    gm = torch.fx.symbolic_trace(f)
    assert rewrite_dtype_literals(gm.graph, torch.float16) == 4  # a, b, d, e
    gm.recompile()
    code = gm.code
    assert "torch.float32" not in code and ".float()" not in code
    assert code.count("torch.float16") == 3 and "-65504.0" in code and ".half()" in code
    assert "torch.float64" in code  # only float32 literals follow the dtype
    assert rewrite_dtype_literals(gm.graph, "bfloat16") == 0  # nothing float32 is left
    with pytest.raises(TypeError, match="torch.fx.Graph"):
        rewrite_dtype_literals("x.to(torch.float32)", torch.float16)


def test_variant_keeps_model_py_when_the_cast_graph_runs(tmp_path):
    variant = load_sample(dtype_variant(dev_samples_dir() / SPLADE, tmp_path / "v", torch.float16))
    assert variant.model_source == load_sample(dev_samples_dir() / SPLADE).model_source
    assert variant.metas["L_input_attention_mask_"].dtype == torch.int64  # ints stay ints
    hidden = [m for m in variant.weight_metas if m.dtype.is_floating_point]
    assert hidden and all(m.dtype == torch.float16 for m in hidden)
    assert "dtype_literals_rewritten" not in variant.graph_net


def test_variant_rewrites_dtype_literals_when_the_cast_graph_does_not_run(tmp_path):
    # T5's RMSNorm casts to torch.float32, which makes the next linear mix dtypes.
    variant = load_sample(dtype_variant(dev_samples_dir() / T5, tmp_path / "v", torch.bfloat16))
    assert "torch.float32" not in variant.model_source
    assert variant.graph_net["dtype_literals_rewritten"] == "torch.bfloat16"
    assert (
        variant.graph_net["dtype_generalization"]["source_graph_hash"]
        == load_sample(dev_samples_dir() / T5).graph_hash
    )
    with torch.no_grad():
        out = variant.build_module("cpu")(*variant.replay_inputs("cpu", seed=0))
    assert out[0].dtype == torch.bfloat16


def test_float32_variant_is_the_sample_itself(tmp_path):
    variant = load_sample(dtype_variant(dev_samples_dir() / SPLADE, tmp_path / "v", torch.float32))
    original = load_sample(dev_samples_dir() / SPLADE)
    assert (variant.model_source, variant.graph_hash) == (
        original.model_source,
        original.graph_hash,
    )


def test_build_reference_task_lays_out_graphs_pass_dir_and_entry(tmp_path):
    task = build_reference_task("masked_mean_pooling", tmp_path / "task")
    assert task.graph_entries == (
        "graphs/splade-mini_float32",
        "graphs/splade-mini_float16",
        "graphs/splade-mini_bfloat16",
    )
    assert task.pass_names == ("FusedMaskedMeanPooling",)
    assert (task.pass_dir / "FusedMaskedMeanPooling.py").is_file()
    assert task.entry is not None and os.access(task.entry, os.X_OK)
    assert "--compiler pass_mgr" in task.entry.read_text()
    assert task.name == "reference-masked_mean_pooling"
    assert task.metadata == {
        "builder": "reference",
        "pass": "masked_mean_pooling",
        "scope": "graph",
        "dtypes": ["float32", "float16", "bfloat16"],
    }
    assert [m["dtype"] for m in task.graph_metadata] == ["float32", "float16", "bfloat16"]
    assert {m["source"] for m in task.graph_metadata} == {SPLADE}


def test_build_reference_task_needs_the_source_samples(tmp_path):
    root = tmp_path / "samples"
    shutil.copytree(
        dev_samples_dir() / "transformers-auto-model" / "prajjwal1_bert-tiny",
        root / "transformers-auto-model" / "prajjwal1_bert-tiny",
    )
    with pytest.raises(SampleError, match="not under the samples root") as info:
        build_reference_task("add_layer_norm", tmp_path / "task", root)
    assert "ms-marco-TinyBERT-L2" in info.value.context["sample"]
    assert not (tmp_path / "task").exists()


def test_build_reference_task_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "notes.txt").write_text("mine")
    with pytest.raises(TaskError, match="not empty"):
        build_reference_task("masked_mean_pooling", tmp_path / "task", dtypes=(torch.float32,))
