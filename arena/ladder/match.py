"""``arena match``: two bots head to head on duplicate deals until an SPRT decides.

Each deal is played twice with the seats swapped; the pair is the unit of the statistics
(pentanomial counts, :mod:`arena.ratings.pairs`): the Elo interval, the win rate's interval and
the SPRT all treat a deal as one observation.  A bot can be named by its ladder label
(``name@version``) through :func:`resolve_bot`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from ..bots.containment import Containment, cleanup_stale
from ..bots.manifest import BotSpec, ManifestError, load_bot
from ..engine import Rules
from ..ratings import PAIR_NAMES, PairSprt, Sprt, Verdict, elo_difference, los, pair_elo, pair_index, rate_interval
from ..referee import TimeControl
from ..store.ladders import refs_of
from ..tournament.executors import BotSetup, ExecutorError, GameTask, open_in_process, store_played
from ..tournament.worker import open_workers
from ..tournament.seeds import deal_seed, load_secret, run_secret
from ..tournament.store import Store
from ..tournament.suites import Suite
from .config import LadderError

@dataclass
class MatchProgress:
    a: str
    b: str
    wins: int = 0  # from a's side
    draws: int = 0
    losses: int = 0
    sprt: Sprt | PairSprt | None = None
    status: Verdict = Verdict.CONTINUE
    pairs: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])  # LL, LD, DD/WL, WD, WW from a's side
    deal_wins: list[int] = field(default_factory=list)  # a's outright wins in each deal (of its 2 games)
    deal_pairs: list[int] = field(default_factory=list)  # each deal's pair outcome, an index into PAIR_NAMES

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def elo(self) -> tuple[float, float, float]:
        """(Elo of a - b, low, high): the 95% interval from the pairs (pentanomial counts, Wilson on
        the score).  The ends are finite; the estimate is ±inf only while a side has scored nothing,
        and then the other end is the one-sided bound a view shows instead (:func:`elo_text`)."""
        e = pair_elo(self.pairs)
        return e["elo"], e["elo_low"], e["elo_high"]

    def trinomial_elo(self) -> tuple[float, float]:
        """The per-game (W/D/L) estimate, which takes the two games of a deal as independent."""
        return elo_difference(self.wins, self.draws, self.losses)

    def win_rate(self) -> tuple[float, float, float]:
        """a's outright win rate per game with its 95% interval over deals (Wilson, as every rate)."""
        return rate_interval(self.deal_wins, [2] * len(self.deal_wins))

    def los(self) -> float:
        return los(self.wins, self.losses)

    def as_json(self) -> dict[str, Any]:
        elo, _, _ = self.elo()
        tri, tri_margin = self.trinomial_elo()
        fin = lambda x, k=1: round(x, k) if math.isfinite(x) else None  # noqa: E731
        pe = pair_elo(self.pairs)
        rate, rate_lo, rate_hi = self.win_rate()
        out: dict[str, Any] = {"a": self.a, "b": self.b, "games": self.games, "wins": self.wins,
                               "draws": self.draws, "losses": self.losses,
                               "pairs": dict(zip(PAIR_NAMES, self.pairs)), "deals": sum(self.pairs),
                               "elo": fin(elo), "elo_low": fin(pe["elo_low"]), "elo_high": fin(pe["elo_high"]),
                               "elo_text": elo_text(pe),
                               "normalized_elo": fin(pe["nelo"]), "normalized_elo_low": fin(pe["nelo_low"]),
                               "normalized_elo_high": fin(pe["nelo_high"]),
                               "score": round(pe["score"], 4), "score_low": round(pe["score_low"], 4),
                               "score_high": round(pe["score_high"], 4),
                               "win_rate": round(rate, 4), "win_rate_low": round(rate_lo, 4),
                               "win_rate_high": round(rate_hi, 4),
                               "trinomial_elo": fin(tri), "trinomial_elo_margin": fin(tri_margin),
                               "los": round(self.los(), 4), "status": self.status}
        if self.sprt is not None:
            s = self.sprt
            out["sprt"] = {"model": "pentanomial" if isinstance(s, PairSprt) else "trinomial",
                           "elo0": s.elo0, "elo1": s.elo1, "alpha": s.alpha, "beta": s.beta,
                           "llr": round(s.llr, 4), "lower": round(s.lower, 4), "upper": round(s.upper, 4)}
        return out

    def add_pair(self, first: float, second: float) -> None:
        """Count one deal's two games (a's scores, seat order a-b then b-a)."""
        for s in (first, second):
            if s == 1.0:
                self.wins += 1
            elif s == 0.5:
                self.draws += 1
            else:
                self.losses += 1
        self.pairs[pair_index(first, second)] += 1
        self.deal_pairs.append(pair_index(first, second))
        self.deal_wins.append(int(first == 1.0) + int(second == 1.0))
        if isinstance(self.sprt, PairSprt):
            self.sprt.update(first, second)
        elif self.sprt is not None:
            self.sprt.update(first)
            self.sprt.update(second)


