"""The balanced matchmaking of a living ladder and its audit (``arena ladder NAME --balance``)."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from arena.cli.main import app
from arena.ladder import load_ladder, open_store, run_ladder
from arena.ladder.balance import audit, choose_balanced, stated_spread
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


@pytest.mark.parametrize("bots, seats, field", [(6, 2, 2), (12, 2, 3), (12, 3, 2), (9, 3, 4), (8, 4, 3),
                                                 (12, 4, 3), (13, 6, 5)])
def test_a_balanced_ladder_keeps_games_and_co_seatings_within_the_stated_spread(bots, seats, field) -> None:
    """The spread docs/RATINGS.md states for a steady membership, checked every 5th batch from
    the 50th to the 300th: games within 3 batches of the focus's games (6 at two seats, where the
    focus plays every table of its batch and the field one each), co-seatings within 4, seats even."""
    labels = [f"b{i}" for i in range(bots)]
    games: list[tuple[str, ...]] = []
    pairs: Counter[tuple[str, str]] = Counter()
    count: Counter[str] = Counter()
    seen: dict[str, int] = {}
    stated = stated_spread(seats, field)
    assert stated.batch == seats * math.comb(field, seats - 1)  # the focus's games in one batch
    for n in range(300):
        t = choose_balanced([Candidate(x, count[x]) for x in labels], pairs, seen, seats=seats, field_size=field)
        for rest in itertools.combinations(t.field, seats - 1):
            table = (t.focus, *rest)
            for r in range(seats):
                seated = table[r:] + table[:r]
                games.append(seated)
                count.update(seated)
                seen.update(dict.fromkeys(seated, len(games)))
                for a, b in itertools.combinations(seated, 2):
                    pairs[pair_key(a, b)] += 1
        if n >= 50 and n % 5 == 0:
            b = audit(games, labels, seats)
            assert b.games_spread <= (6 if seats == 2 else 3) * stated.batch and b.seat_spread == 0, (n, b.games_spread)
            assert b.pair_spread <= 4 * stated.batch, (n, b.pair_spread)
            assert stated.holds(b)


def balanced_ladder(tmp_path: Path, monkeypatch, name: str):
    """A living 2-seat classic ladder ``name`` of four built-in bots with the balanced policy, its
    games played in process: the file's path, the ladder and its open store."""
    _in_process(monkeypatch)
    path = tmp_path / f"{name}.toml"
    path.write_text('rules = "classic"\nseats = 2\ndeals = 1\nmax_turns = 300\nconcurrency = 2\n'
                    'bots = ["random", "lowest", "highest", "heuristic"]\n[matchmaking]\npolicy = "balanced"\n'
                    'opponents = 1\n')
    ladder = load_ladder(path)
    ladder.store = str(tmp_path / "s.sqlite")
    return path, ladder, open_store(ladder)


def test_a_ladder_run_with_the_balanced_policy_and_its_audit(tmp_path: Path, monkeypatch) -> None:
    path, ladder, store = balanced_ladder(tmp_path, monkeypatch, "even")
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
    # each batch plays 4 deals (raised to fill the two concurrent slots) in both seatings: B is the
    # focus's games in a batch as played, not as the file's one deal would have it
    batch = max(store_games(ladder.store, ladder.run_id(n)) for n, _ in tables)
    assert batch == 8
    assert data["stated"] == {"batch": 8, "games": 48, "together": 32, "within": data["games_spread"] <= 48
                              and data["pair_high"] - data["pair_low"] <= 32}
    shown = CliRunner().invoke(app, ["ladder", str(path), "--store", ladder.store, "--balance"])
    assert shown.exit_code == 0 and "spread: games" in shown.output and "seat 2" in shown.output
    assert "stated spread of the balanced policy: games 48, games together 32 (B = 8)" in shown.output
    # after the seeding round-robin, every pair's games together are within one batch of each other
    assert data["pair_high"] - data["pair_low"] <= batch
    assert data["games_spread"] <= 2 * batch


def store_games(path: str, tournament: str) -> int:
    from arena.tournament.store import Store
    db = Store(path, readonly=True)
    try:
        return db.count_games(tournament=tournament)
    finally:
        db.close()


def test_the_audit_names_the_window_every_member_was_present_for(tmp_path: Path, monkeypatch) -> None:
    """A bot submitted to a living balanced ladder plays its placement (a gauntlet against everyone)
    and then its share. The stated spread is for members present over the whole window, and the
    audit says which window that is: the games stored since the newest member's placement, whose
    audit holds."""
    from arena.ladder.placement import submit

    from .test_ladder import bot_copy
    path, ladder, store = balanced_ladder(tmp_path, monkeypatch, "club")
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=16))
    late = bot_copy(tmp_path, "heuristic", "2.0")
    trio.run(lambda: submit(ladder, str(late), store, ctx()))
    trio.run(lambda: run_ladder(ladder, store, ctx(), games=40))
    after = store.db.execute("SELECT COUNT(*) FROM games WHERE tournament LIKE ? AND rowid > (SELECT MAX(rowid) "
                             "FROM games WHERE tournament=?)", (ladder.run_prefix + "%",
                                                               ladder.placement_id("heuristic@2.0"))).fetchone()[0]
    store.close()

    def balance(*extra: str) -> dict:
        out = CliRunner().invoke(app, ["ladder", str(path), "--store", ladder.store, "--balance", "--json", *extra])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    whole = balance()
    assert whole["last_joined"] == {"bot": "heuristic@2.0", "games": after} and after >= 40
    assert balance("--window", str(after))["stated"]["within"]
    shown = CliRunner().invoke(app, ["ladder", str(path), "--store", ladder.store, "--balance"])
    assert (f"heuristic@2.0 joined last: every member was present for the last {after} games (after its "
            f"placement); arena ladder club --balance --window {after} audits them") in " ".join(shown.output.split())
    from .test_serve import ServerProc
    server = ServerProc(Path(ladder.store))
    try:
        status, _, body = server.get("/ladders/club/balance")
    finally:
        server.stop()
    assert status == 200 and (f"heuristic@2.0 joined last: every member was present for the last {after} games "
                              f"(after its placement); <code>arena ladder club --balance --window {after}</code>"
                              ) in " ".join(body.decode().split())
