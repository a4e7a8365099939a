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

import hashlib
import heapq
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "Folding",
    "FoldedSymbol",
    "Occurrence",
    "apply_folding",
    "fold_sequences",
    "motif_occurrences",
]

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

    @property
    def table_digest(self) -> str:
        """SHA-256 of the symbol table (what a fixed motif table is known by in records)."""
        table = [[s.name, s.left, s.right] for s in self.symbols.values()]
        text = json.dumps([self.min_count, self.max_ops, table])
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> Folding:
        """The symbol table of a ``folding.json`` (no folded sequences: see :func:`apply_folding`).

        Raises ``ValueError`` for a file that is not a folding of this schema.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"not a folding of schema version {SCHEMA_VERSION}")
        symbols: dict[str, FoldedSymbol] = {}
        for d in data["symbols"]:
            symbols[d["name"]] = FoldedSymbol(
                d["name"], d["left"], d["right"], tuple(d["ops"]), int(d["count"])
            )
        return cls(symbols, [], int(data["min_count"]), int(data["max_ops"]), [])


def _symbol_name(index: int) -> str:
    return f"@{index}"  # never collides with an operator name


def _pair_counts(
    tokens: Sequence[tuple[str, int, int]],
) -> tuple[Counter[tuple[str, str]], dict[tuple[str, str], int]]:
    """Adjacent pairs of one token list: how often each occurs and where it first starts
    (the original op index of its left token)."""
    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], int] = {}
    i = 0
    while i < len(tokens) - 1:
        pair = (tokens[i][0], tokens[i + 1][0])
        counts[pair] += 1
        first.setdefault(pair, tokens[i][1])
        # Count a run "a a a" as one non-overlapping "a a", as replacement will.
        i += 2 if pair[0] == pair[1] and i + 2 < len(tokens) and tokens[i + 2][0] == pair[0] else 1
    return counts, first


def _replace(
    tokens: list[tuple[str, int, int]], left: str, right: str, name: str
) -> list[tuple[str, int, int]]:
    """Every non-overlapping occurrence of ``left right``, left to right, becomes ``name``."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(tokens):
        if i + 1 < len(tokens) and tokens[i][0] == left and tokens[i + 1][0] == right:
            out.append((name, tokens[i][1], tokens[i + 1][2]))
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


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

    Identical sequences are folded once (their pairs count as often as they occur), and
    a fold recounts only the sequences that held the folded pair, so a corpus of
    thousands of graphs folds in seconds to minutes, not hours. The result is the same
    as recounting the whole corpus after every fold.
    """
    if min_count < 2:
        raise ValueError("min_count must be at least 2: a motif has to repeat")
    # Distinct sequences in order of first appearance, with their multiplicity.
    index_of: dict[tuple[str, ...], int] = {}
    weight: list[int] = []
    rep_of: list[int] = []
    for seq in sequences:
        key = tuple(seq)
        if key not in index_of:
            index_of[key] = len(weight)
            weight.append(0)
        weight[index_of[key]] += 1
        rep_of.append(index_of[key])
    tokens: list[list[tuple[str, int, int]]] = [
        [(op, i, i + 1) for i, op in enumerate(key)] for key in index_of
    ]
    symbols: dict[str, FoldedSymbol] = {}

    def ops_of(sym: str) -> tuple[str, ...]:
        return symbols[sym].ops if sym in symbols else (sym,)

    counts: Counter[tuple[str, str]] = Counter()
    holders: dict[tuple[str, str], set[int]] = {}
    per_seq: list[tuple[Counter[tuple[str, str]], dict[tuple[str, str], int]]] = []
    for s_idx, toks in enumerate(tokens):
        c, first = _pair_counts(toks)
        per_seq.append((c, first))
        for pair, n in c.items():
            counts[pair] += n * weight[s_idx]
            holders.setdefault(pair, set()).add(s_idx)

    def key_of(pair: tuple[str, str]) -> tuple[int, tuple[int, int]]:
        s_min = min(holders[pair])
        return -counts[pair], (s_min, per_seq[s_min][1][pair])

    heap: list[tuple[int, tuple[int, int], tuple[str, str]]] = []

    def push(pair: tuple[str, str]) -> None:
        if counts[pair] >= min_count and len(ops_of(pair[0])) + len(ops_of(pair[1])) <= max_ops:
            heapq.heappush(heap, (*key_of(pair), pair))

    for pair in counts:
        push(pair)
    while heap and (max_symbols is None or len(symbols) < max_symbols):
        neg, first_seen, pair = heapq.heappop(heap)
        if counts[pair] < min_count or (neg, first_seen) != key_of(pair):
            continue  # stale: the pair changed since this entry was pushed
        left, right = pair
        name = _symbol_name(len(symbols) + 1)
        symbols[name] = FoldedSymbol(name, left, right, ops_of(left) + ops_of(right), -neg)
        touched: set[tuple[str, str]] = set()
        for s_idx in sorted(holders[pair]):
            old, _ = per_seq[s_idx]
            tokens[s_idx] = _replace(tokens[s_idx], left, right, name)
            new, new_first = _pair_counts(tokens[s_idx])
            per_seq[s_idx] = (new, new_first)
            for p in old.keys() | new.keys():
                delta = new.get(p, 0) - old.get(p, 0)
                if delta:
                    counts[p] += delta * weight[s_idx]
                if p not in new:
                    holders[p].discard(s_idx)
                else:
                    holders.setdefault(p, set()).add(s_idx)
                touched.add(p)
        for p in touched:
            if not holders.get(p):
                holders.pop(p, None)
                counts.pop(p, None)
            else:
                push(p)
    ids = (
        list(sequence_ids) if sequence_ids is not None else [str(i) for i in range(len(sequences))]
    )
    return Folding(symbols, [list(tokens[r]) for r in rep_of], min_count, max_ops, ids)


def apply_folding(folding: Folding, sequence: Sequence[str], *, sequence_id: str = "") -> Folding:
    """``sequence`` folded with the fixed symbol table of ``folding`` (a motif table).

    The folds are replayed in their order; each replaces the pair's occurrences exactly
    as :func:`fold_sequences` did in every sequence of its corpus, so a sequence of that
    corpus gets the tokens the corpus-wide folding gave it, whichever other sequences
    are processed with it (a chunk, or the sample alone). The result holds this one
    sequence (index 0), for :func:`motif_occurrences`.
    """
    tokens = [(op, i, i + 1) for i, op in enumerate(sequence)]
    present = {t[0] for t in tokens}
    for sym in folding.symbols.values():
        if sym.left in present and sym.right in present:
            tokens = _replace(tokens, sym.left, sym.right, sym.name)
            present = {t[0] for t in tokens}
    return Folding(
        dict(folding.symbols), [tokens], folding.min_count, folding.max_ops, [sequence_id]
    )


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
