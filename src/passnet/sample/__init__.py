"""GraphNet samples: the format (read, write), replay of tensors from metadata, the one
tracer (:func:`trace_graph`), operator names, and the one output comparator
(:func:`compare_outputs`)."""

from passnet.sample._compare import Comparison, accuracy_message, compare_outputs, flatten_outputs
from passnet.sample._constraints import Constraints, parse_constraints_file, render_constraints_file
from passnet.sample._discover import find_samples, is_sample_dir
from passnet.sample._graph import (
    LOCATION_KEY,
    SampleTracer,
    declared_custom_ops,
    load_custom_op,
    model_line,
    node_line,
    node_location,
    op_resolves,
    stable_toposort,
    trace_graph,
    trace_sample,
)
from passnet.sample._meta import (
    TensorMeta,
    dtype_from_str,
    dtype_to_str,
    parse_meta_file,
    render_meta_file,
)
from passnet.sample._model import compile_model_source, forward_parameters, rewrite_devices
from passnet.sample._ops import (
    canonical_op_name,
    compute_nodes,
    describe_op,
    format_node,
    is_builtin_op_namespace,
    op_sequence,
    qualified_name,
)
from passnet.sample._paddle import (
    PADDLE,
    PADDLE_INSTALL,
    TORCH,
    is_shape_patch_dir,
    model_dir,
    paddle_missing,
    replay_paddle_arrays,
    sample_framework,
)
from passnet.sample._replay import ParamUsage, analyze_usage, replay_cache, replay_value
from passnet.sample._sample import (
    OPTIONAL_FILES,
    Sample,
    is_module_state,
    load_sample,
    missing_optional_files,
    recorded_hash,
    sample_digest,
)
from passnet.sample._write import write_sample

__all__ = [
    "PADDLE",
    "PADDLE_INSTALL",
    "TORCH",
    "is_shape_patch_dir",
    "model_dir",
    "paddle_missing",
    "replay_paddle_arrays",
    "sample_framework",
    "LOCATION_KEY",
    "OPTIONAL_FILES",
    "Comparison",
    "Constraints",
    "ParamUsage",
    "Sample",
    "SampleTracer",
    "TensorMeta",
    "accuracy_message",
    "analyze_usage",
    "canonical_op_name",
    "compare_outputs",
    "compile_model_source",
    "compute_nodes",
    "declared_custom_ops",
    "describe_op",
    "dtype_from_str",
    "dtype_to_str",
    "find_samples",
    "flatten_outputs",
    "format_node",
    "forward_parameters",
    "is_builtin_op_namespace",
    "is_sample_dir",
    "load_custom_op",
    "is_module_state",
    "load_sample",
    "recorded_hash",
    "missing_optional_files",
    "model_line",
    "node_line",
    "node_location",
    "op_resolves",
    "op_sequence",
    "parse_constraints_file",
    "parse_meta_file",
    "qualified_name",
    "render_constraints_file",
    "render_meta_file",
    "replay_cache",
    "replay_value",
    "rewrite_devices",
    "sample_digest",
    "stable_toposort",
    "trace_graph",
    "trace_sample",
    "write_sample",
]
