"""The gVisor containment (arena.bots.gvisor): refused with runsc's reason where runsc cannot run,
never replaced by a weaker mode; where it runs, a bot plays a whole game in it, sees gVisor's
kernel and nothing of the host, and leaves no runsc process behind (a game, a timeout, a referee
killed -9)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arena.bots import gvisor, probes
from arena.bots.containment import Containment, cgroup_root
from arena.bots.launch import ContainmentError, Launcher, containment_for
from arena.bots.start import start_bot
from arena.bots.uids import uid_in_pool

from tests.checks import arena_here, reachable

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "PYTHONWARNINGS": "ignore"}
GVISOR_PROBLEM = probes.gvisor_problem_now()
needs_gvisor = pytest.mark.skipif(GVISOR_PROBLEM is not None, reason=f"gVisor cannot run here: {GVISOR_PROBLEM}")


def arena(*args: str, env: dict[str, str] = ENV, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def runsc_processes(under: Path) -> dict[int, str]:
    """The runsc processes (runsc, its gofer and sandbox) whose state is under ``under``: pid and
    command line."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "runsc" in cmd and f"--root={under}" in cmd:
            found[int(pid)] = cmd
    return found


@pytest.fixture
def failing_runsc(tmp_path: Path) -> dict[str, str]:
    """The environment of an arena whose PATH finds a runsc that cannot start its sandbox (as in a
    container without the rights it needs): it prints runsc's words for that and exits 128."""
    fake = tmp_path / "bin" / "runsc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'running container: creating container: cannot create sandbox: "
                    "operation not permitted' >&2\nexit 128\n")
    fake.chmod(0o755)
    return {**ENV, "PATH": f"{fake.parent}:{ENV.get('PATH', '/usr/bin:/bin')}"}


def stored_games(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store) as db:
        return db.execute("select count(*) from games").fetchone()[0]


# -- refusal: always runs --------------------------------------------------------------------------


def test_a_failing_runsc_refuses_the_run_with_its_reason(tmp_path: Path, failing_runsc: dict[str, str]) -> None:
    """A runsc that cannot start its sandbox: `arena tournament --gvisor` stops before any game with
    one error line carrying runsc's own words; it neither plays under bubblewrap nor stores a game."""
    store = tmp_path / "store" / "arena.sqlite"
    done = arena("tournament", "--bot", "random", "--bot", "lowest", "--deals", "1", "--gvisor",
                 "--store", str(store), "--plain", env=failing_runsc)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "gVisor" in errors[0] and "cannot create sandbox: operation not permitted" in errors[0]
    if os.geteuid() != 0:
        assert "root referee" in errors[0]
    assert "Traceback" not in done.stderr
    assert stored_games(store) == 0


def test_a_ladder_for_strangers_refuses_a_submission_where_runsc_fails(open_tmp: Path,
                                                                       failing_runsc: dict[str, str]) -> None:
    """`gvisor = true` in a ladder file: the entry check of a submission is refused with runsc's
    reason, and nothing is placed."""
    from tests.test_ladder import bot_copy, write_ladder
    path = write_ladder(open_tmp, "strangers", gvisor=True)
    low = bot_copy(open_tmp, "lowest", "2.0")
    done = arena_here("submit", str(low), "--ladder", str(path), "--store", str(open_tmp / "s.sqlite"), "--plain",
                      env=failing_runsc)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "gVisor" in errors[0], done.stderr
    assert "operation not permitted" in errors[0] or "root referee" in errors[0]
    assert "Traceback" not in done.stderr
    assert "seeding" not in done.stdout  # refused at the entry check, not after it ran under bubblewrap
    assert stored_games(open_tmp / "s.sqlite") == 0


BOT_COMMANDS = {"check": ["check", "random", "--games", "1", "--rules", "classic"],
                "play": ["play", "random", "lowest", "--quiet"],
                "match": ["match", "random", "lowest", "--max-games", "2"]}


