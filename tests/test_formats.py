"""The staged formats run end to end: a Swiss, knockouts and heats, their resume, seeding and views.

Bots are in-process fakes named ``p0``, ``p1``, ... (copies of a bundled bot's folder under
those names), each playing a deterministic policy, so an event's games depend only on its
deals and seats and two runs of it can be compared game by game.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import trio

from arena.tournament.config import ConfigError, load_config
from arena.tournament.formats import (event_view, planned_games, stage_of, stored_config, stored_results,
                                      swiss_scores, winner)
from arena.tournament.run import Reporter, RunStats, run_tournament
from arena.tournament.store import Store
from arena.tournament.swiss import meetings, pair_round
from tests.fakes import POLICIES, ScriptedConnection, policy_bot
from tests.test_resume import bots_dir  # noqa: F401 - the fixture: bundled bots copied where a bot's uid can read
from tests.test_swiss import cost, partitions

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("heuristic", "lowest", "highest")  # deterministic policies: a game depends only on its deal and seats


def make_bots(where: Path, n: int) -> list[str]:
    refs = []
    for i in range(n):
        d = where / f"p{i}"
        shutil.copytree(ROOT / "bots" / "lowest", d, ignore=shutil.ignore_patterns("__pycache__"))
        toml = (d / "bot.toml").read_text().replace('name = "lowest"', f'name = "p{i}"')
        (d / "bot.toml").write_text(toml)
        refs.append(str(d))
    return refs


def launcher(begun: list[str] | None = None):
    """p<i> plays KINDS[i % 3]; ``begun`` collects each game id as a seat is told to start it."""
    def launch(spec):
        conn = ScriptedConnection(policy_bot(POLICIES[KINDS[int(spec.name[1:]) % 3]](), spec.name))
        if begun is not None:
            send = conn.send_line

            def send_line(text: str, *, timeout: float = 10.0) -> None:
                msg = json.loads(text)
                if msg.get("type") == "start":
                    begun.append(msg["game"])
                send(text, timeout=timeout)
            conn.send_line = send_line
        return conn
    return launch


def event(tmp_path: Path, n: int, store: str = "e.sqlite", **kw: Any):
    bots = make_bots(tmp_path / "bots", n) if not (tmp_path / "bots").exists() else \
        [str(tmp_path / "bots" / f"p{i}") for i in range(n)]
    # 200 turns: heuristic against highest never ends (it stops at the turn cap, 2,000 by default,
    # which was most of this file's CPU); a capped game is a result like any other here
    cfg = load_config(None, {"name": "event", "bots": bots, "concurrency": 2, "max_turns": 200,
                             "store": str(tmp_path / store), **kw})
    return cfg, Store(cfg.store)


def play(cfg, db, reporter: Reporter | None = None, begun: list[str] | None = None, stats: RunStats | None = None):
    trio.run(lambda: run_tournament(cfg, db, reporter, launcher=launcher(begun), stats=stats))


def by_stage(cfg, db) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for g in db.games(tournament=cfg.name, limit=10**6):
        out[stage_of(cfg, g["index"])].append(g)
    return dict(out)


def tables_of(games: list[dict[str, Any]]) -> dict[frozenset[str], list[dict[str, Any]]]:
    out: dict[frozenset[str], list[dict[str, Any]]] = defaultdict(list)
    for g in games:
        out[frozenset(g["seats"])].append(g)
    return dict(out)


def check_duplicate_rotations(games: list[dict[str, Any]], deals: int) -> set[int]:
    """Every table of a stage plays the same deals, each in every seat rotation; returns the deals."""
    seeds = None
    for table, played in tables_of(games).items():
        per_deal: dict[int, list[tuple[str, ...]]] = defaultdict(list)
        for g in played:
            per_deal[g["seed"]].append(tuple(g["seats"]))
        assert len(per_deal) == deals
        for orders in per_deal.values():
            assert len(orders) == len(table)  # one game per rotation
            for seat in range(len(table)):  # every bot in every seat of the deal once
                assert sorted(o[seat] for o in orders) == sorted(table)
        assert seeds is None or set(per_deal) == seeds  # duplicate deals across the stage's tables
        seeds = set(per_deal)
    return seeds or set()


def match_points(games: list[dict[str, Any]]) -> Counter[str]:
    pts: Counter[str] = Counter()
    for g in games:
        behind = len(g["seats"])
        for group in g["result"]["order"]:
            behind -= len(group)
            for s in group:
                pts[g["seats"][s]] += behind + (len(group) - 1) / 2
    return pts


# ---------------------------------------------------------------- swiss

def test_a_swiss_seats_by_the_fit_avoids_repeats_and_spreads_byes(tmp_path: Path) -> None:
    cfg, db = event(tmp_path, 7, format="swiss", seats=3, rounds=3, deals=2)
    play(cfg, db)
    t = db.tournament("event")
    assert t["status"] == "done" and t["played"] == t["planned"] == planned_games(cfg) == 3 * 2 * 3 * 2
    labels = [f"p{i}@1.0" for i in range(7)]
    stages = by_stage(cfg, db)
    assert sorted(stages) == [0, 1, 2]
    history: list[tuple[str, ...]] = []
    byes: list[str] = []
    seen_deals: set[int] = set()
    for r in range(3):
        games = stages[r]
        deals = check_duplicate_rotations(games, 2)
        assert not deals & seen_deals  # each round its own deals
        seen_deals |= deals
        seated = {b for g in games for b in g["seats"]}
        byes += [b for b in labels if b not in seated]
        # the round is the pairing of the fit over the rounds before it, nothing else
        earlier = [(g["seats"], g["result"]) for s in range(r) for g in stages[s]]
        scores = {b: round(e, 6) for b, e in swiss_scores(labels, earlier).items()}
        order = sorted(labels, key=lambda b: (-scores[b], labels.index(b)))
        met = meetings(history)
        want = pair_round(order, scores, 3, met, Counter(byes[:r]))
        assert {frozenset(t) for t in want.tables} == set(tables_of(games))
        # and no seating of these bots repeats fewer meetings
        assert want.repeats == min(cost(p, met, scores)[0] for p in partitions(sorted(seated), 3))
        history += [tuple(t) for t in tables_of(games)]
    assert len(byes) == 3 and len(set(byes)) == 3  # one bye a round, never the same bot twice


def test_a_swiss_with_one_seat_per_author_keeps_authors_apart_before_repeats(tmp_path: Path) -> None:
    """Two authors with two bots each, three rounds at two seats: the first two rounds use up
    every pairing across authors, so the third must repeat one; without the rule it would seat
    each author's pair together (the only fresh pairing)."""
    make_bots(tmp_path / "bots", 4)
    for i, who in enumerate(("ann", "ann", "bob", "bob")):
        toml = tmp_path / "bots" / f"p{i}" / "bot.toml"
        toml.write_text(toml.read_text().replace('author = "Palace Arena"', f'author = "{who}"'))
    cfg, db = event(tmp_path, 4, format="swiss", seats=2, rounds=3, deals=1, one_seat_per_author=True,
                    accept_kernel_channels=True)
    play(cfg, db)
    assert db.tournament("event")["status"] == "done"
    author = {"p0@1.0": "ann", "p1@1.0": "ann", "p2@1.0": "bob", "p3@1.0": "bob"}
    stages = by_stage(cfg, db)
    assert sorted(stages) == [0, 1, 2]
    for r in range(3):
        for table in tables_of(stages[r]):
            assert len({author[b] for b in table}) == 2, (r, table)
    assert sum(meetings(tuple(t) for r in range(3) for t in tables_of(stages[r])).values()) == 6  # 4 pairs, one met twice


