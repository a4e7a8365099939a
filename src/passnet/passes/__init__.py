"""Pass files: loading, matching, rewriting, diagnostics, and the ``pass_mgr`` compilers.

Pipeline, one module per step::

    _loader    import a pass directory as package ``pass_dir``, validate, trace
    _pattern   the traced pattern and the replacement_args selection
    _matcher   find a pattern; explain the best partial match when it is not there
    _rewrite   replace a match by one call
    _manager   apply passes in order; PassNet log lines; PassReport
    _launch    lean Triton launches on CUDA
    _opaque    replacements as custom ops, for pass_mgr+inductor
    _backend   the ``pass_mgr`` and ``pass_mgr+inductor`` compilers (registered through
               the ``passnet.compilers`` entry-point group)
    integrity/ static inspection, the runtime dispatch guard, the harness checks
    library/   reference Triton passes and their catalog

The judging side uses :func:`passnet.passes.integrity.inspect_pass_dir` and
:func:`passnet.task.load_task`; loading (:func:`load_pass_dir`, :class:`PassManager`)
executes pass code and belongs in the evaluation child process. See ``docs/passes.md``.
"""

from passnet.passes._launch import (
    FastRun,
    accelerate_rules,
    direct_launch_available,
    fast_launch_available,
    kernels_of,
    rule_namespaces,
)
from passnet.passes._loader import PassRule, load_pass_dir
from passnet.passes._manager import (
    PASS_MGR_LOGGER,
    PassCodeError,
    PassManager,
    ReplacementError,
    ReplacementSite,
    RewriteResult,
)
from passnet.passes._matcher import Match, Matcher, Mismatch
from passnet.passes._pattern import ArgSpec, Literal, Pattern, derive_arg_spec, trace_pattern

__all__ = [
    "PASS_MGR_LOGGER",
    "ArgSpec",
    "FastRun",
    "Literal",
    "Match",
    "Matcher",
    "Mismatch",
    "PassManager",
    "PassRule",
    "Pattern",
    "PassCodeError",
    "ReplacementError",
    "ReplacementSite",
    "RewriteResult",
    "accelerate_rules",
    "derive_arg_spec",
    "direct_launch_available",
    "fast_launch_available",
    "kernels_of",
    "load_pass_dir",
    "rule_namespaces",
    "trace_pattern",
]
