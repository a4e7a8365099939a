"""Integrity defenses against adversarial pass files (docs/passes.md, "Integrity").

Three layers, one list of what they check and why: :data:`CHECKS`, a tuple of named
:class:`Check` entries (name, layer, threat, rationale, outcome statuses, red-team
exploits), looked up with :func:`get_check`. Every name a layer emits is registered
there:

* ``static``  — AST inspection of every file of a pass directory before any of it
  runs (:func:`inspect_pass_dir`); each rule is a check, and ``Finding.rule`` must be
  one of them;
* ``dispatch`` — the runtime guard around replacement functions on every checked
  call (:class:`DispatchGuard`), whose rejections carry the rule ``dispatch``;
* ``harness`` — what the evaluation child checks around the compiled calls
  (:func:`harness_findings`: ``input-mutation``, ``output-alias``) and the mechanisms
  under which cheats fail correctness (``compiled-first``, ``poisoned-allocator``,
  ``fresh-draw``, ``nonfinite-match``, ``tolerance``).
"""

from passnet.passes.integrity._checks import CHECKS, Check, get_check
from passnet.passes.integrity._guard import ALLOWED_OPS, DispatchGuard, Violation
from passnet.passes.integrity._harness import aliased_outputs, harness_findings, mutated_inputs
from passnet.passes.integrity._static import (
    PACKAGE,
    Finding,
    check_pass_dir,
    inspect_pass_dir,
    inspect_sources,
    rejection,
    require_imported_packages,
    scan_pass_dir,
)

__all__ = [
    "ALLOWED_OPS",
    "CHECKS",
    "PACKAGE",
    "Check",
    "DispatchGuard",
    "Finding",
    "Violation",
    "aliased_outputs",
    "check_pass_dir",
    "get_check",
    "harness_findings",
    "inspect_pass_dir",
    "inspect_sources",
    "mutated_inputs",
    "rejection",
    "require_imported_packages",
    "scan_pass_dir",
]
