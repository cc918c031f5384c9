"""``arena bench``: a course's bench from its file (:mod:`arena.tournament.bench`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..safetext import SafeConsole
from .common import fail

if TYPE_CHECKING:
    from ..tournament.bench import Bench

out = SafeConsole(highlight=False, soft_wrap=True)


def bench(file: Annotated[Path, typer.Argument(help="The bench file (TOML; docs/FORMATS.md).")],
          csv_out: Annotated[Optional[Path], typer.Option("--csv", help="Write the grades here as CSV.")] = None,
          sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain bots with bubblewrap "
                                                          "(the default where it works).")] = None) -> None:
    """Play every member's games against the reference bots that the store does not hold yet (nothing
    before the deadline; the members' folders as copied at it), then print the grades, and each
    member that could not be played with why."""
    import trio
    from ..tournament.bench import Refused, grades, load_bench, run_bench, write_csv
    from ..tournament.store import Store
    b = load_bench(file)
    if csv_out is not None and csv_out.is_dir():
        fail(f"--csv {csv_out} is a directory")
    db = Store(b.store)
    refused: list[Refused] = []  # one member's folder never stops the others' grades
    try:
        labels = trio.run(lambda: run_bench(b, db, now=dt.datetime.now(dt.timezone.utc),
                                            overrides={"sandbox": sandbox}, from_ladder=ladder_versions,
                                            refused=refused))
        rows = grades(b, db, labels)
    finally:
        db.close()
    for g in rows:
        refs = ", ".join(f"{r} {s:.2f}" for r, s in g.by_reference.items())
        out.print(f"{g.member}: {g.grade} (score {g.score:.3f} in {g.games} games; {refs})", markup=False)
    for r in refused:
        out.print(f"{r.member}: not graded: {r.why}", markup=False)
    if csv_out is not None:
        write_csv(csv_out, rows, refused)
        out.print(f"wrote {csv_out}", markup=False)


def ladder_versions(b: "Bench") -> list[str]:
    """The folders of the bench's ladder's active versions: each bot's newest member that is not
    suspended or retired (as a season freezes them)."""
    from ..ladder.tables import bot_statuses, members
    from ..tournament.config import ConfigError
    from ..tournament.store import Store
    if not Path(b.ladder_store).is_file():
        raise ConfigError(f"bench {b.name}: no store at {b.ladder_store} to take ladder {b.ladder}'s members from")
    db = Store(b.ladder_store, readonly=True)
    try:
        out = bot_statuses(db, b.ladder)
        newest = {m.name: m.ref for m in members(db, b.ladder) if m.label not in out}  # registered order: last wins
    finally:
        db.close()
    if not newest:
        raise ConfigError(f"bench {b.name}: ladder {b.ladder} has no active member in {b.ladder_store}")
    return list(newest.values())


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
