"""``arena ladder run``: keep playing the table where a game teaches the most, until stopped.

The run is a sequence of *batches*; batch ``n`` is the ordinary gauntlet tournament
``ladder:<name>:run:<n>`` (the focus bot against its field, every deal in every seat rotation),
so it is stored, listed and resumed like any tournament.  Between batches the run re-reads the
store: games stored by others (``arena submit`` placements), new members, retirements.  A batch
that was planned when the run was killed is finished first on the next start, so a kill -9 loses
only the games that were being played, and the matchmaking resumes where it stopped.

The ladder's own work (reading new games, refitting, matchmaking, snapshots, suspensions) is
timed apart from playing and reported as a share of the run's wall time.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time

import trio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..store.games import tournament_statuses
from ..store.people import has_accounts, owner_names
from ..tournament.runlock import held
from ..tournament.store import Store, StoreError
from .config import Ladder, LadderError, SeatRule
from .history import LadderState, take_snapshot
from .balance import choose_balanced
from .matchmaking import Candidate, Table, choose_table
from .placement import RunContext, ensure_seeded, play_games
from .seasons import Season, check_frozen, current, due, end_season
from .tables import Actor, MemberStatus, bot_statuses, verified_spec, members, paused, rebase_refs, reinstated_after, set_status

BATCH_GAMES_PER_SLOT = 4  # a batch plays at least this many games per concurrent slot: starting a batch's
# bot processes and waiting for its slowest game cost less per game (measured: docs/RATINGS.md)
LADDER_RUN = Actor(None, "ladder run")  # who the audit says suspended a bot that faulted game after game
PAUSE_POLL_S = 2.0
STDERR_LINES = 20  # of a suspended bot's last faulted game, kept with its status


@dataclass
class RunSummary:
    games: int = 0  # played by this run
    batches: int = 0
    wall_s: float = 0.0
    overhead_s: float = 0.0  # the ladder's own work, outside playing
    snapshots: int = 0
    suspended: list[str] = field(default_factory=list)
    stopped: str = ""  # why the run ended: games, hours, no_table, stopped (SIGTERM), interrupted
    paused: bool = False  # waiting now because an admin paused the ladder

    @property
    def overhead_share(self) -> float:
        return self.overhead_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def games_per_hour(self) -> float:
        return 3600.0 * self.games / self.wall_s if self.wall_s > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"games": self.games, "batches": self.batches, "wall_s": round(self.wall_s, 3),
                "overhead_s": round(self.overhead_s, 4), "overhead_share": round(self.overhead_share, 5),
                "games_per_hour": round(self.games_per_hour, 1), "snapshots": self.snapshots,
                "suspended": self.suspended, "stopped": self.stopped}


def batch_seed(ladder: Ladder, batch: int) -> int:
    """The public base seed of batch ``batch``: every batch deals new cards."""
    from ..tournament.seeds import ladder_batch_seed
    return ladder_batch_seed(ladder.name, ladder.seed, batch)


def _batches(store: Store, ladder: Ladder) -> list[tuple[int, str]]:
    """(batch number, status) of every run batch stored so far, in order."""
    n = len(ladder.run_prefix)
    return [(int(tid[n:]), status) for tid, status in tournament_statuses(store.db, ladder.run_prefix)]


def _candidates(store: Store, ladder: Ladder, state: LadderState, say: Callable[[str], None],
                verified: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Active members whose files are still what they joined with: label -> (ref, Candidate).
    Files are hashed once per member and run (``verified``: (label, ref) -> the manifest's author);
    the tournament checks them again."""
    out = bot_statuses(store, ladder.name)
    ratings = state.ratings()
    owners = owner_names(store.db)
    active: dict[str, Any] = {}
    for m in members(store, ladder.name):
        if m.label in out:
            continue
        if (m.label, m.ref) not in verified and (spec := verified_spec(m)) is not None:
            verified[m.label, m.ref] = spec.author
        if (m.label, m.ref) not in verified:
            set_status(store, ladder.name, m.label, MemberStatus.SUSPENDED, f"its files at {m.ref} are missing or changed "
                       "since it joined", by=LADDER_RUN)
            say(f"suspended {m.label}: its files at {m.ref} are missing or changed since it joined the ladder")
            continue
        r = ratings.get(m.label) if ratings is not None else None
        author = "" if m.origin == "initial" else verified[m.label, m.ref]  # the file's own bots: their own
        author = owners.get(m.name, author)  # an owned bot's author is its account, whatever its manifest says
        active[m.label] = (m.ref, Candidate(m.label, state.bot_games[m.label], r.elo if r else None,
                                            r.ci_low if r else None, r.ci_high if r else None, author))
    return active


