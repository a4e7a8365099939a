"""Each reference pass's task, rewritten by the pass manager, computes what eager computes.

The task is built from the real samples (fp32 and fp16/bf16 variants); the pass
manager loads the pass directory, rewrites every graph and the rewritten graph runs
under the runtime integrity guard (kernels in the Triton interpreter).

fp32 graphs must agree with eager at the baseline tolerance. In fp16/bf16 a whole
encoder amplifies any one-ulp difference (a different fp32 summation order in a
LayerNorm or GEMM) through the layers after it, so two correct fp16 evaluations of
a deep graph differ by about as much as fp16 differs from fp32. There the test asks
that the rewritten graph be as accurate as eager: its error against the fp32 graph
at most twice eager's own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from passnet.dataset import build_reference_task
from passnet.passes import PassManager
from passnet.passes.library import get_reference_pass, reference_passes
from passnet.record import baseline_tolerance
from passnet.sample import load_sample, trace_graph
from passnet.task import load_task

# T5 overflows in fp16 (as it does in eager: the comparison skips non-finite values),
# which the Triton interpreter reports when it rounds to fp16.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

# Replacements per graph: what each pattern occurs as in each source sample.
EXPECTED = {
    ("masked_mean_pooling", "splade-mini"): 1,
    ("roll_add_layer_norm", "vuiseng9_tiny-random-SwinModel"): 1,
    ("rms_norm", "t5-efficient-large-el2"): 5,
    ("add_layer_norm", "prajjwal1_bert-tiny"): 4,  # + the embeddings' add + LN (second rule)
    ("add_layer_norm", "ms-marco-TinyBERT-L2"): 4,
    ("add_layer_norm", "bge-small-zh"): 8,
    ("linear_bias_gelu", "prajjwal1_bert-tiny"): 2,
    ("linear_bias_gelu", "ms-marco-TinyBERT-L2"): 2,
    ("linear_bias_gelu", "bge-small-zh"): 4,
    ("scale_mask_softmax", "vuiseng9_tiny-random-SwinModel"): 3,  # + 1 shifted (second rule)
    ("scale_mask_softmax", "yujiepan_tiny-random-swin-patch4-window7-224"): 4,  # with the bias
}


def _run(module: torch.nn.Module, inputs: list) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        out = module(*inputs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def test_every_catalog_pass_and_source_sample_has_an_expectation():
    assert {(p.name, Path(s).name) for p in reference_passes() for s in p.source_samples} == set(
        EXPECTED
    )


@pytest.mark.parametrize("name", [p.name for p in reference_passes()])
def test_pass_manager_rewrites_every_task_graph_like_eager(name, device, tmp_path):
    task = load_task(build_reference_task(name, tmp_path / "task").path)
    rule = get_reference_pass(name).rules[0]
    manager = PassManager.from_dirs(task.pass_dir)
    fp32_outputs: dict[str, tuple[torch.Tensor, ...]] = {}
    for graph in task.graphs:  # float32 first: create_task keeps the variant order
        source, _, dtype = graph.name.rpartition("_")
        sample = load_sample(graph)
        module = sample.build_module(device)
        inputs = sample.replay_inputs(device, seed=0)
        result = manager.apply(trace_graph(module))
        assert result.report.replacements[rule] == EXPECTED[name, source], graph.name
        eager = _run(module, inputs)
        with manager.guard.checking():
            rewritten = _run(result.graph_module, inputs)
        assert len(rewritten) == len(eager)
        for i, (exp, act) in enumerate(zip(eager, rewritten)):
            assert act.dtype == exp.dtype and act.shape == exp.shape, (graph.name, i)
            if dtype == "float32":
                atol, rtol = baseline_tolerance(exp.dtype)
                torch.testing.assert_close(act, exp, atol=atol, rtol=rtol, equal_nan=True)
                continue
            reference = fp32_outputs[source][i].double()
            finite = reference.isfinite() & exp.isfinite()
            eager_error = (exp.double() - reference)[finite].abs().max().item()
            pass_error = (act.double() - reference)[finite].abs().max().item()
            assert pass_error <= 2 * eager_error + 1e-6, (graph.name, i, pass_error, eager_error)
        if dtype == "float32":
            fp32_outputs[source] = eager
