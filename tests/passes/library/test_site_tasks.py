"""Every reference pass on its site task (the subgraphs around its matches, several shapes and
dtypes): each site is replaced once and computes what eager computes."""

from __future__ import annotations

import pytest
import torch

from passnet.dataset import build_reference_task
from passnet.passes import PassManager
from passnet.passes.library import reference_passes
from passnet.record import baseline_tolerance
from passnet.sample import load_sample, trace_graph


@pytest.mark.parametrize("name", [p.name for p in reference_passes()])
def test_pass_manager_replaces_every_site_like_eager(name, device, tmp_path):
    task = build_reference_task(
        name, tmp_path / "task", dtypes=(torch.float32,), scope="site", shape_factors=(2,)
    )
    manager = PassManager.from_dirs(task.pass_dir)
    for graph in task.graphs:
        sample = load_sample(graph)
        module = sample.build_module(device)
        inputs = sample.replay_inputs(device, seed=0)
        result = manager.apply(trace_graph(module))
        assert sum(result.report.replacements.values()) == 1, graph.name
        with torch.no_grad():
            eager = module(*inputs)
            with manager.guard.checking():
                rewritten = result.graph_module(*inputs)
        assert len(rewritten) == len(eager)
        for exp, act in zip(eager, rewritten):
            atol, rtol = baseline_tolerance(exp.dtype)
            torch.testing.assert_close(act, exp, atol=atol, rtol=rtol, equal_nan=True)


@pytest.mark.parametrize("name", [p.name for p in reference_passes()])
def test_half_precision_sites_err_no_more_than_eager_does(name, device, tmp_path):
    # fp16/bf16: measured against the fp32 site's outputs, the rewritten graph may err at
    # most twice as much as eager does (rounding ties between summation orders)
    task = build_reference_task(name, tmp_path / "task", scope="site", shape_factors=())
    manager = PassManager.from_dirs(task.pass_dir)
    reference: dict[str, tuple[torch.Tensor, ...]] = {}
    for graph in task.graphs:  # each site's float32 variant comes first
        site, _, dtype = graph.name.rpartition("_")
        sample = load_sample(graph)
        module = sample.build_module(device)
        inputs = sample.replay_inputs(device, seed=0)
        result = manager.apply(trace_graph(module))
        with torch.no_grad():
            eager = module(*inputs)
            with manager.guard.checking():
                rewritten = result.graph_module(*inputs)
        if dtype == "float32":
            reference[site] = tuple(eager)
            continue
        for i, (exp, act) in enumerate(zip(eager, rewritten)):
            assert act.dtype == exp.dtype and act.shape == exp.shape, (graph.name, i)
            ref = reference[site][i].double()
            finite = ref.isfinite() & exp.isfinite()
            eager_error = (exp.double() - ref)[finite].abs().max().item()
            pass_error = (act.double() - ref)[finite].abs().max().item()
            assert pass_error <= 2 * eager_error + 1e-6, (graph.name, i, pass_error, eager_error)
