"""Reference passes: correct, fast Triton passes for patterns of the real dev samples.

Each pass is a folder of rule files written exactly as a pass author puts them in a
task's ``pass_dir``; this package lists them, copies them into pass directories,
and builds a PassBench-style task for each from the real graphs that contain its
pattern (plus fp16/bf16 variants).

>>> from passnet.passes.library import reference_passes, install_pass
>>> [p.name for p in reference_passes()][:2]
['masked_mean_pooling', 'roll_add_layer_norm']
"""

from passnet.passes.library._catalog import (
    LIBRARY_DIR,
    RULE_ORDER_FILE,
    ReferencePass,
    get_reference_pass,
    reference_passes,
)
from passnet.passes.library._install import PassInstallError, install_pass
from passnet.passes.library._tasks import DEFAULT_DTYPES, build_reference_task
from passnet.passes.library._variants import dtype_variant, rewrite_dtype_literals

__all__ = [
    "DEFAULT_DTYPES",
    "LIBRARY_DIR",
    "RULE_ORDER_FILE",
    "PassInstallError",
    "ReferencePass",
    "build_reference_task",
    "dtype_variant",
    "get_reference_pass",
    "install_pass",
    "reference_passes",
    "rewrite_dtype_literals",
]
