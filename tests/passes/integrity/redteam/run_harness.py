"""Evaluate pass directories end to end with the real harness; print ``{name: record}`` as JSON.

Run as a script in a fresh interpreter so that ``TRITON_INTERPRET=1`` (set by the caller)
holds from the first import of Triton, in this process and in the evaluation children::

    python run_harness.py SAMPLE NAME=PASS_DIR[@CONST_PASS_DIR] [...]

``@CONST_PASS_DIR`` adds a trusted ``const_pass_dir`` (no static layer, no guard): it
shows a harness mechanism alone catching an exploit the static layer rejects first.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    from passnet.evaluate import EvalSettings, evaluate_sample

    sample, *cases = argv
    settings = EvalSettings(
        warmup=1, trials=3, rounds=1, timeout_s=300, num_threads=1, time_graphs=False
    )
    out = {}
    for case in cases:
        name, _, dirs = case.partition("=")
        pass_dir, _, const_pass_dir = dirs.partition("@")
        config = {"pass_dir": pass_dir}
        if const_pass_dir:
            config["const_pass_dir"] = const_pass_dir
        record = evaluate_sample(
            sample, compiler="pass_mgr", compiler_config=config, settings=settings
        )
        out[name] = {
            "status": record.status.value,
            "error": record.error.message if record.error else None,
            "integrity": record.integrity,
            "first_failing_draw": (
                record.correctness.first_failing_draw if record.correctness else None
            ),
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