@pytest.mark.parametrize("command", sorted(BOT_COMMANDS))
def test_check_play_and_match_refuse_gvisor_where_runsc_fails(tmp_path: Path, failing_runsc: dict[str, str],
                                                              command: str) -> None:
    """`--gvisor` on the commands that start bots outside a tournament: where runsc cannot run,
    one error line with runsc's words and no game, never the game under bubblewrap. (In this
    process: what a shell sees of such a refusal is the tournament's test above.)"""
    store = tmp_path / "store" / "arena.sqlite"
    args = [*BOT_COMMANDS[command], "--gvisor"] + ([] if command == "check" else ["--store", str(store)])
    done = arena_here(*args, env=failing_runsc)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "gVisor" in errors[0], done.stderr
    assert "operation not permitted" in errors[0] or "root referee" in errors[0]
    assert "000000" not in errors[0]  # refused before any game (Launcher.preflight), not at a game's first start
    assert stored_games(store) == 0
    done = arena_here(*args, "--trusted-bots", env=failing_runsc)  # the arguments' contradiction
    assert done.returncode == 2 and "contradict" in done.stderr, done.stdout + done.stderr


# That `arena check`, `play` and `match` run a bot under gVisor's kernel (not in another mode) is
# tests/test_gvisor_system.py's test_check_play_match_and_debug_run_under_gvisor_with_the_system_list.


def test_no_runsc_is_refused_not_replaced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gvisor, "RUNSC", str(tmp_path / "missing"))
    with pytest.raises(ContainmentError, match="gVisor was asked for but cannot run here: runsc not found"):
        Launcher(containment=Containment.GVISOR).mode_now()
    monkeypatch.setattr(gvisor, "RUNSC", None)
    with pytest.raises(ContainmentError, match="contradict"):
        containment_for(gvisor=True, trusted=True)


def test_a_worker_told_gvisor_works_still_refuses_seats_when_runsc_then_fails(
        monkeypatch: pytest.MonkeyPatch, failing_runsc: dict[str, str]) -> None:
    """A worker process takes its parent's word that runsc runs here (probes.take_gvisor_from_parent)
    and does not probe again; a runsc that fails after that is each seat's forfeit (runsc exits
    before the bot's hello), never a game in a weaker mode. The word is taken only for the runsc the worker itself would use."""
    from arena.engine import PRESETS
    from arena.tournament.executors import BlockingExecutor, BotSetup, GameTask
    monkeypatch.setenv("PATH", failing_runsc["PATH"])
    monkeypatch.setattr(probes, "_gvisor_checked", {})
    fake = gvisor.find_runsc()
    assert fake is not None and fake.startswith(failing_runsc["PATH"].split(":")[0])
    probes.take_gvisor_from_parent("/elsewhere/runsc")  # not the runsc this process uses: probed as ever
    assert probes._gvisor_checked == {}
    probes.take_gvisor_from_parent(fake)
    assert probes.gvisor_problem_now() is None and probes.gvisor_seen_working() == fake  # no probe of its own
    setup = BotSetup.of(["random", "lowest"], rules=PRESETS["classic"], containment=Containment.GVISOR)
    ex = BlockingExecutor(setup)
    try:
        played = ex.play(GameTask("told-0", 7, tuple(setup.specs), 50))
    finally:
        ex.close()
    # runsc exits before the bot's hello: both seats forfeit at the handshake, with runsc's words
    assert sorted((f["seat"], f["reason"]) for f in played.record.faults) == [(0, "handshake"), (1, "handshake")]
    assert played.record.steps == []  # no move: nothing ran in another mode
    assert all("cannot create sandbox" in " ".join(err) for err in played.record.stderr), played.record.stderr


