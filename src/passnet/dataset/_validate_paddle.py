"""GraphNet's constraints for a Paddle sample (docs/paddle.md, "Validate and hash").

* **serializable**: the files load and the metadata round-trips (checked by the caller);
* **custom_op_accessible**: every call of ``forward`` is a Paddle operator (``paddle.*``);
* **statically_analyzable**: ``model.py`` reads into the canonical graph, and Paddle's
  static graph of it (``paddle.jit.to_static(full_graph=True)``) computes the eager outputs;
* **runnable**: the layer runs eagerly on inputs replayed from the metadata;
* **decomposable**: not checked for Paddle samples (skipped; it does not fail the sample).

Paddle runs here: call :func:`validate_paddle` in the validation child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from passnet.errors import PassnetError, TooLarge
from passnet.sample import Sample, compare_outputs
from passnet.status import Status

__all__ = ["validate_paddle"]


def validate_paddle(sample: Sample, checks: Any, seed: int, started: float) -> Any:
    """The :class:`ValidationReport` of a loaded Paddle sample; ``checks`` holds the
    serializable verdict so far."""
    from passnet.dataset._hash_paddle import paddle_canonical_graph
    from passnet.dataset._validate import Constraint
    from passnet.evaluate import build_paddle_sample, check_fits, paddle_outputs

    graph_hash = ""
    try:
        graph = paddle_canonical_graph(sample)
        graph_hash = graph.graph_hash
        foreign = [op for op in graph.ops if not op.startswith("paddle.")]
        if foreign:
            checks.fail(
                Constraint.CUSTOM_OP_ACCESSIBLE,
                f"{len(foreign)} calls are not Paddle operators (first: {foreign[0]})",
                file="model.py",
            )
        else:
            checks.passed(Constraint.CUSTOM_OP_ACCESSIBLE, "every call is a paddle.* operator")
    except PassnetError as exc:
        checks.fail(Constraint.STATICALLY_ANALYZABLE, exc.message, file="model.py")
        checks.skip(Constraint.CUSTOM_OP_ACCESSIBLE, "model.py does not read")
    try:
        check_fits(sample, "cpu", copies=3)  # the inputs, eager's and the static graph's
    except TooLarge as exc:
        for c in (Constraint.RUNNABLE, Constraint.STATICALLY_ANALYZABLE):
            checks.skip(c, f"not run: {exc.message}")
        checks.notes.append(f"too large: {exc.message}")
        return checks.report(sample.path, started, graph_hash, status=Status.TOO_LARGE)
    try:
        layer, inputs = build_paddle_sample(sample, seed)
        expected = paddle_outputs(layer, inputs)
    except Exception as exc:  # noqa: BLE001 - the sample failing is the finding
        message = exc.message if isinstance(exc, PassnetError) else f"{type(exc).__name__}: {exc}"
        checks.fail(Constraint.RUNNABLE, message, file="model.py")
        return _report(checks, sample.path, started, graph_hash)
    checks.passed(Constraint.RUNNABLE)
    try:
        from passnet.compilers import create_compiler

        static = create_compiler("paddle-static").compile(layer, inputs)
        cmp = compare_outputs(paddle_outputs(static, inputs), expected)
        if cmp.status is not Status.OK:
            checks.fail(
                Constraint.STATICALLY_ANALYZABLE,
                f"Paddle's static graph differs from eager: {cmp.message or cmp.status.value}",
                file="model.py",
            )
    except Exception as exc:  # noqa: BLE001 - a graph Paddle cannot make static is the finding
        checks.fail(
            Constraint.STATICALLY_ANALYZABLE,
            f"paddle.jit.to_static(full_graph=True) fails: {type(exc).__name__}: {str(exc)[:300]}",
            file="model.py",
        )
    checks.passed(Constraint.STATICALLY_ANALYZABLE)
    checks.passed(Constraint.SERIALIZABLE)
    return _report(checks, sample.path, started, graph_hash)


def _report(checks: Any, path: Path, started: float, graph_hash: str) -> Any:
    from passnet.dataset._validate import CheckStatus, Constraint

    checks.skip(Constraint.DECOMPOSABLE, "not checked for Paddle samples")
    failed = any(r.status is CheckStatus.FAILED for r in checks.results.values())
    skipped = [
        c
        for c in Constraint
        if c not in checks.results or checks.results[c].status is CheckStatus.SKIPPED
    ]
    status = Status.SAMPLE_ERROR if failed or skipped != [Constraint.DECOMPOSABLE] else Status.OK
    return checks.report(path, started, graph_hash, status=status)
