"""What of a game is whose: a bot's stderr, its ``info`` lines, the requests its seat was sent and
the arena's messages about its faults (which quote what it wrote) belong to the account that owns
the bot, and to admins. Everyone else gets the omniscient replay of a finished game without them.

The public parts are an allow-list: a field added to the replay or to a fault later stays private
until it is named here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from starlette.requests import Request

from ..store.people import Account, Role, label_name, owner_names
from . import auth

PUBLIC_FRAME = frozenset({"n", "events", "flags", "mismatch", "kind", "text", "seat", "name", "phase", "turn", "ms",
                          "of", "act", "choice", "fault"})
PUBLIC_FAULT = frozenset({"game", "seat", "reason", "finished", "turn"})


def label_readable(label: str, owners: dict[str, str], who: str) -> bool:
    """Whether account ``who`` owns the bot of ``label`` (``owners``: bot name -> account name)."""
    return owners.get(label_name(label)) == who


async def readable_bots(request: Request, labels: list[str]) -> set[str]:
    """The labels among ``labels`` whose private lines this request may read: its account's bots,
    or all of them for an admin; none for anyone not logged in."""
    who: Account | None = await auth.current(request)
    if who is None:
        return set()
    if who.role == Role.ADMIN:
        return set(labels)
    owners = await auth.with_db(request, owner_names)
    return {label for label in labels if label_readable(label, owners, who.name)}


def replay_for(replay: dict[str, Any], seats: list[str], readable: set[str]) -> dict[str, Any]:
    """The replay JSON with the private fields of each seat not in ``readable`` left out."""
    frames = []
    for frame in replay["frames"]:
        info = frame["i"]
        seat = info.get("seat")
        if isinstance(seat, int) and not (0 <= seat < len(seats) and seats[seat] in readable):
            info = {k: v for k, v in info.items() if k in PUBLIC_FRAME}
            if info.get("kind") == "fault":
                info["text"] = f"forfeit: {info.get('fault')}"
        elif not isinstance(seat, int):
            info = {k: v for k, v in info.items() if k in PUBLIC_FRAME}
        frames.append({**frame, "i": info})
    return {**replay, "frames": frames}


def bot_page_for(page: Any, readable: bool) -> Any:
    """The bot page, its fault panels without what the bot wrote, and its suspensions without their
    reasons (they may quote it, or name a server path), unless ``readable``."""
    if readable:
        return page
    return replace(page, faults=[{**{k: v for k, v in f.items() if k in PUBLIC_FAULT}, "private": True}
                                 for f in page.faults],
                   statuses=[{"ladder": s["ladder"], "status": s["status"], "reason": ""} for s in page.statuses])