def test_a_stopped_swiss_resumes_to_the_same_event_and_plays_nothing_twice(tmp_path: Path) -> None:
    ref, ref_db = event(tmp_path, 5, store="ref.sqlite", format="swiss", seats=2, rounds=3, deals=1)
    play(ref, ref_db)
    total = planned_games(ref)
    assert total == 3 * 2 * 1 * 2

    class Stop(Exception):
        pass

    class StopAfter(Reporter):
        def __init__(self, n: int) -> None:
            self.n = n

        def game_done(self, game, record) -> None:
            self.n -= 1
            if self.n == 0:
                raise Stop()

    cfg, db = event(tmp_path, 5, store="cut.sqlite", format="swiss", seats=2, rounds=3, deals=1)
    stored = 0
    for cut in (3, 2, 1):  # 4 games a round: stopped in round 1, in round 2, and in round 2 again
        before = db.done_indexes("event")
        begun: list[str] = []
        with pytest.raises(Stop):
            play(cfg, db, StopAfter(cut), begun=begun)
        stored += cut
        assert len(db.done_indexes("event")) == stored
        assert not {f"event-{i:06d}" for i in before} & set(begun)  # no stored game begun again
    before = db.done_indexes("event")
    assert 4 < len(before) < 8
    begun: list[str] = []
    play(cfg, db, begun=begun)
    every = db.done_indexes("event")
    assert len(every) == total and db.tournament("event")["status"] == "done"
    first = [g for i, g in enumerate(begun) if g not in begun[:i]]
    assert len(begun) == 2 * len(first)  # each game begun once, by its two seats
    assert sorted(first) == sorted(f"event-{i:06d}" for i in every - before)  # only the missing ones
    want = {g["index"]: (g["seats"], g["seed"], g["result"]) for g in ref_db.games(tournament="event", limit=999)}
    got = {g["index"]: (g["seats"], g["seed"], g["result"]) for g in db.games(tournament="event", limit=999)}
    assert got == want


