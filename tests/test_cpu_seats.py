"""Seats that cannot take each other's CPU (docs/SANDBOX.md, "CPU between seats").

A starver (tests/cpu_bots/starver.py) leaves many processes spinning, each in a session of its
own; a worker (tests/cpu_bots/worker.py) needs a fixed amount of CPU per decision. Against the
starver the worker must forfeit no more often than against a quiet opponent: by default because
the starver is frozen off its turn, on a ``ponder`` table because every bot's cgroup has the same
CPU weight whatever it forks. The bots are started the way a worker process starts them
(``Launcher``, ``BlockingPlayer``, ``play_game``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from arena.bots.launch import containment_for
import pytest
import trio

from arena.bots.cgroups import detect_cgroups
from arena.bots.launch import Launcher
from arena.bots.manifest import BotSpec, load_bot
from arena.bots.probes import gvisor_problem_now
from arena.engine import preset
from arena.limits import Limits
from arena.referee import TimeControl
from arena.referee.blocking import BlockingPlayer, play_game, settle
from arena.referee.core import Request
from arena.referee.seat import answered

from tests.checks import reachable

CGROUPS, CGROUP_NOTE = detect_cgroups() if os.geteuid() == 0 else (None, "not root")
needs_cgroups = pytest.mark.skipif(
    CGROUPS is None or not (CGROUPS.shares_cpu and CGROUPS.freezes),
    reason=f"needs cgroups with the cpu controller and a freezer: {CGROUP_NOTE}")

GVISOR_PROBLEM = gvisor_problem_now()
BOTS = Path(__file__).resolve().parent / "cpu_bots"
# The worker's CPU per decision is a 37th of its move time, room for a loaded machine; SPINNERS
# sessions outnumber it 120 to 1, so starved on 2 idle cores it would need 4.8 s of its 3.
WORK_S = 0.08
CLOCK = TimeControl(move_ms=3000, bank_ms=0, handshake_ms=30_000)
SPINNERS = 120
GVISOR_SPINNERS = 16  # gVisor's scheduler ignores nice: with 120 spinners the starver missed its own handshake
LIMITS = Limits(max_processes=256)
# One game per pairing and table kind (frozen, ponder): its TURNS turns ask the worker at least 4 times
# with the starver's spinners all there (the assertions count them); a second game of the same kind in
# the same processes measured nothing new. The two kinds' games share one pair of processes.
TURNS = 12


def bot(root: Path, name: str, script: str, *args: float | int, author: str | None = None) -> BotSpec:
    """A bot of ``script`` from tests/cpu_bots run with ``args``, readable by a bot's uid."""
    d = root / name
    d.mkdir()
    shutil.copy(BOTS / script, d / script)
    argv = ", ".join(f'"{a}"' for a in (script, *args))
    by = "" if author is None else f'author = "{author}"\n'
    (d / "bot.toml").write_text(f'name = "{name}"\n{by}command = ["python3", {argv}]\n')
    for p in (d, d / script, d / "bot.toml"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return load_bot(d)


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> dict[str, BotSpec]:
    root = reachable(Path(tempfile.mkdtemp(prefix="arena-cpu-", dir=tmp_path_factory.mktemp("cpu"))))
    root.chmod(0o755)
    return {"worker": bot(root, "worker", "worker.py", WORK_S), "quiet": bot(root, "quiet", "starver.py", 0),
            "starver": bot(root, "starver", "starver.py", SPINNERS),
            "gvisor-starver": bot(root, "gvisor-starver", "starver.py", GVISOR_SPINNERS)}


class Watched(BlockingPlayer):
    """The worker's seat, noting how much CPU the other seat's cgroup used while it was asked."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.other: BlockingPlayer | None = None
        self.grew: list[float] = []
        self.seen: list[tuple[int, int]] = []  # (processes, OOM kills) in the other's cgroup, per decision

    def decide(self, req: Request):
        cgroup = self.other.conn.cgroup if self.other is not None and self.other.conn is not None else None
        before = cgroup.cpu_seconds() if cgroup is not None else None
        out = super().decide(req)
        if before is not None:
            self.grew.append(cgroup.cpu_seconds() - before)
            self.seen.append((len(cgroup.pids()), cgroup.oom_kills()))
        return out


@dataclass
class Played:
    forfeits: int = 0  # games the worker forfeited
    grew: list[float] = field(default_factory=list)  # the opponent's CPU during each worker decision
    seen: list[tuple[int, int]] = field(default_factory=list)  # its processes and OOM kills then

    def __str__(self) -> str:  # what a failure shows: the CPU, and whether the spinners were there
        return f"cpu per decision {self.grew}; (processes, oom kills) {self.seen}"


_played: dict[tuple[str, bool], dict[bool, Played]] = {}


def play(specs: dict[str, BotSpec], opponent: str, *, ponder: bool, gvisor: bool = False) -> Played:
    """The worker's game against ``opponent`` on a frozen or a ponder table (each pairing played once
    per test run, both kinds of table in the same two processes: starting a starver's spinners, or a
    gVisor seat, costs more than its game)."""
    if (opponent, gvisor) not in _played:
        _played[opponent, gvisor] = _play(specs, opponent, gvisor)
    return _played[opponent, gvisor][ponder]


def _play(specs: dict[str, BotSpec], opponent: str, gvisor: bool = False) -> dict[bool, Played]:
    launcher = Launcher(LIMITS, containment_for(gvisor=gvisor))
    plans = {s.label: trio.run(launcher.plan, s) for s in specs.values()}

    def launch(spec: BotSpec):
        return plans[spec.label].start()

    worker = Watched(specs["worker"], launch, CLOCK)
    other = BlockingPlayer(specs[opponent], launch, CLOCK)
    worker.other = other
    played = {True: Played(), False: Played()}
    try:
        for seed, ponder in enumerate(played):  # the ponder table first: a frozen table freezes and thaws its seats itself
            worker.grew, worker.seen = [], []
            rec = play_game([worker, other], preset("classic"), seed, game_id=f"g{seed}", clock=CLOCK,
                            max_turns=TURNS, ponder=ponder)
            assert not [f for f in rec.faults if f["seat"] == 1], rec.faults  # the opponent plays cleanly
            played[ponder].forfeits += any(f["seat"] == 0 for f in rec.faults)
            played[ponder].grew, played[ponder].seen = worker.grew, worker.seen
    finally:
        worker.shutdown()
        other.shutdown()
        settle()
    return played


@needs_cgroups
@pytest.mark.parametrize("ponder", [False, True], ids=["frozen", "ponder"])
def test_a_starver_costs_a_fixed_work_bot_no_forfeit(specs, ponder) -> None:
    quiet = play(specs, "quiet", ponder=ponder)
    starved = play(specs, "starver", ponder=ponder)
    assert quiet.forfeits == 0  # the premise: the work fits its time with room to spare
    assert starved.forfeits == quiet.forfeits
    assert len(starved.grew) >= 4
    assert min(n for n, _ in starved.seen) > SPINNERS, str(starved)  # it did leave them spinning


@needs_cgroups
def test_a_seat_off_its_turn_gets_no_cpu(specs) -> None:
    """While the worker thinks, the frozen starver's cgroup CPU stays where it was; on a ponder
    table the same starver does run meanwhile (so the measure can see it)."""
    frozen = play(specs, "starver", ponder=False)
    assert len(frozen.grew) >= 4 and max(frozen.grew) < 0.005, str(frozen)
    pondering = play(specs, "starver", ponder=True)
    assert sum(pondering.grew) > WORK_S, str(pondering)
    # the premise of both: every spinner was alive at every decision (the filter's refusal of setsid
    # once killed them all at birth, and both assertions above passed on nothing but start-up noise)
    assert min(n for n, _ in frozen.seen + pondering.seen) > SPINNERS, str(frozen)


@needs_cgroups
@pytest.mark.skipif(GVISOR_PROBLEM is not None, reason=f"gVisor cannot run here: {GVISOR_PROBLEM}")
def test_a_gvisor_seat_off_its_turn_gets_no_cpu_and_costs_no_forfeit(specs) -> None:
    """The same under the gVisor mode: the starver's spinners are gVisor's tasks, run by runsc's
    sandbox process, which sits in the seat's cgroup; frozen off turn, that cgroup's CPU stays
    where it was while the worker (under gVisor too) thinks, and the worker forfeits nothing."""
    frozen = play(specs, "gvisor-starver", ponder=False, gvisor=True)
    assert frozen.forfeits == 0
    assert len(frozen.grew) >= 4 and max(frozen.grew) < 0.005, frozen.grew


@needs_cgroups
@pytest.mark.skipif(GVISOR_PROBLEM is not None, reason=f"gVisor cannot run here: {GVISOR_PROBLEM}")
def test_a_pondering_gvisor_starver_gets_its_share_and_no_more(specs) -> None:
    """On a ponder table the gVisor starver runs while the worker thinks (the measure sees it), but
    its cgroup's equal CPU weight holds it to its share: the worker forfeits nothing."""
    pondering = play(specs, "gvisor-starver", ponder=True, gvisor=True)
    assert sum(pondering.grew) > WORK_S, pondering.grew
    assert pondering.forfeits == 0


