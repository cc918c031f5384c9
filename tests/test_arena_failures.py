"""The arena's failures are the arena's: a launch that fails for the arena's reasons (no cgroup, no
sandbox, a failed fork, a bug) forfeits no bot; the game is not stored and is played on the next
run; a ladder suspends no one for it. A start that fails on the bot's own files is still the bot's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from arena.bots.containment import Containment
import pytest
import trio

from arena.bots.errors import BotCommandError, BotStartError, SandboxUnavailable
from arena.bots.launch import BuildError, ContainmentError
from arena.bots.manifest import load_bot
from arena.engine import PRESETS
from arena.faults import ArenaFailure
from arena.ladder import bot_statuses, load_ladder, open_store, run_ladder
from arena.ladder.config import LadderError
from arena.ladder.tables import _add_member
from arena.referee import TimeControl
from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle
from arena.referee.testing import MockBot, policy
from arena.tournament.config import load_config
from arena.tournament.run import TournamentIncomplete, run_tournament
from arena.tournament.store import Store

from .fakes import policy_launcher
from .test_ladder import bot_copy, ctx, write_ladder

CLOCK = TimeControl(move_ms=1000, bank_ms=5000, handshake_ms=5000)
ARENAS = [BotStartError("cannot create the bot's cgroup: [Errno 28] No space left on device"),
          SandboxUnavailable("bwrap: setting up uid map: Permission denied"),
          ContainmentError("no containment for bots on this machine"),
          OSError(12, "Cannot allocate memory"), RuntimeError("a bug in the arena")]
BOTS = [BotCommandError("command not found: 'nope'"), BuildError("x@1: build exited 2")]


def failing(error: BaseException, name: str = "lowest", times: int | None = None, starts: list | None = None):
    """In-process bundled policies; starting bot ``name`` raises ``error`` (the first ``times`` times)."""
    inner = policy_launcher()
    count = [0]

    def launch(spec):
        if spec.name == name and (times is None or count[0] < times):
            count[0] += 1
            raise error
        if starts is not None:
            starts.append(spec.label)
        return inner(spec)
    return launch


def _blocking_table(error: BaseException, started: list[MockBot]) -> list[BlockingPlayer]:
    """Blocking players of three bots (the shell worker processes run); starting "lowest" raises ``error``."""
    def launch(spec):
        if spec.name == "lowest":
            raise error
        started.append(MockBot(policy(lambda msg: 0, spec.name)))
        return started[-1]
    return [BlockingPlayer(load_bot(n), launch, CLOCK) for n in ("random", "lowest", "highest")]


@pytest.mark.parametrize("error", ARENAS, ids=lambda e: type(e).__name__)
def test_the_blocking_referee_ends_the_game_unrecorded_on_an_arena_launch_failure(error: BaseException) -> None:
    """The branch of play_game that worker processes reach: no forfeit, every started seat stopped."""
    started: list[MockBot] = []
    players = _blocking_table(error, started)
    with pytest.raises(ArenaFailure, match="the arena could not start lowest@1.0"):
        play_game(players, PRESETS["classic"], 5, game_id="g", clock=CLOCK)
    # seats start one after another here: the one before the failure was started, told the game
    # began, and is stopped; the one after it is never started
    assert len(started) == 1 and started[0].closed and started[0].of_type("start")
    assert all(p.conn is None for p in players)


@pytest.mark.parametrize("error", BOTS, ids=lambda e: type(e).__name__)
def test_the_blocking_referee_forfeits_a_start_that_fails_on_the_bots_own_files(error: BaseException) -> None:
    started: list[MockBot] = []
    players = _blocking_table(error, started)
    rec = play_game(players, PRESETS["classic"], 5, game_id="g", clock=CLOCK)
    assert [(f["seat"], f["reason"]) for f in rec.faults] == [(1, "start_failed")]
    assert rec.result is not None and all(b.of_type("end") for b in started)


def test_the_blocking_referee_forfeits_a_missing_command_through_the_real_launcher(tmp_path: Path) -> None:
    from arena.bots.launch import Launcher
    bot = tmp_path / "nocmd"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "nocmd"\ncommand = ["./not-here"]\n')
    launch = BlockingLaunch(Launcher(containment=Containment.TRUSTED))
    players = [BlockingPlayer(load_bot("random"), launch, CLOCK), BlockingPlayer(load_bot(bot), launch, CLOCK)]
    try:
        rec = play_game(players, PRESETS["classic"], 5, game_id="g", clock=CLOCK)
    finally:
        for p in players:
            p.shutdown()
        settle()
    assert [(f["seat"], f["reason"]) for f in rec.faults] == [(1, "start_failed")]
    assert "command not found" in rec.faults[0]["message"]


def test_a_tournament_voids_the_game_then_plays_it_on_the_next_run(tmp_path: Path) -> None:
    cfg = load_config(None, {"name": "af", "bots": ["random", "lowest"], "deals": 1, "concurrency": 1,
                             "store": str(tmp_path / "s.sqlite")})
    db = Store(cfg.store)
    with pytest.raises(TournamentIncomplete, match="could not be played.*the arena could not start lowest@1.0"):
        trio.run(lambda: run_tournament(cfg, db, launcher=failing(BotStartError("no cgroup"), times=1)))
    stored = db.games(tournament="af", limit=100)
    assert len(stored) == 1  # 2 games (1 pair x 2 rotations): the voided one is not stored
    assert not any(db.game_record(g["id"])["faults"] for g in stored)  # type: ignore[index]
    trio.run(lambda: run_tournament(cfg, db, launcher=policy_launcher()))
    assert len(db.games(tournament="af", limit=100)) == 2 and db.tournament("af")["status"] == "done"  # type: ignore[index]


def test_a_ladder_suspends_no_one_for_the_arenas_failures(tmp_path: Path) -> None:
    """A bot whose starts fail for the arena's reason in every game: the run stops and says so, its
    batch is finished by the next run, and the bot is never suspended (it would be after 3 faults)."""
    path = write_ladder(tmp_path, "af", bots=["random", "lowest", "highest", "heuristic"],
                        store=str(tmp_path / "s.sqlite"))
    ladder = load_ladder(path)
    store = open_store(ladder)
    try:
        trio.run(lambda: run_ladder(ladder, store, ctx(), games=1))
        unlucky = bot_copy(tmp_path, "random", "2.0", "unlucky")
        _add_member(store, ladder, load_bot(unlucky), "submitted", "test")
        c = ctx()
        c.launcher = failing(BotStartError("cannot create the bot's cgroup"), name="random")
        for _ in range(3):
            with pytest.raises(LadderError, match="the arena could not start random@"):
                trio.run(lambda: run_ladder(ladder, store, c, games=30))
        assert bot_statuses(store, ladder.name) == {}
        for t in store.tournaments():
            for g in store.games(tournament=t["id"], limit=1000):
                assert not store.game_record(g["id"])["faults"]  # type: ignore[index]
        summary = trio.run(lambda: run_ladder(ladder, store, ctx(), games=10))
        assert summary.suspended == [] and summary.games >= 10 and bot_statuses(store, ladder.name) == {}
    finally:
        store.close()


def test_arena_check_says_the_arena_failed_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``arena check`` (also the entry check of submissions) reports the arena's failure as its own,
    in one line, and not as a fault of the bot."""
    from typer.testing import CliRunner

    from arena.bots.launch import LaunchPlan
    from arena.cli.main import app

    def broken(self):
        raise BotStartError("cannot create the bot's cgroup: [Errno 28] No space left on device")
    monkeypatch.setattr(LaunchPlan, "start", broken)  # the check runs on the blocking shell
    result = CliRunner().invoke(app, ["check", "random", "--games", "1", "--rules", "classic"])
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(errors) == 1 and "the arena could not start random@1.0" in errors[0] and "cgroup" in errors[0]
    assert "start_failed" not in result.output


def test_a_folder_its_private_uid_cannot_use_is_the_bots_start_failure(tmp_path: Path) -> None:
    """The start error's kind, not its words, makes it the bot's: a plan whose folder the bot's
    private uid may not enter gives BotUnreadable (start_failed), with how to fix it."""
    import os

    from arena.bots.errors import StartErrorKind
    from arena.bots.launch import BotUnreadable, Containment, Launcher, LaunchPlan
    from arena.faults import StartFailed
    from arena.limits import Limits

    mode = Launcher().mode_now()
    python = Path("/usr/bin/python3")  # visible in every containment
    if os.geteuid() != 0 or mode is Containment.TRUSTED or not python.exists():
        pytest.skip("private uids need a root referee (and a system python3)")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    plan = LaunchPlan("locked@1", (str(python), "-c", "pass"), locked, Limits(), mode)
    with pytest.raises(BotUnreadable, match="chmod o\\+rx") as info:
        plan.start()
    assert isinstance(info.value, StartFailed)
    with pytest.raises(BotStartError) as raw:  # the spawn's own error carries the kind
        from arena.bots.start import start_bot
        start_bot(plan.argv, locked, **plan._kw())
    assert raw.value.kind is StartErrorKind.UID_DENIED
