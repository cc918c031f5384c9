"""Deal suites: a fixed file of deals that matches, tournaments and ladders play instead of fresh ones.

A suite is the chess engine tester's opening book for Palace: the same deals every run, so
two versions of a bot meet the same hands, and deals cut from games a bot lost can be played
again. A deal is the engine's deal seed: whoever holds it can deal every card (face-down
cards, the stock order), so a suite is as secret as the store's ``secret.key`` — written 0600,
never sent to a bot (a bot gets only the HMAC-derived seed of :func:`arena.referee.core.bot_seed`).

The file is JSON: ``{"format": "palace-deal-suite", "version": 1, "rules": {...}, "players": N,
"deals": [{"seed": S, "game": GAME_ID?}, ...]}``. ``game`` names the stored game a deal was cut
from. An entry may also be a mid-game position: ``"moves"`` (the index into the legal actions of
every step from the deal to the position, forced steps included) and ``"position"`` (that state
in the engine's position format, :func:`arena.engine.views.to_position`). A game from it plays
the moves for the seats without asking them, then asks as usual: its record keeps them, so it
replays from its seed like any game. Loading checks that the moves reach the position.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import Rules, RulesError, State, apply_action, legal_actions, start_game
from ..engine.views import to_position
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
    moves: tuple[tuple[int, ...], ...] = field(default=())  # per entry: () a deal, else a position's opening
    positions: tuple[dict[str, Any] | None, ...] = field(default=())  # per entry: the position those reach

    def origin(self, i: int) -> str | None:
        return self.games[i] if i < len(self.games) else None

    def moves_of(self, i: int) -> tuple[int, ...]:
        """The opening a game from entry ``i`` plays for its seats (() for a plain deal)."""
        return self.moves[i] if i < len(self.moves) else ()

    def position_of(self, i: int) -> dict[str, Any] | None:
        return self.positions[i] if i < len(self.positions) else None

    @property
    def position_count(self) -> int:
        return sum(1 for i in range(len(self.deals)) if self.moves_of(i))

    def digest(self) -> str:
        """Names the suite's content (for a match's resume key) without revealing a seed."""
        content: dict[str, Any] = {"rules": self.rules.options(), "players": self.players, "deals": list(self.deals)}
        if self.position_count:  # a suite of plain deals keeps the digest it always had
            content["moves"] = [list(self.moves_of(i)) for i in range(len(self.deals))]
        text = json.dumps(content, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_json(self) -> dict[str, Any]:
        deals = []
        for i, s in enumerate(self.deals):
            entry: dict[str, Any] = {"seed": s}
            if self.origin(i):
                entry["game"] = self.origin(i)
            if self.moves_of(i):
                entry["moves"] = list(self.moves_of(i))
                entry["position"] = self.position_of(i)
            deals.append(entry)
        return {"format": FORMAT, "version": VERSION, "rules": self.rules.options(), "players": self.players,
                "deals": deals}


def reach(rules: Rules, players: int, seed: int, moves: tuple[int, ...], max_turns: int = 2000) -> State:
    """The state ``moves`` (legal-action indexes, one per step) lead to from the deal ``seed``; a
    move out of range, or a game over before the position, is a :class:`SuiteError`."""
    state, _ = start_game(rules, players, seed, max_turns=max_turns)
    for k, m in enumerate(moves, 1):
        if state.result is not None:
            raise SuiteError(f"the game is over after {k - 1} of its {len(moves)} moves")
        actions = legal_actions(state)
        if not 0 <= m < len(actions):
            raise SuiteError(f"move {k} is action {m}, but there are {len(actions)}")
        state, _ = apply_action(state, actions[m], check=False)
    if state.result is not None:
        raise SuiteError("the game is over at the position: nothing is left to play")
    return state


def cut_position(record: dict[str, Any], at: int) -> tuple[tuple[int, ...], dict[str, Any]] | None:
    """A stored game cut just before its ``at``-th request (the ``at``-th decision any seat was
    asked for): the moves that lead there and that position; None when the game asked fewer, or
    a seat forfeited before it (a forfeit is no move to replay)."""
    moves: list[int] = []
    asked = 0
    start_faults = len(record.get("faults", [])) - sum(1 for st in record["steps"] if "fault" in st)
    if start_faults > 0:
        return None
    for step in record["steps"]:
        if "request" in step:
            asked += 1
            if asked == at:
                rules = Rules.from_options(record["rules"])
                state = reach(rules, len(record["players"]), int(record["seed"]), tuple(moves))
                return tuple(moves), to_position(state)
        if "fault" in step or "action" not in step:
            return None
        moves.append(int(step["action"]))
    return None


def make_suite(rules: Rules, players: int, count: int) -> Suite:
    """``count`` fresh deals from the operating system's random source (as the store's secret is)."""
    _check_players(rules, players)
    if count < 1:
        raise SuiteError("a suite needs at least one deal (--count)")
    return Suite(rules, players, tuple(int.from_bytes(os.urandom(8), "big") >> 1 for _ in range(count)))


def suite_from_games(store: Store, *, tournament: str | None = None, bot: str | None = None,
                     lost_by: str | None = None, limit: int | None = None,
                     position_at: int | None = None) -> Suite:
    """The deals of stored games (each once), optionally only those ``lost_by`` a bot label
    (it did not finish first alone). They must share one rule set and player count. With
    ``position_at`` T each entry is the game's position before its T-th decision
    (:func:`cut_position`); games that asked fewer, or had a forfeit before it, are left out."""
    if position_at is not None and position_at < 1:
        raise SuiteError("--position-at counts decisions from 1")
    rows = store.games(tournament=tournament, bot=bot or lost_by, limit=10**9)
    cuts: dict[int, tuple[tuple[int, ...], dict[str, Any]]] = {}
    seeds: dict[int, str] = {}
    kinds: dict[tuple[str, int], int] = {}
    rules_of: dict[tuple[str, int], dict[str, Any]] = {}
    for g in rows:
        if lost_by is not None:
            order = g["result"].get("order") or []
            won = [s for s in (order[0] if order else []) if g["seats"][s] == lost_by]
            if lost_by not in g["seats"] or (won and len(order[0]) == 1):
                continue
        if int(g["seed"]) in seeds:  # the deal's other seatings: the same entry, not read again
            continue
        record = store.game_record(g["id"])
        if record is None:
            continue
        if position_at is not None:
            cut = cut_position(record, position_at)
            if cut is None:
                continue
            cuts[int(g["seed"])] = cut
        key = (json.dumps(record["rules"], sort_keys=True), len(g["seats"]))
        kinds[key] = kinds.get(key, 0) + 1
        rules_of[key] = record["rules"]
        seeds.setdefault(int(g["seed"]), g["id"])
    if not seeds:
        what = f" lost by {lost_by}" if lost_by else ""
        reach_t = f" that reach decision {position_at} without a forfeit" if position_at is not None else ""
        raise SuiteError(f"no stored games{what}{reach_t} match (tournament {tournament or 'any'}, "
                         f"bot {bot or 'any'})")
    if len(kinds) > 1:
        raise SuiteError(f"the games use {len(kinds)} different rule sets or player counts; pick one "
                         "with --tournament (a suite has one)")
    key = next(iter(kinds))
    items = list(seeds.items())[:limit] if limit else list(seeds.items())
    try:
        rules = Rules.from_options(rules_of[key])
    except (RulesError, TypeError, ValueError) as e:
        raise SuiteError(f"the stored games' rules cannot be read: {e}") from None
    if position_at is None:
        return Suite(rules, key[1], tuple(s for s, _ in items), tuple(g for _, g in items))
    return Suite(rules, key[1], tuple(s for s, _ in items), tuple(g for _, g in items),
                 tuple(cuts[s][0] for s, _ in items), tuple(cuts[s][1] for s, _ in items))


def save_suite(path: str | Path, suite: Suite) -> None:
    """Write the suite 0600: its seeds deal every card."""
    try:
        write_private_text(path, json.dumps(suite.as_json(), indent=1) + "\n")
    except OSError as e:
        raise SuiteError(f"cannot write {path}: {e.strerror or e}") from None


def config_suite(path: str | Path | None, error: type[Exception], where: str) -> Suite | None:
    """The suite a tournament or ladder file names (None when it names none); a broken one is
    that file's own kind of error (``error``), its message starting with ``where``."""
    if not path:
        return None
    try:
        return load_suite(path)
    except SuiteError as e:
        raise error(f"{where}{e}") from None


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
    seeds, games, moves, positions = [], [], [], []
    for i, d in enumerate(deals):
        seed = d.get("seed") if isinstance(d, dict) else None
        if type(seed) is not int or not 0 <= seed <= MAX_SEED:
            raise SuiteError(f"{p}: deal {i + 1} needs a 'seed' from 0 to 2^63-1")
        game = d.get("game")
        seeds.append(seed)
        games.append(str(game) if game is not None else None)
        opening, position = _position_entry(p, i, d, rules, players, seed)
        moves.append(opening)
        positions.append(position)
    if not any(moves):
        return Suite(rules, players, tuple(seeds), tuple(games))
    return Suite(rules, players, tuple(seeds), tuple(games), tuple(moves), tuple(positions))


