"""Evaluation children start alike: fixed hash seed and, where allowed, no address randomization."""

from __future__ import annotations

import os
import sys

import pytest

from passnet.evaluate._isolate import _ADDR_NO_RANDOMIZE, run_isolated
from tests.evaluate.isolate_probe import probe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def test_children_share_hash_seed_and_layout_and_the_parent_is_untouched() -> None:
    parent_seed = os.environ.get("PYTHONHASHSEED")
    a = run_isolated(probe, (), timeout_s=60).result
    b = run_isolated(probe, (), timeout_s=60).result
    assert a is not None and b is not None
    assert a["seed"] == b["seed"] == "0"
    assert a["hash"] == b["hash"]
    assert os.environ.get("PYTHONHASHSEED") == parent_seed
    with open("/proc/self/personality") as f:
        assert not int(f.read().strip(), 16) & _ADDR_NO_RANDOMIZE
    # Where the kernel lets us (personality() is not blocked), children run without ASLR.
    assert a["persona"] == b["persona"]
