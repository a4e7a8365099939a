"""Where a reference pass matches a real graph, cut out as subgraph samples (PassBench's unit).

A PassBench task is a set of *subgraphs* sharing one operator sequence, in several
shapes and dtypes (PassNet §3.1; docs/pass_library.md). :func:`site_subgraphs` makes them
from the real graphs a reference pass matches: the sample is traced and split into
units (:func:`passnet.dataset._subgraph.trace_parent`), each rule's pattern is
matched against it in the pass's rule order (a node claimed by an earlier rule is
not matched again, as when the pass manager rewrites), and the unit range spanning
each match is written as a subgraph sample with the dataset's checks
(:func:`passnet.dataset.write_op_ranges`: it reproduces the parent's values at its
cut, reloads and runs; sites with the same canonical hash, e.g. the same layer
repeated, are written once).

Only the ``pattern`` functions are run, compiled from the rule files' source: the
pass files themselves are never imported here (they need Triton, and pass code runs
only in the evaluation child).
"""

from __future__ import annotations

import ast
import logging
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from passnet._parse import parse_python
from passnet.dataset._decompose import SubgraphRecord, SubgraphStatus, write_op_ranges
from passnet.dataset._generalize import VariantStatus, generalize_sample
from passnet.dataset._subgraph import OpRange, ParentGraph, trace_parent
from passnet.errors import DatasetError, PassLoadError, SampleError
from passnet.passes import Matcher, Pattern, trace_pattern
from passnet.passes.library import ReferencePass
from passnet.sample import load_sample, trace_graph

__all__ = [
    "SITE_KIND",
    "PassSite",
    "find_sites",
    "reference_patterns",
    "shape_variants",
    "site_subgraphs",
]

log = logging.getLogger(__name__)

#: ``graph_net.json`` ``subgraph.kind`` of a site subgraph.
SITE_KIND = "pass-site"


@dataclass(frozen=True)
class PassSite:
    """One match of a rule in a traced sample, as the unit range that spans it."""

    rule: str
    range: OpRange
    nodes: tuple[str, ...]
    """The matched graph nodes, in graph order."""


def _pattern_function(file: Path, pass_name: str) -> Any:
    """``pattern`` of a rule file, compiled from its source alone (the file is not imported)."""
    try:
        tree = parse_python(file.read_text(), str(file))
    except (OSError, SyntaxError) as exc:
        raise PassLoadError(f"cannot read the rule: {exc}", file=file, pass_name=pass_name) from exc
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "pattern"]
    if not found:
        raise PassLoadError("defines no pattern()", file=file, pass_name=pass_name)
    module = ast.Module(body=found, type_ignores=[])
    namespace: dict[str, Any] = {"torch": torch, "operator": operator}
    exec(compile(module, str(file), "exec"), namespace)  # noqa: S102 - a shipped rule's pattern
    return namespace["pattern"]


def reference_patterns(ref: ReferencePass) -> list[tuple[str, Pattern]]:
    """``(rule, traced pattern)`` for each rule of a reference pass, in its load order."""
    out = []
    for rule, file in zip(ref.rules, ref.rule_files(), strict=True):
        fn = _pattern_function(file, ref.name)
        out.append((rule, trace_pattern(fn, pass_name=rule, file=file)))
    return out


def find_sites(patterns: list[tuple[str, Pattern]], parent: ParentGraph) -> list[PassSite]:
    """Every match of the patterns in the parent's graph, rule by rule, without overlaps."""
    graph = parent.gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    claimed: set[torch.fx.Node] = set()
    sites = []
    for rule, pattern in patterns:
        for match in Matcher(pattern).find(graph):
            nodes = match.graph_nodes
            if nodes & claimed:
                continue
            claimed |= nodes
            units = [parent.unit_of[n] for n in nodes if n in parent.unit_of]
            if not units:
                continue
            names = tuple(n.name for n in sorted(nodes, key=order.__getitem__))
            sites.append(PassSite(rule, OpRange(min(units), max(units) + 1), names))
    return sorted(sites, key=lambda s: s.range)


