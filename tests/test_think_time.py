"""Think time as a channel between seats, and the two table rules against it (docs/SANDBOX.md):

- ``fixed_schedule``: every decision takes one ``move_ms`` slot (no bank), so when a seat's requests
  arrive says nothing of how long the others thought. Checked on the blocking referee over a fake
  clock: a sender that spells bits in its think time, a receiver that times its requests.
- ``one_seat_per_author``: no table seats two bots of one author (tournament schedule and ladder
  matchmaking alike).
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from arena.bots.manifest import BUNDLED_DIR
from arena.engine import PRESETS
from arena.ladder import load_ladder
from arena.ladder.matchmaking import Candidate, choose_table
from arena.referee import TimeControl
from arena.referee.testing import FakeClock, MockBot, Sleep, action_line, hello_line
from arena.tournament.config import ConfigError, load_config, load_bots
from arena.tournament.executors import BotSetup
from arena.tournament.run import bot_setup
from arena.tournament.schedule import schedule

from .fakes import play_mocks

CLOCK = TimeControl(move_ms=100, bank_ms=1000, handshake_ms=1000)
SLOT = CLOCK.move_ms / 1000


def _sender(think: list[float]):
    times = itertools.cycle(think)

    def respond(msg):
        if msg["type"] == "hello":
            return [hello_line("sender")]
        if msg["type"] == "request":
            return [Sleep(next(times)), action_line(msg, 0)]
        return []
    return respond


def _receiver(seen: list[float], clock: FakeClock):
    def respond(msg):
        if msg["type"] == "hello":
            return [hello_line("receiver")]
        if msg["type"] == "request":
            seen.append(clock.now())  # when the request reached this seat
            return [action_line(msg, 0)]
        return []
    return respond


def _play(think: list[float], fixed: bool) -> tuple[list[float], Any, MockBot]:
    """The times (from the first) at which the receiver was asked, with the sender thinking ``think``;
    the game's record; the receiver."""
    seen: list[float] = []
    timer = FakeClock()
    bots = {"sender": MockBot(_sender(think)), "receiver": MockBot(_receiver(seen, timer))}
    rec = play_mocks([bots["receiver"], bots["sender"]], PRESETS["classic"], 11, clock=CLOCK, timer=timer,
                     names=["receiver", "sender"], game_id="g", max_turns=120, fixed_schedule=fixed, shutdown=False)
    return [round(t - seen[0], 6) for t in seen], rec, bots["receiver"]


def _observed(think: list[float], fixed: bool) -> list[float]:
    times, rec, _ = _play(think, fixed)
    assert not rec.faults
    return times


BITS_A = [0.01, 0.06, 0.06, 0.01, 0.06, 0.01, 0.01, 0.01]  # a hand, spelled in think time (10 ms: 0, 60 ms: 1)
BITS_B = [0.06, 0.01, 0.01, 0.06, 0.01, 0.06, 0.06, 0.06]


def test_think_time_is_a_channel_without_the_fixed_schedule() -> None:
    """The attack works on an ordinary table: the receiver's request times differ with the message."""
    a, b = _observed(BITS_A, False), _observed(BITS_B, False)
    assert len(a) == len(b) > 10 and a != b


def test_the_fixed_schedule_leaves_the_receiver_nothing_to_read() -> None:
    a, b = _observed(BITS_A, True), _observed(BITS_B, True)
    assert len(a) > 10 and a == b == _observed([0.0], True)


def test_the_fixed_schedule_has_no_bank_so_running_over_is_a_forfeit() -> None:
    """With a bank, a bot 1 ms over its move time would move the schedule by a whole slot for 1 ms
    of bank. On the fixed schedule the clock has no bank (the requests say so): the late sender
    forfeits, and every request the receiver got stayed on the grid of whole slots."""
    times, rec, receiver = _play([0.01, 0.01, 0.101], True)
    assert [(f["seat"], f["reason"]) for f in rec.faults] == [(1, "timeout")]
    assert all(abs(t / SLOT - round(t / SLOT)) < 1e-6 for t in times)
    assert {m["clock"]["bank_ms"] for m in receiver.of_type("request")} == {0}
    assert rec.clock["bank_ms"] == 0  # the record says which clock the game had


