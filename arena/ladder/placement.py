"""Joining a ladder: the initial bots' seeding round-robin and a newcomer's placement gauntlet.

Both are ordinary resumable tournaments (``ladder:<name>:seed``, ``ladder:<name>:placement:<label>``)
played through :func:`play_games`, the ladder's one call into the tournament machinery.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bots.containment import Containment
from ..bots.filesystem import SystemView
from ..bots.launch import ARENA_COPIES, Launcher
from ..bots.manifest import BotSpec, ManifestError, load_bot
from ..tournament.config import ConfigError, TournamentConfig
from ..tournament.run import Reporter, TournamentIncomplete, run_tournament
from ..tournament.seeds import ladder_tournament_seed
from ..tournament.store import Store
from .config import CheckFailed, Ladder, LadderError
from .tables import (verified_spec, _add_member, _bump_message, _rehash, _snapshot, bot_statuses, check_identity, keep_ladder_file,
                     ladder_results, member, members, rebase_refs)

if TYPE_CHECKING:
    from .standings import LadderStandings, Row

ReporterFactory = Callable[[str, str | None, list[tuple[list[str], dict[str, Any]]]], Reporter]
"""(title, focus label, ladder games so far) -> a Reporter for one run (the CLI's live display)."""


@dataclass
class RunContext:
    """What a ladder run needs from its caller: how to start bots and show progress."""

    launcher: Callable | None = None  # None: real processes (arena.bots.launch.Launcher)
    reporter: ReporterFactory | None = None
    say: Callable[[str], None] = lambda text: None
    checker: Callable[[BotSpec], Awaitable[dict[str, Any]]] | None = None  # None: arena.tournament.check.run_check

    def make_reporter(self, title: str, focus: str | None, history) -> Reporter | None:
        return self.reporter(title, focus, history) if self.reporter else None


async def play_games(cfg: TournamentConfig, store: Store, reporter: Reporter | None,
                     launcher: Callable | None, ladder: Ladder | None = None) -> int:
    """Play the games of ``cfg`` that the store lacks; returns how many were stored now.

    Every ladder game (seeding, placement, ``arena ladder run`` batches) goes through here, so
    pointing the ladder at another executor is a change to this function only. With
    ``one_seat_per_author``, the ladder file's own bots (``ladder``'s initial members) count as
    their own authors."""
    before = len(store.done_indexes(cfg.name))
    try:
        initial = [m.label for m in members(store, ladder.name) if m.origin == "initial"] \
            if ladder is not None and cfg.one_seat_per_author else []
        await run_tournament(cfg, store, reporter, launcher=launcher, collect=False, own_authors=initial)
    except (ConfigError, TournamentIncomplete) as e:  # a ladder's own error, whichever the run reported
        raise LadderError(str(e)) from None
    return len(store.done_indexes(cfg.name)) - before


async def _run(cfg: TournamentConfig, store: Store, ctx: RunContext, title: str, focus: str | None,
               ladder: Ladder) -> int:
    reporter = ctx.make_reporter(title, focus, ladder_results(store, ladder))
    return await play_games(cfg, store, reporter, ctx.launcher, ladder)


def _spec(ref: str) -> BotSpec:
    try:
        return load_bot(ref)
    except ManifestError as e:
        raise LadderError(str(e)) from None


def _opponents(store: Store, ladder: Ladder, exclude: str, ctx: RunContext) -> list[str]:
    """Refs of the members a newcomer plays; a member whose files changed since it joined is left out."""
    refs = []
    out = bot_statuses(store, ladder.name)
    for m in members(store, ladder.name):
        if m.label == exclude or m.label in out:
            continue
        if verified_spec(m) is not None:
            refs.append(m.ref)
        else:
            ctx.say(f"warning: {m.label} is left out of this placement: its files at {m.ref} are missing or "
                    "changed since it joined the ladder")
    return refs


async def ensure_seeded(ladder: Ladder, store: Store, ctx: RunContext | None = None) -> int:
    """Play the initial bots' round-robin if it is not complete, and place initial bots added to
    the file later.  Returns the number of games played now."""
    ctx = ctx or RunContext()
    check_identity(store, ladder)
    played = 0
    seed = store.tournament(ladder.seed_id)
    if seed is None or seed["status"] != "done":
        if seed is not None:  # resuming: the same schedule as when it started
            fp = dict(seed["config"])
            refs = rebase_refs(store, ladder.seed_id, fp.pop("bots"))
            fp.pop("format", None)
        else:  # members play from their snapshots; one registered before keeps its own
            fp = {"seed": ladder_tournament_seed(ladder.seed_id, ladder.seed)}  # cards of its own (seeds.py)
            refs = [_add_member(store, ladder, _spec(r), "initial", ladder.seed_id, ctx.say).ref for r in ladder.bots]
        ctx.say(f"seeding ladder {ladder.name}: round-robin of its initial bots "
                f"({', '.join(_spec(r).label for r in refs)})")
        cfg = ladder.tournament(ladder.seed_id, format="round-robin", bots=refs, **fp)
        played += await _run(cfg, store, ctx, f"{ladder.name}: seeding", None, ladder)
    for ref in ladder.bots:  # initial bots added to the file after the seed
        spec = _spec(ref)
        if member(store, ladder.name, spec.label) is None:
            ctx.say(f"{spec.label} was added to {ladder.name}'s initial bots: placing it")
            played += await _place(ladder, store, spec, "initial", ctx)
    keep_ladder_file(store, ladder)
    return played


async def _place(ladder: Ladder, store: Store, spec: BotSpec, origin: str, ctx: RunContext) -> int:
    """Register ``spec`` and play (or finish) its placement gauntlet."""
    tid = ladder.placement_id(spec.label)
    existing = store.tournament(tid)
    me = _add_member(store, ladder, spec, origin, tid, ctx.say)
    if existing is not None:
        fp = dict(existing["config"])
        opponents = rebase_refs(store, tid, fp.pop("bots"))
        candidates = rebase_refs(store, tid, fp.pop("candidates"))
        fp.pop("format", None)
    else:
        # cards of its own: with the ladder's seed, table t dealt what the seeding round-robin's and
        # every earlier placement's table t had shown (seeds.ladder_tournament_seed)
        opponents, candidates = _opponents(store, ladder, spec.label, ctx), [me.ref]
        fp = {"seed": ladder_tournament_seed(tid, ladder.seed)}
    if len(opponents) < ladder.seats - 1:
        raise LadderError(f"ladder {ladder.name} has {len(opponents)} playable member(s) besides {spec.label}; "
                          f"a {ladder.seats}-seat placement needs {ladder.seats - 1}")
    cfg = ladder.tournament(tid, format="gauntlet", bots=opponents, candidates=candidates, **fp)
    ctx.say(f"placement of {spec.label} on {ladder.name}: against {len(opponents)} member(s), "
            f"{cfg.deals} deal(s){' of its suite' if cfg.suite else ''} per table x {ladder.seats} seat rotations")
    return await _run(cfg, store, ctx, f"{ladder.name}: placing {spec.label}", spec.label, ladder)


def _drop_copy(store: Store, ladder: Ladder, label: str, copy: str) -> None:
    """Remove the copy of a bot that did not join (unless another process registered it meanwhile),
    and the folders above it that held nothing else: a refused bot leaves nothing behind."""
    if member(store, ladder.name, label) is not None:
        return
    path = Path(copy)
    shutil.rmtree(path, ignore_errors=True)
    for folder in (path.parent, path.parent.parent):  # ladder-bots/NAME, then ladder-bots
        try:
            if any(p.name != ARENA_COPIES for p in folder.iterdir()):
                return
            shutil.rmtree(folder)
        except OSError:
            return


def check_containment(ladder: Ladder) -> dict[str, Launcher]:
    """``run_check``'s arguments for a submission's entry check in the ladder's containment and view
    (gVisor where the ladder file names it; the stranger view for strangers' seats in any mode), as
    its games get; none for the default. Every entry point (``arena submit``, uploads) checks
    through this one."""
    cfg = ladder.tournament(ladder.seed_id, format="round-robin", bots=ladder.bots)
    if cfg.containment is Containment.AUTO and cfg.view is SystemView.HOST:
        return {}
    return {"launcher": Launcher(containment=cfg.containment, system=tuple(cfg.system), view=cfg.view)}


@dataclass
class SubmitResult:
    label: str
    status: str  # 'placed' (new entry), 'resumed' (placement finished now), 'unchanged' (nothing to play)
    games_played: int
    standings: "LadderStandings"

    @property
    def row(self) -> "Row":
        return next(r for r in self.standings.rows if r.label == self.label)


async def submit(ladder: Ladder, bot_ref: str, store: Store, ctx: RunContext | None = None) -> SubmitResult:
    """``arena submit``: version rules, ``arena check``, seed the ladder, place the bot, refit."""
    ctx = ctx or RunContext()
    spec = _spec(bot_ref)
    if spec.human:
        raise LadderError("a ladder cannot seat a human")
    check_identity(store, ladder)
    digest = spec.files_hash()
    known = member(store, ladder.name, spec.label)
    if known is not None:
        known = _rehash(store, known)  # a member stored with the unframed hash: rehashed from its snapshot
    if known is not None and known.hash != digest:
        raise LadderError(_bump_message(ladder, known, digest))
    played = 0
    if known is None:
        # the check and the placement run from the ladder's copy, made first inside the closed store:
        # files swapped in the bot's directory after the check never reach the ladder
        copy = _snapshot(store, ladder, spec, digest)
        spec = _spec(copy)
        ctx.say(f"checking {spec.label} (arena check, {ladder.check_games} game(s) per scenario)")
        try:
            if ctx.checker is not None:
                report = await ctx.checker(spec)
            else:
                from ..tournament.check import run_check
                report = await run_check(spec, ladder.check_games, ladder.move_ms, **check_containment(ladder))
        except BaseException:
            _drop_copy(store, ladder, spec.label, copy)
            raise
        if not report.get("ok"):
            _drop_copy(store, ladder, spec.label, copy)
            from ..tournament.check import fault_total
            n = fault_total(report.get("faults"))
            why = f"{n} fault(s)" if n else "it answered no requests"
            raise CheckFailed(f"{spec.label} failed arena check ({why}); fix it and submit again", report)
        played += await ensure_seeded(ladder, store, ctx)
        played += await _place(ladder, store, spec, "submitted", ctx)
        status = "placed"
    else:
        played += await ensure_seeded(ladder, store, ctx)
        t = store.tournament(known.placement)
        if t is not None and t["status"] == "done":
            ctx.say(f"{spec.label} is already on ladder {ladder.name} with these files; nothing to play")
            status = "unchanged"
        else:
            ctx.say(f"{spec.label} is already on ladder {ladder.name}: finishing its placement")
            if known.placement == ladder.seed_id:
                status = "resumed"  # ensure_seeded finished it
            else:
                played += await _place(ladder, store, _spec(known.ref), known.origin, ctx)
                status = "resumed"
    from .history import take_snapshot
    from .standings import ladder_standings
    if played:
        take_snapshot(store, ladder)  # at every submission that played games
    return SubmitResult(spec.label, status, played, ladder_standings(ladder, store))
