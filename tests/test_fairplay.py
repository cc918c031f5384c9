"""Fair play, written as attacks: a cheating bot (tests/fairplay_bots/attacker/attack.py) tries
to read the store and the checkout, another bot's files and HOME, the referee's environment and
memory, other processes' command lines, to reach the network, to signal the referee, and to
leave a file for its next process; it reports each attempt on stderr and must manage none, in
every containment mode.  A bot its private uid cannot run is an error, never a run as root.

Every bot is started the way a tournament starts it: arena.bots.launch.Launcher, then the referee's
BlockingPlayer and play_game, as worker processes run them.  docs/SANDBOX.md ties each line of the threat model to a test here.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from arena.bots.errors import BotStartError
from arena.bots.launch import BuildError, Containment, ContainmentError, Launcher, containment_for
from arena.bots.manifest import load_bot
from arena.bots.probes import namespaces_problem_now, sandbox_problem_now
from arena.engine import PRESETS
from arena.referee import TimeControl
from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle
from arena.tournament.store import Store

ROOT = os.geteuid() == 0
ATTACKER = Path(__file__).resolve().parent / "fairplay_bots" / "attacker"
REPO = Path(__file__).resolve().parent.parent
CLOCK = TimeControl(move_ms=2000, bank_ms=10_000, handshake_ms=30_000)

BWRAP_PROBLEM = sandbox_problem_now()
NS_PROBLEM = namespaces_problem_now()
MODES = [
    pytest.param(True, id="bubblewrap", marks=pytest.mark.skipif(
        BWRAP_PROBLEM is not None, reason=f"bubblewrap: {BWRAP_PROBLEM}")),
    pytest.param(False, id="namespaces", marks=pytest.mark.skipif(
        NS_PROBLEM is not None, reason=f"namespaces: {NS_PROBLEM}")),
]


def world_readable_dir(prefix: str) -> Path:
    """A directory any uid can traverse, like a checkout under /work (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o755)
    return d


def copy_bot(dest: Path, command: list[str] | None = None, mode: int = 0o755) -> Path:
    dest.mkdir()
    shutil.copy(ATTACKER / "attack.py", dest / "attack.py")
    (dest / "attack.py").chmod(0o644)
    toml = (ATTACKER / "bot.toml").read_text()
    if command is not None:
        toml = toml.replace('command = ["python3", "attack.py"]', f"command = {json.dumps(command)}")
    (dest / "bot.toml").write_text(toml)
    (dest / "bot.toml").chmod(0o644)
    dest.chmod(mode)
    return dest


class World:
    """What a cheater would like to reach: a live store, another bot, a service on the host's
    loopback, a process with a secret in its command line and environment."""

    def __init__(self) -> None:
        self.root = world_readable_dir("arena-fairplay-")
        self.nonce = secrets.token_hex(6)
        self.secret = f"SECRET-{self.nonce}"
        self.store = Store(self.root / "arena-data" / "arena.sqlite")  # kept open: the WAL is live
        self.store.begin_tournament(f"t-{self.nonce}", {"secret": self.secret}, 1)
        self.other = copy_bot(self.root / "other-bot")
        (self.other / "strategy.txt").write_text("my secret strategy")
        (self.other / "strategy.txt").chmod(0o644)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.listener.setblocking(False)
        self.secret_proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()", self.secret],
            stdin=subprocess.PIPE, env={"ARENA_SECRET": self.secret, "PATH": "/usr/bin:/bin"})

    def attacker(self, name: str = "attacker", **targets) -> Path:
        d = copy_bot(self.root / name)
        (d / "targets.json").write_text(json.dumps({
            "store": str(self.store.path.resolve()), "other_bot": str(self.other),
            "checkout": str(REPO), "port": self.listener.getsockname()[1],
            "referee": os.getpid(), "secret": self.secret, "nonce": self.nonce, **targets}))
        (d / "targets.json").chmod(0o644)
        return d

    def nobody_connected(self) -> bool:
        try:
            self.listener.accept()[0].close()
        except BlockingIOError:
            return True
        return False

    def close(self) -> None:
        self.secret_proc.stdin.close()
        self.secret_proc.wait()
        self.listener.close()
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def world():
    w = World()
    yield w
    w.close()


def attack_reports(record, player: BlockingPlayer, seat: int) -> list[dict[str, str]]:
    lines = list(record.stderr[seat]) + player.take_stderr()
    for step in record.steps:
        if step["seat"] == seat:
            lines += step.get("stderr", [])
    found = dict.fromkeys(line for line in lines if line.startswith("ATTACK "))  # a line may be logged twice
    return [json.loads(line[len("ATTACK "):]) for line in found]


