"""Decomposing graphs with constructs of real corpus samples: ``torch.Size`` built from
``SymInt`` dims."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from passnet.dataset import SubgraphStatus, decompose_sample
from passnet.sample import TensorMeta, load_sample, trace_sample, write_sample

SIZE_SOURCE = textwrap.dedent(
    """\
    import torch


    class GraphModule(torch.nn.Module):
        def forward(
            self,
            s0: torch.SymInt,
            L_x_: torch.Tensor,
            L_w_: torch.nn.parameter.Parameter,
        ):
            l_x_ = L_x_
            conv = torch.conv2d(l_x_, L_w_, None, (1, 1), (1, 1), (1, 1), 1)
            relu = torch.relu(conv)
            size_1 = torch.Size([s0, s0])
            up = torch.nn.functional.interpolate(
                relu, size=size_1, mode="bilinear", align_corners=False
            )
            relu = size_1 = None
            return (up + 1.0,)
    """
)


def test_a_size_built_from_symint_dims_traces_and_decomposes(tmp_path: Path) -> None:
    # torchvision's fcn_resnet50 upsamples to torch.Size([s53, s53]) (Dynamo, dynamic
    # shapes): torch.Size() refused the traced dims and the sample could not be traced
    path = write_sample(
        tmp_path / "size",
        SIZE_SOURCE,
        [
            TensorMeta("s0", [], torch.int64, data=[6]),
            TensorMeta("L_x_", [1, 2, 4, 4], torch.float32, mean=0.0, std=1.0),
            TensorMeta("L_w_", [2, 2, 3, 3], torch.float32, mean=0.0, std=0.5),
        ],
    )
    sample = load_sample(path)
    gm = trace_sample(sample)
    assert any(n.target is torch.Size for n in gm.graph.nodes)
    inputs = sample.replay_inputs("cpu", seed=0)
    with torch.no_grad():
        (eager,) = sample.build_module("cpu")(*inputs)
        (traced,) = gm(*inputs)
    assert eager.shape == (1, 2, 6, 6) and torch.equal(eager, traced)
    result = decompose_sample(path, tmp_path / "out", ["single-op"])
    assert result.status == "ok", result.errors
    up = next(r for r in result.subgraphs if r.ops == ["F.interpolate"])
    assert up.status is SubgraphStatus.WRITTEN, up.reason
    source = (Path(up.path) / "model.py").read_text()
    assert "s0: torch.SymInt" in source and "torch.Size([s0, s0])" in source