def elo_text(pe: dict[str, float]) -> str:
    """A match's Elo as every view writes it: ``-79.5 [-135.6, -27.3]``, or a one-sided bound while
    one side has scored nothing (``> +312.4 (B has scored nothing yet)``)."""
    if pe["pairs"] == 0:
        return "- (no games)"
    if pe["elo"] == math.inf:
        return f"> {pe['elo_low']:+.1f} (B has scored nothing yet)"
    if pe["elo"] == -math.inf:
        return f"< {pe['elo_high']:+.1f} (A has scored nothing yet)"
    return f"{pe['elo']:+.1f} [{pe['elo_low']:+.1f}, {pe['elo_high']:+.1f}]"


def match_id(a: BotSpec, b: BotSpec, rules: Rules, seed: int, max_turns: int,
             suite: Suite | None = None) -> tuple[str, dict[str, Any]]:
    """The store's tournament id for a match: same bots (the files in their directories), rules,
    seed (or deal suite) and turn cap = same games, resumed."""
    fp = {"format": "match", "bots": [a.label, b.label], "hashes": [a.files_hash(), b.files_hash()],
          "rules": rules.options(), "seats": 2, "seed": seed, "max_turns": max_turns,
          "deals": "secret" if suite is None else f"suite:{suite.digest()}"}
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:10]
    return f"match:{a.label}:{b.label}:{digest}", fp


