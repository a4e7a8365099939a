"""Dataset construction (design §7).

Part 1 — collect: :func:`extract` graphs from live models, :func:`validate_sample`
against the five constraints, :func:`graph_hash` / :func:`dedup`, and the SQLite
:class:`Catalog`. Part 2 — refine: ``decompose_samples``, ``generalize_sample``,
``build_bench`` and their result types; those are imported on first use, so
``passnet.dataset`` imports even where a part-2 module is absent (the name is then
an ``AttributeError``).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from passnet.dataset._catalog import CATALOG_SCHEMA_VERSION, Catalog, SampleRecord, TaskRecord
from passnet.dataset._dedup import DedupGroup, DedupReport, dedup, group_by_hash
from passnet.dataset._extract import (
    CapturedGraph,
    ExtractedGraph,
    ExtractFailure,
    ExtractOptions,
    Extractor,
    ExtractResult,
    capture_graphs,
    extract,
    extract_file,
    tensor_meta,
    write_graph_sample,
)
from passnet.dataset._graph import (
    canonical_op_name,
    compute_nodes,
    op_sequence,
    trace_module,
    trace_sample,
)
from passnet.dataset._hash import (
    HASH_VERSION,
    CanonicalGraph,
    HashResult,
    InputSpec,
    canonical_graph,
    graph_hash,
    hash_samples,
    is_assertion_op,
)
from passnet.dataset._validate import (
    CheckStatus,
    Constraint,
    ConstraintCheck,
    ValidationReport,
    compare_outputs,
    read_reports,
    validate_sample,
    validate_samples,
)

# Part 2: public name -> private module holding it, imported on first access.
_PART2 = {
    **dict.fromkeys(
        [
            "DecomposeResult",
            "SubgraphKind",
            "SubgraphRecord",
            "SubgraphStatus",
            "decompose_sample",
            "decompose_samples",
            "read_decompose_manifest",
            "write_op_ranges",
        ],
        "_decompose",
    ),
    **dict.fromkeys(
        ["GeneralizeResult", "VariantRecord", "VariantStatus", "generalize_sample"], "_generalize"
    ),
    **dict.fromkeys(["BenchResult", "BenchTask", "build_bench"], "_bench"),
}

__all__ = [
    "CATALOG_SCHEMA_VERSION",
    "HASH_VERSION",
    "CanonicalGraph",
    "CapturedGraph",
    "Catalog",
    "CheckStatus",
    "Constraint",
    "ConstraintCheck",
    "DedupGroup",
    "DedupReport",
    "ExtractFailure",
    "ExtractOptions",
    "ExtractResult",
    "ExtractedGraph",
    "Extractor",
    "HashResult",
    "InputSpec",
    "SampleRecord",
    "TaskRecord",
    "ValidationReport",
    "canonical_graph",
    "canonical_op_name",
    "capture_graphs",
    "compare_outputs",
    "compute_nodes",
    "dedup",
    "extract",
    "extract_file",
    "graph_hash",
    "group_by_hash",
    "hash_samples",
    "is_assertion_op",
    "op_sequence",
    "read_reports",
    "tensor_meta",
    "trace_module",
    "trace_sample",
    "validate_sample",
    "validate_samples",
    "write_graph_sample",
] + [
    name
    for name, module in _PART2.items()
    if importlib.util.find_spec(f"{__name__}.{module}") is not None
]


def __getattr__(name: str) -> Any:
    module = _PART2.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    qualified = f"{__name__}.{module}"
    try:
        found = importlib.import_module(qualified)
    except ModuleNotFoundError as exc:
        if exc.name != qualified:
            raise
        raise AttributeError(
            f"{__name__}.{name} is not available: {qualified} is not installed"
        ) from None
    return getattr(found, name)
