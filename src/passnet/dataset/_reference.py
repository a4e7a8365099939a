"""A PassBench-style task per reference pass, built from the real graphs it matches.

Two scopes: ``graph`` (the default) takes the whole source samples, so a pass is
measured end to end on real models; ``site`` takes the subgraphs around the pass's
matches in them (:mod:`passnet.dataset._sites`), PassBench's unit: variants
of one subgraph in several shapes and dtypes (PassNet §3.1).

The task is written by :func:`passnet.task.write_task` (the one task writer); its
``task.json`` metadata holds ``builder: "reference"``, the ``pass``, ``scope``,
``dtypes`` (and ``shape_factors`` for sites), and each graph's record its
``source`` sample (relative to the samples root), ``dtype`` and, for a site, the
``site`` (unit range) and ``shape`` (the scaled symbol, ``""`` for its own shape).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from passnet.data import dev_samples_dir
from passnet.dataset._decompose import SubgraphStatus
from passnet.dataset._sites import reference_patterns, shape_variants, site_subgraphs
from passnet.dataset._variants import dtype_variant
from passnet.errors import SampleError
from passnet.passes.library import get_reference_pass, install_pass
from passnet.sample import dtype_to_str, is_sample_dir
from passnet.task import Task, TaskError, TaskGraph, load_task, write_task

__all__ = ["DEFAULT_DTYPES", "DEFAULT_SHAPE_FACTORS", "SCOPES", "build_reference_task"]

log = logging.getLogger(__name__)

DEFAULT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
SCOPES = ("graph", "site")
DEFAULT_SHAPE_FACTORS: tuple[int, ...] = (2, 4)
"""Site scope: the batch symbol scaled by these factors (plus the site's own shape)."""


def build_reference_task(
    name: str,
    out_dir: str | Path,
    samples_root: str | Path | None = None,
    *,
    dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES,
    scope: str = "graph",
    shape_factors: Sequence[int] = DEFAULT_SHAPE_FACTORS,
) -> Task:
    """Create the task of reference pass ``name`` at ``out_dir`` and return it loaded.

    The task's graphs are the pass's source samples (found under ``samples_root``,
    default: the shipped dev samples) in every dtype of ``dtypes``, as
    ``graphs/<sample>_<dtype>/``, each validated by running it eagerly (see
    :func:`dtype_variant`). Its ``pass_dir`` holds the pass, and ``entry.sh``
    evaluates it with the ``pass_mgr`` compiler. ``out_dir`` must not exist or
    be empty. A missing source sample or a variant that does not run is a
    :class:`~passnet.errors.SampleError`, raised before anything is written there.

    ``scope="site"`` builds the task from the pass's sites instead (PassBench's
    unit, PassNet §3.1): every distinct subgraph around a match in the source
    samples (written once per canonical hash and sample), at its own shape and
    with its batch symbol scaled by each of ``shape_factors`` (variants the pass
    no longer matches are left out), in every dtype, as
    ``graphs/<sample>_<start>-<stop>[_S0-<n>]_<dtype>/``; the task is named
    ``reference-<name>-sites``. A sample the pass does not match, or a site that
    cannot be cut out faithfully, is a ``SampleError``. ``shape_factors`` is not
    used with the graph scope.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        # write_task refuses it too; refusing first spares building every variant
        raise TaskError("task folder already exists and is not empty", task=out)
    ref = get_reference_pass(name)
    root = Path(samples_root) if samples_root is not None else dev_samples_dir()
    for rel in ref.source_samples:
        if not is_sample_dir(root / rel):
            raise SampleError(
                f"reference pass {name!r} is built from this sample, which is not under the samples root",
                sample=root / rel,
            )
    patterns = reference_patterns(ref) if scope == "site" else []
    labels = [dtype_to_str(dtype).removeprefix("torch.") for dtype in dtypes]
    with tempfile.TemporaryDirectory(prefix="passnet-reftask-") as tmp:
        # (fp32 sample, graph folder stem, what task.json records of it)
        sources: list[tuple[Path, str, dict[str, str]]] = []
        for rel in ref.source_samples:
            if scope == "graph":
                sources.append((root / rel, Path(rel).name, {"source": str(rel)}))
                continue
            _, records = site_subgraphs(
                ref, root / rel, Path(tmp) / "sites" / Path(rel).name, patterns, root=root
            )
            for r in records:
                if r.status is not SubgraphStatus.WRITTEN:
                    continue
                site = f"{r.start:04d}-{r.stop:04d}"
                stem = f"{Path(rel).name}_{site}"
                shapes = shape_variants(
                    patterns, r.path, Path(tmp) / "shapes" / stem, tuple(shape_factors)
                )
                sources += [
                    (
                        p,
                        f"{stem}_{label}" if label else stem,
                        {"source": str(rel), "site": site, "shape": label},
                    )
                    for p, label in shapes
                ]
        graphs = []
        for src, stem, info in sources:
            for dtype, label in zip(dtypes, labels, strict=True):
                variant = dtype_variant(src, Path(tmp) / f"{stem}_{label}", dtype)
                graphs.append(
                    TaskGraph(f"graphs/{stem}_{label}", variant, {**info, "dtype": label})
                )
        metadata: dict[str, object] = {
            "builder": "reference",
            "pass": name,
            "scope": scope,
            "dtypes": labels,
        }
        if scope == "site":
            metadata["shape_factors"] = list(shape_factors)
        suffix = "-sites" if scope == "site" else ""
        task = write_task(out, graphs, name=f"reference-{name}{suffix}", metadata=metadata)
    install_pass(name, task.pass_dir)
    log.info("built reference task %s at %s (%d graphs)", name, task.path, len(task.graphs))
    return load_task(task.path)
