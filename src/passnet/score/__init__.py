"""Metrics: S_t, ES_t, AS, fast_p; tolerance tables; PassNet/GraphNet log parser."""

from passnet.score._tolerance import TOLERANCE_LEVELS, baseline_tolerance, log_key, tolerance

__all__ = ["TOLERANCE_LEVELS", "baseline_tolerance", "log_key", "tolerance"]
