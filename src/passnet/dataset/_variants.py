"""fp16/bf16 variants of a sample that still run, for reference tasks.

:func:`cast_sample` casts a sample's floating inputs and weights
and leaves ``model.py`` as traced. Graphs traced in fp32 often spell the dtype
out (``x.to(torch.float32)`` in T5's RMSNorm, ``torch.zeros(..., dtype=torch.float32)``
for Swin's window mask), and then the cast graph mixes dtypes and fails. For
those, the variant is made from a copy whose fp32 literals name the target dtype
(``torch.float32``/``torch.float`` and ``torch.finfo(torch.float32).max``, the
attention-mask fill value), as the model would have traced in that dtype.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from passnet.errors import SampleError
from passnet.sample import dtype_to_str, load_sample, trace_graph, write_sample

__all__ = ["cast_sample", "dtype_variant", "rewrite_dtype_literals"]

log = logging.getLogger(__name__)

_FLOAT32_NAME = re.compile(r"\btorch\.float(?:32)?\b")
_FP32_MAX = repr(torch.finfo(torch.float32).max)


def rewrite_dtype_literals(source: str, dtype: torch.dtype) -> str:
    """``model.py`` source with its fp32 dtype literals and fp32 extreme values made ``dtype``'s."""
    source = _FLOAT32_NAME.sub(dtype_to_str(dtype), source)
    # -finfo(float32).max fills masked attention scores; it overflows fp16.
    return source.replace(_FP32_MAX, repr(torch.finfo(dtype).max))


def _run_eagerly(path: Path) -> None:
    sample = load_sample(path)
    with torch.no_grad():
        sample.build_module("cpu")(*sample.replay_inputs("cpu", seed=0))


def dtype_variant(src: str | Path, dst: str | Path, dtype: torch.dtype) -> Path:
    """Write the ``dtype`` variant of sample ``src`` at ``dst``, validated by running it eagerly.

    float32 is a copy of the sample itself. Other dtypes come from
    :func:`~passnet.passes.cast_sample`, first with ``model.py`` as it is and, when
    that graph does not run, with its dtype literals rewritten
    (:func:`rewrite_dtype_literals`; ``graph_net.json`` then records
    ``"dtype_literals_rewritten"``). Raises :class:`~passnet.errors.SampleError`
    saying why when neither runs.
    """
    src, dst = Path(src), Path(dst)
    if dtype == torch.float32:
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        try:
            _run_eagerly(dst)
        except Exception as exc:  # noqa: BLE001 - eager failure of a sample is a sample error
            shutil.rmtree(dst)
            raise SampleError(
                f"does not run eagerly: {type(exc).__name__}: {exc}", sample=src
            ) from exc
        return dst
    try:
        return cast_sample(src, dst, dtype)
    except SampleError as as_is:
        sample = load_sample(src)
        rewritten = rewrite_dtype_literals(sample.model_source, dtype)
        if rewritten == sample.model_source:
            raise
        log.info("%s: the cast graph does not run as traced; rewriting its fp32 literals", src)
        with tempfile.TemporaryDirectory(prefix="passnet-variant-") as tmp:
            staged = write_sample(
                Path(tmp) / src.name,
                rewritten,
                sample.weight_metas,
                input_metas=sample.input_metas,
                constraints=sample.constraints,
                graph_net={**sample.graph_net, "dtype_literals_rewritten": dtype_to_str(dtype)},
                graph_hash=sample.graph_hash,
            )
            try:
                return cast_sample(staged, dst, dtype)
            except SampleError as rewritten_error:
                raise SampleError(
                    f"no runnable {dtype_to_str(dtype)} variant: as traced, {as_is.message}; "
                    f"with dtype literals rewritten, {rewritten_error.message}",
                    sample=src,
                ) from rewritten_error


# Argument positions (and keywords) of running statistics and affine parameters, by norm function.
_F_NORM = {
    "stats": ((1, "running_mean"), (2, "running_var")),
    "affine": ((3, "weight"), (4, "bias")),
}
_TORCH_BATCH_NORM = {
    "stats": ((3, "running_mean"), (4, "running_var")),
    "affine": ((1, "weight"), (2, "bias")),
}


