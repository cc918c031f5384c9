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

from .config import LADDER_DIR, CheckFailed, Ladder, LadderError, Matchmaking, ladder_path, list_ladders, load_ladder
from .history import LadderState, history, take_snapshot, trends
from .match import MatchProgress, match_games, match_id, resolve_bot, run_match
from .matchmaking import Candidate, Table, choose_table
from .placement import RunContext, SubmitResult, ensure_seeded, play_games, submit
from .run import RunSummary, retire, run_ladder
from .standings import Cell, LadderStandings, Row, head_to_head, ladder_standings, resolve_anchor
from .tables import (LADDER_SCHEMA, BotStatus, Member, bot_statuses, check_identity, clear_status,
                     keep_ladder_file, ladder_results, member, members, open_store, resolve_ref, snapshot_dir)

__all__ = [
    "LADDER_DIR", "LADDER_SCHEMA", "BotStatus", "Candidate", "Cell", "CheckFailed", "Ladder", "LadderError",
    "LadderStandings", "LadderState", "MatchProgress", "Matchmaking", "Member", "Row", "RunContext", "RunSummary",
    "SubmitResult", "Table", "bot_statuses", "check_identity", "choose_table", "clear_status", "ensure_seeded",
    "head_to_head", "history", "keep_ladder_file", "ladder_path", "ladder_results", "ladder_standings",
    "list_ladders", "load_ladder", "match_games", "match_id", "member", "members", "open_store", "play_games",
    "resolve_anchor", "resolve_bot", "retire", "run_ladder", "run_match", "snapshot_dir", "submit",
    "take_snapshot", "trends",
]
