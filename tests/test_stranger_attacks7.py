"""#35 again, as an attacking bot author with the docs and the code: the entry points nobody had
attacked yet. Here, the C round trip of a decision (``arena/bots/_pipe.c``, called by
``BlockingBot.ask`` inside the referee's process, where a crash would end the whole arena): a
bot writing what a parser trips on, through the real shell, with the helper and without it
(the general loop alone). Both must give the same verdict, and the arena must go on talking to
an honest bot on the same hub afterwards.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import struct
import termios
import time
from pathlib import Path

import pytest

from arena.bots import blocking, channel
from arena.bots.blocking import hub
from arena.bots.errors import BotError
from arena.bots.procs import scan_procs
from arena.bots.spawn import DEFAULT_PATH
from arena.bots.start import start_bot
from arena.limits import Limits
from tests.checks import on_thread, reachable

HOSTILE = reachable(Path(__file__).parent / "hostile")
PY = shutil.which("python3", path=DEFAULT_PATH)
LINE = 64  # the line limit here (bytes before the newline)
LIMITS = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, max_line_bytes=LINE, max_output_bytes=4096,
                stderr_cap_bytes=1024)
SLOW = 30  # a wait only a broken test reaches

pytestmark = pytest.mark.skipif(PY is None, reason="no python3 on the bots' PATH")


def steps(*items: list) -> str:
    return json.dumps(list(items)).encode().hex()


def out(data: bytes) -> list:
    return ["out", data.hex()]


# (at start, before any request; then one request's steps per ask). Each names what a bot did.
ATTACKS = {
    "nul-bytes": ([], [[out(b'{"action":\x000}\n')]]),
    "line-at-the-limit": ([], [[out(b"x" * LINE + b"\n")]]),
    "line-one-past-the-limit": ([], [[out(b"x" * (LINE + 1) + b"\n")]]),
    "part-line-then-eof-alive": ([], [[out(b"part"), ["close", 1], ["sleep", 2]], []]),
    "part-line-then-exit": ([], [[out(b"part"), ["exit", 0]], []]),
    "invalid-utf8": ([], [[out(b"\xc3\x28\n")], [out(b"ok\n")]]),
    "carriage-return": ([], [[out(b"a\r\n")], [out(b"b\rc\n")], [out(b"\r\n")], [out(b"\r\r\n")]]),
    "two-lines-in-one-write": ([], [[out(b"one\ntwo\n")], [], [out(b"three\n")]]),
    "output-before-any-request": ([out(b"early\n")], [[out(b"late\n")], []]),
    "stdout-flood": ([["flood", 1, 8192]], [[]]),  # all of it in the pipe before the request
    "stderr-flood-then-answer": ([], [[["flood", 2, 200_000], out(b"ok\n")], [out(b"ok2\n")]]),
    "stdout-closed-process-alive": ([], [[["close", 1], ["sleep", 2]]]),
    "killed-mid-line": ([], [[out(b'{"act'), ["kill"]]]),
    "stderr-closed-then-answer": ([], [[["close", 2], out(b"ok\n")], [out(b"ok2\n")]]),
}


def written(start: list) -> int:
    """Bytes the start's steps put on stdout."""
    return sum(len(bytes.fromhex(s[1])) if s[0] == "out" else s[2] if s[:2] == ["flood", 1] else 0 for s in start)