# ---------------------------------------------------------------- knockout and heats

def test_single_elimination_with_byes_for_the_top_seeds(tmp_path: Path) -> None:
    cfg, db = event(tmp_path, 6, format="knockout", deals=2)
    play(cfg, db)
    labels = [f"p{i}@1.0" for i in range(6)]
    stages = by_stage(cfg, db)
    assert set(tables_of(stages[0])) == {frozenset(("p3@1.0", "p4@1.0")), frozenset(("p2@1.0", "p5@1.0"))}
    out: set[str] = set()
    matches = 0
    for s in sorted(stages):
        check_duplicate_rotations(stages[s], 2)  # best of 2 deals, each in both seatings
        for table, games in tables_of(stages[s]).items():
            assert not table & out  # a loser never plays again
            pts = match_points(games)
            a, b = sorted(table, key=labels.index)
            loser = b if pts[a] >= pts[b] else a  # on equal points the better seed goes on
            out.add(loser)
            matches += 1
    assert matches == 5 and db.tournament("event")["played"] == planned_games(cfg) == 5 * 2 * 2
    view = event_view(db.tournament("event")["config"], stored_results(db, "event"))
    champion = winner(stored_config(db.tournament("event")["config"]), view)
    assert champion is not None and set(labels) - out == {champion}


def test_double_elimination_puts_out_on_the_second_loss(tmp_path: Path) -> None:
    cfg, db = event(tmp_path, 5, format="knockout", elimination="double", deals=1)
    play(cfg, db)
    labels = [f"p{i}@1.0" for i in range(5)]
    losses: Counter[str] = Counter()
    for s, games in sorted(by_stage(cfg, db).items()):
        for table, played in tables_of(games).items():
            assert all(losses[b] < 2 for b in table)  # nobody plays after a second loss
            pts = match_points(played)
            a, b = sorted(table, key=labels.index)
            losses[b if pts[a] >= pts[b] else a] += 1
    champion = winner(stored_config(db.tournament("event")["config"]),
                      event_view(db.tournament("event")["config"], stored_results(db, "event")))
    assert champion is not None and losses[champion] <= 1
    assert all(losses[b] == 2 for b in labels if b != champion)
    assert sum(losses.values()) in (2 * 5 - 2, 2 * 5 - 1)  # one match per loss


