"""Typed score results and their ``aggregated_score.json`` form (docs/scoring.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from passnet.errors import InputFormatError
from passnet.status import Interpretation

__all__ = ["SCORE_SCHEMA_VERSION", "WEIGHT_SCHEMES", "Components", "ScoreParams", "ScoreReport"]

SCORE_SCHEMA_VERSION = 1

WEIGHT_SCHEMES = ("passnet", "graphnet")
"""AS's level weightings: PassNet appendix E, or GraphNet's ``aggregate_es_scores``."""


@dataclass(frozen=True)
class ScoreParams:
    """The parameters a score was computed with."""

    b: float = 0.1
    p: float = 0.0
    interpretation: Interpretation = Interpretation.DEFAULT
    speedup_kind: str = "e2e"
    count_sample_errors: bool = False
    p_fast: float = 1.0
    weights: str = "passnet"
    """AS's level weights: ``passnet`` (PassNet appendix E) or ``graphnet``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "interpretation", Interpretation(self.interpretation))
        if not 0 < self.b <= 1:  # NaN fails this too
            raise ValueError(f"failure penalty b must be in (0, 1], got {self.b}")
        if not (self.p >= 0 and math.isfinite(self.p)):
            raise ValueError(f"slowdown penalty p must be finite and >= 0, got {self.p}")
        if self.speedup_kind not in ("e2e", "device"):
            raise ValueError(f"speedup_kind must be 'e2e' or 'device', got {self.speedup_kind!r}")
        if self.weights not in WEIGHT_SCHEMES:
            raise ValueError(f"weights must be one of {WEIGHT_SCHEMES}, got {self.weights!r}")

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "b": self.b,
            "p": self.p,
            "interpretation": self.interpretation.value,
            "speedup_kind": self.speedup_kind,
            "count_sample_errors": self.count_sample_errors,
            "p_fast": self.p_fast,
            "weights": self.weights,
        }


@dataclass(frozen=True)
class Components:
    """Factored form of ES_t at one level t (GraphNet eq. 1-3, appendix D conventions)."""

    alpha: float
    """Geometric-mean speedup of the graphs correct at t (1 when none)."""
    beta: float
    """Geometric-mean speedup of the correct graphs that slow down (1 when none)."""
    lam: float
    """λ: fraction of graphs correct at t."""
    eta: float
    """η: fraction of the correct graphs that slow down (0 when none are correct)."""
    gamma: float
    """γ_t: geometric mean of the failures' penalty factors (1 when nothing fails)."""
    n_correct: int
    n_slow: int
    n_failed: int

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "beta": self.beta,
            "lambda": self.lam,
            "eta": self.eta,
            "gamma": self.gamma,
            "n_correct": self.n_correct,
            "n_slow": self.n_slow,
            "n_failed": self.n_failed,
        }


@dataclass(frozen=True)
class ScoreReport:
    """All scores of one result set (one compiler × configuration over a set of graphs)."""

    id: str
    """The PassNet ``id`` field (task, compiler or run name)."""
    score: float
    """AS, the aggregated speedup."""
    es: dict[int, float]
    """ES_t for t = -10..|E|+1."""
    s: dict[int, float]
    """S_t for t = -10..0."""
    components: dict[int, Components]
    weights: dict[int, float]
    """W_t used by AS."""
    fast_p: float
    fast_0: float
    gmean_speedup: float | None
    """Geometric-mean speedup over graphs correct at baseline (None when there are none)."""
    subgraph_correctness_ratio: float
    sample_correctness_ratio: float
    n_samples: int
    """Number of task/sample groups."""
    counts: dict[str, int]
    """Records per status, excluded sample errors included."""
    params: ScoreParams
    n_graphs: int
    """Graphs scored (N)."""
    n_excluded: int
    """Sample errors left out of N (``count_sample_errors=False``)."""
    n_missing_speedup: int = 0
    """Graphs that ran but had no usable speedup (scored as runtime failures)."""
    schema_version: int = field(default=SCORE_SCHEMA_VERSION)

    @property
    def num_error_classes(self) -> int:
        """|E| of the interpretation used."""
        return max(self.es) - 1

    def to_json_dict(self) -> dict[str, Any]:
        """The ``aggregated_score.json`` content; tolerance levels become string keys."""
        return {
            "id": self.id,
            "score": self.score,
            "es": {str(t): v for t, v in self.es.items()},
            "s": {str(t): v for t, v in self.s.items()},
            "components": {str(t): c.to_json_dict() for t, c in self.components.items()},
            "weights": {str(t): w for t, w in self.weights.items()},
            "fast_p": self.fast_p,
            "fast_0": self.fast_0,
            "gmean_speedup": self.gmean_speedup,
            "subgraph_correctness_ratio": self.subgraph_correctness_ratio,
            "sample_correctness_ratio": self.sample_correctness_ratio,
            "n_samples": self.n_samples,
            "counts": dict(self.counts),
            "params": self.params.to_json_dict(),
            "n_graphs": self.n_graphs,
            "n_excluded": self.n_excluded,
            "n_missing_speedup": self.n_missing_speedup,
            "schema_version": self.schema_version,
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> ScoreReport:
        """Rebuild a report written by :meth:`to_json_dict`."""
        try:
            version = int(d.get("schema_version", SCORE_SCHEMA_VERSION))
            if version > SCORE_SCHEMA_VERSION:
                raise InputFormatError(
                    f"score schema_version {version} is newer than this passnet "
                    f"({SCORE_SCHEMA_VERSION})",
                    field="schema_version",
                )
            comps = {
                int(t): Components(
                    alpha=c["alpha"],
                    beta=c["beta"],
                    lam=c["lambda"],
                    eta=c["eta"],
                    gamma=c["gamma"],
                    n_correct=c["n_correct"],
                    n_slow=c["n_slow"],
                    n_failed=c["n_failed"],
                )
                for t, c in d["components"].items()
            }
            return cls(
                id=d["id"],
                score=d["score"],
                es={int(t): v for t, v in d["es"].items()},
                s={int(t): v for t, v in d["s"].items()},
                components=comps,
                weights={int(t): v for t, v in d["weights"].items()},
                fast_p=d["fast_p"],
                fast_0=d["fast_0"],
                gmean_speedup=d["gmean_speedup"],
                subgraph_correctness_ratio=d["subgraph_correctness_ratio"],
                sample_correctness_ratio=d["sample_correctness_ratio"],
                n_samples=d["n_samples"],
                counts=dict(d["counts"]),
                params=ScoreParams(**d["params"]),
                n_graphs=d["n_graphs"],
                n_excluded=d["n_excluded"],
                n_missing_speedup=d.get("n_missing_speedup", 0),
                schema_version=version,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputFormatError(f"not an aggregated score: {exc!r}") from exc
