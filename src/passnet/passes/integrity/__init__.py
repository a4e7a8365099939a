"""Integrity defenses against adversarial pass files (design §6).

Three layers, one list of what they check (:data:`CHECKS`):

* ``static``  — AST inspection of every file of a pass directory before any of it
  runs (:func:`inspect_pass_dir`);
* ``dispatch`` — the runtime guard around replacement functions on every checked
  call (:class:`DispatchGuard`);
* ``harness`` — what the evaluation child checks around the compiled calls
  (input mutation, output aliasing; compiled-first order, a poisoned allocator and
  a fresh input draw make caching and uninitialized memory fail correctness).
"""

from passnet.passes.integrity._guard import ALLOWED_OPS, DispatchGuard, Violation
from passnet.passes.integrity._harness import aliased_outputs, harness_findings, mutated_inputs
from passnet.passes.integrity._static import (
    PACKAGE,
    Finding,
    check_pass_dir,
    inspect_pass_dir,
    inspect_sources,
    rejection,
    scan_pass_dir,
)

__all__ = [
    "ALLOWED_OPS",
    "PACKAGE",
    "DispatchGuard",
    "Finding",
    "Violation",
    "aliased_outputs",
    "check_pass_dir",
    "harness_findings",
    "inspect_pass_dir",
    "inspect_sources",
    "mutated_inputs",
    "rejection",
    "scan_pass_dir",
]
