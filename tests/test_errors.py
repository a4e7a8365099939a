"""passnet.errors: the exception chain walk the OOM and cause checks share."""

from __future__ import annotations

from passnet.errors import exception_chain


def test_the_chain_follows_causes_then_contexts_each_exception_once() -> None:
    try:
        try:
            raise MemoryError("inner")
        except MemoryError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        chain = list(exception_chain(outer))
    assert [type(e) for e in chain] == [RuntimeError, MemoryError]

    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError("during") from None
    except ValueError as exc:
        # `from None` sets no cause: the context is still walked
        assert [type(e) for e in exception_chain(exc)] == [ValueError, KeyError]

    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a  # a cycle ends the walk
    assert list(exception_chain(a)) == [a, b]
    assert list(exception_chain(None)) == []
