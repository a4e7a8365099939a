"""Graph labels that fit a terminal and still tell rows apart.

Labels of one run share long prefixes (``transformers-auto-model/...``): cut at the end, as
rich cuts a column, three rows of four read ``transformers-auto-mode…``. A label is
shortened from the front and the middle instead, where rows are alike, and keeps its tail,
where they differ.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ELLIPSIS", "label_width", "short_labels"]

ELLIPSIS = "…"


def label_width(columns: int) -> int:
    """Characters a graph label gets in a line or table of ``columns`` characters: a
    quarter (at least 24), the rest for statuses, figures and notes."""
    return max(24, columns // 4)


def _common_dir_prefix(labels: Sequence[str]) -> str:
    """The leading folders (``a/b/``) every label shares, never a whole label."""
    if len(labels) < 2:
        return ""
    split = [label.split("/")[:-1] for label in labels]  # folders only, not the leaf
    common: list[str] = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "/".join(common) + "/" if common else ""


def _elide(label: str, width: int) -> str:
    """``label`` in at most ``width`` characters: its last folder level (the sample's name)
    kept whole where it fits, the start kept for the rest, the middle elided."""
    if len(label) <= width:
        return label
    if width <= len(ELLIPSIS):
        return label[-width:]
    leaf = label.rsplit("/", 1)[-1]
    tail = leaf if len(leaf) < width - len(ELLIPSIS) else label[-(width - len(ELLIPSIS)) :]
    head = width - len(ELLIPSIS) - len(tail)
    return label[:head] + ELLIPSIS + tail


def short_labels(labels: Sequence[str], width: int) -> list[str]:
    """``labels`` shortened to at most ``width`` characters each, distinct where they were.

    Labels that fit are kept whole. Otherwise the folders all labels share are dropped
    (``…/`` in their place) and what is still too long loses its middle, keeping the
    start and the tail (the sample's name). Where two labels would still read alike they
    are kept whole: telling rows apart matters more than the width.
    """
    if all(len(label) <= width for label in labels):
        return list(labels)
    prefix = _common_dir_prefix(labels)
    out = []
    for label in labels:
        rest = label[len(prefix) :] if prefix else label
        shown = (ELLIPSIS + "/" + rest) if prefix else rest
        out.append(_elide(shown, width))
    seen: dict[str, set[str]] = {}
    for label, shown in zip(labels, out):
        seen.setdefault(shown, set()).add(label)
    return [
        label if len(seen[shown]) > 1 else shown for label, shown in zip(labels, out, strict=True)
    ]