class Logged(BlockingPlayer):
    """A seat that runs no process: it logs what the game loop does to it, and always plays 0."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        super().__init__(load_bot("lowest"), None, CLOCK)
        self.name, self.log = name, log

    def begin(self, message) -> None:
        self.log.append((self.name, "start"))

    def decide(self, req: Request):
        self.log.append((self.name, "request"))
        return answered(self, (0, None), 0.001)

    def finish(self, message) -> None:
        self.log.append((self.name, "end"))

    def hold(self, frozen: bool) -> None:
        self.log.append((self.name, "freeze" if frozen else "thaw"))


@pytest.mark.parametrize("ponder", [False, True], ids=["frozen", "ponder"])
def test_a_seat_is_thawed_only_for_its_own_requests(ponder) -> None:
    """The loop's order, with no process: every seat thawed for its start and frozen once started
    (tests/test_stranger_attacks3.py: and once it heard its end); each request sent to a
    thawed seat (so the thaw is outside its clock) and the seat frozen again once it answered.
    A ponder table neither freezes nor thaws."""
    log: list[tuple[str, str]] = []
    play_game([Logged("a", log), Logged("b", log)], preset("classic"), 1, game_id="g", clock=CLOCK,
              max_turns=10, ponder=ponder)
    asked = [i for i, (_, what) in enumerate(log) if what == "request"]
    assert len(asked) > 4
    if ponder:
        assert not [e for e in log if e[1] in ("freeze", "thaw")]
        return
    assert log[:6] == [("a", "thaw"), ("a", "start"), ("a", "freeze"), ("b", "thaw"), ("b", "start"), ("b", "freeze")]
    for i in asked:
        seat = log[i][0]
        assert log[i - 1] == (seat, "thaw") and log[i + 1] == (seat, "freeze"), log[i - 1:i + 2]
    frozen = {"a": True, "b": True}
    ends = [i for i, (_, what) in enumerate(log) if what == "end"]
    for seat, what in log[:ends[0]]:  # at most one seat is thawed while the game is played
        if what in ("freeze", "thaw"):
            frozen[seat] = what == "freeze"
            assert sum(not f for f in frozen.values()) <= 1
    for seat, what in log[ends[0]:]:  # a seat hears its end thawed: a frozen one cannot read it
        if what in ("freeze", "thaw"):
            frozen[seat] = what == "freeze"
        if what == "end":
            assert not frozen[seat], log[ends[0] - 2:]
    assert len(ends) == 2


def test_ponder_goes_from_the_files_to_every_game(tmp_path: Path, monkeypatch) -> None:
    from arena.ladder import load_ladder
    from arena.tournament.config import load_bots, load_config
    from arena.tournament.executors import BlockingExecutor, BotSetup, GameTask
    from arena.tournament.run import bot_setup
    import arena.tournament.executors as executors

    f = tmp_path / "t.toml"
    f.write_text('bots = ["random", "lowest"]\nponder = true\n')
    cfg = load_config(f)
    setup = bot_setup(cfg, load_bots(cfg))
    assert setup.ponder and BotSetup.from_wire(setup.wire()).ponder  # to workers and Dask
    assert not bot_setup(load_config(None, {"bots": ["random", "lowest"]}), load_bots(cfg)).ponder
    lad = tmp_path / "lad.toml"
    lad.write_text('bots = ["random", "lowest"]\nponder = true\n')
    ladder = load_ladder(lad)
    assert ladder.tournament("x", format="round-robin", bots=ladder.bots).ponder
    seen = []
    monkeypatch.setattr(executors, "play_game", lambda *a, **kw: seen.append(kw["ponder"]) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        BlockingExecutor(setup, launcher=lambda spec: None).play(GameTask("g", 1, tuple(setup.specs), 100))
    assert seen == [True]


@needs_cgroups
def test_a_frozen_seats_end_longer_than_the_pipe_reaches_the_running_bot(specs, monkeypatch) -> None:
    """Real processes and a real freezer: each seat's ``end`` is padded past what a pipe holds
    (64 KiB), as a long game's events can be. A seat still frozen could not read it: the send would
    wait out its timeout and the bot be closed; thawed first, both bots hear it and live on into
    the next game (same process)."""
    from arena.referee.core import RefereeCore
    ends = RefereeCore.end_messages

    def padded(self):
        return [(seat, {**msg, "events": [*msg["events"], {"type": "note", "text": "x" * 200_000}]})
                for seat, msg in ends(self)]

    monkeypatch.setattr(RefereeCore, "end_messages", padded)
    launcher = Launcher(LIMITS, containment_for())
    plan = trio.run(launcher.plan, specs["quiet"])
    players = [BlockingPlayer(specs["quiet"], lambda spec: plan.start(), CLOCK) for _ in range(2)]
    try:
        pids = []
        for seed in range(2):
            rec = play_game(players, preset("classic"), seed, game_id=f"long-end-{seed}", clock=CLOCK, max_turns=12)
            assert not rec.faults, rec.faults
            assert all(p.conn is not None for p in players), "a bot was closed at its end"
            pids.append([p.conn.pid for p in players])
        assert pids[0] == pids[1]  # the same processes played both games: nobody was lost at an end
    finally:
        for p in players:
            p.shutdown()
        settle()