def play(attacker: Path, launcher: Launcher, games: int = 1):
    """``games`` games of the attacker against the random bot, a fresh attacker process each."""
    launch = BlockingLaunch(launcher)
    me = BlockingPlayer(load_bot(attacker), launch, CLOCK, restart_each_game=True)
    them = BlockingPlayer(load_bot("random"), launch, CLOCK)
    reports, records = [], []
    try:
        for g in range(games):
            rec = play_game([me, them], PRESETS["classic"], 100 + g, game_id=f"fairplay-{g}",
                            clock=CLOCK, max_turns=60)
            records.append(rec)
            me.close()  # the next game gets a fresh process, as between rotation rounds
            reports += attack_reports(rec, me, 0)
    finally:
        me.shutdown()
        them.shutdown()
        settle()
    return reports, records


EVERY_ATTACK = {
    "read store", "read store-wal", "read store-shm", "list store dir", "list run dir", "read other bot",
    "list checkout", "read other HOME", "read other TMPDIR", "connect 127.0.0.1", "signal referee",
    "read referee environ", "read referee memory", "find secret command line", "find secret environment",
    "write own directory", *(f"remember {p}" for p in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "HOME", "TMPDIR")),
}


def leaks(report: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in report.items() if v.startswith("LEAK")}


@pytest.mark.parametrize("sandbox", MODES)
def test_every_attack_fails(world, sandbox):
    def main():
        launcher = Launcher(containment=containment_for(sandbox))
        victim = launcher.plan_now(load_bot(copy_bot(world.root / "victim", ["python3", "attack.py", "victim"]))).start()
        with victim:
            paths = json.loads(victim.receive_line(30))
            attacker = world.attacker(other_home=paths["home"], other_tmpdir=paths["tmpdir"])
            return play(attacker, launcher, games=2), launcher.describe_now()

    (reports, records), described = main()
    assert described.startswith(Containment.BUBBLEWRAP if sandbox else Containment.NAMESPACES)
    assert len(reports) == 2, [r.faults for r in records]  # the attacker ran, twice
    for report in reports:
        assert EVERY_ATTACK <= set(report)
        assert leaks(report) == {}
    assert world.nobody_connected()
    assert not any(world.root.rglob("planted.txt"))
    assert all(not r.faults for r in records)  # and it played its games normally


@pytest.mark.parametrize("sandbox", MODES)
def test_a_build_is_contained_like_the_bot(world, sandbox):
    """A bot's ``build`` runs as its private uid in a copy of its directory, with the bot's
    containment: every attack of the bot fails there too, its source stays untouched, and a link
    it leaves to a referee-only file is not followed when the copy is handed back."""
    root_only = world.root / "referee-only.txt"
    root_only.write_text(world.secret)
    root_only.chmod(0o600)
    attacker = world.attacker(source=str(world.root / "attacker"), root_only=str(root_only))
    (attacker / "bot.toml").write_text((attacker / "bot.toml").read_text() + 'build = ["python3", "attack.py", "build"]\n')
    launcher = Launcher(containment=containment_for(sandbox))
    reports, records = play(attacker, launcher)
    built = launcher.built[load_bot(attacker).label]
    assert built.root != attacker.resolve()  # the bot plays from the built copy
    report = json.loads((built.root / "build-report.json").read_text())
    assert EVERY_ATTACK - {"write own directory", "read other HOME", "read other TMPDIR"} <= set(report)
    assert leaks(report) == {}
    assert report["write source directory"].startswith("denied")
    if ROOT:
        assert report["uid"] != "0"
        assert (built.root / "build-report.json").stat().st_uid == 0  # handed back to the referee
    assert not (built.root / "build-report.json").stat().st_mode & 0o022
    st = root_only.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()  # the link was not followed
    assert world.nobody_connected()
    assert not (attacker / "build-report.json").exists() and not any(world.root.rglob("planted.txt"))
    assert len(reports) == 1 and leaks(reports[0]) == {} and not records[0].faults


def test_a_build_that_needs_what_containment_hides_says_how_to_fix_it(world):
    """A build tool outside the system directories (a toolchain under /root) is not run as root
    instead: the build fails, once, and says why."""
    if NS_PROBLEM is not None and BWRAP_PROBLEM is not None:
        pytest.skip("no containment here")
    attacker = world.attacker()
    (attacker / "bot.toml").write_text((attacker / "bot.toml").read_text() + 'build = ["no-such-compiler"]\n')
    launcher = Launcher()
    spec = load_bot(attacker)
    for _ in range(2):  # the failure is remembered, not retried per game
        with pytest.raises(BuildError, match="--trusted-bots") as caught:
            launcher.build_now(spec)
    assert "not found" in str(caught.value) and "system-wide" in str(caught.value)
    assert isinstance(launcher.built[spec.label], BuildError)


