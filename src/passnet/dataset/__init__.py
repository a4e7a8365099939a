"""Dataset construction (docs/dataset.md, docs/dataset_decompose.md).

Collect: :func:`extract` graphs from live models, :func:`validate_sample` against the
five constraints, :func:`graph_hash` / :func:`dedup`, and the SQLite :class:`Catalog`.
Refine: :func:`decompose_samples` (fusible, classical, single-op subgraphs),
:func:`generalize_sample` (dtype and shape variants), :func:`build_bench` (PassBench-GN
tasks split by kind, long-tail evaluation tasks), and the reference passes' tasks
(:func:`build_reference_task`).
"""

from __future__ import annotations

from passnet.dataset._bench import (
    LONG_TAIL_CATEGORIES,
    BenchResult,
    BenchTask,
    build_bench,
    write_bench_manifest,
    write_candidate_list,
)
from passnet.dataset._catalog import (
    CATALOG_SCHEMA_VERSION,
    COUNT_KEYS,
    Catalog,
    SampleRecord,
    TaskRecord,
)
from passnet.dataset._decompose import (
    DEFAULT_MEMORY_LIMIT_GB,
    DEFAULT_OP_BOUNDS,
    DEFAULT_TIMEOUT_S,
    DecomposeResult,
    DecomposeStage,
    DecomposeStatus,
    SubgraphKind,
    SubgraphRecord,
    SubgraphStatus,
    build_motif_table,
    decompose_sample,
    decompose_samples,
    read_decompose_manifest,
    write_op_ranges,
)
from passnet.dataset._dedup import DedupGroup, DedupReport, dedup, group_by_hash
from passnet.dataset._extract import (
    CapturedGraph,
    ExtractedGraph,
    ExtractFailure,
    ExtractOptions,
    Extractor,
    ExtractResult,
    capture_graphs,
    dump_results,
    extract,
    extract_file,
    tensor_meta,
    write_graph_sample,
)
from passnet.dataset._fusible import FusibleAnalysis, analyze_fusible, fusible_ranges
from passnet.dataset._generalize import (
    GeneralizeResult,
    GeneralizeStage,
    VariantRecord,
    VariantStatus,
    generalize_sample,
    generalize_samples,
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
from passnet.dataset._reference import (
    DEFAULT_DTYPES,
    DEFAULT_SHAPE_FACTORS,
    SCOPES,
    build_reference_task,
)
from passnet.dataset._stage import ChildDeath, SampleJob, Stage, StageRun, run_stage
from passnet.dataset._subgraph import ParentGraph, trace_parent
from passnet.dataset._validate import (
    CheckStatus,
    Constraint,
    ConstraintCheck,
    ValidateStage,
    ValidationReport,
    read_reports,
    validate_sample,
    validate_samples,
)
from passnet.dataset._variants import cast_sample, dtype_variant, rewrite_dtype_literals

__all__ = [
    "CATALOG_SCHEMA_VERSION",
    "COUNT_KEYS",
    "DEFAULT_DTYPES",
    "DEFAULT_MEMORY_LIMIT_GB",
    "DEFAULT_OP_BOUNDS",
    "DEFAULT_SHAPE_FACTORS",
    "DEFAULT_TIMEOUT_S",
    "HASH_VERSION",
    "LONG_TAIL_CATEGORIES",
    "SCOPES",
    "BenchResult",
    "BenchTask",
    "CanonicalGraph",
    "CapturedGraph",
    "Catalog",
    "CheckStatus",
    "Constraint",
    "ConstraintCheck",
    "DecomposeResult",
    "DecomposeStatus",
    "DedupGroup",
    "DedupReport",
    "ExtractFailure",
    "ExtractOptions",
    "ExtractResult",
    "ExtractedGraph",
    "Extractor",
    "FusibleAnalysis",
    "GeneralizeResult",
    "HashResult",
    "InputSpec",
    "ParentGraph",
    "SampleRecord",
    "SubgraphKind",
    "SubgraphRecord",
    "SubgraphStatus",
    "TaskRecord",
    "ValidateStage",
    "ValidationReport",
    "VariantRecord",
    "VariantStatus",
    "analyze_fusible",
    "build_bench",
    "build_motif_table",
    "build_reference_task",
    "canonical_graph",
    "capture_graphs",
    "cast_sample",
    "decompose_sample",
    "DecomposeStage",
    "decompose_samples",
    "dedup",
    "dtype_variant",
    "dump_results",
    "extract",
    "extract_file",
    "fusible_ranges",
    "generalize_sample",
    "GeneralizeStage",
    "generalize_samples",
    "ChildDeath",
    "SampleJob",
    "Stage",
    "StageRun",
    "run_stage",
    "graph_hash",
    "group_by_hash",
    "hash_samples",
    "is_assertion_op",
    "read_decompose_manifest",
    "read_reports",
    "rewrite_dtype_literals",
    "tensor_meta",
    "trace_parent",
    "validate_sample",
    "validate_samples",
    "write_bench_manifest",
    "write_candidate_list",
    "write_graph_sample",
    "write_op_ranges",
]
