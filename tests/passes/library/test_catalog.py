"""The catalog lists exactly the pass folders; install_pass copies them into pass directories."""

from __future__ import annotations

import json

import pytest

from passnet.errors import RegistryError
from passnet.passes.integrity import inspect_pass_dir
from passnet.passes.library import (
    LIBRARY_DIR,
    PassInstallError,
    get_reference_pass,
    install_pass,
    reference_passes,
)
from passnet.task import MANIFEST_FILE, read_manifest


def test_catalog_lists_every_pass_folder_and_nothing_else():
    folders = {p.parent.name for p in LIBRARY_DIR.glob(f"*/{MANIFEST_FILE}")}
    assert folders == {p.name for p in reference_passes()}
    assert len(folders) >= 6


@pytest.mark.parametrize("ref", reference_passes(), ids=lambda p: p.name)
def test_each_pass_folder_is_a_valid_pass_dir_that_passes_static_inspection(ref):
    assert read_manifest(ref.folder) == ref.rules
    assert sorted(p.name for p in ref.folder.glob("*.py")) == sorted(f"{r}.py" for r in ref.rules)
    assert inspect_pass_dir(ref.folder) == []
    assert ref.description and ref.source_samples


def test_unknown_pass_name_lists_the_known_ones():
    with pytest.raises(RegistryError, match="known: masked_mean_pooling, roll_add_layer_norm"):
        get_reference_pass("flash_attention")


def test_install_into_a_new_pass_dir_copies_rules_and_writes_the_manifest(tmp_path):
    written = install_pass("rms_norm", tmp_path / "pass_dir")
    assert [p.name for p in written] == ["FusedRMSNorm.py"]
    assert (
        written[0].read_bytes()
        == (get_reference_pass("rms_norm").folder / "FusedRMSNorm.py").read_bytes()
    )
    assert json.loads((tmp_path / "pass_dir" / MANIFEST_FILE).read_text()) == ["FusedRMSNorm"]


def test_install_appends_to_an_existing_manifest_and_is_idempotent(tmp_path):
    pass_dir = tmp_path / "pass_dir"
    pass_dir.mkdir()
    (pass_dir / "Mine.py").write_text("# a user's pass\n")
    (pass_dir / MANIFEST_FILE).write_text('["Mine"]')
    install_pass("add_layer_norm", pass_dir)
    install_pass("linear_bias_gelu", pass_dir)
    install_pass("add_layer_norm", pass_dir)
    assert read_manifest(pass_dir) == [
        "Mine",
        "FusedLinearAddLayerNorm",
        "FusedAddLayerNorm",
        "FusedFeedForwardAddLayerNorm",
        "FusedLinearBiasGelu",
    ]


def test_install_refuses_to_replace_a_different_file_unless_asked(tmp_path):
    pass_dir = tmp_path / "pass_dir"
    pass_dir.mkdir()
    (pass_dir / "FusedRMSNorm.py").write_text("# someone else's rule of the same name\n")
    with pytest.raises(PassInstallError, match="already in the pass directory") as info:
        install_pass("rms_norm", pass_dir)
    assert info.value.context["pass_name"] == "rms_norm"
    assert (pass_dir / "FusedRMSNorm.py").read_text().startswith("# someone else's")
    install_pass("rms_norm", pass_dir, overwrite=True)
    assert "def pattern" in (pass_dir / "FusedRMSNorm.py").read_text()
