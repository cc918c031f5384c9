"""``build(cls, *items)``: a NamedTuple from its fields, without NamedTuple's Python ``__new__``.

The engine rebuilds its state, a seat and an event or two on every turn. A small C
helper (``_records.c``, built at install with the compiled engine) allocates each in
one step; without it, ``tuple.__new__`` does the same job about four times slower.
Either way the caller passes every field, ``kind`` included, in declaration order.
"""

from __future__ import annotations

from typing import Any


def build_with_tuple_new(cls: type, *items: object) -> Any:
    """The same record through ``tuple.__new__``: the fallback, and the reference in tests."""
    return tuple.__new__(cls, items)


try:
    from ._records import build
    NATIVE = True
except ImportError:  # not built (no C compiler at install): the same records, slower
    NATIVE = False
    build = build_with_tuple_new
