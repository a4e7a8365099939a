"""Pass files: tasks, loading, matching, rewriting, diagnostics and integrity guards.

Pipeline, one module per step::

    _task      Task folders (PassBench layout), create_task, cast_sample (dtype variants)
    _manifest  sorted_output_pass_rule_names.json
    _static    static integrity inspection of a pass directory (never imports pass code)
    _rules       what pass code may use; Finding
    _symbols     module-level facts of pass files (imports, functions, kernels, tables)
    _checker     the AST checks
    _loader    import a pass directory as package ``pass_dir``, validate, trace
    _pattern   the traced pattern and the replacement_args selection
    _graph     the FX graph of a sample (symbolic trace), node rendering
    _matcher   find a pattern; explain the best partial match when it is not there
    _rewrite   replace a match by one call
    _manager   apply passes in order; PassNet log lines; PassReport
    _guard     runtime dispatch guard around replacement functions
    _opaque    replacements as custom ops, for pass_mgr+inductor
    _backend   the ``pass_mgr`` and ``pass_mgr+inductor`` compilers
    _cli       ``passnet task ...`` commands

The judging side uses :func:`inspect_pass_dir` / :func:`load_task`; loading
(:func:`load_pass_dir`, :class:`PassManager`) executes pass code and belongs in
the evaluation child process. See ``docs/passes.md``.
"""

from passnet.passes._graph import format_node, trace_graph
from passnet.passes._guard import ALLOWED_OPS, DispatchGuard, Violation
from passnet.passes._loader import PassRule, load_pass_dir
from passnet.passes._manager import (
    PASS_MGR_LOGGER,
    PassCodeError,
    PassManager,
    ReplacementError,
    ReplacementSite,
    RewriteResult,
)
from passnet.passes._manifest import MANIFEST_FILE, read_manifest
from passnet.passes._matcher import Match, Matcher, Mismatch
from passnet.passes._pattern import ArgSpec, Literal, Pattern, derive_arg_spec, trace_pattern
from passnet.passes._static import (
    Finding,
    check_pass_dir,
    inspect_pass_dir,
    inspect_sources,
    rejection,
)
from passnet.passes._task import Task, TaskError, cast_sample, create_task, load_task

__all__ = [
    "ALLOWED_OPS",
    "MANIFEST_FILE",
    "PASS_MGR_LOGGER",
    "ArgSpec",
    "DispatchGuard",
    "Finding",
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
    "Task",
    "TaskError",
    "Violation",
    "cast_sample",
    "check_pass_dir",
    "create_task",
    "derive_arg_spec",
    "format_node",
    "inspect_pass_dir",
    "inspect_sources",
    "load_pass_dir",
    "load_task",
    "read_manifest",
    "rejection",
    "trace_graph",
    "trace_pattern",
]
