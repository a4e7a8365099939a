"""fp16/bf16 variants of a sample that still run, for reference tasks.

:func:`passnet.passes.cast_sample` casts a sample's floating inputs and weights
and leaves ``model.py`` as traced. Graphs traced in fp32 often spell the dtype
out (``x.to(torch.float32)`` in T5's RMSNorm, ``torch.zeros(..., dtype=torch.float32)``
for Swin's window mask), and then the cast graph mixes dtypes and fails. For
those, the variant is made from a copy whose fp32 literals name the target dtype
(``torch.float32``/``torch.float`` and ``torch.finfo(torch.float32).max``, the
attention-mask fill value), as the model would have traced in that dtype.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from pathlib import Path

import torch

from passnet.errors import SampleError
from passnet.passes import cast_sample
from passnet.sample import dtype_to_str, load_sample, write_sample

__all__ = ["dtype_variant", "rewrite_dtype_literals"]

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