def _suspend_faulty(store: Store, ladder: Ladder, state: LadderState, say: Callable[[str], None]) -> list[str]:
    """Suspend active members whose last ``suspend_after`` games all ended in a forfeit of their own."""
    limit = ladder.matchmaking.suspend_after
    out = bot_statuses(store, ladder.name)
    done = []
    for m in members(store, ladder.name):
        run = state.faults.get(m.label)
        if m.label in out or run is None or run.count < limit:
            continue
        run = run.since(reinstated_after(store, ladder.name, m.label))
        if run.count < limit:  # the faults it was suspended for, before it was reinstated
            continue
        record = store.game_record(run.last_game) or {}
        stderr = _stderr_of(record, run.last_seat)
        fault: dict[str, Any] = next((f for f in reversed(record.get("faults", [])) if f.get("seat") == run.last_seat),
                                     {})
        message = fault.get("message", "")
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(run.reasons.items()))
        # both numbers: faults are counted between batches, so the batch that reached the limit
        # finished first and the count can be above suspend_after
        why = (f"{run.count} faulted games in a row ({reasons}); suspend_after = {limit}, "
               "counted when the batch that reached it finished")
        set_status(store, ladder.name, m.label, MemberStatus.SUSPENDED, why,
                   {"faults": dict(run.reasons), "last_game": run.last_game, "last_reason": run.last_reason,
                    "last_message": message, "stderr": stderr, "last_seat": run.last_seat,
                    "last_turn": fault.get("turn")}, by=LADDER_RUN)
        tail = "\n".join(f"    {line}" for line in stderr) or "    (no stderr)"
        say(f"suspended {m.label}: {why}; last game {run.last_game}: "
            f"{run.last_reason} {message}\n  its last stderr lines:\n{tail}")
        done.append(m.label)
    return done


def _stderr_of(record: dict[str, Any], seat: int) -> list[str]:
    """The last stderr lines a seat wrote in a stored game (start faults keep theirs in
    ``stderr``; a fault during play keeps them on its step)."""
    lines = [line for step in record.get("steps", []) if step.get("seat") == seat
             for line in step.get("stderr", [])]
    if not lines:
        lines = list((record.get("stderr") or [[]] * (seat + 1))[seat])
    return lines[-STDERR_LINES:]


def plan_batch(ladder: Ladder, table: Table, refs: dict[str, str], batch: int, concurrency: int,
               suite_from: int = 0, deal_secret: str = ""):
    """The tournament config of one batch: the focus against its field, with enough deals for
    ``BATCH_GAMES_PER_SLOT`` games per concurrent slot (with a suite: its deals from ``suite_from``)."""
    mm = ladder.matchmaking
    tables = math.comb(len(table.field), ladder.seats - 1)
    deals = max(mm.deals, math.ceil(BATCH_GAMES_PER_SLOT * concurrency / max(1, tables * ladder.seats)))
    cfg = ladder.tournament(ladder.run_id(batch), format="gauntlet", bots=[refs[b] for b in table.field],
                            candidates=[refs[table.focus]], deals=deals, seed=batch_seed(ladder, batch),
                            **({"suite_from": suite_from} if ladder.suite else {}),
                            **({"deal_secret": deal_secret} if deal_secret else {}))
    cfg.processes = 1  # a batch is a few games: starting worker processes for each would cost more than they save
    return cfg


def _next_suite_deal(store: Store, ladder: Ladder, batches: list[tuple[int, str]]) -> int:
    """Where the next batch starts in the ladder's suite: after the last batch that played it
    (batches go round the suite, so every deal of it is played as often as the others)."""
    suite = ladder.deal_suite()
    if suite is None:
        return 0
    for b, _ in reversed(batches):
        fp = (store.tournament(ladder.run_id(b)) or {}).get("config", {})
        if fp.get("suite") == suite.digest():
            return (fp.get("suite_from", 0) + fp["deals"]) % len(suite.deals)
    return 0