def test_fixed_schedule_goes_from_the_files_to_every_game(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text('bots = ["random", "lowest"]\nfixed_schedule = true\n')
    cfg = load_config(f)
    setup = bot_setup(cfg, load_bots(cfg))
    assert setup.fixed_schedule and BotSetup.from_wire(setup.wire()).fixed_schedule  # to workers and Dask
    assert not bot_setup(load_config(None, {"bots": ["random", "lowest"]}), load_bots(cfg)).fixed_schedule
    lad = tmp_path / "lad.toml"
    lad.write_text('bots = ["random", "lowest"]\nfixed_schedule = true\none_seat_per_author = true\n'
                   'accept_kernel_channels = true\n')
    ladder = load_ladder(lad)
    t = ladder.tournament("x", format="round-robin", bots=ladder.bots)
    assert t.fixed_schedule and t.one_seat_per_author


def test_a_tournament_plays_its_games_on_the_fixed_schedule(tmp_path: Path) -> None:
    """Through the runner and the executor: every stored game had the schedule's clock (no bank),
    and a game took at least one slot per decision."""
    from arena.tournament.run import run_tournament
    from arena.tournament.store import Store
    from tests.fakes import policy_launcher

    cfg = load_config(None, {"name": "fx", "bots": ["lowest", "highest"], "deals": 1, "move_ms": 5,
                             "fixed_schedule": True, "max_turns": 60, "store": str(tmp_path / "s.sqlite")})
    played = trio.run(lambda: run_tournament(cfg, Store(cfg.store), launcher=policy_launcher(), keep_logs=True))
    assert len(played) == 2
    for rec in played:
        asked = sum(1 for st in rec.steps if "request" in st)
        assert rec.clock["bank_ms"] == 0 and asked > 5 and rec.wall_ms >= asked * 5


# ---------------------------------------------------------------- one seat per author

def _bot(tmp_path: Path, name: str, author: str) -> str:
    d = tmp_path / name
    shutil.copytree(BUNDLED_DIR / "random", d, ignore=shutil.ignore_patterns("__pycache__"))
    text = (d / "bot.toml").read_text().replace('name = "random"', f'name = "{name}"')
    text = text.replace('author = "Palace Arena"', f"author = {author!r}")
    (d / "bot.toml").write_text(text)
    return str(d)


def test_a_tournament_seats_no_author_twice(tmp_path: Path) -> None:
    bots = [_bot(tmp_path, "a1", "Alice"), _bot(tmp_path, "a2", " alice "), _bot(tmp_path, "b1", "Bob"),
            _bot(tmp_path, "n1", ""), _bot(tmp_path, "n2", "")]
    cfg = load_config(None, {"bots": bots, "one_seat_per_author": True, "accept_kernel_channels": True, "seats": 2})
    specs = load_bots(cfg)
    labels = {ref: s.label for ref, s in specs.items()}
    authors = {s.label: s.author for s in specs.values()}
    games = schedule(cfg, labels, b"k" * 32, authors)
    tables = {frozenset(g.seats) for g in games}
    assert len(tables) == 9  # the 10 pairs of 5 bots but a1-a2; two bots without an author may meet
    assert frozenset({"a1@1.0", "a2@1.0"}) not in tables and frozenset({"n1@1.0", "n2@1.0"}) in tables
    assert cfg.fingerprint()["one_seat_per_author"] is True
    assert len(schedule(load_config(None, {"bots": bots}), labels, b"k" * 32, authors)) == 10 * 2 * 4


def test_a_three_seat_tournament_seats_no_author_twice(tmp_path: Path) -> None:
    """At 3 seats and more, a table with two seats of one author is refused too, not only a table
    where every seat has one author."""
    bots = [_bot(tmp_path, "a1", "Alice"), _bot(tmp_path, "a2", "alice"), _bot(tmp_path, "b1", "Bob"),
            _bot(tmp_path, "c1", "Carol")]
    cfg = load_config(None, {"bots": bots, "one_seat_per_author": True, "accept_kernel_channels": True, "seats": 3})
    specs = load_bots(cfg)
    games = schedule(cfg, {r: s.label for r, s in specs.items()}, b"k" * 32, {s.label: s.author for s in specs.values()})
    assert {frozenset(g.seats) for g in games} == {frozenset({"a1@1.0", "b1@1.0", "c1@1.0"}),
                                                  frozenset({"a2@1.0", "b1@1.0", "c1@1.0"})}


def test_one_author_alone_has_no_table(tmp_path: Path) -> None:
    bots = [_bot(tmp_path, "a1", "Alice"), _bot(tmp_path, "a2", "Alice")]
    cfg = load_config(None, {"bots": bots, "one_seat_per_author": True, "accept_kernel_channels": True})
    specs = load_bots(cfg)
    with pytest.raises(ConfigError, match="one_seat_per_author leaves no 2-seat table"):
        schedule(cfg, {r: s.label for r, s in specs.items()}, b"k" * 32, {s.label: s.author for s in specs.values()})


@pytest.mark.parametrize("explore", [False, True])
def test_ladder_matchmaking_seats_no_author_twice(explore: bool) -> None:
    bots = [Candidate("a1", 0, author="alice"), Candidate("a2", 0, author="Alice"), Candidate("a3", 0, author="alice"),
            Candidate("b1", 30, author="bob"), Candidate("c1", 30, author="carol"), Candidate("x", 30)]
    for seats, field_size in ((2, 3), (3, 2), (4, 3)):
        table = choose_table(bots, {}, seats=seats, field_size=field_size, new_games=20, explore=explore,
                             one_per_author=True)
        assert table is not None
        seated = [table.focus, *table.field]
        who = [next(b.author.lower() or b.label for b in bots if b.label == s) for s in seated]
        assert len(set(who)) == len(who) and len(seated) >= seats, table
    alone = [Candidate("a1", author="alice"), Candidate("a2", author="alice")]
    assert choose_table(alone, {}, seats=2, field_size=3, new_games=20, explore=explore, one_per_author=True) is None
    assert choose_table(alone, {}, seats=2, field_size=3, new_games=20, explore=explore) is not None


def test_the_bots_the_arena_ships_count_as_their_own_authors(tmp_path: Path) -> None:
    """The bundled bots share an author ("Palace Arena") but may sit together; claiming that author
    only keeps a bot away from its own kind."""
    from arena.tournament.run import seat_authors
    cfg = load_config(None, {"bots": ["random", "lowest", "highest"], "one_seat_per_author": True, "accept_kernel_channels": True})
    specs = load_bots(cfg)
    assert len({s.author for s in specs.values()}) == 1
    authors = seat_authors(specs)
    assert set(authors.values()) == {""}
    assert len(schedule(cfg, {r: s.label for r, s in specs.items()}, b"k" * 32, authors)) == 3 * 2 * 4
    mine = load_bots(load_config(None, {"bots": [_bot(tmp_path, "imp", "Palace Arena"), "random"]}))
    assert seat_authors(mine) == {"imp@1.0": "Palace Arena", "random@1.0": ""}


def test_a_ladder_never_seats_one_submitters_two_bots_together(tmp_path: Path) -> None:
    """Placement and matchmaking alike: two bots of one author never share a table; the ladder file's
    own bots (all by one author) still play each other."""
    from arena.ladder import open_store, run_ladder, submit
    from tests.test_ladder import ctx, write_ladder

    path = write_ladder(tmp_path, "authors", bots=["random", "lowest", "highest"], store=str(tmp_path / "s.sqlite"),
                        one_seat_per_author=True, accept_kernel_channels=True)
    ladder = load_ladder(path)
    store = open_store(ladder)
    try:
        for name in ("m1", "m2"):
            d = Path(_bot(tmp_path, name, "Mallory"))
            text = (d / "bot.toml").read_text().replace(f'name = "{name}"', 'name = "random"')
            (d / "bot.toml").write_text(text.replace('version = "1.0"', f'version = "{name}"'))
            trio.run(submit, ladder, str(d), store, ctx())
        # Two batches of matchmaking: with the rule dropped from them (choose_table's and the batch's
        # schedule), the first already seated Mallory's two bots together 4 times.
        trio.run(lambda: run_ladder(ladder, store, ctx(), games=24))
        mallory = {"random@m1", "random@m2"}
        seatings = [set(g["seats"]) for t in store.tournaments() for g in store.games(tournament=t["id"], limit=5000)]
        assert len(seatings) > 24 and not any(mallory <= s for s in seatings)
        assert any({"random@1.0", "lowest@1.0"} <= s for s in seatings)  # the file's own bots met
        assert sum(bool(mallory & s) for s in seatings) > 20  # and Mallory's bots did play
    finally:
        store.close()
