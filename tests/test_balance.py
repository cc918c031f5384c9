"""The balanced matchmaking of a living ladder and its audit (``arena ladder NAME --balance``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import trio
from typer.testing import CliRunner

from arena.cli.main import app
from arena.ladder import load_ladder, open_store, run_ladder
from arena.ladder.balance import audit, choose_balanced
from arena.ladder.matchmaking import Candidate, pair_key

from .test_ladder import ctx
from .test_ladder_run import _in_process


def test_audit_counts_games_seats_and_co_seatings() -> None:
    games = [("a", "b"), ("b", "a"), ("a", "c"), ("c", "a"), ("x", "a")]  # x is no member: its seats are ignored
    b = audit(games, ["a", "b", "c"], 2)
    rows = {r.bot: r for r in b.rows}
    assert rows["a"].games == 5 and rows["a"].seats == (2, 3)
    assert rows["b"].seats == (1, 1) and rows["c"].together == {"a": 2, "b": 0}
    assert (b.games_spread, b.seat_spread, b.pair_low, b.pair_high, b.pair_spread) == (3, 1, 0, 2, 2)


def test_the_longest_idle_bot_goes_first_against_those_it_met_least() -> None:
    bots = [Candidate(x, games=10) for x in "abcd"]
    pairs = {pair_key("a", "b"): 5, pair_key("a", "c"): 1, pair_key("a", "d"): 3}
    t = choose_balanced(bots, pairs, {"a": 3, "b": 9, "c": 7, "d": 8}, seats=2, field_size=2)
    assert (t.focus, t.field, t.why) == ("a", ("c", "d"), "longest idle")
    new = choose_balanced(bots + [Candidate("e")], pairs, {"a": 3, "b": 9, "c": 7, "d": 8}, seats=2, field_size=2)
    assert new.focus == "e" and new.why == "new"  # a newcomer has waited longest of all


def test_one_seat_per_author_holds_in_the_balanced_policy() -> None:
    bots = [Candidate("a", author="ann"), Candidate("b", author="ann"), Candidate("c", author="cy"),
            Candidate("d", author="cy")]
    t = choose_balanced(bots, {}, {}, seats=3, field_size=2, one_per_author=True)
    assert t is None  # two authors cannot fill a table of three
    t = choose_balanced(bots, {}, {}, seats=2, field_size=3, one_per_author=True)
    assert t.focus == "a" and t.field == ("c",)


def test_a_balanced_ladder_keeps_games_and_pairs_even() -> None:
    """Batches of the focus against two others, both seatings, one deal: after 300 batches of six
    bots every bot's games and every pair's games together are within one batch's worth."""
    labels = [f"b{i}" for i in range(6)]
    games: list[tuple[str, ...]] = []
    pairs: Counter[tuple[str, str]] = Counter()
    count: Counter[str] = Counter()
    seen: dict[str, int] = {}
    for _ in range(300):
        t = choose_balanced([Candidate(x, count[x]) for x in labels], pairs, seen, seats=2, field_size=2)
        for other in t.field:
            for seats in ((t.focus, other), (other, t.focus)):
                games.append(seats)
                count.update(seats)
                seen.update(dict.fromkeys(seats, len(games)))
                pairs[pair_key(*seats)] += 1
    b = audit(games, labels, 2)
    assert b.games_spread <= 4 and b.seat_spread == 0 and b.pair_spread <= 2, b


def test_a_ladder_run_with_the_balanced_policy_and_its_audit(tmp_path: Path, monkeypatch) -> None:
    _in_process(monkeypatch)
    path = tmp_path / "even.toml"
    path.write_text('rules = "classic"\nseats = 2\ndeals = 1\nmax_turns = 300\nconcurrency = 2\n'
                    'bots = ["random", "lowest", "highest", "heuristic"]\n[matchmaking]\npolicy = "balanced"\n'
                    'opponents = 1\n')
    ladder = load_ladder(path)
    ladder.store = str(tmp_path / "s.sqlite")
    store = open_store(ladder)
    tables: list[tuple[int, str]] = []
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=80, on_batch=lambda s, t, n: tables.append((n, t.focus))))
    assert len(tables) >= 4
    rows = store.db.execute("SELECT rowid, tournament, seats FROM games ORDER BY rowid").fetchall()
    for n, focus in tables:  # each batch's focus had waited longest since its last game
        first = min(r for r, t, _ in rows if t == ladder.run_id(n))
        last = {}
        for r, _, seats in rows:
            if r < first:
                last.update(dict.fromkeys(json.loads(seats), r))
        assert last[focus] == min(last.values()), (n, focus, last)
    store.close()
    out = CliRunner().invoke(app, ["ladder", str(path), "--store", ladder.store, "--balance", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    every = [r["games"] for r in data["bots"]]
    assert data["games_spread"] == max(every) - min(every) and len(every) == 4
    assert all(sum(r["seats"]) == r["games"] for r in data["bots"])
    shown = CliRunner().invoke(app, ["ladder", str(path), "--store", ladder.store, "--balance"])
    assert shown.exit_code == 0 and "spread: games" in shown.output and "seat 2" in shown.output
    # after the seeding round-robin, every pair's games together are within one batch of each other
    batch = max(store_games(ladder.store, ladder.run_id(n)) for n, _ in tables)
    assert data["pair_high"] - data["pair_low"] <= batch
    assert data["games_spread"] <= 2 * batch


def store_games(path: str, tournament: str) -> int:
    from arena.tournament.store import Store
    db = Store(path, readonly=True)
    try:
        return db.count_games(tournament=tournament)
    finally:
        db.close()
