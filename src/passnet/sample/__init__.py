"""GraphNet sample format: read, write, replay tensors from metadata."""

from passnet.sample._constraints import Constraints, parse_constraints_file, render_constraints_file
from passnet.sample._discover import find_samples, is_sample_dir
from passnet.sample._meta import (
    TensorMeta,
    dtype_from_str,
    dtype_to_str,
    parse_meta_file,
    render_meta_file,
)
from passnet.sample._model import rewrite_devices
from passnet.sample._replay import ParamUsage, analyze_usage
from passnet.sample._sample import OPTIONAL_FILES, Sample, load_sample, sample_digest
from passnet.sample._write import write_sample

__all__ = [
    "OPTIONAL_FILES",
    "Constraints",
    "ParamUsage",
    "Sample",
    "TensorMeta",
    "analyze_usage",
    "dtype_from_str",
    "dtype_to_str",
    "find_samples",
    "is_sample_dir",
    "load_sample",
    "parse_constraints_file",
    "parse_meta_file",
    "render_constraints_file",
    "render_meta_file",
    "rewrite_devices",
    "sample_digest",
    "write_sample",
]
