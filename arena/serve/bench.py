"""A course's bench on ``arena serve`` (``--bench FILE``): its page and its games, each member's
only to that member.

A bench keeps its games in a store of its own (the bench file's ``store``; ``arena serve`` refuses
one that is the server's), so no public page, list or live event can show them: they are read
here only, for a person signed in. An admin or organiser sees every member, grade and game; a
member sees the bench, its references, deadline and bands, and the rows, games and logs of the
bots their account owns, never another member's (a game of another member is "no such game").
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from ..store.people import Role, label_name, owner_names
from ..tournament.bench import Bench, grades, load_bench
from ..tournament.config import ConfigError
from . import auth, data, privacy
from .pages import message, render

log = logging.getLogger(__name__)


def _labels(folders: list[str]) -> list[str]:
    from ..bots.manifest import ManifestError, load_bot
    out = []
    for f in folders:
        try:
            out.append(load_bot(f).label)
        except (ManifestError, OSError):
            out.append(Path(f).name)
    return out


async def _open(request: Request) -> tuple[Bench, Any] | Response:
    """The bench named in the path and who may see which of its members; a Response when refused."""
    name = request.path_params["name"]
    path = request.app.state.options.benches.get(name)
    if path is None:
        return message(request, "No such bench", f"This server shows no bench {name!r}.", 404)
    who = await auth.current(request)
    if who is None:
        return message(request, "Sign in", "A bench's games are shown only to its members: sign in first.", 403)
    try:
        bench = load_bench(path)  # read again: the organiser may change the file while the server runs
    except ConfigError as e:  # the reason names server paths: the terminal's, not a visitor's
        log.warning("bench %s: %s", name, e)
        return message(request, "Bench unavailable", "The bench file cannot be read now; the server's log says why.",
                       503)
    if who.role in (Role.ADMIN, Role.ORGANISER):
        return bench, None  # None: every member
    owners = await auth.with_db(request, owner_names)
    return bench, {n for n, owner in owners.items() if owner == who.name}


def _visible(label: str, owned: set[str] | None) -> bool:
    return owned is None or label_name(label) in owned


async def bench_page(request: Request) -> Response:
    """Members, reference bots, deadline, bands and grades; a member's own rows and games only."""
    opened = await _open(request)
    if isinstance(opened, Response):
        return opened
    bench, owned = opened

    def build() -> dict[str, Any]:
        prefix = f"{bench.name}/"
        db = data.open_read(Path(bench.store))
        played: list[str] = []
        rows, games = [], {}
        if db is not None:
            try:
                played = [t["id"][len(prefix):] for t in db.tournaments() if t["id"].startswith(prefix)]
                mine = [m for m in played if _visible(m, owned)]
                rows = grades(bench, db, mine)
                games = {m: db.games(tournament=prefix + m, limit=10_000) for m in mine}
            finally:
                db.db.close()
        members = list(dict.fromkeys(_labels(bench.members) + played))
        return {"bench": bench, "members": [m for m in members if _visible(m, owned)], "count": len(members),
                "references": _labels(bench.references), "rows": rows, "games": games,
                "everyone": owned is None, "bands": sorted(bench.bands.items(), key=lambda b: -b[1]),
                "open": bench.deadline is not None and dt.datetime.now(dt.timezone.utc) < bench.deadline}

    page = await anyio.to_thread.run_sync(build)
    return render(request, "bench.html", title=f"Bench {bench.name}", **page)


async def bench_game(request: Request) -> Response:
    """One game of the bench, with the logs of the seats the viewer may read."""
    opened = await _open(request)
    if isinstance(opened, Response):
        return opened
    bench, owned = opened
    gid = request.path_params["gid"]

    def build() -> dict[str, Any] | None:
        from ..replay.simulate import ReplayError, simulate
        from ..replay.view import replay_data
        db = data.open_read(Path(bench.store))
        if db is None:
            return None
        try:
            row = data.game_row(db, gid)
            prefix = f"{bench.name}/"
            if row is None or not row["tournament"].startswith(prefix) \
                    or not _visible(row["tournament"][len(prefix):], owned):
                return None  # another member's game reads as no game at all
            record = db.game_record(gid)
            if record is None:
                return {"row": row}
            try:
                out = replay_data(simulate(record))
            except ReplayError as e:
                return {"row": row, "error": str(e)}
            out["seed"] = str(out.get("seed"))
            return {"row": row, "replay": out}
        finally:
            db.db.close()

    page = await anyio.to_thread.run_sync(build)
    if page is None:
        return message(request, "No such game", f"The bench {bench.name} has no such game of yours.", 404)
    if "replay" in page:
        seats = list(page["row"]["seats"])
        readable = set(seats) if owned is None else {s for s in seats if _visible(s, owned)}
        page = dict(page, replay=dict(privacy.replay_for(page["replay"], seats, readable), view=None))
    return render(request, "game.html", title=f"Game {gid}", games_at=f"/benches/{bench.name}/games",
                  crumb=f"/benches/{bench.name}", **page)


def owned_folders(bench: Bench, store: Path) -> dict[str, str]:
    """The bench's member and reference folders whose bot names an account of the server's store
    owns (name -> account): that account sees the member's grade, games and logs. Uploads refuse
    these names once the bench is shown; a name claimed before then is the organiser's to check,
    since the server cannot tell a student's own claim from another's (``arena serve`` lists them
    at its start)."""
    from ..bots.manifest import load_bot
    from ..errors import ArenaError
    db = data.open_read(store)
    if db is None:
        return {}
    try:
        owners = owner_names(db.db)
    finally:
        db.db.close()
    found = {}
    for ref in [*bench.members, *bench.references]:
        try:
            name = load_bot(ref).name
        except (ArenaError, OSError):
            name = Path(ref).name
        if name in owners:
            found[name] = owners[name]
    return found