@pytest.mark.parametrize("sandbox", MODES)
def test_the_checkout_and_arena_source_are_not_visible(world, sandbox):
    """The sandbox binds a copy of the arena package, never the checkout (with arena-data/)."""
    attacker = world.attacker()
    (attacker / "targets.json").write_text(json.dumps({
        **json.loads((attacker / "targets.json").read_text()), "store": str(REPO / "arena-data" / "arena.sqlite"),
        "other_bot": str(REPO)}))
    reports, _ = play(attacker, Launcher(containment=containment_for(sandbox)))
    assert len(reports) == 1
    assert leaks(reports[0]) == {}


needs_root = pytest.mark.skipif(not ROOT, reason="private bot uids need a root referee")


@needs_root
@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize("unreachable", ["0700 directory", "0700 command"])
def test_a_bot_its_uid_cannot_run_is_an_error_never_root(world, sandbox, unreachable):
    if unreachable == "0700 directory":
        attacker = world.attacker()
        attacker.chmod(0o700)
    else:
        attacker = world.attacker()
        (attacker / "run.sh").write_text("#!/bin/sh\nexec python3 attack.py\n")
        (attacker / "run.sh").chmod(0o700)
        (attacker / "bot.toml").write_text((attacker / "bot.toml").read_text().replace(
            'command = ["python3", "attack.py"]', 'command = ["./run.sh"]'))
    reports, records = play(attacker, Launcher(containment=containment_for(sandbox)))
    assert reports == []  # it never ran, as anyone
    fault = records[0].faults[0]
    assert fault["reason"] == "start_failed"
    assert "chmod" in fault["message"] and "--trusted-bots" in fault["message"]


@needs_root
def test_shipped_bots_run_from_a_copy_and_users_bots_fail_closed(monkeypatch):
    """A private checkout's own bots (reference bots, starters) run from a copy their private uids
    read (no other user: its folder is sealed) that keeps
    links as links; one that leads out of the folder is the bot's fault (refused, named, never
    copied as /etc/shadow's bytes read as root); a user's bot in a private directory is left as it
    is, to be refused."""
    from arena.bots import launch
    from arena.bots.errors import BotCommandError
    from arena.bots.uids import BOT_UID_BASE, inaccessible_reason
    private = Path(tempfile.mkdtemp(prefix="arena-private-checkout-"))  # 0700, like a clone under /root
    try:
        shipped = private / "bots" / "lowest"
        shutil.copytree(REPO / "bots" / "lowest", shipped)
        (shipped / "same.py").symlink_to("bot.py")
        users = copy_bot(private / "mine")
        monkeypatch.setattr(launch, "SHIPPED", (private / "bots",))
        copied = launch.runnable(load_bot(shipped))
        assert copied.root != shipped and not launch._others_can_use(copied.workdir / "bot.py", stat.S_IROTH)
        assert inaccessible_reason(copied.workdir / "bot.py", BOT_UID_BASE, BOT_UID_BASE, os.R_OK) is None
        assert os.readlink(copied.root / "same.py") == "bot.py"
        assert not any(p.stat().st_mode & 0o022 for p in copied.root.rglob("*") if not p.is_symlink())
        assert launch.runnable(load_bot(users)).root == users.resolve()
        leaky = private / "bots" / "leaky"
        shutil.copytree(REPO / "bots" / "lowest", leaky)
        spec = load_bot(leaky)
        spec.files_hash()  # read by the run before the link appears
        (leaky / "passwd").symlink_to("/etc/shadow")
        with pytest.raises(BotCommandError, match=r"passwd: a link to '/etc/shadow'"):
            launch.runnable(spec)
    finally:
        shutil.rmtree(private)


def test_only_a_python_command_gets_the_arena_package():
    """The copy of the ``arena`` package (on PYTHONPATH, bound into the sandbox) is for commands
    that start with python3; any other program, bot or build, gets nothing added."""
    spec = load_bot(REPO / "examples" / "bots" / "javascript")
    assert Launcher._python(spec, contained=True) == (sys.executable, {})
    python, env = Launcher._python(load_bot("lowest"), contained=True)
    assert python and set(env) <= {"PYTHONPATH"}


def test_a_missing_command_is_an_error():
    d = world_readable_dir("arena-missing-")
    try:
        (d / "bot.toml").write_text('name = "ghost"\nversion = "1"\ncommand = ["./no-such-program"]\n')
        with pytest.raises(BotStartError, match="not found"):
            Launcher().plan_now(load_bot(d)).start()
    finally:
        shutil.rmtree(d)


@needs_root
def test_trusted_bots_run_as_the_referee_on_purpose(world, capsys):
    attacker = world.attacker()
    attacker.chmod(0o700)
    launcher = Launcher(containment=Containment.TRUSTED)
    reports, records = play(attacker, launcher)
    assert "--trusted-bots" in capsys.readouterr().err  # said out loud
    assert len(reports) == 1 and not records[0].faults
    assert reports[0]["read referee environ"].startswith("LEAK")  # what trusting means
    assert launcher.describe_now().startswith("no containment")