async def run_ladder(ladder: Ladder, store: Store, ctx: RunContext | None = None, *, games: int | None = None,
                     hours: float | None = None, cluster: str = "",
                     on_batch: Callable[[RunSummary, Table, int], None] | None = None,
                     summary: RunSummary | None = None, stop: Callable[[], bool] | None = None) -> RunSummary:
    """Play batches until ``games`` are played, ``hours`` have passed, ``stop()`` says so (checked
    between batches, so the batch being played is finished: a server's graceful shutdown), or the
    caller cancels.

    ``summary`` (if given) is filled in as the run goes, so a caller interrupted by Ctrl-C still
    has the numbers."""
    ctx = ctx or RunContext()
    out = summary or RunSummary()
    t0 = time.perf_counter()
    deadline = None if hours is None else t0 + 3600.0 * hours
    mm = ladder.matchmaking
    overhead = 0.0
    current: tuple[str, int] | None = None  # the batch being played and its games stored before
    try:
        out.games += await ensure_seeded(ladder, store, ctx)
        tick = time.perf_counter()
        state = LadderState(ladder)
        state.refresh(store)
        last_snapshot = state.games
        known = {m.label for m in members(store, ladder.name)}
        verified: dict[tuple[str, str], str] = {}
        previous: str | None = None
        batches = _batches(store, ladder)
        unfinished = [b for b, status in batches if status != "done"]
        number = batches[-1][0] + 1 if batches else 0
        used = {batch_seed(ladder, b) for b, _ in batches}  # bases dealt from: a batch never repeats one
        suite_next = _next_suite_deal(store, ladder, batches)
        suite_size = len(ladder.deal_suite().deals) if ladder.suite else 1
        overhead += time.perf_counter() - tick
        for b in unfinished:  # planned before a kill: finish them as they were planned
            tid = ladder.run_id(b)
            fp = dict(store.tournament(tid)["config"])  # type: ignore[index]
            bots = rebase_refs(store, tid, fp.pop("bots"))
            candidates = rebase_refs(store, tid, fp.pop("candidates"))
            fp.pop("format", None)
            cfg = ladder.tournament(tid, format="gauntlet", bots=bots, candidates=candidates, **fp)
            cfg.cluster = cluster
            ctx.say(f"finishing batch {b} (planned before the last run stopped)")
            current = (tid, len(store.done_indexes(tid)))
            out.games += await play_games(cfg, store, None, ctx.launcher, ladder)
            out.batches += 1
            current = None
        while True:
            tick = time.perf_counter()
            state.refresh(store)
            now_members = {m.label for m in members(store, ladder.name)}
            joined = sorted(now_members - known)
            known = now_members
            out.suspended += _suspend_faulty(store, ladder, state, ctx.say)
            if joined or state.games - last_snapshot >= mm.snapshot_every:
                if take_snapshot(store, ladder, state=state):  # every snapshot_every games, and when bots join
                    out.snapshots += 1
                last_snapshot = state.games
            why = _stop_reason(out, games, deadline, stop)
            if why:
                out.stopped = why
                overhead += time.perf_counter() - tick
                break
            if (why := paused(store, ladder.name)) is not None:  # an admin paused it: wait, play nothing
                if not out.paused:
                    ctx.say(f"ladder {ladder.name} is paused ({why}): waiting until it is resumed")
                out.paused = True
                overhead += time.perf_counter() - tick
                await _wait_paused()
                continue
            if out.paused:
                ctx.say(f"ladder {ladder.name} resumed")
                out.paused = False
            _check_still_ones_own(store, ladder)
            active = _candidates(store, ladder, state, ctx.say, verified)
            season = _season(store, ladder, ctx.say)
            if season is not None:  # only the versions the season froze play in it
                active = {label: c for label, c in active.items() if label in season.members}
            if mm.policy == "balanced":
                table = choose_balanced([c for _, c in active.values()], state.pair_games, state.last_seen,
                                        seats=ladder.seats, field_size=mm.field_size(ladder.seats),
                                        one_per_author=ladder.one_seat_per_author)
            else:
                table = choose_table([c for _, c in active.values()], state.pair_games, seats=ladder.seats,
                                     field_size=mm.field_size(ladder.seats), new_games=mm.new_threshold(ladder.seats),
                                     explore=number % mm.explore_every == mm.explore_every - 1, previous=previous,
                                     one_per_author=ladder.one_seat_per_author)
            if table is None:
                out.stopped = "no_table"
                authors = " of distinct authors (one_seat_per_author)" if ladder.one_seat_per_author else ""
                ctx.say(f"ladder {ladder.name} has {len(active)} active bot(s); a {ladder.seats}-seat table needs "
                        f"{ladder.seats}{authors}: stopping")
                overhead += time.perf_counter() - tick
                break
            # A base is 31 bits: two of ~65,000 batches likely share one, and the second would deal the
            # first's cards, which its games show whole. The next number's base is as public (a season's
            # verifier recomputes each game's from its batch number).
            while batch_seed(ladder, number) in used:
                number += 1
            used.add(batch_seed(ladder, number))
            cfg = plan_batch(ladder, table, {label: ref for label, (ref, _) in active.items()}, number,
                             ladder.concurrency or os.cpu_count() or 1, suite_next,
                             season.secret_name if season is not None else "")
            suite_next = (suite_next + cfg.deals) % suite_size
            cfg.cluster = cluster
            overhead += time.perf_counter() - tick
            current = (cfg.name, len(store.done_indexes(cfg.name)))
            played = await play_games(cfg, store, None, ctx.launcher, ladder)
            current = None
            out.games += played
            out.batches += 1
            previous = table.focus
            out.wall_s = time.perf_counter() - t0
            out.overhead_s = overhead
            if on_batch is not None:
                on_batch(out, table, number)
            number += 1
        tick = time.perf_counter()
        state.refresh(store)
        if state.games > last_snapshot and take_snapshot(store, ladder, state=state):
            out.snapshots += 1
        overhead += time.perf_counter() - tick
    finally:
        if current is not None:  # stopped mid-batch: its games stored so far are this run's too
            stored = len(store.done_indexes(current[0])) - current[1]
            out.games += stored
            out.batches += stored > 0  # a batch this run played games of, though it did not finish
            _mark_interrupted(store, current[0])
        out.wall_s = time.perf_counter() - t0
        out.overhead_s = overhead
    return out


