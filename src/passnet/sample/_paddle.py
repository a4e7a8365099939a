"""PaddlePaddle samples (GraphNet's ``paddle_samples``): recognize them, find their
``shape_patches_*`` variants, and replay their tensors (docs/paddle.md).

A Paddle sample has the layout of a torch one (``model.py`` with a ``GraphModule``, here a
``paddle.nn.Layer``; ``weight_meta.py``; ``input_meta.py``; ``graph_net.json`` with
``"framework": "paddle"``; ``graph_hash.txt``). Some subgraphs carry ``shape_patches_<model>/``
folders: the same graph (the parent's ``model.py``) with other input and weight metadata,
taken from a sibling model of other shapes. Each such folder is a sample of its own.

Nothing here imports Paddle: the parent process of an evaluation reads Paddle samples
without it; only the evaluation child builds Paddle tensors and layers.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import torch

from passnet.sample._meta import TensorMeta, dtype_to_str
from passnet.sample._replay import _generator, name_heuristics, replay_value

__all__ = [
    "PADDLE",
    "PADDLE_INSTALL",
    "SHAPE_PATCH_PREFIX",
    "TORCH",
    "is_shape_patch_dir",
    "model_dir",
    "paddle_missing",
    "replay_paddle_arrays",
    "sample_framework",
]

TORCH = "torch"
PADDLE = "paddle"
PADDLE_INSTALL = "pip install 'passnet[paddle]'"
"""What installs the Paddle extra (PaddlePaddle's CPU build; a CUDA build: docs/paddle.md)."""
SHAPE_PATCH_PREFIX = "shape_patches_"

_MODEL_FILE = "model.py"
_WEIGHT_META_FILE = "weight_meta.py"
_GRAPH_NET_FILE = "graph_net.json"
_PADDLE_LAYER = "paddle.nn.Layer"


def is_shape_patch_dir(path: Path) -> bool:
    """Whether ``path`` is a ``shape_patches_*`` variant: its own metadata, its parent's
    ``model.py``."""
    path = Path(path)
    return (
        path.name.startswith(SHAPE_PATCH_PREFIX)
        and not (path / _MODEL_FILE).is_file()
        and (path / _WEIGHT_META_FILE).is_file()
        and (path.parent / _MODEL_FILE).is_file()
    )


def model_dir(path: Path) -> Path:
    """The folder whose ``model.py``, ``graph_net.json`` and ``graph_hash.txt`` a sample
    uses: its own, or its parent's for a ``shape_patches_*`` variant."""
    path = Path(path)
    return path.parent if is_shape_patch_dir(path) else path


def sample_framework(path: Path) -> str:
    """``"paddle"`` or ``"torch"``: ``graph_net.json``'s ``framework`` where it names one,
    else whether ``model.py`` subclasses ``paddle.nn.Layer``. Reads two small files, imports
    nothing; an unreadable file counts as torch (loading the sample then says what is wrong)."""
    folder = model_dir(Path(path))
    try:
        meta: Any = json.loads((folder / _GRAPH_NET_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        meta = None
    if isinstance(meta, dict) and isinstance(meta.get("framework"), str):
        return PADDLE if meta["framework"].strip().lower() == PADDLE else TORCH
    try:
        source = (folder / _MODEL_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return TORCH
    return PADDLE if _PADDLE_LAYER in source else TORCH


def paddle_missing() -> str | None:
    """Why Paddle samples cannot run here (PaddlePaddle not installed), or None. Finds the
    package without importing it."""
    if importlib.util.find_spec("paddle") is None:
        return (
            f"PaddlePaddle is not installed: {PADDLE_INSTALL} (or a CUDA build of paddlepaddle-gpu)"
        )
    return None


def _uniform(meta: TensorMeta) -> bool:
    return (
        meta.dtype.is_floating_point
        and meta.data is None
        and meta.mean is None
        and meta.std is None
        and meta.min_val is not None
        and meta.max_val is not None
    )


def replay_paddle_arrays(
    params: list[str], metas: dict[str, TensorMeta], seed: int
) -> list[tuple[Any, str]]:
    """``(array, dtype)`` for ``forward``'s parameters ``params``: a NumPy array and the Paddle
    dtype's name (``"bfloat16"`` arrays are float32: NumPy has no bfloat16), by the replay
    rules of torch
    samples (:func:`passnet.sample.replay_value`: stored ``data`` as stored, integers in
    ``[min_val, max_val]``, bools fair coins, floats ``normal(mean, std)`` clamped to
    ``[min_val, max_val]``, one generator per tensor seeded from ``(seed, name)``); a float
    with a range and no ``mean``/``std`` (which only Paddle's metadata has) is drawn
    uniformly in ``[min_val, max_val]``, GraphNet's rule for it.

    The graph is not traced (torch.fx cannot trace a Paddle layer): a value is kept
    strictly positive by its names alone (its Paddle ``original_name`` too)."""
    arrays = []
    for name in params:
        meta = metas[name]
        usage = name_heuristics(name)
        if meta.original_name and not usage.positive:
            usage = name_heuristics(str(meta.original_name))
        if _uniform(meta):
            # Paddle's metadata gives some floats a range and no statistics, which torch
            # samples never do: drawn uniformly in it, as GraphNet's Paddle harness does
            low, high = float(meta.min_val), float(meta.max_val)  # type: ignore[arg-type]
            base = torch.float64 if meta.dtype == torch.float64 else torch.float32
            value = torch.rand(meta.shape, generator=_generator(seed, name), dtype=base)
            value = (value * (high - low) + low).clamp(low, high).to(meta.dtype)
        else:
            value = replay_value(meta, usage, seed, is_symint=False)
        dtype = dtype_to_str(meta.dtype).removeprefix("torch.")
        if dtype == "bfloat16":
            value = value.float()
        arrays.append((value.numpy(), dtype))
    return arrays
