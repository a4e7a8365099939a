"""Decomposition: op-range extraction, fusible analysis, and subgraph samples that compose back
into their parent."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from passnet.dataset import (
    SubgraphKind,
    SubgraphStatus,
    decompose_sample,
    decompose_samples,
    graph_hash,
    read_decompose_manifest,
    write_op_ranges,
)
from passnet.dataset._fusible import analyze_fusible, fusible_ranges, list_kernels
from passnet.dataset._lockstep import load_module, run_lockstep
from passnet.dataset._subgraph import (
    OpRange,
    SubgraphError,
    extract_subgraph,
    iter_partition,
    trace_parent,
    unit_ranges,
)
from passnet.sample import TensorMeta, load_sample, write_sample
from tests.conftest import BERT, DEV, MLP

RESNET = DEV / "torchvision" / "resnet18"
BASELINE3D = DEV / "mmpose" / "SimpleBaseline3D"
GCN = DEV / "torchgeometric" / "GCN"

TOY_SOURCE = textwrap.dedent(
    """\
    import torch


    class GraphModule(torch.nn.Module):
        def forward(self, L_x_: torch.Tensor, L_w_: torch.nn.parameter.Parameter):
            a = torch.nn.functional.linear(L_x_, L_w_)
            b = a.relu()
            c, d = b.chunk(2, dim=-1)
            e = c * d
            f = e + a.sum(-1, keepdim=True)
            g = f.view(L_x_.size(0), -1)
            return (g, b)
    """
)


def make_toy(path: Path) -> Path:
    metas = [
        TensorMeta("L_x_", [3, 4], torch.float32, mean=0.0, std=1.0),
        TensorMeta("L_w_", [8, 4], torch.float32, mean=0.0, std=0.5),
    ]
    return write_sample(path, TOY_SOURCE, metas)


def test_units_attach_tuple_getitems_to_their_producer(tmp_path: Path) -> None:
    parent = trace_parent(make_toy(tmp_path / "toy"))
    ops = [u.op for u in parent.units]
    assert ops == [
        "F.linear",
        "Tensor.relu",
        "Tensor.chunk",
        "operator.mul",
        "Tensor.sum",
        "operator.add",
        "Tensor.view",
    ]
    chunk = parent.units[2]
    assert [n.name for n in chunk.nodes][1:] == ["getitem", "getitem_1"]
    # size() is recomputed where used, never a unit of its own
    assert all(u.op != "Tensor.size" for u in parent.units)


def test_subgraph_interface_takes_values_from_before_the_cut_and_returns_live_ones(
    tmp_path: Path,
) -> None:
    parent = trace_parent(make_toy(tmp_path / "toy"))
    sub = extract_subgraph(parent, OpRange(3, 6))  # mul, sum, add
    assert sub.input_names == ["linear", "getitem", "getitem_1"]  # in parent order
    assert [n.name for n in sub.outputs] == ["add"]
    middle = extract_subgraph(parent, OpRange(1, 3))  # relu, chunk: b is returned by the parent
    assert [n.name for n in middle.outputs] == ["relu", "getitem", "getitem_1"]
    view = extract_subgraph(parent, OpRange(6, 7))
    assert "L_x_" in view.input_names  # the parameter whose size() the view reads
    source = view.model_source
    assert "class GraphModule(torch.nn.Module)" in source and "size = l_x_.size(0)" in source
    assert source.rstrip().endswith("return (view,)")


def test_a_range_cannot_split_a_tuple_from_its_users(tmp_path: Path) -> None:
    source = TOY_SOURCE.replace(
        "c, d = b.chunk(2, dim=-1)",
        "cd = b.chunk(2, dim=-1)\n        c = cd[0]\n        d = torch.cat(cd)[:3]",
    )
    path = write_sample(
        tmp_path / "tuple",
        source,
        [
            TensorMeta("L_x_", [3, 4], torch.float32, mean=0.0, std=1.0),
            TensorMeta("L_w_", [8, 4], torch.float32, mean=0.0, std=0.5),
        ],
    )
    parent = trace_parent(path)
    cat_unit = next(u.index for u in parent.units if u.op == "torch.cat")
    assert not parent.cut_allowed(cat_unit)
    with pytest.raises(SubgraphError, match="non-tensor value crosses"):
        extract_subgraph(parent, OpRange(cat_unit, cat_unit + 1))


@pytest.mark.parametrize("sample", [BERT, RESNET, BASELINE3D, GCN], ids=lambda p: p.name)
def test_single_op_chain_reproduces_the_parent_outputs(sample: Path) -> None:
    parent = trace_parent(sample)
    subs = [extract_subgraph(parent, r) for r in unit_ranges(parent)]
    checks, (ok, why) = run_lockstep(parent, subs, feed_forward=True)
    assert ok, why
    assert len(checks) == len(subs) and all(c.ok for c in checks)


@pytest.mark.parametrize("sample", [BERT, RESNET], ids=lambda p: p.name)
def test_fusible_chain_reproduces_the_parent_outputs(sample: Path) -> None:
    parent = trace_parent(sample)
    analysis = analyze_fusible(parent)
    assert analysis.compilations == 1
    ranges = fusible_ranges(analysis)
    assert ranges and all(2 <= len(r) <= 35 for r in ranges)
    subs = [extract_subgraph(parent, r) for r in iter_partition(parent, ranges)]
    _, (ok, why) = run_lockstep(parent, subs, feed_forward=True)
    assert ok, why


def test_a_broken_subgraph_breaks_the_chain_and_is_named(tmp_path: Path) -> None:
    parent = trace_parent(make_toy(tmp_path / "toy"))
    subs = [extract_subgraph(parent, OpRange(i, i + 1)) for i in range(len(parent.units))]

    def factory(sub):  # the mul subgraph computes the wrong thing
        source = sub.model_source.replace("getitem * getitem_1", "getitem + getitem_1")
        return load_module(source, "cpu")

    checks, (ok, why) = run_lockstep(parent, subs, feed_forward=True, module_factory=factory)
    assert not ok and "range [3,4)" in why
    assert next(c for c in checks if not c.ok).range == OpRange(3, 4)  # later ones get wrong inputs


def test_chain_of_written_samples_reproduces_the_parent(tmp_path: Path) -> None:
    parent = trace_parent(BASELINE3D)
    subs = [extract_subgraph(parent, OpRange(i, i + 1)) for i in range(len(parent.units))]

    def from_disk(sub):
        path = write_sample(
            tmp_path / f"u{sub.range.start}",
            sub.model_source,
            [TensorMeta(n, [1], torch.float32) for n in sub.input_names],
        )
        return load_sample(path).build_module("cpu")

    _, (ok, why) = run_lockstep(parent, subs, feed_forward=True, module_factory=from_disk)
    assert ok, why


def test_fusible_one_compile_agrees_with_every_prefix() -> None:
    parent = trace_parent(BASELINE3D)
    fast = analyze_fusible(parent, "one-compile")
    slow = analyze_fusible(parent, "every-prefix")
    assert slow.complete and slow.compilations == len(parent.units) and fast.compilations == 1
    assert fast.segments == slow.segments
    assert fast.fused == slow.fused
    assert fusible_ranges(fast) == fusible_ranges(slow)


def test_a_linear_and_its_activation_share_a_kernel_as_on_a_gpu() -> None:
    # Triton's choice (on CPU too): a bias addmm followed by pointwise users becomes mm and a
    # bias add fused with them. The every-prefix reference sees linear alone (nothing after
    # it: one addmm) and a new kernel at relu, so there the two methods differ by design.
    parent = trace_parent(MLP)
    assert parent.op_sequence[:2] == ["F.linear", "torch.relu"]
    fast = analyze_fusible(parent, "one-compile")
    slow = analyze_fusible(parent, "every-prefix")
    assert fast.segments[0] == OpRange(0, 2) and fast.fused[0]
    assert slow.segments[:2] == [OpRange(0, 1), OpRange(1, 2)]


def test_fusible_spans_follow_inductor_fusion_on_conv_bn_relu() -> None:
    parent = trace_parent(BASELINE3D)
    spans = [parent.op_sequence[r.start : r.stop] for r in fusible_ranges(analyze_fusible(parent))]
    assert ["F.batch_norm", "F.relu", "F.dropout"] in spans
    assert all(span[0] != "F.conv1d" for span in spans)  # the convolution is an extern kernel


def test_kernels_name_the_fx_nodes_they_compute() -> None:
    parent = trace_parent(MLP)
    kernels = list_kernels(parent.gm, parent.replay_inputs())
    externs = {k.sources for k in kernels if k.extern}
    generated = {k.sources for k in kernels if not k.extern}
    assert externs == {frozenset({"linear"}), frozenset({"linear_1"})}  # the two matrix products
    assert frozenset({"linear", "relu"}) in generated  # the first bias add fused with relu


def test_decompose_writes_runnable_samples_with_provenance(tmp_path: Path) -> None:
    from passnet.dataset import Catalog

    with Catalog(tmp_path / "catalog.sqlite") as catalog:
        result = decompose_sample(BERT, tmp_path / "out", ["fusible", "single_op"], catalog=catalog)
        recorded = catalog.subgraphs(BERT)
    assert result.status == "ok", result.errors
    written = [r for r in result.subgraphs if r.status is SubgraphStatus.WRITTEN]
    assert result.count("fusible", SubgraphStatus.WRITTEN) >= 3
    assert result.count("single-op", SubgraphStatus.DUPLICATE) > 0  # two identical encoder layers
    assert len(recorded) == len(written)
    for rec in written:
        sample = load_sample(rec.path)
        provenance = sample.graph_net["subgraph"]
        # named relative to the folder holding the sample (no root given)
        assert provenance["parent"] == BERT.name and provenance["unit_range"] == [
            rec.start,
            rec.stop,
        ]
        assert provenance["parent_graph_hash"] == load_sample(BERT).graph_hash
        assert provenance["op_sequence"] == rec.ops and sample.graph_hash == rec.graph_hash
        assert graph_hash(sample) == rec.graph_hash  # part 1's canonical hash of the written files
        with torch.no_grad():
            out = sample.build_module("cpu")(*sample.replay_inputs("cpu", seed=1))
        assert isinstance(out, tuple) and out
    mask = tmp_path / "out" / BERT.name / "fusible" / "0010-0015"
    constraints = (mask / "input_tensor_constraints.py").read_text()
    assert '([S0, 1, S1, S1], "expand")' in constraints  # symbolic dims of an intermediate input


def test_a_sample_that_cannot_be_traced_is_an_error_record(tmp_path: Path) -> None:
    bad = write_sample(
        tmp_path / "bad",
        "import torch\n\nclass GraphModule(torch.nn.Module):\n"
        "    def forward(self, L_x_: torch.Tensor):\n        return (L_x_.no_such_method(),)\n",
        [TensorMeta("L_x_", [2], torch.float32)],
    )
    result = decompose_sample(bad, tmp_path / "out", ["single-op"])
    assert result.status == "error" and not result.subgraphs
    assert result.errors[0].stage == "trace" and "no_such_method" in result.errors[0].message
    assert result.errors[0].context["sample"] == str(bad)


def test_batch_decomposition_resumes_and_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = write_sample(
        tmp_path / "in" / "bad", "not python(", [TensorMeta("L_x_", [2], torch.float32)]
    )
    good = make_toy(tmp_path / "in" / "toy")
    out = tmp_path / "out"
    first = decompose_samples([bad, good], out, ["single-op", "classical"])
    assert [r.status for r in first] == ["error", "ok"]
    assert [r.name for r in first] == ["bad", "toy"]
    assert (out / "toy" / "single-op").is_dir()
    calls = []
    import passnet.dataset._stage as stage_module

    original = stage_module.run_sample
    monkeypatch.setattr(
        stage_module, "run_sample", lambda *a, **k: calls.append(a) or original(*a, **k)
    )
    again = decompose_samples([bad, good], out, ["single-op", "classical"])
    assert calls == [] and [r.to_dict() for r in again] == [r.to_dict() for r in first]
    assert len(read_decompose_manifest(out / "decompose.jsonl")) == 2
    retried = decompose_samples([bad, good], out, ["single-op", "classical"], retry_failed=True)
    assert len(calls) == 1 and retried[0].status == "error"  # only the failed sample again


def test_kind_names_accept_both_spellings() -> None:
    assert SubgraphKind.parse("single_op") is SubgraphKind.SINGLE_OP
    assert SubgraphKind.parse("single-op") is SubgraphKind.SINGLE_OP
    with pytest.raises(Exception, match="unknown subgraph kind"):
        SubgraphKind.parse("fused")


def test_cli_decompose_reports_counts_and_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    assert (
        main(["decompose", str(MLP), "--out", str(tmp_path), "--kind", "single_op", "fusible"]) == 0
    )
    out = capsys.readouterr().out
    assert "single-op" in out and "written" in out
    assert sorted(p.name for p in (tmp_path / MLP.name / "single-op").iterdir()) == [
        "0000-0001",
        "0001-0002",
        "0002-0003",
    ]
    bad = write_sample(tmp_path / "bad", "import torch\n", [TensorMeta("L_x_", [2], torch.float32)])
    assert main(["decompose", str(bad), "--out", str(tmp_path / "o2"), "--kind", "single-op"]) == 1
    assert "trace" in capsys.readouterr().err


def test_write_op_ranges_writes_chosen_ranges_and_says_what_became_of_each(tmp_path: Path) -> None:
    source = TOY_SOURCE.replace(
        "c, d = b.chunk(2, dim=-1)",
        "cd = b.chunk(2, dim=-1)\n        c = cd[0]\n        d = torch.cat(cd)[:3]",
    )
    metas = [
        TensorMeta("L_x_", [3, 4], torch.float32, mean=0.0, std=1.0),
        TensorMeta("L_w_", [8, 4], torch.float32, mean=0.0, std=0.5),
    ]
    parent = trace_parent(write_sample(tmp_path / "tuple", source, metas))
    cat_unit = next(u.index for u in parent.units if u.op == "torch.cat")
    ranges = [OpRange(0, 2), OpRange(cat_unit, cat_unit + 1), OpRange(0, 2)]
    out = tmp_path / "sites"
    records = write_op_ranges(parent, ranges, out, kind="pass-site")
    assert [(r.start, r.stop) for r in records] == [(0, 2), (0, 2), (cat_unit, cat_unit + 1)]
    written, duplicate, skipped = records
    assert written.status is SubgraphStatus.WRITTEN and written.kind == "pass-site"
    assert Path(written.path) == out / "0000-0002"
    assert duplicate.status is SubgraphStatus.DUPLICATE and duplicate.duplicate_of == written.path
    assert skipped.status is SubgraphStatus.SKIPPED and "crosses" in skipped.reason
    info = json.loads((out / "0000-0002" / "graph_net.json").read_text())["subgraph"]
    assert info["kind"] == "pass-site" and info["op_sequence"] == ["F.linear", "Tensor.relu"]
    sample = load_sample(out / "0000-0002")
    with torch.no_grad():
        got = sample.build_module("cpu")(*sample.replay_inputs("cpu", seed=0))
    assert len(got) == 2  # linear (used after the range) and relu (returned by the parent)


MUTATING_SOURCE = textwrap.dedent(
    """\
    import torch


    class GraphModule(torch.nn.Module):
        def forward(self, L_x_: torch.Tensor, L_w_: torch.nn.parameter.Parameter, L_s_: torch.Tensor, L_t_: torch.Tensor):
            a = torch.nn.functional.linear(L_x_, L_w_)
            b = a * L_s_
            c = b.relu()
            d = L_s_.add_(1.0)
            e = L_t_.view(-1)
            f = e.mul_(2.0)
            g = c + L_s_.sum() + L_t_.sum()
            h = g * 3.0
            return (h,)
    """
)


def test_inputs_the_parent_changes_in_place_are_copied_where_a_range_starts(
    tmp_path: Path,
) -> None:
    """Ranges check against a copy of an input made where they start, unless the parent
    never changes that input: the weights are copied only when a range runs, once."""
    path = write_sample(
        tmp_path / "mutating",
        MUTATING_SOURCE,
        [
            TensorMeta("L_x_", [3, 4], torch.float32, mean=0.0, std=1.0),
            TensorMeta("L_w_", [8, 4], torch.float32, mean=0.0, std=0.5),
            TensorMeta("L_s_", [8], torch.float32, mean=0.0, std=1.0),
            TensorMeta("L_t_", [2, 2], torch.float32, mean=0.0, std=1.0),
        ],
    )
    parent = trace_parent(path)
    names = {n.name for n in parent.mutated_inputs}
    assert names == {"l_s_", "l_t_"}  # directly (add_) and through a view (view, mul_)
    subs = [extract_subgraph(parent, r) for r in unit_ranges(parent)]
    spanning = [
        extract_subgraph(parent, OpRange(0, len(parent.units))),
        extract_subgraph(parent, OpRange(1, len(parent.units) - 1)),
    ]
    checks, _ = run_lockstep(parent, [*subs, *spanning], feed_forward=False)
    assert all(c.ok for c in checks), [c.reason for c in checks if not c.ok]
    chain, (ok, why) = run_lockstep(parent, subs, feed_forward=True)
    assert ok, why
