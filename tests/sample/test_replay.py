"""Seeded replay keeps graphs valid: the three warts of the dev set, ranges, determinism."""

from __future__ import annotations

import ast

import torch

from passnet.sample import TensorMeta, load_sample, rewrite_devices
from passnet.sample._replay import ROUNDED_ZERO_STD, ParamUsage, replay_tensor
from tests.conftest import BERT, DEV

YOLO = DEV / "ultralytics" / "yolov8n-cls"
SWIN = DEV / "transformers-auto-model" / "yujiepan_tiny-random-swin-patch4-window7-224"
SQUIM = DEV / "torchaudio" / "squim_objective"


def _values(path, seed=0):
    s = load_sample(path)
    return s, dict(zip(s.param_names, s.replay_inputs("cpu", seed)))


def test_replay_is_deterministic_per_seed_and_differs_across_seeds() -> None:
    s = load_sample(BERT)
    a, b, c = s.replay_inputs(seed=0), s.replay_inputs(seed=0), s.replay_inputs(seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    floats = [(x, z) for x, z in zip(a, c) if x.is_floating_point()]
    assert any(not torch.equal(x, z) for x, z in floats)


def test_yolo_batchnorm_eps_scalars_are_positive_and_eager_runs() -> None:
    s, values = _values(YOLO)
    eps = [v for k, v in values.items() if k.endswith("bn_eps")]
    assert eps and all(float(v) > 0 for v in eps)
    assert all(s.usage[k].positive for k in values if k.endswith("bn_eps"))
    running_var = [v for k, v in values.items() if "running_var" in k]
    assert all(bool((v > 0).all()) for v in running_var)
    with torch.no_grad():
        outs = s.build_module()(*values.values())
    assert all(torch.isfinite(o).all() for o in outs)


def test_swin_metas_without_data_use_their_integer_range() -> None:
    s, values = _values(SWIN)
    idx = [v for k, v in values.items() if k.endswith("relative_position_index_")]
    assert idx
    for v in idx:
        assert v.dtype == torch.int64 and int(v.min()) >= 0 and int(v.max()) <= 168


def test_squim_runs_with_finite_outputs() -> None:
    s, values = _values(SQUIM)
    with torch.no_grad():
        outs = s.build_module()(*values.values())
    assert all(torch.isfinite(o).all() for o in outs if o.is_floating_point())


def test_embedding_indices_stay_below_the_table_size() -> None:
    meta = TensorMeta("ids", [64], torch.int64)
    t = replay_tensor(meta, ParamUsage(index_bound=7), seed=3)
    assert int(t.max()) < 7 and int(t.min()) >= 0


def test_rounded_zero_std_does_not_make_a_constant_tensor() -> None:
    meta = TensorMeta("w", [1000], torch.float32, mean=0.0, std=0.0)
    t = replay_tensor(meta, ParamUsage(), seed=0)
    assert float(t.std()) > ROUNDED_ZERO_STD / 2
    assert abs(float(t.mean())) < 1e-4


def test_float_draws_are_clamped_to_the_stored_range() -> None:
    meta = TensorMeta("v", [4096], torch.float32, mean=0.0, std=1.0, min_val=-0.5, max_val=0.25)
    t = replay_tensor(meta, ParamUsage(), seed=0)
    assert float(t.min()) >= -0.5 and float(t.max()) <= 0.25


def test_half_precision_metas_replay_in_their_dtype() -> None:
    meta = TensorMeta("h", [3, 5], torch.bfloat16, mean=1.0, std=0.1)
    assert replay_tensor(meta, ParamUsage(), seed=0).dtype == torch.bfloat16


def test_every_cuda_spelling_is_rewritten_to_the_target_device() -> None:
    src = (
        "def f(x):\n"
        "    a = torch.arange(3, device=device(type='cuda', index=0))\n"
        "    b = torch.zeros(2, device='cuda:0')\n"
        "    c = x.to('cuda')\n"
        "    d = x.cuda()\n"
        "    e = torch.device('cuda:1')\n"
        "    g = torch.ones(1, device=device(type='cpu'))\n"
        "    h = x.cuda(0)\n"
        "    i = x.cuda(device=1, non_blocking=True)\n"
        "    j = x.to(0)\n"
        "    k = torch.ones(1, device=0)\n"
        "    m = x.to(torch.float16, copy=True)\n"
    )
    out = ast.unparse(rewrite_devices(src, "cpu"))
    assert "cuda" not in out
    assert out.count("'cpu'") == 10
    assert "x.to('cpu', non_blocking=True)" in out
    assert "x.to(torch.float16, copy=True)" in out  # a dtype and a bool are not devices


VMAP_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_w_: torch.Tensor):
        l_x_ = L_x_
        l_w_ = L_w_
        rows = torch.arange(3)
        lazy = torch._functorch.predispatch.lazy_load_decompositions()
        lazy = None
        nesting = torch._functorch.predispatch._vmap_increment_nesting(3, "error")
        nesting = None
        child = torch._functorch.predispatch._add_batch_dim(rows, 0, 1)
        rows = None
        mask = child.le(1)
        child = None
        batched = torch._functorch.predispatch._remove_batch_dim(mask, 1, 3, 0)
        mask = None
        dec = torch._functorch.predispatch._vmap_decrement_nesting()
        dec = None
        out = l_x_ * batched.float() + l_w_
        return (out,)
