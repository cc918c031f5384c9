"""A deal across lanes, written as the attack: games played at once (lanes, referee worker
processes, Dask workers) must never let a bot process that saw a deal (its ``end`` shows every
card; a seat order's start shows a hand) run while another seat order of that deal is played.
Two processes of one bot on turn at once share the machine, and whatever channel the sandbox
leaves between them (CPU contention at least: tests/test_stranger_attacks24.py) carries the
hand the first one saw to the second.

The first test shows it from what the run itself records: every message each pooled process was
sent, in one order across lanes (the scripted bots log it), tied to the record's process serial
per seat. Its bots hold some games' ends so that the lanes' order is the one that breaks on
866824f (the seat order after a deal's first went to the other lane, while the first lane's
processes played on), whatever the machine's speed: the holds wait for events the run must
produce, never for time.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import defaultdict
from pathlib import Path

import pytest
import trio

from arena.tournament.config import load_config
from arena.tournament.run import run_tournament
from arena.tournament.store import Store
from tests.fakes import ScriptedConnection

HOLD_S = 60.0  # a hold that its event never ends gives up (a scheduling this test does not foresee)


class Log:
    """What every bot process was sent, in one order across lanes; and the holds."""

    def __init__(self, started_before_first_ends: int = 3) -> None:
        self.before_first_ends = started_before_first_ends
        self.events: list[tuple[int, str, int, int]] = []  # (connection, message type, game index, seat)
        self.changed = threading.Condition()
        self.started: list[int] = []  # game indexes in the order their first seat got ``start``
        self.asked: set[int] = set()  # games in which some seat got a request
        self.connections = itertools.count()  # one number a bot process

    def launcher(self):
        def launch(spec):
            with self.changed:
                conn_id = next(self.connections)
            state: dict[str, int] = {}

            def respond(line: str) -> list[str] | None:
                msg = json.loads(line)
                kind = msg["type"]
                if kind == "hello":
                    return [json.dumps({"type": "hello", "protocol": 1, "name": spec.name, "version": "1"})]
                if kind == "shutdown":
                    return None
                if kind == "start":
                    state["game"], state["seat"] = int(msg["game"].rsplit("-", 1)[1]), msg["seat"]
                game = state.get("game", -1)
                with self.changed:
                    self.events.append((conn_id, kind, game, state.get("seat", -1)))
                    if kind == "start" and game not in self.started:
                        self.started.append(game)
                    if kind == "request":
                        self.asked.add(game)
                    self.changed.notify_all()
                if kind == "end":
                    self.hold(game)
                if kind == "request":
                    return [json.dumps({"type": "action", "request": msg["id"], "action": 0})]
                return []
            return ScriptedConnection(respond)
        return launch

    def hold(self, game: int) -> None:
        """The first game to start ends only once a third has started (on 866824f: the seat order
        after the other lane's deal, which that lane is then free to take); the third ends only
        once the fourth (the first lane's next game) has asked a seat to move."""
        with self.changed:
            if self.started[:1] == [game]:
                self.changed.wait_for(lambda: len(self.started) >= self.before_first_ends, timeout=HOLD_S)
            elif self.started[2:3] == [game]:
                self.changed.wait_for(lambda: len(self.started) >= 4 and self.started[3] in self.asked,
                                      timeout=HOLD_S)


def overlaps(log: Log, processes: dict[int, list[str]], seeds: dict[int, int]) -> list[str]:
    """From the run's own record: each time a process was sent anything (it ran: thawed to read it,
    or on turn) while a deal it had seen (a hand at its start, every card at its end) was being
    played by other processes, and each time two games of one deal were in play at once."""
    serial = {}  # connection -> the record's process serial
    for conn, kind, game, seat in log.events:
        if kind == "start":
            serial[conn] = processes[game][seat]
    span: dict[int, list[int]] = defaultdict(list)  # game -> positions of its events
    for i, (_, _, game, _) in enumerate(log.events):
        span[game].append(i)
    found = []
    for g, at in span.items():
        first, last = at[0], at[-1]
        for h, other in span.items():
            if h < g and seeds[h] == seeds[g] and other[0] < last and first < other[-1]:
                found.append(f"games {h} and {g} of one deal were played at once")
        saw: set[str] = set()  # processes that saw this deal in another game, up to event i
        for i in range(last + 1):
            conn, kind, game, _ = log.events[i]
            if game != g and seeds[game] == seeds[g]:
                saw.add(serial[conn])
            elif i >= first and seeds[game] != seeds[g] and serial[conn] in saw:
                found.append(f"process {serial[conn]} had seen the deal of game {g} and was sent {kind} "
                             f"in game {game} while game {g} was played")
    return found


def test_no_process_that_saw_a_deal_runs_while_another_lane_plays_it(tmp_path: Path) -> None:
    cfg = load_config(None, {"name": "lanes", "bots": ["lowest", "highest"], "deals": 2, "rules": "classic",
                             "concurrency": 2, "max_turns": 30, "store": str(tmp_path / "l.sqlite")})
    store = Store(cfg.store)
    log = Log()
    trio.run(lambda: run_tournament(cfg, store, launcher=log.launcher()))
    games = store.games(tournament="lanes", limit=100)
    assert len(games) == 4
    processes = {g["index"]: store.game_record(g["id"])["processes"] for g in games}
    seeds = {g["index"]: g["seed"] for g in games}
    assert len(set(seeds.values())) == 2  # two deals, each in both seat orders
    assert len(log.started) == 4 and len({s.split(".")[0] for p in processes.values() for s in p}) == 2  # two lanes
    found = overlaps(log, processes, seeds)
    assert not found, "\n".join(dict.fromkeys(found))


def test_a_matchs_two_seat_orders_are_never_played_at_once(tmp_path: Path) -> None:
    """`arena match -j 2` (and a ladder's): on 866824f a deal's two seat orders were played at once on
    two lanes, each seat's process holding a hand the other's opponent held. Its first game ends
    only once another has started, so they meet there whatever the machine's speed."""
    from arena.bots.manifest import load_bot
    from arena.engine import rules_from
    from arena.ladder.match import run_match
    store = Store(tmp_path / "m.sqlite")
    log = Log(started_before_first_ends=2)
    progress, tid = trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules_from("classic", {}),
                                               max_games=8, max_turns=30, concurrency=2, store=store,
                                               launcher=log.launcher()))
    games = store.games(tournament=tid, limit=100)
    assert progress.games == 8 == len(games)
    processes = {g["index"]: store.game_record(g["id"])["processes"] for g in games}
    seeds = {g["index"]: g["seed"] for g in games}
    assert len({s.split(".")[0] for p in processes.values() for s in p}) == 2  # two lanes
    found = overlaps(log, processes, seeds)
    assert not found, "\n".join(dict.fromkeys(found))


