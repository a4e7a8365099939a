"""Decomposing graphs with constructs of real corpus samples: transformers' ``vmap``
mask construction (functorch regions), masks filled with the dtype's minimum, and
``torch.Size`` built from ``SymInt`` dims."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from passnet.dataset import SubgraphStatus, decompose_sample, extract
from passnet.dataset._lockstep import load_module, run_lockstep
from passnet.dataset._subgraph import (
    OpRange,
    SubgraphError,
    extract_subgraph,
    tensor_meta_from_value,
    trace_parent,
    unit_ranges,
)
from passnet.sample import (
    ParamUsage,
    TensorMeta,
    load_sample,
    replay_value,
    trace_sample,
    write_sample,
)
from tests.dataset.test_decompose import make_toy
from tests.dataset.tiny_models import VmapMask, build, inputs_for

CORPUS = Path("/work/corpus")
POLYCODER = CORPUS / "transformers-auto-model" / "PolyCoder-160M"


@pytest.fixture(scope="module")
def vmap_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:class:`VmapMask` extracted by Dynamo: its ``vmap`` becomes ``_vmap_increment_nesting``,
    ``_add_batch_dim`` ... ``_remove_batch_dim``, ``_vmap_decrement_nesting`` calls."""
    torch._dynamo.reset()
    model = build(VmapMask)
    ex = extract(model, name="vmap", out=tmp_path_factory.mktemp("vmap"))
    with torch.no_grad():
        ex(*inputs_for(model))
    torch._dynamo.reset()
    (path,) = ex.samples
    assert "_add_batch_dim" in (path / "model.py").read_text()
    return path


@pytest.fixture(scope="module", params=["predispatch", "torch._C"])
def vmap_spellings(
    request: pytest.FixtureRequest, vmap_sample: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """:func:`vmap_sample`, and the same graph as an older torch's Dynamo wrote it
    (``torch._C._functorch`` calls; 10 corpus samples, whisper-base among them)."""
    if request.param == "predispatch":
        return vmap_sample
    sample = load_sample(vmap_sample)
    source = sample.model_source.replace(
        "torch._functorch.predispatch.lazy_load_decompositions",
        "torch._functorch.vmap.lazy_load_decompositions",
    ).replace("torch._functorch.predispatch.", "torch._C._functorch.")
    assert "predispatch" not in source
    return write_sample(
        tmp_path_factory.mktemp("vmap_c") / "vmap", source, list(sample.metas.values())
    )


def _region(parent) -> tuple[int, int]:
    inside = [u.index for u in parent.units if "_functorch." in u.op]
    return inside[0], inside[-1] + 1


def test_a_vmap_region_is_atomic(vmap_spellings: Path) -> None:
    parent = trace_parent(vmap_spellings)
    start, stop = _region(parent)
    # the calls that set functorch's state are units, so the region's subgraph makes them
    assert parent.units[start].op.endswith("lazy_load_decompositions")
    assert parent.units[start + 1].op.endswith("_vmap_increment_nesting")
    assert parent.units[stop - 1].op.endswith("_vmap_decrement_nesting")
    assert parent.cut_allowed(start) and parent.cut_allowed(stop)
    assert not any(parent.cut_allowed(c) for c in range(start + 1, stop))
    add_batch_dim = next(u.index for u in parent.units if u.op.endswith("_add_batch_dim"))
    with pytest.raises(
        SubgraphError, match="functorch vmap/jvp region .* spans the cut before unit"
    ):
        extract_subgraph(parent, OpRange(add_batch_dim, stop))
    assert OpRange(start, stop) in unit_ranges(parent)  # one single-op candidate
    region = extract_subgraph(parent, OpRange(start, stop))
    (check,), _ = run_lockstep(parent, [region], feed_forward=False)
    assert check.ok, check.reason
    assert torch._C._functorch.maybe_current_level() is None


def test_a_sample_with_a_vmap_region_decomposes_and_its_region_is_a_sample(
    vmap_spellings: Path, tmp_path: Path
) -> None:
    result = decompose_sample(
        vmap_spellings, tmp_path / "out", ["fusible", "classical", "single-op"]
    )
    assert result.status == "ok", result.errors
    assert torch._C._functorch.maybe_current_level() is None
    parent = trace_parent(vmap_spellings)
    start, stop = _region(parent)
    region = next(r for r in result.subgraphs if r.kind == "single-op" and r.start == start)
    assert region.stop == stop and region.status is SubgraphStatus.WRITTEN, region.reason
    assert result.count("single-op", SubgraphStatus.WRITTEN) >= 5
    inside = [
        r for r in result.subgraphs if start < r.start < stop or start < r.stop < stop
    ]  # no written range starts or stops inside the region
    assert all(r.status is not SubgraphStatus.WRITTEN for r in inside)
    # standalone, on replayed inputs (the padding mask and the index ranges are small
    # integer values, kept literally): the causal and padding mask
    sample = load_sample(region.path)
    inputs = dict(zip(sample.param_names, sample.replay_inputs("cpu", seed=0), strict=True))
    with torch.no_grad():
        (got,) = sample.build_module("cpu")(*inputs.values())
    assert torch._C._functorch.maybe_current_level() is None
    (padding,) = [v for v in inputs.values() if v.dtype == torch.bool]
    assert torch.equal(padding, torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]).bool())
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(got, causal & padding[:, None, :])