def pending(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def play(start: list, asks: list[list], timeout: float) -> list[str]:
    """Each ask's outcome: the line, or the fault's type and text, until the first fault. What
    the bot writes at its start is all in the pipe before the first request (so how the reads
    split it is the same with and without the helper)."""
    said = []
    with start_bot([PY, str(HOSTILE / "scripted.py"), steps(*start)], HOSTILE, limits=LIMITS) as bot:
        while pending(bot._fds[1]) < written(start):
            time.sleep(0.005)
        for request in asks:
            try:
                said.append(repr(bot.ask(steps(*request).encode(), timeout)))
            except BotError as e:
                said.append(f"{type(e).__name__}: {e}")
                break
    return said


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_bots_bytes_get_the_same_verdict_with_or_without_the_c_round_trip(monkeypatch, attack):
    """The helper answers only the usual case and hands the rest to the general loop: for each
    thing a hostile bot can write, the outcome of every ask (line or fault, with its text) is the
    one the general loop alone gives, and an honest bot on the same hub still answers after."""
    start, asks = ATTACKS[attack]
    if attack.endswith("-alive"):  # its bot sleeps 2 s after closing stdout: the exit grace that follows
        monkeypatch.setattr(channel, "EXIT_GRACE", 0.2)  # EOF is waited out in full, on both paths alike
    with_helper = play(start, asks, 5)
    monkeypatch.setattr(blocking, "_round_trip", None)
    general = play(start, asks, 5)
    monkeypatch.undo()
    assert with_helper == general
    with start_bot([PY, str(HOSTILE / "echo.py")], HOSTILE, limits=LIMITS) as honest:
        assert honest.ask(b"hello", SLOW) == "ready"
        assert honest.receive_line(SLOW) == "hello"
    hub().settle()


def test_a_bot_flooding_or_closing_its_stderr_on_the_same_hub_never_delays_an_honest_reply():
    """Bots of one thread share a hub: the helper's poll watches the others' stderr and hands the
    round trip back whenever one is ready. A bot writing stderr without end (unfrozen, as under
    ``ponder``), and one that closed its stderr (a pipe forever hung up), make every round trip of
    the honest bot go through the general loop, which must still give each reply, at once."""
    flood = steps(["flood", 2, 1 << 40])
    with start_bot([PY, str(HOSTILE / "scripted.py"), flood], HOSTILE, limits=LIMITS) as flooder, \
            start_bot([PY, str(HOSTILE / "scripted.py"), steps(["close", 2])], HOSTILE, limits=LIMITS) as hung_up, \
            start_bot([PY, str(HOSTILE / "echo.py")], HOSTILE, limits=LIMITS) as honest:
        assert honest.receive_line(SLOW) == "ready"
        for n in range(40):
            assert honest.ask(f"move {n}".encode(), SLOW) == f"move {n}"
        assert flooder.stderr_dropped_bytes > 0  # it did flood meanwhile, and was read
        assert hung_up.returncode is None  # alive, its stderr closed
    hub().settle()


# -- a Dask worker's run under gVisor --------------------------------------------------------------

PROBE = """\
import os, sys
sys.stderr.write("PROBE release=%s uid=%d pid=%d\\n" % (os.uname().release, os.getuid(), os.getpid()))
sys.stderr.flush()
exec(open("bot.py").read())
"""


def gvisor_processes() -> set[int]:
    """runsc processes (runsc, its gofer and sandbox) of this test process's bots: each names the
    bot's state directory, which names this process."""
    mark = f"palace-arena-home-r{os.getpid()}-".encode()
    found = set()
    for pid in scan_procs():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"runsc") and mark in cmd:
            found.add(pid)
    return found


def _gvisor_problem() -> str | None:
    from arena.bots import probes
    return probes.gvisor_problem_now()


