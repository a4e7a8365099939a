"""The catalog of reference passes: what each one matches and where it occurs.

Each reference pass is a folder next to this module holding its rule files
exactly as a user puts them in a task's ``pass_dir`` (one ``<Rule>.py`` per rule
and ``sorted_output_pass_rule_names.json``). The folders are data: they are
never imported by passnet itself, only copied into pass directories and loaded
there by the pass manager (in its isolated child).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from passnet.errors import RegistryError
from passnet.task import read_manifest

__all__ = [
    "LIBRARY_DIR",
    "ReferencePass",
    "get_reference_pass",
    "reference_passes",
]

LIBRARY_DIR = Path(__file__).parent

_BERT = (
    "transformers-auto-model/prajjwal1_bert-tiny",
    "transformers-auto-model/ms-marco-TinyBERT-L2",
    "transformers-auto-model/bge-small-zh",
)
_SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"
_SWIN_224 = "transformers-auto-model/yujiepan_tiny-random-swin-patch4-window7-224"


@dataclass(frozen=True)
class ReferencePass:
    """One reference pass of the library."""

    name: str
    """Folder name, e.g. ``"rms_norm"``; the name :func:`install_pass` takes."""
    description: str
    source_samples: tuple[str, ...]
    """Dev samples (relative to the samples root) whose graphs contain the pattern: its task's graphs."""

    @property
    def folder(self) -> Path:
        return LIBRARY_DIR / self.name

    @property
    def rules(self) -> list[str]:
        """Rule names in load order, as ``sorted_output_pass_rule_names.json`` lists them."""
        return read_manifest(self.folder)

    def rule_files(self) -> list[Path]:
        """The ``<Rule>.py`` files, in load order."""
        return [self.folder / f"{rule}.py" for rule in self.rules]


_PASSES: tuple[ReferencePass, ...] = (
    ReferencePass(
        "masked_mean_pooling",
        "unsqueeze/expand/cast of the attention mask, mul, two sums, clamp, div, cat "
        "(sentence-embedding mean pooling) -> one kernel reading the [B, S] mask directly",
        ("transformers-auto-model/splade-mini",),
    ),
    ReferencePass(
        "roll_add_layer_norm",
        "Swin window roll-back (torch.roll) + view + residual add + layer_norm, returning "
        "both the sum and the normalised tensor -> one kernel with index arithmetic for the roll",
        (_SWIN,),
    ),
    ReferencePass(
        "rms_norm",
        "T5 RMSNorm: cast, pow(2), mean, + eps, rsqrt, mul, mul weight -> one row-wise kernel",
        ("transformers-auto-model/google/t5-efficient-large-el2",),
    ),
    ReferencePass(
        "add_layer_norm",
        "linear + eval dropout + residual add + layer_norm -> one Triton GEMM with an "
        "add+LayerNorm epilogue; residual add + layer_norm (operands broadcast, weight/bias "
        "optional) -> one row-wise kernel",
        _BERT,
    ),
    ReferencePass(
        "linear_bias_gelu",
        "the BERT feed-forward sublayer (linear + bias + exact GELU, linear, eval dropout, "
        "residual add, layer_norm) -> one Triton kernel with both GEMMs, GELU and the "
        "LayerNorm; linear with bias + exact GELU elsewhere -> one Triton GEMM with bias and "
        "GELU in the epilogue",
        _BERT,
    ),
    ReferencePass(
        "scale_mask_softmax",
        "attention scores / scalar + additive mask or bias (Swin's relative-position bias "
        "gathered from its table inside the kernel; also Swin's shifted-window mask through "
        "views) + softmax(dim=-1) [+ eval dropout] -> one row-wise kernel",
        (_SWIN, _SWIN_224),
    ),
)


def reference_passes() -> list[ReferencePass]:
    """Every reference pass of the library, in catalog order."""
    return list(_PASSES)


def get_reference_pass(name: str) -> ReferencePass:
    """The reference pass called ``name``; a :class:`RegistryError` lists the known names."""
    for p in _PASSES:
        if p.name == name:
            return p
    known = ", ".join(p.name for p in _PASSES)
    raise RegistryError(f"unknown reference pass {name!r}; known: {known}")