def test_ladder_and_tournament_files_may_ask_for_gvisor(tmp_path: Path) -> None:
    """The choice in a file reaches the launcher of every game, worker processes included."""
    from arena.ladder.config import load_ladder
    from arena.tournament.config import load_config
    from arena.tournament.executors import BotSetup, default_launcher
    from arena.tournament.run import bot_setup
    (tmp_path / "strangers.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\n')
    (tmp_path / "t.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\n')
    ladder = load_ladder(tmp_path / "strangers.toml", tmp_path, check_bots=False)
    for cfg in (ladder.tournament("t", format="round-robin", bots=ladder.bots), load_config(tmp_path / "t.toml")):
        setup = BotSetup.from_wire(bot_setup(cfg, {}).wire())
        assert setup.containment is Containment.GVISOR and default_launcher(setup).containment is Containment.GVISOR
    assert load_config(None, {"bots": ["random", "lowest"]}).containment is Containment.AUTO


# -- where runsc runs ------------------------------------------------------------------------------


PROBE_BOT = textwrap.dedent("""
    import os, socket, sys
    print(os.uname().release, os.getuid(), ",".join(sorted(os.listdir("/"))), flush=True)
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2)
        print("network", flush=True)
    except OSError:
        print("no network", flush=True)
    sys.stdin.readline()
""")


@needs_gvisor
def test_a_bot_under_gvisor_sees_its_own_kernel_and_nothing_of_the_host(tmp_path: Path) -> None:
    """The seat is killed at its close (the bot waits on its stdin): its close reaps runsc's
    sandbox and gofer (the killed half of test_a_gvisor_seat_leaves_no_zombie_in_the_arena)."""
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "probe.py").write_text(PROBE_BOT)
    bot = reachable(bot)

    def main() -> tuple[str, str]:
        proc = start_bot(["python3", "probe.py"], bot, containment=Containment.GVISOR)
        with proc:
            assert proc.containment.startswith("gVisor (runsc run)")
            lines = proc.receive_line(60), proc.receive_line(60)
            if cgroup_root()[0] is not None:  # runsc, its gofer and its sandbox: counted and killed as the bot
                assert proc.cgroup is not None and proc.home is not None
                ours = set(runsc_processes(proc.home))
                assert len(ours) == 3 and ours <= proc.cgroup.pids()
            return lines

    first, second = main()
    assert _zombies_named_exe() == []
    release, uid, top = first.split()
    assert release != os.uname().release  # gVisor's kernel answers, not the host's
    assert uid_in_pool(int(uid))
    assert set(top.split(",")) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin",
                                   "sys", "tmp", "usr"}
    assert second == "no network"