@pytest.mark.skipif(_gvisor_problem() is not None, reason="gVisor cannot run here")
def test_a_cluster_run_under_gvisor_seats_its_bots_in_runsc_and_leaves_nothing_after_its_close(tmp_path, monkeypatch):
    """A run that names the gVisor mode, on a worker (the plugin's referee, pickled as it reaches a
    Dask worker; a game on the task's thread, the close on another, as attacks6 does it in the
    namespaces mode): each bot sees gVisor's kernel, a private uid and pid 1, and a bot that
    ignores ``shutdown`` and spins is gone after the close, with its runsc processes and state."""
    import pickle
    import tempfile

    from arena.bots.bundles import CACHE_ENV
    from arena.bots.containment import Containment
    from arena.bots.manifest import load_bot
    from arena.bots.uids import uid_in_pool
    from arena.tournament import cluster as C
    from arena.tournament.config import TournamentConfig
    from arena.tournament.executors import BotSetup, GameTask
    from tests.test_stranger_attacks6 import LINGER, REPO

    monkeypatch.setattr(blocking, "SHUTDOWN_GRACE", 0.2)
    home = Path(tempfile.mkdtemp(prefix="arena-a7-"))
    home.chmod(0o755)
    cache = home / "cache"
    cache.mkdir(mode=0o755)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    folders = []
    for name, script, text in (("linger", "linger.py", LINGER), ("probe", "probe.py", PROBE)):
        d = home / name
        d.mkdir(mode=0o755)
        shutil.copy(REPO / "examples" / "bots" / "python" / "bot.py", d / "bot.py")
        (d / script).write_text(text)
        (d / "bot.toml").write_text(f'name = "{name}"\nversion = "1"\nauthor = "{name}"\ncommand = ["python3", "{script}"]\n')
        folders.append(d)
    specs = [load_bot(d) for d in folders]
    cfg = TournamentConfig()
    setup = BotSetup.of({str(d): s for d, s in zip(folders, specs)}, rules=cfg.ruleset(), clock=cfg.clock(),
                        containment=Containment.GVISOR)
    referee = pickle.loads(pickle.dumps(C._referee(setup)))
    played: list[bytes] = []
    before = gvisor_processes()  # (another test's, if any: not this run's)
    runsc: set[int] = set()

    def task() -> None:  # the Dask task's thread
        played.append(referee.play(GameTask("g7-000000", 5, tuple(s.label for s in specs), 300).wire()))
        runsc.update(gvisor_processes() - before)  # the bots, warm in the run's pool

    try:
        on_thread(task)
        on_thread(referee.close)  # the plugin's teardown
    finally:
        shutil.rmtree(home, ignore_errors=True)
    from arena.tournament.executors import PlayedGame
    rec = PlayedGame.from_bytes(played[0], cfg.ruleset().options()).full_record()
    said = [line for lines in rec.stderr for line in lines if line.startswith("PROBE")]
    said += [line for step in rec.steps for line in step.get("stderr", []) if line.startswith("PROBE")]
    assert said, "the probe bot said nothing"
    words = dict(w.split("=") for w in said[0].split()[1:])
    assert words["release"] == "4.4.0", said  # gVisor's kernel, not the host's
    assert uid_in_pool(int(words["uid"])) and words["pid"] == "1", said
    assert runsc, "no runsc process ran the bots"
    assert runsc & gvisor_processes() == set(), "runsc outlived the run's close"


# -- names that are not there: the host's negative dentries under gVisor ------------------------------