def test_lockstep_never_compares_batched_tensors_and_other_ranges_still_pass(
    tmp_path: Path,
) -> None:
    # a range returning a functorch batched tensor (a cut inside a vmap region) failed the
    # whole sample: torch.equal has no batching rule
    parent = trace_parent(make_toy(tmp_path / "toy"))
    subs = [extract_subgraph(parent, OpRange(0, 1)), extract_subgraph(parent, OpRange(1, 2))]

    def factory(sub):
        module = load_module(sub.model_source, "cpu")
        if sub.range.start != 0:
            return module
        # the same logical values as the parent's, batched at functorch level 1
        return lambda *a: tuple(
            torch._C._functorch._add_batch_dim(v.unsqueeze(0), 0, 1) for v in module(*a)
        )

    checks, _ = run_lockstep(parent, subs, feed_forward=False, module_factory=factory)
    by_start = {c.range.start: c for c in checks}
    assert not by_start[0].ok and "vmap-batched tensor" in by_start[0].reason
    assert by_start[1].ok, by_start[1].reason


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_statistics_of_a_mask_at_the_dtype_minimum_replay(dtype: torch.dtype) -> None:
    # transformers' float masks hold finfo(dtype).min: rounded to 4 digits, float32's
    # -3.4028e38 became -3.403e38, past the float32 range, and every subgraph taking such
    # a mask failed "does not run on replayed inputs" (528 of jhu-clsp_ettin-decoder-150m's)
    info = torch.finfo(dtype)
    mask = torch.zeros(1, 1, 10, 10).masked_fill(torch.ones(10, 10).triu(1).bool(), info.min)
    meta = tensor_meta_from_value("where", mask.to(dtype))
    assert float(info.min) <= meta.min_val <= 0.999 * float(info.min) and meta.max_val == 0.0
    assert float(info.min) <= meta.mean < 0
    values = replay_value(meta, ParamUsage(), seed=0, is_symint=False)
    assert values.dtype == dtype and values.shape == (1, 1, 10, 10)
    assert bool(torch.isfinite(values).all())


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


@pytest.mark.slow
@pytest.mark.skipif(not POLYCODER.is_dir(), reason="the torch corpus is not here")
def test_a_real_transformers_sample_with_vmap_masks_decomposes(tmp_path: Path) -> None:
    # it ended error ("Batching rule not implemented for aten::equal"), no subgraph written
    result = decompose_sample(POLYCODER, tmp_path / "out", ["classical", "single-op"])
    assert result.status == "ok", result.errors
    (region,) = [
        r
        for r in result.subgraphs
        if r.status is SubgraphStatus.WRITTEN and any("_add_batch_dim" in op for op in r.ops)
    ]
    assert region.kind == "single-op" and (region.start, region.stop) == (8, 35)
    assert region.ops[0].endswith("lazy_load_decompositions")
    assert region.ops[-1].endswith("_vmap_decrement_nesting")
    assert any(
        r.kind == "classical" and "functorch vmap/jvp region" in r.reason
        for r in result.subgraphs
        if r.status is SubgraphStatus.SKIPPED
    )
    assert result.count("single-op", SubgraphStatus.WRITTEN) >= 40
    assert not any(r.status is SubgraphStatus.FAILED for r in result.subgraphs)
