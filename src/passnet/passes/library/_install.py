"""Copy a reference pass into a task's ``pass_dir``."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from passnet.errors import PassError
from passnet.passes.library._catalog import get_reference_pass
from passnet.task import MANIFEST_FILE, read_manifest, write_manifest

__all__ = ["PassInstallError", "install_pass"]

log = logging.getLogger(__name__)


class PassInstallError(PassError):
    """A reference pass cannot be put into a pass directory (``pass_name``, ``file``)."""


def install_pass(name: str, pass_dir: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Copy the rule files of reference pass ``name`` into ``pass_dir``.

    Creates ``pass_dir`` if needed and appends the pass's rules to its
    ``sorted_output_pass_rule_names.json`` (rules already listed keep their place),
    so several reference passes can share one pass directory. A different file of
    the same name is only replaced with ``overwrite=True``. Returns the rule files
    written, in load order.
    """
    ref = get_reference_pass(name)
    pass_dir = Path(pass_dir)
    pass_dir.mkdir(parents=True, exist_ok=True)
    order = read_manifest(pass_dir) if (pass_dir / MANIFEST_FILE).is_file() else []
    written = []
    for src in ref.rule_files():
        dst = pass_dir / src.name
        if not src.is_file():
            raise PassInstallError("rule file missing from the library", pass_name=name, file=src)
        if dst.exists() and dst.read_bytes() != src.read_bytes() and not overwrite:
            raise PassInstallError(
                "a different file of this name is already in the pass directory "
                "(install with overwrite=True to replace it)",
                pass_name=name,
                file=dst,
            )
        shutil.copyfile(src, dst)
        written.append(dst)
        if src.stem not in order:
            order.append(src.stem)
    write_manifest(pass_dir, order)
    log.info("installed reference pass %s into %s: %s", name, pass_dir, [p.stem for p in written])
    return written