@pytest.mark.skipif(_gvisor_problem() is not None, reason="gVisor cannot run here")
def test_two_gvisor_seats_look_names_up_in_no_folder_of_the_host_they_share(tmp_path):
    """Under gVisor each seat's gofer looks names up in the host's folders, and a name a folder
    lacks leaves a negative entry in the host's dentry cache, keyed by that folder: a seat that
    looked up 600 names of a slot made the other seat's lookups of them 2-4% faster (the
    receiver's median of single lookups against two sets nobody looked up), 0.2-0.8 bits/s
    (bench/bench_dentry_channel.py --gvisor --median). No folder two seats are served from may be
    the same host folder: every folder a seat's bundle binds (the system view's, the arena
    package's) is the seat's own, its files the same inodes as the shared files (the same warmed
    pages), so a seat still reads them."""
    import json as _json
    import tempfile

    from arena.bots.containment import Containment
    from tests.checks import on_thread, reachable

    shared = tmp_path / "shared"  # a read-only folder every seat sees (as the arena package is)
    shared.mkdir()
    (shared / "module.py").write_text("X = 1\n")
    bot = tmp_path / "bot"
    bot.mkdir()
    bot, shared = reachable(bot), reachable(shared)
    said = ["python3", "-c", f"import sys; sys.path.insert(0, {str(shared)!r}); import module, json; "
            "print(module.X, flush=True); sys.stdin.readline()"]
    mine = f"palace-arena-home-r{os.getpid()}-"
    others = set(Path(tempfile.gettempdir()).glob(f"{mine}*gvisor*"))  # (another test's, if any)
    with start_bot(said, bot, containment=Containment.GVISOR, ro_binds=[shared], limits=LIMITS) as one, \
            start_bot(said, bot, containment=Containment.GVISOR, ro_binds=[shared], limits=LIMITS) as two:
        assert one.receive_line(SLOW) == "1" and two.receive_line(SLOW) == "1"
        homes = sorted(set(Path(tempfile.gettempdir()).glob(f"{mine}*gvisor*")) - others)
        assert len(homes) == 2
        folders = []
        for home in homes:
            mounts = _json.loads((home / "bundle" / "config.json").read_text())["mounts"]
            binds = {m["destination"]: m["source"] for m in mounts if m["type"] == "bind"}
            assert str(shared) in binds and "/usr/lib/python3.11" in binds
            for where, source in binds.items():
                if os.path.isdir(source):
                    assert Path(source).is_relative_to(home), f"{where} is served from the host's {source}"
                    folders.append(os.stat(source).st_ino)
            assert os.stat(Path(binds[str(shared)]) / "module.py").st_ino == os.stat(shared / "module.py").st_ino
        assert len(folders) == len(set(folders)), "two seats are served from one folder"
    hub().settle()


# -- the per-run hub of a worker, with two runs -----------------------------------------------------

# test_stranger_attacks6's lingering bot, sleeping rather than spinning once shut down: it still
# ignores shutdown and outlives its grace unless killed, which is what the retirement tests watch.
SLEEPING_LINGER = """\
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
exec(open("bot.py").read())
while True:  # shut down, stdin closed: stay
    time.sleep(60)
"""


def test_a_bot_retired_mid_run_is_finished_before_its_game_returns_to_the_worker(monkeypatch):
    """A worker keeps each run's bots on that run's own hub. A pooled bot is retired when its
    process saw the next game's deal (and its latest game was another): at that game's start it
    gets ``shutdown``, is thawed to exit by itself, and has its grace, which the hub's waits
    during the game end (a kill). A game shorter than the grace left it closing: the run's hub
    waits next only at the run's next game on this worker, its close or the idle reaper (every
    30 s, after 120 s idle), and meanwhile a bot that ignores ``shutdown`` spun, unfrozen,
    through every other run's games on the worker. Now the game's task returns only once the
    bots it retired are finished."""
    from arena.tournament.executors import GameTask
    from tests import test_stranger_attacks6
    from tests.test_stranger_attacks6 import _alive, worker_run

    # when the retired bot ends is what counts here: a spinning one spent its grace's CPU for nothing
    monkeypatch.setattr(test_stranger_attacks6, "LINGER", SLEEPING_LINGER)
    run, specs, cache, bot = worker_run(monkeypatch, grace=2.0)  # past a 30-turn game with its bots started
    labels = tuple(s.label for s in specs)
    seen: list[int] = []
    closing: list[int] = []

    def task() -> None:  # the Dask task's thread: two deals, ordered by seat rotation as a tournament's
        run.play(GameTask("a-000000", 5, labels, 30).wire())
        run.play(GameTask("a-000001", 6, labels, 30).wire())
        seen.extend(p.conn.pid for p in run.executor.pool.info if p.spec.name == "linger")
        run.play(GameTask("a-000002", 5, labels[::-1], 30).wire())  # a deal it saw, not its latest: retired
        closing.append(run.hub.closing)

    try:
        on_thread(task)
        assert len(seen) == 1
        assert closing == [0], "a bot retired by the game was still in its grace when the game returned"
        assert _alive(seen) == [], "the retired bot outlived its game"
    finally:
        on_thread(run.close)  # the plugin's teardown
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(bot.parent, ignore_errors=True)
