"""Work in a disposable child process: the forkserver, time and memory bounds, how a child
ended (crash, timeout, host out of memory). Evaluation, the dataset stages and the agent's
tools all run untrusted or fragile work through it.

Nothing here knows what runs in the child: each caller names its child function and the
modules its forkserver should preload (:func:`run_isolated`'s ``preload``).
"""

from passnet.isolate._memory import (
    host_available_bytes,
    limit_data_segment,
    mentions_host_oom,
    out_of_host_memory,
)
from passnet.isolate._process import (
    STACKS_DIR_ENV,
    TORCH_PRELOAD,
    ChildOutcome,
    even_chunks,
    layout_fixed,
    no_randomization_for_exec,
    process_alive,
    run_isolated,
    run_isolated_batch,
    run_isolated_items,
)

__all__ = [
    "STACKS_DIR_ENV",
    "TORCH_PRELOAD",
    "ChildOutcome",
    "even_chunks",
    "host_available_bytes",
    "layout_fixed",
    "limit_data_segment",
    "mentions_host_oom",
    "no_randomization_for_exec",
    "out_of_host_memory",
    "process_alive",
    "run_isolated",
    "run_isolated_batch",
    "run_isolated_items",
]
