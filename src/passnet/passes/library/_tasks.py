"""A PassBench-style task per reference pass, built from the real graphs it matches."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from passnet.data import dev_samples_dir
from passnet.errors import SampleError
from passnet.passes import Task, create_task, load_task
from passnet.passes.library._catalog import get_reference_pass
from passnet.passes.library._install import install_pass
from passnet.passes.library._variants import dtype_variant
from passnet.sample import dtype_to_str, is_sample_dir

__all__ = ["DEFAULT_DTYPES", "build_reference_task"]

log = logging.getLogger(__name__)

DEFAULT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)


def build_reference_task(
    name: str,
    out_dir: str | Path,
    samples_root: str | Path | None = None,
    *,
    dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES,
) -> Task:
    """Create the task of reference pass ``name`` at ``out_dir`` and return it loaded.

    The task's graphs are the pass's source samples (found under ``samples_root``,
    default: the shipped dev samples) in every dtype of ``dtypes``, as
    ``graphs/<sample>_<dtype>/``, each validated by running it eagerly (see
    :func:`dtype_variant`). Its ``pass_dir`` holds the pass, and ``entry.sh``
    evaluates it with the ``pass_mgr`` compiler. ``out_dir`` must not exist or
    be empty. A missing source sample or a variant that does not run is a
    :class:`~passnet.errors.SampleError`, raised before anything is written there.
    """
    ref = get_reference_pass(name)
    root = Path(samples_root) if samples_root is not None else dev_samples_dir()
    for rel in ref.source_samples:
        if not is_sample_dir(root / rel):
            raise SampleError(
                f"reference pass {name!r} is built from this sample, which is not under the samples root",
                sample=root / rel,
            )
    with tempfile.TemporaryDirectory(prefix="passnet-reftask-") as tmp:
        variants = []
        for rel in ref.source_samples:
            for dtype in dtypes:
                label = dtype_to_str(dtype).removeprefix("torch.")
                variants.append(
                    dtype_variant(root / rel, Path(tmp) / f"{Path(rel).name}_{label}", dtype)
                )
        task = create_task(out_dir, variants, name=f"reference-{name}")
    install_pass(name, task.pass_dir)
    log.info("built reference task %s at %s (%d graphs)", name, task.path, len(task.graphs))
    return load_task(task.path)