def _check_still_ones_own(store: Store, ladder: Ladder) -> None:
    """A run loaded where the store had no account plays its file's silence as "off"; once the
    store has one (the first sign-up of a club), strangers' bots may join, so it stops before its
    next batch rather than seat them under a rule the store no longer gives (load_ladder again)."""
    if ladder.seat_rule is SeatRule.DESK and has_accounts(store.db):
        raise LadderError(f"ladder {ladder.name}: this store became a club's (it has an account now), so "
                          "one_seat_per_author, which the ladder file leaves out, is on by default: the run stopped "
                          "before its next batch (the games played are kept); run it again to play under that rule")


def _mark_interrupted(store: Store, tid: str) -> None:
    """Say in the store that the batch this run leaves unfinished has no runner (Ctrl-C, SIGTERM,
    an error): readers stop showing it as playing, and the next run finishes it. Left alone if
    another process holds it (this run was refused it) or it ended; a run killed outright writes
    nothing, and readers learn it from the lock (:func:`arena.tournament.runlock.held`)."""
    try:
        row = store.tournament(tid)
        if row is not None and row["status"] == "running" and not held(store.path, [tid]):
            store.finish_tournament(tid, "interrupted")
    except (StoreError, sqlite3.Error):
        pass  # an unwritable store: the lock's release says the same to readers


async def _wait_paused() -> None:
    await trio.sleep(PAUSE_POLL_S)


def _season(store: Store, ladder: Ladder, say: Callable[[str], None]) -> Season | None:
    """The open season the next batch belongs to: one that is due is ended first (and its secret
    revealed); one whose frozen settings the ladder file changed stops the run."""
    season = current(store, ladder.name)
    if season is None:
        return None
    check_frozen(ladder, season)
    why = due(store, ladder, season)
    if not why:
        return season
    ended = end_season(store, ladder)
    say(f"season {ended.number} of {ladder.name} ended: {why}; its deal secret is revealed "
        f"(arena ladder {ladder.name} season show {ended.number})")
    return None


def _stop_reason(out: RunSummary, games: int | None, deadline: float | None,
                 stop: Callable[[], bool] | None = None) -> str:
    if games is not None and out.games >= games:
        return "games"
    if deadline is not None and time.perf_counter() >= deadline:
        return "hours"
    if stop is not None and stop():
        return "stopped"
    return ""


def take_out(store: Store, ladder: str, label: str, status: MemberStatus, reason: str, by: Actor = Actor()) -> str:
    """Retire or suspend a member by hand (its games and rating stay; its owner is told; audited);
    returns a message."""
    names = {m.label for m in members(store, ladder)}
    if label not in names:
        same = sorted(n for n in names if n.split("@", 1)[0] == label)
        hint = f" (did you mean {', '.join(same)}?)" if same else f" (members: {', '.join(sorted(names)) or 'none'})"
        raise LadderError(f"{label} is not a member of ladder {ladder}{hint}")
    current = bot_statuses(store, ladder).get(label)
    if current is not None and current.status is status:
        return f"{label} was already {status.value} {'from' if status is MemberStatus.RETIRED else 'on'} {ladder}"
    set_status(store, ladder, label, status, reason, by=by)
    if status is MemberStatus.RETIRED:
        return f"retired {label} from {ladder}: it plays no more games there (its games and rating stay)"
    return f"suspended {label} on {ladder}: it plays no games until reinstated"


def retire(store: Store, ladder: Ladder, label: str, by: Actor = Actor()) -> str:
    """Take a member out of matchmaking for good (its games and rating stay); returns a message."""
    return take_out(store, ladder.name, label, MemberStatus.RETIRED, "retired by the operator", by)


__all__ = ["RunSummary", "batch_seed", "plan_batch", "retire", "run_ladder", "take_out"]
