"""Deal suites: a fixed file of deals that matches, tournaments and ladders play instead of fresh ones.

A suite is the chess engine tester's opening book for Palace: the same deals every run, so
two versions of a bot meet the same hands, and deals cut from games a bot lost can be played
again. A deal is the engine's deal seed: whoever holds it can deal every card (face-down
cards, the stock order), so a suite is as secret as the store's ``secret.key`` — written 0600,
never sent to a bot (a bot gets only the HMAC-derived seed of :func:`arena.referee.core.bot_seed`).

The file is JSON: ``{"format": "palace-deal-suite", "version": 1, "rules": {...}, "players": N,
"deals": [{"seed": S, "game": GAME_ID?}, ...]}``. ``game`` names the stored game a deal was cut
from.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import Rules, RulesError
from .store import Store, StoreError, write_private_text

FORMAT = "palace-deal-suite"
VERSION = 1
MAX_SEED = 2**63 - 1


class SuiteError(StoreError):
    """A suite file that cannot be read, or a request that cannot make one; the message says why."""


@dataclass(frozen=True)
class Suite:
    rules: Rules
    players: int
    deals: tuple[int, ...]
    games: tuple[str | None, ...] = field(default=())  # the stored game each deal was cut from, if any

    def origin(self, i: int) -> str | None:
        return self.games[i] if i < len(self.games) else None

    def digest(self) -> str:
        """Names the suite's content (for a match's resume key) without revealing a seed."""
        text = json.dumps({"rules": self.rules.options(), "players": self.players, "deals": list(self.deals)},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_json(self) -> dict[str, Any]:
        deals = [{"seed": s, **({"game": g} if g else {})}
                 for s, g in zip(self.deals, list(self.games) + [None] * (len(self.deals) - len(self.games)))]
        return {"format": FORMAT, "version": VERSION, "rules": self.rules.options(), "players": self.players,
                "deals": deals}


def make_suite(rules: Rules, players: int, count: int) -> Suite:
    """``count`` fresh deals from the operating system's random source (as the store's secret is)."""
    _check_players(rules, players)
    if count < 1:
        raise SuiteError("a suite needs at least one deal (--count)")
    return Suite(rules, players, tuple(int.from_bytes(os.urandom(8), "big") >> 1 for _ in range(count)))


def suite_from_games(store: Store, *, tournament: str | None = None, bot: str | None = None,
                     lost_by: str | None = None, limit: int | None = None) -> Suite:
    """The deals of stored games (each once), optionally only those ``lost_by`` a bot label
    (it did not finish first alone). They must share one rule set and player count."""
    rows = store.games(tournament=tournament, bot=bot or lost_by, limit=10**9)
    seeds: dict[int, str] = {}
    kinds: dict[tuple[str, int], int] = {}
    rules_of: dict[tuple[str, int], dict[str, Any]] = {}
    for g in rows:
        if lost_by is not None:
            order = g["result"].get("order") or []
            won = [s for s in (order[0] if order else []) if g["seats"][s] == lost_by]
            if lost_by not in g["seats"] or (won and len(order[0]) == 1):
                continue
        record = store.game_record(g["id"])
        if record is None:
            continue
        key = (json.dumps(record["rules"], sort_keys=True), len(g["seats"]))
        kinds[key] = kinds.get(key, 0) + 1
        rules_of[key] = record["rules"]
        seeds.setdefault(int(g["seed"]), g["id"])
    if not seeds:
        what = f" lost by {lost_by}" if lost_by else ""
        raise SuiteError(f"no stored games{what} match (tournament {tournament or 'any'}, bot {bot or 'any'})")
    if len(kinds) > 1:
        raise SuiteError(f"the games use {len(kinds)} different rule sets or player counts; pick one "
                         "with --tournament (a suite has one)")
    key = next(iter(kinds))
    items = list(seeds.items())[:limit] if limit else list(seeds.items())
    try:
        rules = Rules.from_options(rules_of[key])
    except (RulesError, TypeError, ValueError) as e:
        raise SuiteError(f"the stored games' rules cannot be read: {e}") from None
    return Suite(rules, key[1], tuple(s for s, _ in items), tuple(g for _, g in items))


def save_suite(path: str | Path, suite: Suite) -> None:
    """Write the suite 0600: its seeds deal every card."""
    try:
        write_private_text(path, json.dumps(suite.as_json(), indent=1) + "\n")
    except OSError as e:
        raise SuiteError(f"cannot write {path}: {e.strerror or e}") from None


def load_suite(path: str | Path) -> Suite:
    """A suite file, checked: a broken one is a :class:`SuiteError` naming what is wrong."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise SuiteError(f"cannot read the deal suite {p}: {e.strerror or e}") from None
    except ValueError as e:
        raise SuiteError(f"{p} is not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SuiteError(f"{p} is not a deal suite (write one with `arena deals make` or `arena deals from-games`)")
    if data.get("version") != VERSION:
        raise SuiteError(f"{p}: suite version {data.get('version')!r}, this arena reads version {VERSION}")
    try:
        rules = Rules.from_options(data["rules"])
        players = data["players"]
        deals = data["deals"]
    except (KeyError, TypeError, ValueError, RulesError) as e:
        raise SuiteError(f"{p}: bad rules, players or deals: {e}") from None
    if type(players) is not int or not isinstance(deals, list) or not deals:
        raise SuiteError(f"{p}: 'players' must be a whole number and 'deals' a non-empty list")
    _check_players(rules, players)
    seeds, games = [], []
    for i, d in enumerate(deals):
        seed = d.get("seed") if isinstance(d, dict) else None
        if type(seed) is not int or not 0 <= seed <= MAX_SEED:
            raise SuiteError(f"{p}: deal {i + 1} needs a 'seed' from 0 to 2^63-1")
        game = d.get("game")
        seeds.append(seed)
        games.append(str(game) if game is not None else None)
    return Suite(rules, players, tuple(seeds), tuple(games))


def check_hidden(path: str | Path, bots: dict[str, Path]) -> None:
    """Refuse a suite inside a bot's folder (``bots``: label -> its directory): the sandbox shows a
    bot its own folder, and a ladder copies the folder whole, so that bot could read every deal."""
    where = Path(path).resolve()
    for label, root in bots.items():
        if where.is_relative_to(Path(root).resolve()):
            raise SuiteError(f"the deal suite {path} lies inside the folder of {label} ({root}), which that bot "
                             "can read: keep suites out of bots' folders")


def readable_by_others(path: str | Path) -> bool:
    """True when users other than the owner may read the file (a bot under another uid could)."""
    try:
        return bool(os.stat(path).st_mode & 0o044)
    except OSError:
        return False


def _check_players(rules: Rules, players: int) -> None:
    if not rules.min_players <= players <= rules.max_players:
        raise SuiteError(f"{rules.name} is for {rules.min_players}-{rules.max_players} players, not {players}")
