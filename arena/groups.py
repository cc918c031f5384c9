"""Failures out of trio nurseries, as a caller should meet them: one plain exception.

trio (0.25 on) wraps whatever leaves a nursery in an exception group, even a single error. A
tournament that cannot go on, a Ctrl-C or a full disk is still one thing that happened, so the
public entry points (``run_tournament``, the ladder's and the match's) unwrap it with
:func:`plain_errors`; a group of several real failures stays a group (it is a bug to look at).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


def is_cancel(exc: BaseException) -> bool:
    """trio's Cancelled, which rides along with the real failure and means nothing on its own."""
    return type(exc).__name__ == "Cancelled" and type(exc).__module__.startswith("trio")


def the_failure(exc: BaseException) -> BaseException | None:
    """The one exception a group stands for: a Ctrl-C if there is one, else its only real error
    (the same error met by several tasks at once, such as a lost cluster, is one error)."""
    real = [e for e in leaves(exc) if not is_cancel(e)]
    interrupt = next((e for e in real if isinstance(e, KeyboardInterrupt)), None)
    if interrupt is not None:
        return interrupt
    return real[0] if len({(type(e), str(e)) for e in real}) == 1 else None


@contextmanager
def plain_errors() -> Iterator[None]:
    """Re-raise an exception group that stands for one failure as that failure."""
    try:
        yield
    except BaseExceptionGroup as group:
        one = the_failure(group)
        if one is None:
            raise
        raise one from None
