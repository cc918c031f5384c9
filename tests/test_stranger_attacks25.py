"""#35, an outside round as a bot author at a strangers' table: what earlier games show.

1. Every placement dealt the cards the ladder had already shown. A ladder's seeding round-robin and
   every newcomer's placement gauntlet were dealt from the ladder's own seed, ``deal_seed(secret,
   ladder.seed, table, deal)``, so placement table ``t`` dealt exactly the cards of the seeding
   round-robin's table ``t`` and of every earlier placement's. Seen on 866824f with a ladder of three
   initial bots and two submissions (``arena submit``, bubblewrap): one deal seed in the seeding
   round-robin (random against lowest) and in both placements (each against random). A game's end,
   its stored record and its replay show every card, so an author who read the seeding round-robin's
   games (or his first version's placement) could ship a bot holding those deals: its first view
   names the deal, and then it knows the opponent's hand, the face-down cards and the stock through
   its whole placement, in every mode, gVisor included. Run end to end: a bot holding the seeding
   round-robin's 12 opening views named its opponent's hand and face-down cards in 12 of its 20
   placement games (all right; the 8 others were against submitted bots, at tables the seeding had
   not dealt), none on this branch. Now each of a ladder's own tournaments deals
   from a public base of its own (``seeds.ladder_tournament_seed``), kept in its stored config, so a
   run begun before resumes with the cards it began with.
2. A strangers' tournament dealt the cards of an earlier one. The same store and seed deal the same
   cards (so a run can be played again), and a tournament file's seed is 1 unless it says otherwise:
   a club's weekly event from one file, or any two events left at the default, dealt the second the
   first's cards, which its stored games and replays show whole. Now a table of strangers
   (``one_seat_per_author``) is never dealt a deal another tournament of its store was dealt: the run
   (every entry point: ``arena tournament``, a ladder's placements and batches, on a cluster too) is
   refused before a game, naming the earlier tournament and what to change. A ladder file that seats
   strangers and names a deal suite (whose deals every placement and batch deal again) is refused
   where it is loaded, and so is a strangers' tournament file with one (its deals at every table).
3. A ladder run's batch dealt an earlier batch's cards when their public bases met. A batch's base
   seed is 31 bits of a hash of its number (so anyone can recompute it): two of about 65,000 batches
   (a couple of months of a busy ladder) likely share one, and the second then deals exactly the
   first's cards at every table. Now a run skips a batch number whose base an earlier batch used (the
   next number's base is as public); on a strangers' ladder the check of 2 would otherwise stop the run.
4. Every table of a Swiss stage dealt the same cards, strangers' tables too (the format FORMATS.md
   names for strangers). Bots A (table 1) and C (table 2) of two authors who agree: A's game of deal
   d ends and shows every card; with ``-j 2`` A's process then plays its next games, thawed on its
   turns, while another lane plays d at table 2, where C's opponent holds what A's opponent held. A
   channel between two lanes (CPU contention, about 1-2 bits/s measured under ``ponder``) then carries
   the hand (read from the code, not measured here: the machine's load of 20 drowns any timing).
   Keeping one bot's processes apart from its own deals (another helper's work) does not cover two
   bots. Now each table of a strangers' stage deals its own cards; a run begun before resumes as it began.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import trio

import pytest

from arena.bots.manifest import BUNDLED_DIR
from arena.ladder import RunContext, load_ladder, open_store, submit
from arena.tournament.config import ConfigError

from .checks import fixed_secret
from .fakes import policy_launcher
from .test_formats import by_stage, event, make_bots, play, tables_of


async def _ok_check(spec):
    return {"ok": True, "faults": [], "bot": spec.label}


def _bot(tmp: Path, bundled: str, version: str, author: str) -> Path:
    """A copy of a bundled bot under a version and an author of its own (the fake launcher plays it
    by name)."""
    dest = tmp / f"{bundled}-{version}"
    shutil.copytree(BUNDLED_DIR / bundled, dest, ignore=shutil.ignore_patterns("__pycache__"))
    toml = dest / "bot.toml"
    text = toml.read_text().replace('version = "1.0"', f'version = "{version}"')
    toml.write_text(text.replace('author = "Palace Arena"', f'author = "{author}"'))
    return dest


# --------------------------------------------------------------------------- 1. placements' deals

def test_no_placement_deals_cards_the_ladder_has_already_shown(tmp_path: Path) -> None:
    fixed_secret(tmp_path)  # one store, one secret: what decides the cards is the seeds alone
    body = {"rules": "classic", "seats": 2, "deals": 2, "max_turns": 300, "concurrency": 1,
            "bots": ["random", "lowest", "highest"], "store": str(tmp_path / "store.sqlite")}
    (tmp_path / "open.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in body.items()))
    ladder = load_ladder(tmp_path / "open.toml")
    store = open_store(ladder)
    try:
        ctx = RunContext(launcher=policy_launcher(), checker=_ok_check, say=lambda text: None)
        first = trio.run(submit, ladder, str(_bot(tmp_path, "lowest", "2.0", "mallory")), store, ctx)
        second = trio.run(submit, ladder, str(_bot(tmp_path, "heuristic", "2.0", "mallory")), store, ctx)
        assert first.status == second.status == "placed"
        shown: dict[int, str] = {}  # deal seed -> the first of the ladder's tournaments that dealt it
        for tid in (ladder.seed_id, ladder.placement_id(first.label), ladder.placement_id(second.label)):
            games = store.games(tournament=tid, limit=1000)
            assert games, tid
            dealt = {int(g["seed"]) for g in games}
            again = {seed: shown[seed] for seed in dealt if seed in shown}
            assert not again, f"{tid} dealt {len(again)} deal(s) that earlier games showed whole: {again}"
            shown.update(dict.fromkeys(dealt, tid))
    finally:
        store.close()


# --------------------------------------------------------------------------- 2. a seed used again

@pytest.mark.parametrize("format", ["round-robin", "swiss"])
def test_a_strangers_table_is_never_dealt_cards_another_tournament_of_its_store_showed(tmp_path: Path,
                                                                                      format: str) -> None:
    make_bots(tmp_path / "bots", 4)
    for i, who in enumerate(("ann", "bob", "carol", "dave")):
        toml = tmp_path / "bots" / f"p{i}" / "bot.toml"
        toml.write_text(toml.read_text().replace('author = "Palace Arena"', f'author = "{who}"'))
    fixed_secret(tmp_path)  # the store's secret: every run on it deals the same cards for the same seed
    strangers = {"format": format, "seats": 2, "deals": 1, "one_seat_per_author": True,
                 "accept_kernel_channels": True, **({"rounds": 1} if format == "swiss" else {})}
    first, db = event(tmp_path, 4, name="week-1", **strangers)  # both files leave the seed at its default
    try:
        play(first, db)
        shown = {int(g["seed"]) for g in db.games(tournament="week-1", limit=1000)}
        assert shown
        second, _ = event(tmp_path, 4, name="week-2", **strangers)
        with pytest.raises(ConfigError) as refused:
            play(second, db)
        assert "week-1" in str(refused.value) and "give it a seed" in str(refused.value)
        assert db.tournament("week-2") is None and not db.games(tournament="week-2", limit=10)  # nothing begun
        third, _ = event(tmp_path, 4, name="week-3", seed=3, **strangers)
        play(third, db)  # a seed of its own: fresh cards
        dealt = {int(g["seed"]) for g in db.games(tournament="week-3", limit=1000)}
        assert dealt and not dealt & shown
    finally:
        db.close()


def test_a_ladder_of_strangers_on_a_deal_suite_is_refused_where_it_is_loaded(tmp_path: Path) -> None:
    from arena.engine import rules_from
    from arena.ladder import LadderError
    from arena.tournament.suites import make_suite, save_suite
    save_suite(tmp_path / "suite.json", make_suite(rules_from("classic", {}), 2, 3))
    body = {"rules": "classic", "seats": 2, "deals": 2, "bots": ["random", "lowest"], "suite": "suite.json",
            "one_seat_per_author": True, "accept_kernel_channels": True, "store": str(tmp_path / "s.sqlite")}
    (tmp_path / "suited.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in body.items()))
    with pytest.raises(LadderError, match="drop the suite"):
        load_ladder(tmp_path / "suited.toml")
    body["one_seat_per_author"] = False
    del body["accept_kernel_channels"]
    (tmp_path / "suited.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in body.items()))
    assert load_ladder(tmp_path / "suited.toml").suite  # one author's bots: the suite's deals as before


# --------------------------------------------------------------------------- 3. batch bases

@pytest.mark.parametrize("strangers", [False, True])
def test_a_ladder_batch_never_deals_from_a_base_an_earlier_batch_used(tmp_path: Path, monkeypatch,
                                                                       strangers: bool) -> None:
    """Batch 1's public base made equal to batch 0's (one meeting of two 31-bit hashes, as happens
    by chance over tens of thousands of batches): the run deals batch 1's cards from the next number."""
    import arena.ladder.run as ladder_run
    from arena.ladder import run_ladder
    from arena.tournament.seeds import ladder_batch_seed

    def met(name: str, seed: int, batch: int) -> int:
        return ladder_batch_seed(name, seed, 0 if batch == 1 else batch)

    monkeypatch.setattr("arena.tournament.seeds.ladder_batch_seed", met)
    fixed_secret(tmp_path)
    body = {"rules": "classic", "seats": 2, "deals": 1, "max_turns": 300, "concurrency": 1,
            "bots": ["random", "lowest", "highest"], "store": str(tmp_path / "store.sqlite"),
            **({"one_seat_per_author": True, "accept_kernel_channels": True} if strangers else {})}
    (tmp_path / "batches.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in body.items()))
    ladder = load_ladder(tmp_path / "batches.toml")
    store = open_store(ladder)
    try:
        ctx = RunContext(launcher=policy_launcher(), checker=_ok_check, say=lambda text: None)
        numbers: list[int] = []
        trio.run(lambda: run_ladder(ladder, store, ctx, games=30, on_batch=lambda s, t, n: numbers.append(n)))
        assert len(numbers) >= 3 and 1 not in numbers, numbers  # batch 1's base was batch 0's: skipped
        assert ladder_run.batch_seed(ladder, numbers[1]) != ladder_run.batch_seed(ladder, numbers[0])
        first: dict[int, str] = {}
        for n in numbers:
            for seed in {int(g["seed"]) for g in store.games(tournament=ladder.run_id(n), limit=1000)}:
                assert seed not in first, f"batch {n} dealt a deal batch {first[seed]} had shown"
                first[seed] = str(n)
    finally:
        store.close()


# --------------------------------------------------------------------------- 4. a Swiss stage's tables

def _strangers(tmp_path: Path, n: int) -> None:
    make_bots(tmp_path / "bots", n)
    for i in range(n):
        toml = tmp_path / "bots" / f"p{i}" / "bot.toml"
        toml.write_text(toml.read_text().replace('author = "Palace Arena"', f'author = "author {i}"'))


def test_no_two_tables_of_a_strangers_swiss_stage_are_dealt_the_same_cards(tmp_path: Path) -> None:
    _strangers(tmp_path, 4)
    cfg, db = event(tmp_path, 4, format="swiss", seats=2, rounds=2, deals=2, one_seat_per_author=True,
                    accept_kernel_channels=True)
    try:
        play(cfg, db)
        for stage, games in by_stage(cfg, db).items():
            tables = tables_of(games)
            assert len(tables) == 2, (stage, tables)
            dealt = [{int(g["seed"]) for g in table} for table in tables.values()]
            assert all(len(d) == 2 for d in dealt)  # each table: its 2 deals, each in both seat orders
            assert not dealt[0] & dealt[1], f"stage {stage}: both tables dealt {dealt[0] & dealt[1]}"
    finally:
        db.close()


def test_a_strangers_swiss_begun_with_one_set_of_deals_a_stage_resumes_with_it(tmp_path: Path, monkeypatch) -> None:
    """Begun before each table had deals of its own (an arena whose fingerprint had no
    ``table_deals``), stopped after one game: resumed, it finishes with the deals it began with,
    every table of a stage alike, and is not refused as another configuration."""
    from arena.tournament.config import TournamentConfig
    from arena.tournament.run import Reporter

    class Stop(Exception):
        pass

    class StopAfterOne(Reporter):
        def game_done(self, game, record) -> None:
            raise Stop()

    _strangers(tmp_path, 4)
    cfg, db = event(tmp_path, 4, format="swiss", seats=2, rounds=1, deals=1, one_seat_per_author=True,
                    accept_kernel_channels=True)
    try:
        now = TournamentConfig.fingerprint
        with monkeypatch.context() as before:  # the arena before: no table_deals in what it stored
            before.setattr(TournamentConfig, "fingerprint",
                           lambda self: {k: v for k, v in now(self).items() if k != "table_deals"})
            with pytest.raises(Stop):
                play(cfg, db, StopAfterOne())
        assert "table_deals" not in db.tournament("event")["config"] and len(db.done_indexes("event")) == 1
        play(cfg, db)  # the file as it is: no "different configuration" refusal
        assert db.tournament("event")["status"] == "done"
        assert len({int(g["seed"]) for g in db.games(tournament="event", limit=100)}) == 1  # one deal, as begun
    finally:
        db.close()


def test_a_strangers_tournament_on_a_deal_suite_is_refused(tmp_path: Path) -> None:
    """A suite deals its deals at every table of a run: a strangers' table must not share its cards."""
    from arena.engine import rules_from
    from arena.tournament.config import load_config
    from arena.tournament.suites import make_suite, save_suite
    save_suite(tmp_path / "suite.json", make_suite(rules_from("classic", {}), 2, 2))
    base = {"name": "suited", "bots": ["random", "lowest", "highest"], "seats": 2, "suite": str(tmp_path / "suite.json"),
            "store": str(tmp_path / "s.sqlite")}
    with pytest.raises(ConfigError, match="Drop the suite"):
        load_config(None, {**base, "one_seat_per_author": True, "accept_kernel_channels": True})
    assert load_config(None, base).suite  # one author's bots: the suite as before
