"""``passnet --help`` and every command's parser start without torch: commands import the
library when they run (the startup time itself is measured by benchmarks/cli_startup.py)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "numpy", "matplotlib", "triton", "sympy", "ray")


def test_building_the_parser_imports_no_heavy_library() -> None:
    code = (
        "import sys, passnet.cli as c; c.build_parser(); "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_of_each_command_runs_without_torch() -> None:
    code = (
        "import sys, passnet.cli as c\n"
        "names = c.build_parser()._subparsers._group_actions[0].choices\n"
        "for name in names:\n"
        "    try:\n"
        "        c.main([name, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(len(names), 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, torch_loaded = out.stdout.strip().splitlines()[-1].split()
    assert int(count) >= 14 and torch_loaded == "False"