def _position_entry(p: Path, i: int, d: dict[str, Any], rules: Rules, players: int,
                    seed: int) -> tuple[tuple[int, ...], dict[str, Any] | None]:
    """A suite entry's opening and position, checked: the moves must reach that very position."""
    if "moves" not in d and "position" not in d:
        return (), None
    moves, position = d.get("moves"), d.get("position")
    if (not isinstance(moves, list) or not moves or any(type(m) is not int for m in moves)
            or not isinstance(position, dict)):
        raise SuiteError(f"{p}: deal {i + 1}: a position needs 'moves' (a non-empty list of action indexes "
                         "from the deal) and 'position' (the engine's position format); cut one with "
                         "`arena deals from-games --position-at T`")
    max_turns = position.get("max_turns", 2000)
    try:
        state = reach(rules, players, seed, tuple(moves), max_turns if type(max_turns) is int else 2000)
    except SuiteError as e:
        raise SuiteError(f"{p}: deal {i + 1}: {e}") from None
    if to_position(state) != position:
        raise SuiteError(f"{p}: deal {i + 1}: its moves from its seed do not reach the position it names")
    return tuple(moves), position


def check_hidden(path: str | Path, bots: dict[str, Path]) -> None:
    """Refuse a suite inside a bot's folder (``bots``: label -> its directory): the sandbox shows a
    bot its own folder, and a ladder copies the folder whole, so that bot could read every deal."""
    where = Path(path).resolve()
    for label, root in bots.items():
        if where.is_relative_to(Path(root).resolve()):
            raise SuiteError(f"the deal suite {path} lies inside the folder of {label} ({root}), which that bot "
                             "can read: keep suites out of bots' folders")


def exposure_warning(path: str | Path) -> str | None:
    """What to warn of when a suite file can be read by users other than its owner, or None."""
    if not readable_by_others(path):
        return None
    return (f"{path} is readable by other users: its seeds deal every card; a bot running under another uid "
            f"without the sandbox could read it (chmod 600 {path})")


def readable_by_others(path: str | Path) -> bool:
    """True when users other than the owner may read the file (a bot under another uid could)."""
    try:
        return bool(os.stat(path).st_mode & 0o044)
    except OSError:
        return False


def _check_players(rules: Rules, players: int) -> None:
    if not rules.min_players <= players <= rules.max_players:
        raise SuiteError(f"{rules.name} is for {rules.min_players}-{rules.max_players} players, not {players}")
