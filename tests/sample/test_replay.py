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
