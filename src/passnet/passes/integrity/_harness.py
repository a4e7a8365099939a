"""The harness's own checks around the compiled calls (docs/passes.md, third layer).

The evaluation child calls the compiled side and eager on clones of the same inputs and
compares what each did to its arguments and returned: a compiled side that mutates an
input eager leaves alone (marking inputs as seen, to skip work on the next call), or
returns an input's storage where eager returns a fresh tensor, is an integrity finding.
A finding starts with the name of its registered check (``input-mutation``,
``output-alias``: :data:`passnet.passes.integrity._checks.CHECKS`). Compiled-first
order, a NaN-poisoned allocator and a fresh second input draw (in
:mod:`passnet.evaluate`; registered as harness checks too) make uninitialized memory and
cached outputs fail correctness.
"""

from __future__ import annotations

from typing import Any

import torch

from passnet.passes.integrity._checks import get_check

__all__ = ["aliased_outputs", "harness_findings", "mutated_inputs"]


def mutated_inputs(before: list[Any], after: list[Any]) -> list[int]:
    """Indices of tensor inputs whose contents changed, bit for bit.

    Values compare as their bits: ``torch.equal`` would miss NaN written over NaN's
    place and, after ``nan_to_num``, NaN or -0.0 written over 0.0, which is enough to
    mark an input as seen and skip work on the next call.
    """
    return [
        i
        for i, (b, a) in enumerate(zip(before, after))
        if isinstance(b, torch.Tensor) and not _same_bits(b, a)
    ]


# Resolved at import: a finding can only name a registered check.
_MUTATION = get_check("input-mutation").name
_ALIAS = get_check("output-alias").name

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same_bits(b: torch.Tensor, a: torch.Tensor) -> bool:
    if b.shape != a.shape or b.dtype != a.dtype:
        return False
    if b.is_complex():
        b, a = torch.view_as_real(b), torch.view_as_real(a)
    if b.is_floating_point():
        bits = _BITS[b.element_size()]
        return torch.equal(b.contiguous().view(bits), a.contiguous().view(bits))
    return torch.equal(b, a)


def aliased_outputs(outputs: list[Any], inputs: list[Any]) -> list[int]:
    """Indices of outputs that share storage with an input."""
    ptrs = {
        v.untyped_storage().data_ptr()
        for v in inputs
        if isinstance(v, torch.Tensor) and v.untyped_storage().nbytes() > 0
    }
    return [
        i
        for i, o in enumerate(outputs)
        if isinstance(o, torch.Tensor)
        and o.untyped_storage().nbytes() > 0
        and o.untyped_storage().data_ptr() in ptrs
    ]


def harness_findings(
    original: list[Any], args_c: list[Any], args_e: list[Any], out_c: list[Any], out_e: list[Any]
) -> list[str]:
    """Input mutation and output aliasing that the compiled side does and eager does not.

    Each finding is ``"<check>: <what happened>"``, the check being ``input-mutation`` or
    ``output-alias``; an empty list means the compiled side passed both.
    """
    findings = []
    mut_c, mut_e = set(mutated_inputs(original, args_c)), set(mutated_inputs(original, args_e))
    for i in sorted(mut_c - mut_e):
        findings.append(
            f"{_MUTATION}: compiled code mutated input {i}, which eager leaves unchanged"
        )
    alias_c, alias_e = set(aliased_outputs(out_c, args_c)), set(aliased_outputs(out_e, args_e))
    for i in sorted(alias_c - alias_e):
        findings.append(f"{_ALIAS}: compiled output {i} aliases an input, eager's does not")
    return findings