def pools_of_each_deal(store: Store, name: str) -> dict[int, set[str]]:
    """Deal seed -> the pools (a lane's, a referee worker's, a Dask worker's: the serial's first part)
    whose processes played its games, from the store alone."""
    pools: dict[int, set[str]] = defaultdict(set)
    for g in store.games(tournament=name, limit=10**6):
        pools[g["seed"]] |= {s.split(".")[0] for s in store.game_record(g["id"])["processes"]}
    return pools


def test_a_suites_deal_at_every_table_is_one_lanes_work(tmp_path: Path) -> None:
    """A deal suite deals the same cards at every table: every game of one deal is played by one
    lane, whichever table it is at."""
    from arena.engine import rules_from
    from arena.tournament.suites import make_suite, save_suite
    from tests.fakes import policy_launcher
    path = tmp_path / "s.json"
    save_suite(path, make_suite(rules_from("classic", {}), 2, 2))
    cfg = load_config(None, {"name": "suite", "bots": ["lowest", "highest", "heuristic"], "deals": 2,
                             "rules": "classic", "suite": str(path), "concurrency": 3, "max_turns": 200,
                             "store": str(tmp_path / "s.sqlite")})
    store = Store(cfg.store)
    trio.run(lambda: run_tournament(cfg, store, launcher=policy_launcher()))
    pools = pools_of_each_deal(store, "suite")
    assert len(store.games(tournament="suite", limit=100)) == 12 and len(pools) == 2
    assert all(len(p) == 1 for p in pools.values()), pools
    assert len(set.union(*pools.values())) == 2  # two lanes, a deal each


@pytest.mark.parametrize("where", [{"processes": 2}, {"processes": 2, "concurrency": 4}, {"cluster": "local:2"}],
                         ids=["worker-processes", "worker-lanes", "cluster-local"])
def test_every_game_of_a_deal_is_played_by_one_pool_on_every_path(tmp_path: Path, where: dict) -> None:
    """Referee worker processes (one game at a time, or lanes of their own) and Dask workers take a
    deal's every seat order as one task: the records name one pool per deal (on 866824f each game
    went to whichever worker, or lane, was free)."""
    if "cluster" in where:
        pytest.importorskip("distributed")
    cfg = load_config(None, {"name": "paths", "bots": ["lowest", "highest", "heuristic"], "deals": 4,
                             "rules": "classic", "concurrency": 2, "max_turns": 200, **where,
                             "store": str(tmp_path / "p.sqlite")})
    store = Store(cfg.store)
    trio.run(run_tournament, cfg, store)
    pools = pools_of_each_deal(store, "paths")
    assert len(store.games(tournament="paths", limit=100)) == 24 and len(pools) == 12
    assert all(len(p) == 1 for p in pools.values()), pools
    assert len(set.union(*pools.values())) >= 2  # both workers played


# ---------------------------------------------------------------- within one pool


def recording_launcher(conns: list):
    """Scripted bots that always take action 0, each kept in ``conns`` (what it was sent, whether closed)."""
    from tests.fakes import policy_bot

    def launch(spec):
        conns.append(ScriptedConnection(policy_bot(lambda msg: 0, spec.name)))
        return conns[-1]
    return launch


