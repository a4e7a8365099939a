"""Recursive folding: frequent operator subsequences across a corpus, as nested symbols.

Each graph is linearized into its operator-name sequence. Like byte-pair
encoding, folding repeatedly takes the most frequent adjacent pair of symbols
in the whole corpus and replaces every (non-overlapping, left-to-right)
occurrence with a new symbol, recording the hierarchy: ``[conv2d, batch_norm]
→ @1``, then ``[@1, relu] → @2``. It stops when no pair occurs at least
``min_count`` times. A folded symbol's *ops* are the operator names it expands to.

:func:`motif_occurrences` turns the folded sequences into op ranges: every
occurrence of a folded symbol whose op count lies in ``[min_ops, max_ops]``, at
every level of the hierarchy (a transformer layer and the attention block inside
it are both motifs). ``nested=False`` keeps only the outermost ones, a
non-overlapping cover; a symbol that is too long is opened up into its halves.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Folding", "FoldedSymbol", "Occurrence", "fold_sequences", "motif_occurrences"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FoldedSymbol:
    """A folded symbol: the pair it replaced and the operator names it expands to."""

    name: str
    left: str
    right: str
    ops: tuple[str, ...]
    count: int
    """Occurrences of the pair when it was folded."""


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a folded symbol in one sequence: ops ``[start, stop)``."""

    sequence: int
    start: int
    stop: int
    symbol: str


@dataclass
class Folding:
    """The symbols of a corpus and each sequence rewritten with them."""

    symbols: dict[str, FoldedSymbol]
    folded: list[list[tuple[str, int, int]]]
    """Per sequence: (symbol or op name, start, stop) tokens covering the sequence."""
    min_count: int = 2
    max_ops: int = 62
    sequence_ids: list[str] = field(default_factory=list)

    def expand(self, symbol: str) -> tuple[str, ...]:
        return self.symbols[symbol].ops if symbol in self.symbols else (symbol,)

    def to_json(self) -> str:
        """Stable JSON (schema-versioned) of the symbol hierarchy."""
        return json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "min_count": self.min_count,
                "max_ops": self.max_ops,
                "symbols": [
                    {
                        "name": s.name,
                        "left": s.left,
                        "right": s.right,
                        "count": s.count,
                        "ops": list(s.ops),
                    }
                    for s in self.symbols.values()
                ],
                "sequences": self.sequence_ids,
            },
            indent=1,
        )


def _symbol_name(index: int) -> str:
    return f"@{index}"  # never collides with an operator name


def fold_sequences(
    sequences: Sequence[Sequence[str]],
    *,
    min_count: int = 2,
    max_ops: int = 62,
    max_symbols: int | None = None,
    sequence_ids: Sequence[str] | None = None,
) -> Folding:
    """Fold the most frequent adjacent pair repeatedly (byte-pair encoding over op names).

    A pair is folded only if it occurs at least ``min_count`` times in the corpus and
    expands to at most ``max_ops`` operators. Ties are broken by the pair's first
    occurrence in corpus order, so the result is deterministic.
    """
    if min_count < 2:
        raise ValueError("min_count must be at least 2: a motif has to repeat")
    tokens: list[list[tuple[str, int, int]]] = [
        [(op, i, i + 1) for i, op in enumerate(seq)] for seq in sequences
    ]
    symbols: dict[str, FoldedSymbol] = {}

    def ops_of(sym: str) -> tuple[str, ...]:
        return symbols[sym].ops if sym in symbols else (sym,)

    while max_symbols is None or len(symbols) < max_symbols:
        counts: Counter[tuple[str, str]] = Counter()
        first_seen: dict[tuple[str, str], tuple[int, int]] = {}
        for s_idx, seq in enumerate(tokens):
            i = 0
            while i < len(seq) - 1:
                pair = (seq[i][0], seq[i + 1][0])
                counts[pair] += 1
                first_seen.setdefault(pair, (s_idx, i))
                # Count a run "a a a" as one non-overlapping "a a", as replacement will.
                i += (
                    2 if pair[0] == pair[1] and i + 2 < len(seq) and seq[i + 2][0] == pair[0] else 1
                )
        candidates = [
            (-c, first_seen[p], p)
            for p, c in counts.items()
            if c >= min_count and len(ops_of(p[0])) + len(ops_of(p[1])) <= max_ops
        ]
        if not candidates:
            break
        neg_count, _, (left, right) = min(candidates)
        name = _symbol_name(len(symbols) + 1)
        symbols[name] = FoldedSymbol(name, left, right, ops_of(left) + ops_of(right), -neg_count)
        for s_idx, seq in enumerate(tokens):
            out: list[tuple[str, int, int]] = []
            i = 0
            while i < len(seq):
                if i + 1 < len(seq) and seq[i][0] == left and seq[i + 1][0] == right:
                    out.append((name, seq[i][1], seq[i + 1][2]))
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            tokens[s_idx] = out
    ids = (
        list(sequence_ids) if sequence_ids is not None else [str(i) for i in range(len(sequences))]
    )
    return Folding(symbols, tokens, min_count, max_ops, ids)


def motif_occurrences(
    folding: Folding, sequence: int, *, min_ops: int = 4, max_ops: int = 62, nested: bool = True
) -> list[Occurrence]:
    """Occurrences of folded symbols with ``min_ops``..``max_ops`` operators in one sequence."""
    found: list[Occurrence] = []

    def visit(symbol: str, start: int, stop: int, inside_emitted: bool) -> None:
        if symbol not in folding.symbols:
            return
        in_range = min_ops <= stop - start <= max_ops
        if in_range and (nested or not inside_emitted):
            found.append(Occurrence(sequence, start, stop, symbol))
        if stop - start > max_ops or nested:
            sym = folding.symbols[symbol]
            mid = start + len(folding.expand(sym.left))
            visit(sym.left, start, mid, inside_emitted or in_range)
            visit(sym.right, mid, stop, inside_emitted or in_range)

    for symbol, start, stop in folding.folded[sequence]:
        visit(symbol, start, stop, False)
    return sorted(found, key=lambda o: (o.start, -(o.stop - o.start)))