@needs_gvisor
def test_tournament_under_gvisor_plays_and_leaves_no_runsc(tmp_path: Path, open_tmp: Path) -> None:
    """A whole game through `arena tournament --gvisor`, the pair's two games in two worker
    processes (-j 2); one bot never answers, so its game ends with a timeout; afterwards nothing
    of runsc is left, of the workers' seats either. runsc is probed once, by the run's process:
    the workers take its word (probes.take_gvisor_from_parent) and boot no probe sandbox of their own."""
    from tests.test_cli_firsthour import bot
    silent = bot(tmp_path, "silent", "import time; time.sleep(600)")
    store = tmp_path / "store" / "arena.sqlite"
    noted = tmp_path / "runs"  # one line per `runsc run`: its bundle's command
    noting = tmp_path / "bin" / "runsc"
    noting.parent.mkdir()
    noting.write_text(f"#!/bin/sh\nprev=\nfor a; do [ \"$prev\" = --bundle ] && grep -o '\"args\": *\\[[^]]*' "
                      f"\"$a/config.json\" >> {noted}; prev=$a; done\nexec {gvisor.find_runsc()} \"$@\"\n")
    noting.chmod(0o755)
    # In this process: its seats are the workers', and the workers keep their seats' state under
    # their TMPDIR (a refusal's exit status, as a shell sees it, is the failing runsc's test above).
    done = arena_here("tournament", "--bot", "random", "--bot", str(silent), "--seats", "2",
                      "--deals", "1", "--gvisor", "--move-ms", "300", "--bank-ms", "0", "-j", "2",
                      "--store", str(store), "--plain",
                      env={"TMPDIR": str(open_tmp), "PATH": f"{noting.parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    runs = noted.read_text().splitlines()
    assert len([r for r in runs if '"-c", ":"' in r]) == 1 and len(runs) >= 3, runs  # one probe, then the seats
    assert stored_games(store) == 2  # the pair in both seat orders
    with sqlite3.connect(store) as db:
        reasons = [r for (r,) in db.execute("select result from games")]
    assert any("timeout" in r for r in reasons), reasons
    assert runsc_processes(open_tmp) == {}
    assert [p for p in open_tmp.iterdir() if "gvisor" in p.name] == []  # bundles and runsc state removed


# The bash starter splits each message into tokens with ``grep``, which the gVisor seat's system view
# once lacked (every game a timeout forfeit): its games under gVisor, both seat orders, are
# tests/test_gvisor_system.py's test_the_java_and_bash_starters_play_under_gvisor_through_a_tournament.


REFEREE = textwrap.dedent("""
    import sys, time
    from arena.bots import probes
    from arena.bots.containment import Containment
    from arena.bots.gvisor import find_runsc
    from arena.bots.start import start_bot
    probes._gvisor_checked[find_runsc()] = None  # the test's process probed runsc: not a second sandbox here
    bot = start_bot(["python3", "-c", "import time; print('up', flush=True); time.sleep(600)"],
                             sys.argv[1], containment=Containment.GVISOR)
    print(bot.pid, bot.receive_line(60), flush=True)
    time.sleep(600)
""")


@needs_gvisor
def test_referee_killed_leaves_no_runsc_after_cleanup(tmp_path: Path, open_tmp: Path) -> None:
    env = {**ENV, "TMPDIR": str(open_tmp)}
    referee = subprocess.Popen([sys.executable, "-c", REFEREE, str(reachable(tmp_path))], stdout=subprocess.PIPE,
                               text=True, env=env)
    try:
        assert referee.stdout is not None
        assert referee.stdout.readline().split()[1] == "up"
        assert runsc_processes(open_tmp)  # the test sees what it counts
    finally:
        os.kill(referee.pid, signal.SIGKILL)
        referee.wait()
    subprocess.run([sys.executable, "-c", "from arena.bots.containment import cleanup_stale; cleanup_stale()"],
                   env=env, check=True, timeout=120)
    assert runsc_processes(open_tmp) == {}


FORK_BOT = textwrap.dedent("""
    import os, time
    n = 0
    try:
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
    except OSError:
        pass
    print(n, flush=True)
""")


@needs_gvisor
def test_a_fork_bomb_under_gvisor_stops_at_max_processes(tmp_path: Path) -> None:
    """The bot's processes live inside gVisor (not host pids): its own RLIMIT_NPROC bounds them."""
    from arena.limits import Limits
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "fork.py").write_text(FORK_BOT)
    bot = reachable(bot)

    def main() -> str:
        proc = start_bot(["python3", "fork.py"], bot, containment=Containment.GVISOR, limits=Limits(max_processes=16))
        with proc:
            return proc.receive_line(60)

    assert int(main()) < 16


# -- between two seats: the kernel's shared counters -----------------------------------------------

COUNTERS = Path(__file__).resolve().parent / "fairplay_bots" / "counters.py"
# What the sender spells, one bit per round: SENT of everything for a 1, just past one CPU's batch of
# 1,024 inode numbers, so a shared counter that hands them out in batches must give one more (3,000
# showed nothing more under gVisor and cost 2.3 s of its system calls per 1). Four rounds hold every
# step a reading can take (after a 1, after a 0 that follows a 1, after two 0s, after a 1 that
# follows a 0); a longer message repeated them, each 1 costing seconds of gVisor's system calls.
MESSAGE = "1001"
SENT = 1100
# What a receiver may not be able to read the sender through, written here, not read from the code:
# the inode numbers of pipes and memfds, the gap between two pipes in a row (the machine-wide
# counter's batches), pidfd inodes, the eventfd-id in fdinfo, the autogroup id of a new session.
CHANNELS = ("pipe", "memfd", "pipe_jump", "pidfd", "eventfd", "autogroup")


def _round_views(readings: list[dict]) -> list[dict]:
    """What the receiver saw change between two of its reads, per channel: a number's step, or
    the reading itself where it is not a number."""
    views = []
    for before, after in zip(readings, readings[1:]):
        views.append({k: (after[k] - before[k] if isinstance(after[k], int) and isinstance(before[k], int)
                          and k != "pipe_jump" else after[k]) for k in CHANNELS})
    return views


def counters_pair(tmp_path: Path, **mode) -> tuple[list[dict], list[str]]:
    """Two seats in ``mode`` (start_bot's keywords), in lock step: before each read of the receiver,
    the sender makes SENT of everything for a 1 and nothing for a 0. Returns the receiver's
    readings (one before the first bit) and the two bots' containment lines."""
    seat = tmp_path / "seat"
    seat.mkdir()
    shutil.copy(COUNTERS, seat / "counters.py")
    seat = reachable(seat)

    def main() -> tuple[list[dict], list[str]]:
        import json
        receiver = start_bot(["python3", "counters.py"], seat, **mode)
        with receiver:
            sender = start_bot(["python3", "counters.py"], seat, **mode)
            with sender:
                assert receiver.receive_line(60) == "ready" and sender.receive_line(60) == "ready"
                receiver.send_line("read")
                readings = [json.loads(receiver.receive_line(60))]
                for bit in MESSAGE:
                    if bit == "1":
                        sender.send_line(f"send {SENT}")
                        assert sender.receive_line(120) == "sent"
                    receiver.send_line("read")
                    readings.append(json.loads(receiver.receive_line(60)))
                return readings, [receiver.containment, sender.containment]

    return main()


@needs_gvisor
def test_two_gvisor_seats_share_no_kernel_counter(tmp_path: Path) -> None:
    """The channels that carried 20-100 bits/s between two bubblewrap seats (docs/SANDBOX.md): under
    gVisor every counter the receiver reads moves by its own calls alone, the same after a 1 as
    after a 0, so the sender's message leaves nothing to decode."""
    readings, containment = counters_pair(tmp_path, containment=Containment.GVISOR)
    views = _round_views(readings)
    assert all(r["pipe_jump"] == 1 for r in readings), readings  # no other pipe ever took a number
    after_one = {json_key(v) for v, bit in zip(views, MESSAGE) if bit == "1"}
    after_zero = {json_key(v) for v, bit in zip(views, MESSAGE) if bit == "0"}
    assert after_one == after_zero and len(after_one) == 1, views
    assert all(c.startswith("gVisor (runsc run)") for c in containment), containment


@pytest.mark.skipif(probes.sandbox_problem_now() is not None, reason="needs bubblewrap")
def test_the_counter_pair_can_tell_a_shared_kernel(tmp_path: Path) -> None:
    """The same pair under bubblewrap, which shares the host's kernel: the pipe counter moves with
    the sender's bits (the channel docs/SANDBOX.md measures), so the gVisor test above can see one."""
    readings, _ = counters_pair(tmp_path, containment=Containment.BUBBLEWRAP)
    views = _round_views(readings)
    assert len({json_key(v) for v in views}) > 1, views


def json_key(view: dict) -> str:
    import json
    return json.dumps(view, sort_keys=True)


# -- limits under runsc ----------------------------------------------------------------------------


@needs_gvisor
@pytest.mark.skipif(cgroup_root()[0] is None, reason="needs a memory cgroup")
def test_a_bot_allocating_past_its_cap_under_gvisor_is_a_memory_fault(tmp_path: Path) -> None:
    """gVisor's kernel and the bot's memory live in runsc's sandbox process, in the bot's cgroup:
    past ``memory_mb`` the kernel kills it, and the arena says memory limit (the bot's own fault),
    not a crash, with the peak at the cap."""
    from arena.bots.errors import MemoryLimitExceeded
    from arena.limits import Limits
    bot = tmp_path / "bot"
    bot.mkdir()
    shutil.copy(ROOT / "tests" / "hostile" / "memory_hog.py", bot / "memory_hog.py")
    bot = reachable(bot)
    limits = Limits(cpu_seconds=60, memory_mb=256, max_processes=16)

    proc = start_bot(["python3", "memory_hog.py"], bot, containment=Containment.GVISOR, limits=limits)
    with proc:
        assert proc.receive_line(120) == "eating"
        with pytest.raises(MemoryLimitExceeded) as info:
            proc.receive_line(120)  # a generous wait: only the verdict is asserted
        assert info.value.reason == "memory_limit" and info.value.signal == signal.SIGKILL
    assert proc.resource_usage().peak_memory_bytes <= (256 << 20) + (1 << 20)


# -- a ladder for strangers: every game of a submission in the ladder's mode -----------------------

PICKY = """import os
from arena.botkit import serve
HOST = {host!r}
# Plays legally only where gVisor's kernel answers; under the host's kernel, an answer out of range.
serve(lambda msg: msg["actions"][0]["id"] if os.uname().release != HOST else 10**6, "picky", "1.0")
"""


@needs_gvisor
def test_an_upload_to_a_strangers_ladder_is_checked_and_placed_under_gvisor(tmp_path: Path, open_tmp: Path) -> None:
    """`arena serve`'s upload path: a ladder file naming `gvisor = true` runs the entry check and the
    placement under gVisor. The bot plays legally only under gVisor's kernel, so a check or a
    placement game run in any other mode is a fault, and the upload would not be placed cleanly."""
    import trio

    from tests.test_serve import ServerProc, _finished, multipart, zip_bytes
    from arena.ladder import ensure_seeded, load_ladder, open_store
    from arena.serve import data
    (open_tmp / "ladders").mkdir()
    file = open_tmp / "ladders" / "strangers.toml"
    text = ('rules = "powers"\nseats = 2\ndeals = 1\nbots = ["random", "lowest"]\ncheck_games = 1\n{gvisor}'
            'concurrency = 1\n'  # the server's own process plays: gVisor seats in worker processes are the tournament's test
            'max_tables = 1\n'  # the placement against one member, its two seat orders: four gVisor seats, not eight
            '[options]\nmax_players = 2\n')  # the entry check's one scenario: 2 seats (no 4-seat game of gVisor seats)
    store = open_tmp / "data" / "arena.sqlite"
    store.parent.mkdir()
    # The ladder is seeded first, outside gVisor: its initial bots' round-robin is four seats that
    # show nothing here (a gVisor tournament's games are test_tournament_under_gvisor_plays_and_leaves_no_runsc's);
    # then the file names gVisor, and the server runs the upload's check and placement under it.
    file.write_text(text.format(gvisor=""))
    seeded = open_store(ladder := load_ladder(file, file.parent, store=store), store)
    try:
        assert trio.run(ensure_seeded, ladder, seeded) == 2
    finally:
        seeded.close()
    file.write_text(text.format(gvisor="gvisor = true\n"))
    files = {"picky/bot.toml": b'name = "picky"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n',
             "picky/bot.py": PICKY.format(host=os.uname().release).encode()}
    server = ServerProc(store, "--allow-submit", "--ladders", str(open_tmp / "ladders"))
    try:
        body, ctype = multipart({"ladder": "strangers", "token": server.token}, ("picky.zip", zip_bytes(files)))
        status, headers, _ = server.request("POST", "/submit", body, {"Content-Type": ctype})
        assert status == 303
        page = _finished(server, headers["location"])
        assert b'data-status="placed"' in page, page.decode()[-3000:] + server.stderr()[-3000:]
        assert b"no faults" in page
        db = data.ReadStore(store)
        try:
            results = [r for (r,) in db.db.execute("SELECT result FROM games")]
        finally:
            db.db.close()
        assert results and not [r for r in results if "illegal" in r or "fault" in r], results
    finally:
        server.stop()


def _zombies_named_exe() -> list[int]:
    me, found = os.getpid(), []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            raw = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        rest = raw[raw.rindex(b")") + 2:].split()
        if raw[raw.index(b"(") + 1:raw.rindex(b")")] == b"exe" and rest[0] == b"Z" and int(rest[1]) == me:
            found.append(int(name))
    return found


@needs_gvisor
def test_a_gvisor_seat_leaves_no_zombie_in_the_arena(tmp_path: Path) -> None:
    """runsc's sandbox and gofer (``/proc/self/exe``, named "exe") outlive ``runsc run`` and are
    reparented to the arena, the subreaper: a seat's close reaps them, whether the bot ended by
    itself or was killed, so a long ``arena serve`` with a gVisor ladder piles none up (before,
    each seat left two). Here the bot ends by itself; a killed seat is
    test_a_bot_under_gvisor_sees_its_own_kernel_and_nothing_of_the_host's."""
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "probe.py").write_text(PROBE_BOT)
    bot = reachable(bot)
    proc = start_bot(["python3", "probe.py"], bot, containment=Containment.GVISOR)
    with proc:
        proc.receive_line(60), proc.receive_line(60)
        proc.send_line("bye")  # it reads one line and exits
        assert proc._wait_exit(30)
    assert _zombies_named_exe() == []
