"""A sample whose code crashes the process fails its own validation; the batch carries on."""

from __future__ import annotations

import shutil
from pathlib import Path

from passnet.dataset import validate_samples
from tests.conftest import MLP


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