def test_no_sandbox_is_said_out_loud(capsys):
    if NS_PROBLEM is not None:
        pytest.skip(f"namespaces: {NS_PROBLEM}")
    assert Launcher(containment=Containment.NAMESPACES).mode_now() is Containment.NAMESPACES
    assert "--no-sandbox" in capsys.readouterr().err


def test_bubblewrap_is_the_default_where_it_works():
    expected = (Containment.BUBBLEWRAP if BWRAP_PROBLEM is None else Containment.NAMESPACES if NS_PROBLEM is None
                else None)
    if expected is None:
        with pytest.raises(ContainmentError, match="--trusted-bots"):
            Launcher().mode_now()
    else:
        assert Launcher().mode_now() == expected


# -- the store and what is written from it ----------------------------------------------------


def test_store_files_are_private_from_the_first_byte(tmp_path):
    store = Store(tmp_path / "arena-data" / "arena.sqlite")
    try:
        store.begin_tournament("t", {}, 1)
        files = [store.path, *(store.path.with_name(store.path.name + s) for s in ("-wal", "-shm"))]
        assert all(f.exists() for f in files)
        assert {oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {"0o600"}
        assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    finally:
        store.close()


def test_an_old_open_store_is_closed_on_open(tmp_path):
    d = tmp_path / "arena-data"
    old = Store(d / "arena.sqlite")
    old.begin_tournament("t", {}, 1)
    for f in d.iterdir():
        f.chmod(0o644)  # what an older version left
    d.chmod(0o755)
    again = Store(d / "arena.sqlite")
    try:
        assert {oct(stat.S_IMODE(f.stat().st_mode)) for f in d.iterdir()} == {"0o600"}
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    finally:
        again.close()
        old.close()


def test_exports_and_reports_are_written_0600(tmp_path):
    from typer.testing import CliRunner

    from arena.cli.main import app
    store = Store(tmp_path / "s.sqlite")
    store.begin_tournament("t", {}, 1)
    store.close()
    runner = CliRunner()
    for name in ("out.jsonl", "out.csv"):
        result = runner.invoke(app, ["export", str(tmp_path / name), "--store", str(tmp_path / "s.sqlite")])
        assert result.exit_code == 0, result.output
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    from arena.tournament.store import write_private_text
    write_private_text(tmp_path / "r.html", "<p>")
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o600


@pytest.mark.parametrize("flag, expected", [([], "bubblewrap"), (["--no-sandbox"], "namespaces")])
def test_arena_check_says_which_containment_applied(flag, expected):
    if (BWRAP_PROBLEM if expected == "bubblewrap" else NS_PROBLEM) is not None:
        pytest.skip(f"{expected} is not available here")
    from typer.testing import CliRunner

    from arena.cli.main import app
    result = CliRunner().invoke(app, ["check", "random", "--games", "1", "--move-ms", "200", *flag])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("containment:"))
    assert line.startswith(f"containment: {expected}: a private uid per bot" if ROOT else f"containment: {expected}")
    assert "no network" in line


@needs_root
def test_a_tournament_with_a_bot_its_uid_cannot_run_stops_before_any_game(world, tmp_path):
    from typer.testing import CliRunner

    from arena.cli.main import app
    attacker = world.attacker()
    attacker.chmod(0o700)
    store = tmp_path / "arena-data" / "arena.sqlite"
    result = CliRunner().invoke(app, ["tournament", "--bot", str(attacker), "--bot", "random", "--deals", "1",
                                      "--store", str(store), "--plain"])
    assert result.exit_code == 2, result.output
    assert "--trusted-bots" in result.output and "chmod" in result.output
    assert "Traceback" not in result.output
    assert not store.exists() or Store(store, readonly=True).games(limit=10) == []


def test_a_bot_cannot_loosen_its_limits():
    from dataclasses import replace

    from arena.bots.launch import limits_for
    from arena.limits import Limits
    spec = replace(load_bot("random"), limits={"cpu_seconds": 100_000, "memory_mb": 100_000,
                                                "address_space_mb": 100_000, "max_processes": 8})
    derived = limits_for(spec, Limits())
    assert derived.cpu_seconds is None  # still from the clock, not the bot's 100000 s
    assert derived.memory_mb == 512 and derived.address_space_mb == 512 and derived.max_processes == 8
    assert limits_for(spec, Limits(cpu_seconds=30)).cpu_seconds == 30
    assert limits_for(replace(spec, limits={"cpu_seconds": 5}), Limits(cpu_seconds=30)).cpu_seconds == 5
