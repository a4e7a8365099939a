"""A sample whose code crashes the process fails its own validation; the batch carries on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from passnet.dataset import validate_samples
from tests.conftest import MLP

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _segfaulting_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "crashes"
    shutil.copytree(MLP, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    src = (dst / "model.py").read_text()
    src = src.replace("import torch\n", "import ctypes\nimport torch\n", 1)
    src = src.replace(
        "        l_x_ = L_x_\n", "        ctypes.string_at(0)\n        l_x_ = L_x_\n", 1
    )
    (dst / "model.py").write_text(src)
    assert "ctypes.string_at(0)" in (dst / "model.py").read_text()
    return dst


def test_segfault_in_sample_code_is_a_failed_report_and_the_batch_continues(tmp_path: Path) -> None:
    crash = _segfaulting_copy(tmp_path)
    reports = validate_samples([crash, MLP], timeout_s=300)
    assert len(reports) == 2
    bad, good = reports
    assert not bad.ok
    assert any("SIGSEGV" in c.message for c in bad.failed)
    assert good.ok


def test_a_child_that_cannot_start_names_the_cause_and_ends_the_batch(tmp_path: Path) -> None:
    """A forkserver whose preloaded module fails to import can start no child: validation
    says which module fails and why, instead of an ``EOFError`` for every sample."""
    broken = tmp_path / "mods" / "passnet_broken_preload.py"
    broken.parent.mkdir()
    broken.write_text('raise RuntimeError("this module cannot be imported")\n')
    script = textwrap.dedent(
        f"""
        from passnet.dataset import _validate
        _validate.PRELOAD.append("passnet_broken_preload")
        from passnet.dataset import validate_samples
        from passnet.errors import ChildStartError
        try:
            validate_samples([{str(MLP)!r}], timeout_s=120)
        except ChildStartError as exc:
            print("CAUSE:", exc)
        """
    )
    # On the PYTHONPATH, so that the forkserver (a fresh interpreter) finds it too.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT), str(broken.parent)])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    cause = next(line for line in done.stdout.splitlines() if line.startswith("CAUSE:"))
    assert "RuntimeError: this module cannot be imported" in cause
    assert "passnet_broken_preload.py" in cause
    assert "EOFError" not in cause