def match_games(max_games: int) -> int:
    """The games a match with ``--max-games max_games`` plays at most: whole deal pairs."""
    return 2 * max(1, max_games // 2)


def resolve_bot(ref: str, store: Store | None) -> BotSpec:
    """A bot by path or bundled name, else by a ladder label ``name@version`` found in the store
    (a ladder member's copy of its files, or a bot a tournament registered)."""
    try:
        return load_bot(ref)
    except ManifestError as first:
        if "@" not in ref or store is None:
            raise
        error = first
    from .tables import _has_tables, resolve_ref
    refs: list[str] = []
    if _has_tables(store):
        refs += [resolve_ref(store, r) for r in refs_of(store.db, ref)]
    known = store.bot(ref)
    if known is not None:
        refs.append(known["path"])
    for candidate in refs:
        try:
            spec = load_bot(candidate)
        except (ManifestError, OSError):
            continue
        if spec.label == ref:
            return spec
    if refs:
        raise ManifestError(f"{ref} is known to the store {store.path}, but its files are no longer at "
                            f"{', '.join(dict.fromkeys(refs))}")
    raise ManifestError(f"{error}; no ladder member or stored bot is labelled {ref!r} in {store.path} either")


def _score(seats: list[str], result: dict[str, Any], a: str) -> float:
    place = {seats[s]: g for g, group in enumerate(result["order"]) for s in group}
    b = next(x for x in seats if x != a)
    return 1.0 if place[a] < place[b] else 0.5 if place[a] == place[b] else 0.0


async def run_match(a: BotSpec, b: BotSpec, rules: Rules, *, sprt: Sprt | PairSprt | None = None,
                    max_games: int = 1000, seed: int = 1, clock: TimeControl = TimeControl(), max_turns: int = 2000,
                    concurrency: int = 1, store: Store | None = None, launcher: Callable | None = None,
                    containment: Containment = Containment.AUTO, system: tuple[str, ...] = (),
                    suite: Suite | None = None, on_pair: Callable[[MatchProgress], None] | None = None,
                    on_resume: Callable[[int, int], None] | None = None, cluster: str = "",
                    processes: int | None = None,
                    on_incident: Callable[[str], None] | None = None) -> tuple[MatchProgress, str]:
    """Duplicate-deal pairs of ``a`` against ``b`` (each deal once per seat order) until the SPRT
    accepts H0 or H1 or ``match_games(max_games)`` are played.  ``concurrency`` counts games at a
    time: deals at a time, since a deal's two games are always played one after the other by one
    lane (two seat orders of a deal at once could pass each other their hands; 1: bots that search
    on the clock never share the CPU).  The verdict depends only on the games, in order: concurrency plays some pairs
    ahead, and a stored match resumes where it stopped (``on_resume(stored, planned)`` is told
    first).  Without a ``launcher`` the bots start contained as ``containment`` says (and
    ``system``, a gVisor seat's extra view, checked by the caller: ``filesystem.run_system``;
    :class:`arena.bots.launch.Launcher`); a mode that cannot run here is a
    :class:`~arena.bots.launch.ContainmentError` before any game (``Launcher.preflight``, as a
    tournament's), never a match of forfeits.
    With a ``suite`` its deals are played in order (at most ``max_games`` games) under its rules
    instead of fresh deals from ``seed``.  Returns the progress (from ``a``'s side: W/D/L, pair
    counts, SPRT state) and the store's tournament id.

    The games go through an executor, as a tournament's do: referee worker processes (at most
    ``processes``, default one per core, never more than ``concurrency``), the Dask cluster at
    ``cluster``, or this process when one process is all that is asked or ``launcher`` starts
    the bots (tests' in-process fakes)."""
    if a.label == b.label:
        raise LadderError(f"both sides are {a.label}: a match needs two different labels (bump a version)")
    if not rules.min_players <= 2 <= rules.max_players:
        raise LadderError(f"{rules.name} is not a two-player game")
    if suite is not None:
        if suite.players != 2:
            raise LadderError(f"the deal suite is for {suite.players} players; a match is two-player")
        if suite.rules.options() != rules.options():
            raise LadderError("the deal suite was made for other rules than the match's")
    tid, fp = match_id(a, b, rules, seed, max_turns, suite)
    pairs = match_games(max_games) // 2
    if suite is not None:
        pairs = min(pairs, len(suite.deals))
    stored: dict[int, tuple[list[str], dict[str, Any]]] = {}
    if store is not None:
        store.begin_tournament(tid, fp, 2 * pairs)
        for spec in (a, b):
            store.register_bot(spec.label, spec.name, spec.version, spec.files_hash(),
                               {"command": list(spec.command), "author": spec.author,
                                "build": list(spec.build) if spec.build else None}, str(spec.root))
        for g in store.games(tournament=tid, limit=10**9):
            stored[g["index"]] = (g["seats"], g["result"])
    if stored and on_resume is not None:
        on_resume(len([i for i in stored if i < 2 * pairs]), 2 * pairs)
    progress = MatchProgress(a.label, b.label, sprt=sprt)
    secret = load_secret(store.path.parent) if store is not None else run_secret()
    # refs: how another process loads each bot again (the directory of its manifest)
    setup = BotSetup({a.label: a, b.label: b}, {a.label: str(a.root), b.label: str(b.root)}, rules, clock=clock,
                     containment=containment, system=system)
    concurrency = max(1, concurrency)
    workers = max(1, min(processes or os.cpu_count() or 1, concurrency))
    if cluster:
        from ..tournament.cluster import open_dask
        opened = open_dask(setup, cluster, on_incident=on_incident)
    else:
        if launcher is None:  # no containment, or a bot its uid cannot run: one error, no game (as a tournament)
            from ..bots.launch import Launcher
            cleanup_stale()
            own = Launcher(containment=containment, system=system)
            preflight = getattr(own, "preflight", None)
            if preflight is not None:  # (test doubles stand in for Launcher without one)
                await preflight([a, b])
        if launcher is None and workers > 1:
            opened = open_workers(setup, workers, 1, on_incident=on_incident)
        else:
            opened = open_in_process(setup, capacity=concurrency, launcher=launcher or own)
    def seats_of(idx: int) -> list[str]:
        return [a.label, b.label] if idx % 2 == 0 else [b.label, a.label]

    async def play(deal: int, todo: list[int]) -> None:
        """A deal's seat orders not stored yet, back to back where one lane, worker or Dask worker
        plays them (:meth:`~arena.tournament.executors.InProcessExecutor.play_deal`): ``concurrency``
        deals at a time are that many games at a time."""
        dealt = suite.deals[deal] if suite is not None else deal_seed(secret, seed, 0, deal)
        moves = suite.moves_of(deal) if suite is not None else ()
        results = await executor.play_deal([GameTask(f"{tid}-{idx:06d}", dealt, tuple(seats_of(idx)), max_turns, moves)
                                            for idx in todo])
        for idx, played in zip(todo, results):
            if isinstance(played, ExecutorError):
                raise played
            if store is not None:
                store_played(store, tid, idx, seats_of(idx), played)
            stored[idx] = (seats_of(idx), played.record.result or {})

    async with opened as executor:
        deal = 0
        while deal < pairs and progress.status is Verdict.CONTINUE:
            batch = range(deal, min(pairs, deal + concurrency))
            todo = {d: [i for i in (2 * d, 2 * d + 1) if i not in stored] for d in batch}
            if any(todo.values()):
                async with trio.open_nursery() as nursery:
                    for d, games in todo.items():
                        if games:
                            nursery.start_soon(play, d, games)
            for d in batch:
                progress.add_pair(_score(*stored[2 * d], a.label), _score(*stored[2 * d + 1], a.label))
                deal = d + 1
                if sprt is not None:
                    progress.status = sprt.status
                if progress.status is Verdict.CONTINUE and deal >= pairs:
                    progress.status = Verdict.MAX_GAMES
                if on_pair is not None:
                    on_pair(progress)
                if progress.status is not Verdict.CONTINUE:
                    break
        if store is not None:
            store.finish_tournament(tid)
    return progress, tid