def one_deals_games(seed: int, tables: list[tuple[str, ...]]) -> list:
    from arena.tournament.executors import GameTask
    return [GameTask(f"d-{i:06d}", seed, seats, 60) for i, seats in enumerate(tables)]


def test_a_process_that_saw_the_deal_is_killed_where_it_waits_never_thawed_for_a_shutdown() -> None:
    """A deal a bot plays more often than the table has seats (a suite's deal at two tables): its
    third game needs a third process, and the first, which saw the deal, is stopped. A shutdown
    thaws a process for its grace, during the game that deal is being played in: it is killed
    frozen instead (866824f sent it ``shutdown``)."""
    from arena.engine import rules_from
    from arena.tournament.executors import BlockingExecutor, BotSetup
    conns: list = []
    setup = BotSetup.of(["lowest", "highest"], rules=rules_from("classic", {}))
    ex = BlockingExecutor(setup, recording_launcher(conns))
    a, b = sorted(setup.specs)
    played = ex.play_deal(one_deals_games(5, [(a, b), (b, a), (a, b)]))
    assert len(played) == 3 and all(p.record.result for p in played)
    killed = [c for c in conns if c.closed]
    assert len(conns) == 6 and len(killed) == 2  # per bot: the first of its three processes
    assert all(not c.of_type("shutdown") for c in killed), [c.of_type("shutdown") for c in killed]
    ex.close()


def test_a_deal_given_up_part_way_kills_every_process_that_saw_it() -> None:
    """A deal whose games raised part way (a bot the Dask worker cannot unpack, say) is tried again
    whole, maybe on another worker: no process of this pool that saw it may run meanwhile, so
    they are killed where they wait, and the next deal gets fresh ones."""
    from arena.bots.bundles import BundleError
    from arena.engine import rules_from
    from arena.tournament.executors import BlockingExecutor, BotSetup
    conns: list = []
    setup = BotSetup.of(["lowest", "highest"], rules=rules_from("classic", {}))
    ex = BlockingExecutor(setup, recording_launcher(conns))
    a, b = sorted(setup.specs)
    asked: list[str] = []

    def spec_of(label: str):
        asked.append(label)
        if len(asked) > 2:  # the deal's second game
            raise BundleError("its bundle is gone")
        return setup.specs[label]
    with pytest.raises(BundleError):
        ex.play_deal(one_deals_games(5, [(a, b), (b, a)]), spec_of)
    assert len(conns) == 2 and all(c.closed and not c.of_type("shutdown") for c in conns)
    assert not any(ex.pool.idle.values())
    ex.play_deal(one_deals_games(6, [(a, b)]))
    assert len(conns) == 4
    ex.close()


def test_a_dead_workers_bots_are_killed_before_its_deal_is_played_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A referee worker killed while it holds a deal leaves its bots behind (one on turn holds a
    hand of the deal and runs on; those that saw its end wait frozen). The deal goes to another
    worker only once they are killed (866824f handed it on first, and cleaned up after)."""
    import os
    import signal

    from arena.engine import rules_from
    from arena.tournament import worker as worker_mod
    from arena.tournament.executors import BotSetup, GameTask
    events: list[str] = []
    handed_on = threading.Event()
    real_cleanup, real_play = worker_mod.cleanup_stale, worker_mod._Worker.play

    def cleanup(*args, **kw):
        handed_on.wait(HOLD_S / 30)  # a deal handed on before the cleanup shows itself here
        events.append("cleaned")
        return real_cleanup(*args, **kw)

    class KillAfterSend:
        def __init__(self, stream, pid: int):
            self.stream, self.pid = stream, pid

        async def send_all(self, data: bytes) -> None:
            await self.stream.send_all(data)
            os.kill(self.pid, signal.SIGKILL)  # it holds the deal now

        async def aclose(self) -> None:
            await self.stream.aclose()

    async def play(self, rid, tasks, rules):
        events.append(f"sent to worker {self.number}")
        if len(events) == 1:
            self.proc.stdin = KillAfterSend(self.proc.stdin, self.proc.pid)
        else:
            handed_on.set()
        return await real_play(self, rid, tasks, rules)

    monkeypatch.setattr(worker_mod, "cleanup_stale", cleanup)
    monkeypatch.setattr(worker_mod._Worker, "play", play)
    setup = BotSetup.of(["lowest", "highest"], rules=rules_from("classic", {}))
    a, b = sorted(setup.specs)

    async def main():
        async with worker_mod.open_workers(setup, 2, 1) as ex:
            return await ex.play_deal([GameTask(f"w-{i:06d}", 9, seats, 60) for i, seats in enumerate([(a, b), (b, a)])])

    played = trio.run(main)
    assert all(p.record.result for p in played), played
    assert events[:3] == ["sent to worker 1", "cleaned", "sent to worker 2"], events