"""


def _two_inputs(shape: list[int]) -> list[TensorMeta]:
    return [
        TensorMeta("L_x_", shape, torch.float32, mean=0.0, std=1.0),
        TensorMeta("L_w_", shape, torch.float32, mean=0.0, std=1.0),
    ]


def test_a_graph_with_functorch_vmap_calls_traces_replays_and_runs(tmp_path) -> None:
    # transformers' mask construction, as Dynamo writes it (39 corpus samples): tracing once
    # left the vmap level raised, and every later random draw in the process failed
    from passnet.sample import trace_sample, write_sample

    path = write_sample(tmp_path / "vmap", VMAP_MODEL, _two_inputs([3]))
    sample = load_sample(path)
    gm = trace_sample(sample)
    assert torch._C._functorch.maybe_current_level() is None
    calls = [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
    assert "_vmap_increment_nesting" in calls and "_vmap_decrement_nesting" in calls
    inputs = sample.replay_inputs("cpu", seed=0)  # random draws work after the trace
    with torch.no_grad():
        (eager,) = sample.build_module("cpu")(*inputs)
        (traced,) = gm(*inputs)
    assert torch.equal(eager, traced)
    assert torch.equal(eager, inputs[0] * torch.tensor([1.0, 1.0, 0.0]) + inputs[1])


PACKED_INDICES_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_patches_: torch.Tensor, L_table_: torch.Tensor):
        l_patches_ = L_patches_
        l_table_ = L_table_
        getitem = l_patches_[(slice(None, None, None), slice(None, None, None), 0)]
        rows = getitem.long()
        getitem = None
        values = l_patches_[(slice(None, None, None), slice(None, None, None), slice(1, None))]
        emb = torch.nn.functional.embedding(rows, l_table_, None, None, 2.0, False, False)
        return (emb + values.sum(),)
"""


def test_float_channels_used_as_embedding_indices_are_drawn_as_indices(tmp_path) -> None:
    # Pix2Struct packs row/column indices into its float patches: drawn as normal floats
    # they fell outside the embedding table ("index out of range in self")
    from passnet.sample import write_sample

    metas = [
        TensorMeta("L_patches_", [1, 64, 5], torch.float32, mean=0.06, std=1.5),
        TensorMeta("L_table_", [10, 4], torch.float32, mean=0.0, std=1.0),
    ]
    sample = load_sample(write_sample(tmp_path / "packed", PACKED_INDICES_MODEL, metas))
    patches, table = sample.replay_inputs("cpu", seed=0)
    rows = patches[:, :, 0]
    assert torch.equal(rows, rows.round()) and rows.min() >= 0 and rows.max() < 10
    assert not torch.equal(patches[:, :, 1:], patches[:, :, 1:].round())  # still floats
    with torch.no_grad():
        (out,) = sample.build_module("cpu")(patches, table)
    assert out.shape == (1, 64, 4)


def test_replay_cache_copies_the_same_values_and_each_replay_gets_its_own_copy() -> None:
    from passnet.sample import replay_cache, replay_value

    meta = TensorMeta("w", [4, 5], torch.float32, mean=0.5, std=2.0)
    plain = replay_value(meta, ParamUsage(), 3, False)
    with replay_cache(2**20) as cache:
        first = replay_value(meta, ParamUsage(), 3, False)
        first.add_(100.0)  # a graph writing into its input must not change the kept tensor
        second = replay_value(meta, ParamUsage(), 3, False)
        other_seed = replay_value(meta, ParamUsage(), 4, False)
        positive = replay_value(meta, ParamUsage(positive=True), 3, False)
    assert cache.hits == 1
    assert torch.equal(second, plain)
    assert not torch.equal(other_seed, plain)
    assert bool((positive >= 0).all()) and not torch.equal(positive, plain)


def test_replay_cache_keeps_within_its_budget_and_is_off_outside_its_block() -> None:
    from passnet.sample import replay_cache, replay_value

    big = TensorMeta("big", [64, 64], torch.float32, mean=0.0, std=1.0)  # 16 KiB
    small = TensorMeta("small", [8], torch.float32, mean=0.0, std=1.0)
    with replay_cache(16 * 1024) as cache:
        replay_value(big, ParamUsage(), 0, False)
        replay_value(small, ParamUsage(), 0, False)  # evicts big: over the budget together
        replay_value(big, ParamUsage(), 0, False)
        assert cache.hits == 0 and cache.bytes <= 16 * 1024
    replay_value(small, ParamUsage(), 0, False)
    assert cache.hits == 0


def test_replay_cache_hands_out_nothing_real_under_fake_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from passnet.sample import replay_cache, replay_value

    meta = TensorMeta("w", [3], torch.float32, mean=0.0, std=1.0)
    with replay_cache(2**20) as cache:
        replay_value(meta, ParamUsage(), 0, False)
        with FakeTensorMode():
            replay_value(meta, ParamUsage(), 0, False)
        assert cache.hits == 0
        assert type(replay_value(meta, ParamUsage(), 0, False)) is torch.Tensor
        assert cache.hits == 1