def _matched(patterns: list[tuple[str, Pattern]], path: Path) -> bool:
    graph = trace_graph(load_sample(path).build_module("cpu"), locations=False).graph
    return any(Matcher(pattern).find(graph) for _, pattern in patterns)


def site_subgraphs(
    ref: ReferencePass,
    sample: str | Path,
    out_dir: str | Path,
    patterns: list[tuple[str, Pattern]] | None = None,
    *,
    root: str | Path | None = None,
) -> tuple[list[PassSite], list[SubgraphRecord]]:
    """Write the sites of ``ref`` in ``sample`` as subgraph samples under ``out_dir/<start>-<stop>/``.

    ``patterns``: ``reference_patterns(ref)``, when the caller has them already.
    ``root``: the folder the subgraphs' ``graph_net.json`` name the sample relative to
    (default: the folder holding it; :func:`passnet.dataset.write_op_ranges`).
    Returns the sites found and a record per site (written or duplicate). Raises
    :class:`~passnet.errors.SampleError` when the sample cannot be traced, the pass
    matches nothing in it, a site cannot be made into a faithful subgraph sample,
    or the pass does not match a written subgraph (its boundary would have cut
    the pattern).
    """
    path = Path(sample)
    patterns = patterns if patterns is not None else reference_patterns(ref)
    try:
        parent = trace_parent(path)
    except DatasetError as exc:  # a SampleError passes through as it is
        raise SampleError(f"cannot trace the sample: {exc.message}", sample=path) from exc
    sites = find_sites(patterns, parent)
    if not sites:
        raise SampleError(
            f"reference pass {ref.name!r} matches nothing in this sample (rules: {', '.join(ref.rules)})",
            sample=path,
        )
    records = write_op_ranges(parent, [s.range for s in sites], out_dir, kind=SITE_KIND, root=root)
    for site, rec in zip(sites, records, strict=True):
        if rec.status not in (SubgraphStatus.WRITTEN, SubgraphStatus.DUPLICATE):
            raise SampleError(
                f"the {site.rule} site at units {site.range} ({', '.join(site.nodes)}) cannot be "
                f"made into a subgraph sample: {rec.reason}",
                sample=path,
            )
        if rec.status is SubgraphStatus.WRITTEN and not _matched(patterns, Path(rec.path)):
            raise SampleError(
                f"reference pass {ref.name!r} does not match its own site subgraph {rec.path} "
                f"(units {site.range} of the sample)",
                sample=path,
            )
    return sites, records


def shape_variants(
    patterns: list[tuple[str, Pattern]],
    sample: str | Path,
    out_dir: str | Path,
    factors: tuple[int, ...],
) -> list[tuple[Path, str]]:
    """Shape variants of a site subgraph that the pass still matches: ``(path, label)``.

    The label names the scaled symbol and its value (``S0-4``); the sample itself
    comes first with label ``""``. Variants are made by
    :func:`passnet.dataset.generalize_sample` (each symbol scaled by each factor, then
    validated by running it). One that cannot be made, or that the pass no longer
    matches (a pattern spelling a size as a literal), is left out and logged.
    """
    out: list[tuple[Path, str]] = [(Path(sample), "")]
    if not factors:
        return out
    result = generalize_sample(sample, out_dir, dtypes=(), shape_factors=factors, cross=False)
    if result.status != "ok":
        why = result.error.message if result.error else "unknown error"
        log.warning("%s: no shape variants: %s", sample, why)
        return out
    if not result.symbols:
        log.info("%s: no shape variants: no dynamic dimension found", sample)
    for variant in result.variants:
        if variant.status is not VariantStatus.WRITTEN:
            log.warning("%s: shape variant %s left out: %s", sample, variant.name, variant.reason)
            continue
        path = Path(variant.path)
        if not _matched(patterns, path):
            log.warning(
                "%s: shape variant %s left out: the pass does not match it", sample, variant.name
            )
            continue
        out.append((path, "_".join(f"{k}-{v}" for k, v in sorted(variant.sizes.items()))))
    return out