def _normalization_parameters(module: torch.nn.Module) -> tuple[set[str], set[str]]:
    """(running statistics, affine weights/biases) the graph feeds to batch/instance norm."""
    gm = trace_graph(module, locations=False)
    found: dict[str, set[str]] = {"stats": set(), "affine": set()}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", "")
        if name not in ("batch_norm", "instance_norm"):
            continue
        layout = (
            _F_NORM
            if getattr(node.target, "__module__", "") == "torch.nn.functional"
            else _TORCH_BATCH_NORM
        )
        for kind, positions in layout.items():
            for pos, kw in positions:
                arg = node.args[pos] if len(node.args) > pos else node.kwargs.get(kw)
                if isinstance(arg, torch.fx.Node) and arg.op == "placeholder":
                    found[kind].add(str(arg.target))
    return found["stats"], found["affine"]


def _run_eagerly(path: Path) -> None:
    sample = load_sample(path)
    module = sample.build_module("cpu")
    inputs = sample.replay_inputs("cpu", seed=0)
    with torch.no_grad():
        module(*inputs)


def cast_sample(src: str | Path, dst: str | Path, dtype: torch.dtype | str) -> Path:
    """Write a copy of sample ``src`` at ``dst`` whose floating inputs and weights are ``dtype``.

    Normalization statistics stay float32 (design §7): the running mean/variance
    of batch/instance norm, together with that norm's weight and bias — mixed
    precision batch norm needs its parameters in one float32 dtype. If the
    variant does not run that way, it is retried keeping only the statistics,
    then casting everything. The variant is validated by running it eagerly on
    the CPU; when no variant runs, ``dst`` is removed and a
    :class:`~passnet.errors.SampleError` says why. ``model.py`` is unchanged;
    ``graph_net.json`` records the cast and the hash is derived from the
    source hash and the dtype.
    """
    src, dst = Path(src), Path(dst)
    target = _dtype(dtype)
    if dst.exists() and any(dst.iterdir()):
        raise SampleError("destination already exists and is not empty", sample=dst)
    sample = load_sample(src)
    stats, affine = _normalization_parameters(sample.build_module("cpu"))
    # Mixed-precision batch norm wants its statistics and affine parameters in one
    # float32 dtype (CPU kernels insist); try that first, then statistics alone, then nothing.
    attempts = list(dict.fromkeys([frozenset(stats | affine), frozenset(stats), frozenset()]))
    errors: list[str] = []
    for kept in attempts:
        _write_cast(sample, dst, target, kept)
        try:
            _run_eagerly(dst)
        except Exception as exc:  # noqa: BLE001 - a variant that does not run is reported, not raised raw
            errors.append(
                f"{'keeping ' + ', '.join(sorted(kept)) + ' float32' if kept else 'casting all'}: "
                f"{type(exc).__name__}: {exc}"
            )
            shutil.rmtree(dst)
            continue
        log.info(
            "cast %s to %s at %s (kept float32: %s)",
            src,
            dtype_to_str(target),
            dst,
            sorted(kept) or "none",
        )
        return dst
    raise SampleError(
        f"the {dtype_to_str(target)} variant does not run eagerly: " + "; ".join(errors), sample=src
    )


def _dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        value = dtype
    else:
        value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(
            f"dtype must be a floating dtype such as float16 or bfloat16, got {dtype!r}"
        )
    return value


def _write_cast(sample: Any, dst: Path, target: torch.dtype, kept: frozenset[str]) -> None:
    params = set(sample.param_names)

    def cast(metas: list[Any]) -> list[Any]:
        out = []
        for meta in metas:
            symint = meta.name in params and sample.is_symint(meta.name)
            if meta.dtype.is_floating_point and meta.name not in kept and not symint:
                meta = type(meta)(**{**meta.__dict__, "dtype": target})
            out.append(meta)
        return out

    graph_net = dict(sample.graph_net)
    graph_net["dtype_generalization"] = {
        "dtype": dtype_to_str(target),
        "source_graph_hash": sample.graph_hash,
        "kept_float32": sorted(kept),
    }
    graph_hash = hashlib.sha256(f"{sample.graph_hash}:{dtype_to_str(target)}".encode()).hexdigest()
    write_sample(
        dst,
        sample.model_source,
        cast(sample.weight_metas),
        input_metas=cast(sample.input_metas),
        constraints=sample.constraints,
        graph_net=graph_net,
        graph_hash=graph_hash,
    )
