"""One graph × one compiler: the isolated child, correctness, timing → :class:`~passnet.record.EvalRecord`."""

from passnet.evaluate._child import gc_paused, measure_sides, pin_to_one_core, timing_cores
from passnet.evaluate._compiler_check import check_compiler
from passnet.evaluate._contention import ContentionMonitor, open_contention_monitor
from passnet.evaluate._evaluate import (
    EvaluationStopped,
    evaluate_sample,
    evaluate_samples,
    probe_device,
    software_versions,
)
from passnet.evaluate._gpu_clock import open_clock_monitor
from passnet.evaluate._host import CoreGuard, spare_cores
from passnet.evaluate._memory import COPIES, available_bytes, check_fits
from passnet.evaluate._paddle import PaddleProbe, build_paddle_sample, paddle_outputs, probe_paddle
from passnet.evaluate._prepare import PrepareOutcome, cache_counters, prepare_sample
from passnet.evaluate._roofline import (
    Ceilings,
    Work,
    ceilings,
    checked_roofline,
    graph_work,
    measure_ceilings,
    remeasure_ceilings,
    roofline,
    tf32_switches,
)
from passnet.evaluate._settings import FORKSERVER_PRELOAD, EvalSettings
from passnet.evaluate._timing import cpu_timer, cuda_timer, measure_interleaved
from passnet.evaluate._turns import SCOPES, TURN_MARGIN_S, Turns, turn_bound_s

__all__ = [
    "PaddleProbe",
    "build_paddle_sample",
    "paddle_outputs",
    "probe_paddle",
    "COPIES",
    "FORKSERVER_PRELOAD",
    "Ceilings",
    "ContentionMonitor",
    "CoreGuard",
    "EvalSettings",
    "PrepareOutcome",
    "SCOPES",
    "TURN_MARGIN_S",
    "Turns",
    "available_bytes",
    "cache_counters",
    "ceilings",
    "check_compiler",
    "check_fits",
    "checked_roofline",
    "cpu_timer",
    "cuda_timer",
    "EvaluationStopped",
    "evaluate_sample",
    "evaluate_samples",
    "gc_paused",
    "graph_work",
    "tf32_switches",
    "Work",
    "measure_ceilings",
    "measure_interleaved",
    "measure_sides",
    "open_clock_monitor",
    "open_contention_monitor",
    "pin_to_one_core",
    "prepare_sample",
    "probe_device",
    "remeasure_ceilings",
    "roofline",
    "software_versions",
    "spare_cores",
    "timing_cores",
    "turn_bound_s",
]
