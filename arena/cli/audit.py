"""``arena audit``: checks of a finished event's fairness that need its games played again."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..safetext import SafeConsole
from ..tournament.store import DEFAULT_STORE
from .common import ArenaTyper, fail

audit_app = ArenaTyper(help="Audits of stored events (docs/FORMATS.md).", no_args_is_help=True,
                       context_settings={"help_option_names": ["-h", "--help"]})
out = SafeConsole(highlight=False, soft_wrap=True)


@audit_app.command("collusion")
def collusion(tournament: Annotated[str, typer.Argument(help="The stored tournament.")],
              first: Annotated[str, typer.Argument(help="One bot of the suspected pair (name@version).")],
              second: Annotated[str, typer.Argument(help="The other bot of the pair (name@version).")],
              reference: Annotated[str, typer.Option("--reference", help="The bot that takes each partner's seat: "
                                                     "a folder or a bundled bot that did not sit at the pair's tables.")] = "heuristic",
              confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999, help="The interval's level.")] = 0.95,
              margin: Annotated[float, typer.Option("--margin", min=0.0, help="Points a game a dependence must clear, "
                                                   "its whole interval, to be flagged.")] = 0.25,
              sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain bots with bubblewrap "
                                                              "(the default where it works).")] = None,
              store: Annotated[Path, typer.Option("--store", help="The game store.")] = DEFAULT_STORE) -> None:
    """Deal every table FIRST and SECOND shared again with each of them replaced by the reference
    bot, and say how much each one's result depended on the other (points a game, with an interval).
    Exit 1 when the pair is flagged."""
    import trio
    from ..bots.launch import containment_for
    from ..tournament.collusion import audit_stored
    from ..tournament.store import Store
    if not store.exists():
        fail(f"no store at {store}")
    db = Store(store, readonly=True)
    try:
        found = trio.run(lambda: audit_stored(db, tournament, (first, second), reference, confidence=confidence,
                                              margin=margin, containment=containment_for(sandbox)))
    finally:
        db.close()
    level = f"{confidence:.0%}"
    for d in found.directions:
        out.print(f"{d.bot} with {d.partner} instead of {found.reference}: {d.mean:+.2f} points a game beyond the "
                  f"rest of the table ({level} interval {d.low:+.2f} to {d.high:+.2f}), {d.tables} tables", markup=False)
    if found.two_seat_only:
        out.print("2-seat tables only: a lift there is also what any weak partner gives; it is not evidence alone",
                  markup=False)
    if found.flagged:
        out.print(f"flagged: a dependence clears {margin:g} points a game over its whole interval", markup=False)
        raise typer.Exit(1)
    out.print(f"not flagged (margin {margin:g} points a game)", markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
