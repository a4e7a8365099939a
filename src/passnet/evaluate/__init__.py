"""One graph × one compiler: the isolated child, correctness, timing → :class:`~passnet.record.EvalRecord`."""

from passnet.evaluate._child import gc_paused, measure_sides, pin_to_one_core, timing_cores
from passnet.evaluate._evaluate import (
    EvaluationStopped,
    evaluate_sample,
    evaluate_samples,
    probe_device,
    software_versions,
)
from passnet.evaluate._gpu_clock import open_clock_monitor
from passnet.evaluate._host import CoreGuard, spare_cores
from passnet.evaluate._isolate import (
    FORKSERVER_PRELOAD,
    ChildOutcome,
    even_chunks,
    no_randomization_for_exec,
    process_alive,
    run_isolated,
    run_isolated_batch,
    run_isolated_items,
)
from passnet.evaluate._memory import (
    COPIES,
    available_bytes,
    check_fits,
    limit_data_segment,
    mentions_host_oom,
)
from passnet.evaluate._paddle import PaddleProbe, build_paddle_sample, paddle_outputs, probe_paddle
from passnet.evaluate._prepare import PrepareOutcome, cache_counters, prepare_sample
from passnet.evaluate._roofline import (
    Ceilings,
    Work,
    ceilings,
    graph_work,
    measure_ceilings,
    roofline,
    tf32_switches,
)
from passnet.evaluate._settings import EvalSettings
from passnet.evaluate._timing import cpu_timer, cuda_timer, measure_interleaved
from passnet.evaluate._turns import SCOPES, Turns

__all__ = [
    "PaddleProbe",
    "build_paddle_sample",
    "paddle_outputs",
    "probe_paddle",
    "COPIES",
    "FORKSERVER_PRELOAD",
    "Ceilings",
    "ChildOutcome",
    "CoreGuard",
    "EvalSettings",
    "PrepareOutcome",
    "SCOPES",
    "Turns",
    "available_bytes",
    "cache_counters",
    "ceilings",
    "check_fits",
    "cpu_timer",
    "cuda_timer",
    "EvaluationStopped",
    "evaluate_sample",
    "evaluate_samples",
    "even_chunks",
    "gc_paused",
    "graph_work",
    "tf32_switches",
    "Work",
    "limit_data_segment",
    "measure_ceilings",
    "measure_interleaved",
    "measure_sides",
    "mentions_host_oom",
    "no_randomization_for_exec",
    "open_clock_monitor",
    "process_alive",
    "pin_to_one_core",
    "prepare_sample",
    "probe_device",
    "roofline",
    "run_isolated",
    "run_isolated_batch",
    "run_isolated_items",
    "software_versions",
    "spare_cores",
    "timing_cores",
]
