"""Ladders: named, persistent rating pools that bots join with ``arena submit`` and that
``arena ladder run`` keeps playing.

A ladder is its file (``ladders/<name>.toml``, a copy kept in the store directory) plus the
ordinary game store.  One module per job:

* :mod:`.config` - the ladder file and its ``[matchmaking]`` settings;
* :mod:`.tables` - what the ladder keeps in the store beside its games (members, retired and
  suspended bots, the copies of every member's files, rating snapshots, views);
* :mod:`.placement` - seeding round-robin, ``arena submit``'s check and placement gauntlet, and
  :func:`play_games`, the one call into the tournament machinery;
* :mod:`.matchmaking` - which table a running ladder plays next (pure);
* :mod:`.run` - ``arena ladder run`` and ``arena ladder retire``;
* :mod:`.history` - incremental refits and rating snapshots;
* :mod:`.standings` - the table (one Plackett-Luce fit over all games) and the head-to-head matrix;
* :mod:`.match` - ``arena match``: two bots on duplicate deals, pentanomial statistics, SPRT.

The table is one :func:`arena.ratings.fit_elo` over *all* games of the ladder (order
independent; ``docs/RATINGS.md``).
"""

import importlib
from typing import Any

# Loaded on first use (PEP 562): every ``arena`` command imports the match command from this
# package, and only the ladder commands need numpy, scipy and openskill.
_WHERE = {
    "config": ["LADDER_DIR", "CheckFailed", "Ladder", "LadderError", "Matchmaking", "SeatRule", "SeatsRefused", "ladder_path", "list_ladders",
               "load_ladder", "resolve_anchor"],
    "history": ["LadderState", "rating_history", "take_snapshot", "trends"],
    "match": ["MatchProgress", "match_games", "match_id", "resolve_bot", "run_match"],
    "matchmaking": ["Candidate", "Table", "choose_table"],
    "placement": ["RunContext", "SubmitResult", "ensure_seeded", "play_games", "submit"],
    "run": ["RunSummary", "retire", "run_ladder", "take_out"],
    "seasons": ["Season", "SeasonRow", "current", "end_season", "season", "season_standings", "seasons",
                "start_season"],
    "standings": ["Cell", "LadderStandings", "Row", "head_to_head", "ladder_standings"],
    "tables": ["Actor", "BotStatus", "Member", "MemberStatus", "bot_statuses", "check_identity", "clear_status",
               "keep_ladder_file", "ladder_results", "member", "members", "open_store", "pause", "paused", "resolve_ref", "resume",
               "snapshot_dir"],
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_MODULE_OF))


__all__ = sorted(_MODULE_OF)