def test_heats_send_the_top_of_each_table_to_a_final(tmp_path: Path) -> None:
    cfg, db = event(tmp_path, 7, format="heats", seats=3, advance=1, deals=1)
    play(cfg, db)
    stages = by_stage(cfg, db)
    assert sorted(stages) == [0, 1]
    heat = tables_of(stages[0])
    assert sorted(len(t) for t in heat) == [2, 2, 3]  # seven bots at three tables as even as they go
    check_duplicate_rotations(stages[0], 1)
    tops = set()
    for table, games in heat.items():
        pts = match_points(games)
        best = max(pts.values())
        top = [b for b in table if pts[b] == best]
        tops.add(min(top, key=lambda b: int(b[1:].split("@")[0])))  # the better seed on equal points
    (final,) = tables_of(stages[1])
    assert final == tops
    assert db.tournament("event")["played"] == planned_games(cfg) == 7 + 3  # a table of s bots plays s rotations of each deal


def test_a_knockout_seeded_from_a_swiss(tmp_path: Path) -> None:
    from arena.tournament.standings import from_store
    swiss, db = event(tmp_path, 6, format="swiss", rounds=2, deals=1)
    play(swiss, db)
    ko, _ = event(tmp_path, 6, format="knockout", deals=1, seeding="event", name="final")
    play(ko, db)
    order = [line.bot for line in from_store(db, "event")]
    assert db.tournament("final")["config"]["order"] == order
    first = tables_of(by_stage(ko, db)[0])
    # eight slots for six: the Swiss's top two wait, 3rd meets 6th and 4th meets 5th
    assert set(first) == {frozenset((order[3], order[4])), frozenset((order[2], order[5]))}


def test_a_knockout_seeded_from_a_ladders_every_game(tmp_path: Path) -> None:
    """``seeding = "ladder:NAME"``: the ladder's rating table, one fit over all its tournaments."""
    from arena.tournament.seeds import SECRET_BYTES, SECRET_FILE
    from arena.tournament.standings import read_games, summarise
    # A fixed secret: the deals, and so the orders compared at the end, are the same on every run
    # (with a fresh random secret the whole ladder ordered the bots as the seeding alone now and then).
    key = tmp_path / SECRET_FILE
    key.write_bytes(bytes([1]) * SECRET_BYTES)
    key.chmod(0o600)
    seed, db = event(tmp_path, 4, format="round-robin", deals=1, name="ladder:club:seed")
    play(seed, db)
    run, _ = event(tmp_path, 4, format="round-robin", deals=1, seed=5, name="ladder:club:run:000001")
    play(run, db)
    ko, _ = event(tmp_path, 4, format="knockout", deals=1, seeding="ladder:club", name="cup")
    play(ko, db)
    want = [line.bot for line in summarise(*read_games(db, prefix="ladder:club:"))[0]]
    assert db.tournament("cup")["config"]["order"] == want
    # (these games order the bots otherwise than the seeding round-robin alone: the whole ladder counts)
    assert want != [line.bot for line in summarise(*read_games(db, tournament="ladder:club:seed"))[0]]


