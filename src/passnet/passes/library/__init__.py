"""Reference passes: correct, fast Triton passes for patterns of the real dev samples.

Each pass is a folder of rule files written exactly as a pass author puts them in a
task's ``pass_dir``; this package lists them and copies them into pass directories.
The tasks built from the real graphs that contain each pattern are made by
:func:`passnet.dataset.build_reference_task`.

The pass files are deliberately self-contained (each carries its own kernels and
helpers, as a pass author would write it), so some kernels appear in more than one
file; see ``docs/pass_library.md``.

>>> from passnet.passes.library import reference_passes, install_pass
>>> [p.name for p in reference_passes()][:2]
['masked_mean_pooling', 'roll_add_layer_norm']
"""

from passnet.passes.library._catalog import (
    LIBRARY_DIR,
    ReferencePass,
    get_reference_pass,
    reference_passes,
)
from passnet.passes.library._install import PassInstallError, install_pass

__all__ = [
    "LIBRARY_DIR",
    "PassInstallError",
    "ReferencePass",
    "get_reference_pass",
    "install_pass",
    "reference_passes",
]