@pytest.mark.parametrize("kw,needle", [
    ({"format": "knockout", "seats": 3}, "a knockout is for 2 seats"),
    ({"format": "heats", "seats": 2}, "heats are for 3 to 6 seats"),
    ({"format": "heats", "seats": 3, "advance": 3}, "advance must be 1 to 2"),
    ({"format": "knockout", "rounds": 3}, "rounds is for a swiss"),
    ({"format": "swiss", "elimination": "double"}, "elimination is for a knockout"),
    ({"format": "knockout", "elimination": "triple"}, "elimination"),  # refused once, where the flags are read
    ({"format": "swiss", "seats": 4}, "4 seats need at least 4 bots"),
    ({"format": "knockout", "one_seat_per_author": True}, "one_seat_per_author is for round-robins, gauntlets and swiss"),
    ({"format": "heats", "seats": 3, "one_seat_per_author": True}, "one_seat_per_author is for"),
])
def test_staged_config_errors(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(None, {"bots": ["random", "lowest", "heuristic"], **kw})


def test_a_file_names_the_format(tmp_path: Path) -> None:
    f = tmp_path / "club.toml"
    f.write_text('format = "swiss"\nbots = ["random", "lowest", "heuristic", "highest"]\nrounds = 3\nseats = 2\n')
    cfg = load_config(f)
    assert (cfg.format, cfg.swiss_rounds, cfg.name) == ("swiss", 3, "club")
    f.write_text('format = "ladder"\n')
    with pytest.raises(ConfigError, match="format"):
        load_config(f)


def test_a_missing_seeding_is_one_clear_error(tmp_path: Path) -> None:
    cfg, db = event(tmp_path, 4, format="knockout", seeding="nowhere")
    with pytest.raises(ConfigError, match="seeding: no tournament or ladder 'nowhere'"):
        play(cfg, db)
    assert db.tournament("event") is None  # nothing begun


def test_the_terminal_and_the_report_draw_the_stages(tmp_path: Path) -> None:
    from rich.console import Console

    from arena.replay.html import stages_html
    from arena.tournament.tables import stages_table
    cfg, db = event(tmp_path, 4, format="knockout", deals=1)
    play(cfg, db)
    t = db.tournament("event")
    view = event_view(t["config"], stored_results(db, "event"))
    champion = winner(stored_config(t["config"]), view)
    console = Console(width=200, record=True)
    console.print(stages_table("knockout", view))
    text = console.export_text()
    assert "semi-finals" in text and "final" in text
    page = stages_html("knockout", view, champion)
    assert page.count('class="table"') == 3 and f"<h3>winner</h3><div class=\"table went-on\">{champion}" in page
    assert page.count('class="went-on"') == 3  # both semi-final winners and the final's


# ---------------------------------------------------------------- kill -9, with real bots

def test_a_swiss_killed_with_sigkill_resumes_to_the_same_event(tmp_path: Path, bots_dir: Path) -> None:  # noqa: F811
    """The same command after SIGKILL finishes the Swiss with every game as an uninterrupted run
    has it, none stored twice; the terminal draws its rounds and the report its stages."""
    import os
    import random
    import signal
    import time

    from typer.testing import CliRunner

    from arena.cli.main import app
    from tests.test_resume import arena_cmd, reap_orphans, stored
    conf = tmp_path / "swiss.toml"
    conf.write_text(f'name = "swiss"\nformat = "swiss"\nrounds = 3\nseats = 2\ndeals = 1\nseed = 7\n'
                    f'concurrency = 2\nprocesses = 1\n'  # two games at once in the one process: no worker processes
                    f'bots = ["{bots_dir}/random", "{bots_dir}/lowest", "{bots_dir}/heuristic"]\n'
                    '[time]\nmove_ms = 5000\n')
    total = 3 * 1 * 1 * 2  # a table of two (the third bot sits out) a round, one deal in both seatings
    pids_before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    # the uninterrupted reference and the report are not about the process: run in this one
    with contextlib.chdir(tmp_path):
        ref = CliRunner().invoke(app, ["tournament", str(conf), "--plain", "--store", str(tmp_path / "ref.sqlite")])
    assert ref.exit_code == 0, ref.output
    assert "Rounds" in ref.stdout and "round 3 of 3" in ref.stdout
    seed = random.randrange(1 << 30)
    kill_after = random.Random(seed).randint(2, total - 4)
    store = tmp_path / "killed.sqlite"
    with (tmp_path / "killed.log").open("w") as log:
        proc = subprocess.Popen(arena_cmd("tournament", str(conf), "--plain", "--store", str(store)),
                                cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while stored(store) < kill_after and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert proc.poll() is None, f"the run ended before the kill (seed {seed})"
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
    at_kill = stored(store)
    assert kill_after <= at_kill < total, (seed, at_kill)
    reap_orphans(pids_before)
    # the resumed run is about what the store holds, not the process: it runs in this one
    with contextlib.chdir(tmp_path):
        again = CliRunner().invoke(app, ["tournament", str(conf), "--plain", "--store", str(store)])
    assert again.exit_code == 0, again.output
    assert f"resuming with {at_kill} already stored" in again.stdout
    reap_orphans(pids_before)

    def games(path: Path) -> dict[int, Any]:
        db = Store(path, readonly=True)
        try:
            (rows,) = db.db.execute("SELECT COUNT(*) FROM games").fetchone()
            assert rows == total  # nothing stored twice
            return {g["index"]: (g["seats"], g["seed"], g["result"]) for g in db.games(tournament="swiss", limit=999)}
        finally:
            db.close()
    assert games(store) == games(tmp_path / "ref.sqlite"), f"kill seed {seed}"
    page = tmp_path / "report.html"
    rep = CliRunner().invoke(app, ["report", "swiss", "--html", str(page), "--store", str(store)])
    assert rep.exit_code == 0, rep.output
    text = page.read_text()
    assert 'id="stages"' in text and text.count("<h3>round ") == 3



def test_the_report_draws_an_unfinished_swiss_round_with_seats_scores_authors_and_byes(tmp_path: Path) -> None:
    """Five bots of two authors at two seats, stopped 3 games into round 2 of 3: the report's rounds
    show round 1 played, round 2's tables in play (3 of 8 games), each bot's seat, author and the
    Elo it was paired on, the bye, and what the pairing minimised."""
    import re

    from arena.cli.replay import _stages_html

    make_bots(tmp_path / "bots", 5)
    for i in range(5):
        toml = tmp_path / "bots" / f"p{i}" / "bot.toml"
        toml.write_text(toml.read_text().replace('author = "Palace Arena"', f'author = "{"ann" if i % 2 else "bob"}"'))
    cfg, db = event(tmp_path, 5, format="swiss", seats=2, rounds=3, deals=2)

    class Stop(Exception):
        pass

    class StopAfter(Reporter):
        n = 11  # round 1 plays 8 games (two tables, two deals, both seatings)

        def game_done(self, game, record) -> None:
            self.n -= 1
            if self.n == 0:
                raise Stop()

    with pytest.raises(Stop):
        play(cfg, db, StopAfter())
    page = _stages_html(db, db.tournament("event"))
    rounds = page.split("<h3>")[1:]
    assert [r.split("<", 1)[0] for r in rounds] == ["round 1 of 3", "round 2 of 3"]
    assert "in play" not in rounds[0] and "in play: 3 of 8 games stored" in rounds[1]
    for r in rounds:
        assert re.search(r"byes: p\d@1\.0<", r) and "minimised: repeats: 0, the fewest possible; score spread: " in r
        seated = re.findall(r'class="seat"[^>]*>(\d)</small> (p\d@1\.0) <small class="author">(\w+)</small>', r)
        assert len(seated) == 4 and sorted(s for s, _, _ in seated) == ["1", "1", "2", "2"]
        assert all(who == ("ann" if int(b[1]) % 2 else "bob") for _, b, who in seated)
        assert r.count('class="elo"') == 4
    assert rounds[1].count('class="went-on"') == 0  # nothing decided in a round in play


def test_arena_serve_draws_the_bracket(tmp_path: Path) -> None:
    from tests.test_serve import ServerProc
    cfg, db = event(tmp_path, 4, format="knockout", deals=1, store="data/arena.sqlite")
    play(cfg, db)
    t = db.tournament("event")
    champion = winner(stored_config(t["config"]), event_view(t["config"], stored_results(db, "event")))
    db.close()
    server = ServerProc(tmp_path / "data" / "arena.sqlite")
    try:
        status, _, body = server.get("/brackets/event")
        page = body.decode()
        assert status == 200 and 'id="stages"' in page and "semi-finals" in page
        assert f'<h3>winner</h3><div class="table went-on">{champion}' in page
        assert page.count('<small class="author">Palace Arena</small>') == 4 + 2  # each bot at each of its tables
        status, _, body = server.get("/tournaments/event")
        assert status == 200 and 'href="/brackets/event"' in body.decode()
        status, _, _ = server.get("/brackets/nothing")
        assert status == 404
    finally:
        server.stop()


def test_the_drawn_stages_escape_every_name() -> None:
    from arena.replay.html import stages_html
    from arena.tournament.formats import Stage
    evil = '<img src=x onerror="alert(1)">@1'
    page = stages_html("knockout", [Stage(0, "final <b>", ((evil, "b@1"),), (evil,), points={evil: 1.0, "b@1": 0.0},
                                          advanced=(evil,))], evil, authors={evil: evil, "b@1": "<script>"})
    assert "<img" not in page and "<b>" not in page and "<script" not in page and "&lt;img src=x" in page
