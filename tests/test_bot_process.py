"""Hostile bots against arena.bots, at the process level.

Every bot is a small script in tests/hostile/ run by the system python (which a
private bot uid can execute, unlike a pyenv under /root).  Each test checks the
named error and, through the autouse ``no_leftovers`` fixture, that nothing the
test started is still in /proc (every bot's argv carries a marker, which forked
children inherit), that the test process has no zombie children and that no
cgroup or temp dir of ours remains.
"""

from __future__ import annotations

import json
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from arena.bots import blocking, containment
from arena.bots.blocking import BlockingBot, BotClosed, Interrupted, hub
from arena.bots.start import start_bot
from arena.bots.containment import Containment, RunAs, cgroup_root, cleanup_stale
from arena.bots.errors import (BotClosedInput, BotClosedOutput, BotError, BotExited, BotStartError, BotTimeout,
                               CpuLimitExceeded, LineTooLong, MemoryLimitExceeded, NotUtf8, OutputLimitExceeded,
                               SandboxUnavailable, StartErrorKind)
from arena.bots.filesystem import sandbox_visible
from arena.limits import Limits
from arena.bots.probes import namespaces_problem_now, sandbox_problem_now
from arena.bots.process import ENV_TOKEN
from arena.bots.procs import BOTS_GID, read_proc
from arena.bots.channel import EXIT_GRACE, READ_CHUNK
from arena.bots.spawn import DEFAULT_PATH
from arena.bots.uids import BOT_UID_BASE, inaccessible_reason, uid_in_pool
from arena.faults import BadJson
from arena.referee.protocol import parse_line
from tests.checks import boot_ticks, end_reaped_elsewhere, reachable, zombie_children

HOSTILE = reachable(Path(__file__).parent / "hostile")  # private uids run these
PY = shutil.which("python3", path=DEFAULT_PATH)
MARK = f"arena-hostile-{os.getpid()}"
ROOT = os.geteuid() == 0
FAST = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, max_line_bytes=1 << 20)
SLOW = 120  # a wait that only a broken test reaches: nothing here asserts how fast a bot is

CGROUPS, CGROUP_NOTE = cgroup_root()
SANDBOX_PROBLEM = sandbox_problem_now() if PY else "no python3"

needs_root = pytest.mark.skipif(not ROOT, reason="private bot uids need a root referee")
needs_sandbox = pytest.mark.skipif(SANDBOX_PROBLEM is not None, reason=f"bwrap: {SANDBOX_PROBLEM}")
needs_cgroup = pytest.mark.skipif(CGROUPS is None, reason=f"no usable cgroup: {CGROUP_NOTE}")
pytestmark = pytest.mark.skipif(PY is None, reason="no python3 on the bots' PATH")


def cmd(script: str, *args: str) -> list[str]:
    return [PY, str(HOSTILE / script), *args, MARK]


def marked_pids() -> dict[int, str]:
    """Processes whose argv carries this test run's marker, with their state."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if MARK.encode() not in f.read():
                    continue
            info = read_proc(int(name))
        except OSError:
            continue
        if info is not None:
            found[info.pid] = info.state
    return found


def our_cgroups() -> list[str]:
    if CGROUPS is None:
        return []
    prefix = f"r{os.getpid()}-"
    found: list[str] = []
    for parent in CGROUPS.parents.values():
        try:
            found += [str(p) for p in parent.iterdir() if p.name.startswith(prefix)]
        except FileNotFoundError:  # an empty parent another arena process removed meanwhile: none of ours in it
            pass
    return found


def our_homes() -> list[str]:
    return [str(p) for p in Path(tempfile.gettempdir()).glob(f"r{os.getpid()}-b*")]


@pytest.fixture(autouse=True)
def no_leftovers():
    since = boot_ticks()  # another module's daemons dying orphaned to us are not this test's
    yield
    deadline = time.monotonic() + 2
    while marked_pids() and time.monotonic() < deadline:
        time.sleep(0.02)  # only a failing test gets here: give it a chance
    assert marked_pids() == {}, "bot processes survived the test"
    assert zombie_children(started_since=since) == []
    assert our_cgroups() == []
    assert our_homes() == []


@pytest.fixture(autouse=True)
def settled():
    yield
    hub().settle()  # bots closed with a grace period: finished before the leftover check


def start(script: str, *args: str, limits: Limits = FAST, **kw) -> BlockingBot:
    return start_bot(cmd(script, *args), HOSTILE, limits=limits, **kw)


# -- the well-behaved case ------------------------------------------------------


def test_echo_round_trip_minimal_env_and_private_home():
    def main():
        with start("env_report.py") as bot:
            report = json.loads(bot.receive_line(5))
            home = Path(report["env"]["HOME"])
            assert home.is_dir() and bot.home == home
            usage = bot.resource_usage()
        return report, home, usage

    report, home, usage = main()
    env = report["env"]
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", ENV_TOKEN}
    assert env["PATH"] == DEFAULT_PATH and env["LANG"] == "C.UTF-8"
    assert env["TMPDIR"] == env["HOME"]
    assert report["cwd"] == str(HOSTILE.resolve())
    assert report["home_mode"] == "0o700"
    assert report["sid"] == report["pid"] == report["pgid"]  # own session and group
    assert report["nofile"] == [FAST.open_files, FAST.open_files]
    if ROOT:
        assert uid_in_pool(report["uid"]) and report["gid"] == report["uid"]
        assert report["groups"] == [BOTS_GID]  # the bots' group alone (the folder of its copy: uids.seal)
        assert report["home_owner"] == report["uid"]
    assert not home.exists()  # removed by aclose
    assert usage.cpu_seconds is not None and usage.peak_memory_bytes


def test_echo_and_context_manager_close():
    def main():
        with start("echo.py") as bot:
            assert bot.receive_line(5) == "ready"
            if bot.cgroup is not None:  # joined before exec, in every hierarchy
                for d in bot.cgroup.dirs.values():
                    assert str(bot.pid) in (d / "cgroup.procs").read_text().split()
            for i in range(50):
                bot.send_line(f"ping {i}")
                assert bot.receive_line(5) == f"ping {i}"
        with pytest.raises(BotClosed):
            bot.send_line("after close")
        return bot

    bot = main()
    assert bot.returncode == -signal.SIGKILL


def _open_files() -> set[tuple[int, str]]:
    """This process's descriptors and what each refers to (a pipe's inode differs from every
    earlier pipe's, so a reused number holding a new pipe still counts as new)."""
    gc.collect()
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            found.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            pass
    return found


def test_no_fd_leak_over_many_bots():
    def main():
        def cycle():
            with start("echo.py", containment=Containment.BUBBLEWRAP if SANDBOX_PROBLEM is None else Containment.TRUSTED) as bot:
                assert bot.receive_line(10) == "ready"
            with pytest.raises(BotStartError):
                start_bot(["no-such-bot-binary", MARK], HOSTILE, limits=FAST)

        cycle()  # warm-up: registry, locks, cgroup detection
        before = _open_files()
        for _ in range(5):
            cycle()
        assert _open_files() - before == set()  # what earlier tests' garbage closes meanwhile is no leak

    main()


# -- time ----------------------------------------------------------------------


def test_never_answers_times_out():
    with start("never_answers.py") as bot:
        bot.send_line("your move")
        t = time.monotonic()
        with pytest.raises(BotTimeout) as info:
            bot.receive_line(0.3)
        assert 0.25 < time.monotonic() - t < 1.0
        assert info.value.reason == "timeout"


def test_answers_late_is_timeout_then_stays_in_sync():
    with start("late.py") as bot:
        bot.send_line("a")
        with pytest.raises(BotTimeout):
            bot.receive_line(0.2)
        assert bot.receive_line(3) == "late a"  # the late line is not lost


def test_a_line_that_came_with_the_last_read_needs_no_time_and_an_interrupt_loses_nothing():
    with start("two_lines.py") as bot:
        assert bot.receive_line(5) == "one"
        assert bot.receive_line(0) == "two"  # read with "one": a zero timeout still gets it
        hub().interrupt()  # a caller cancelled: the next real wait raises, once
        with pytest.raises(Interrupted):
            bot.receive_line(5)
        bot.send_line("x")
        assert bot.receive_line(5) == "x 1"  # the interrupt was spent: this wait works
        assert bot.receive_line(0) == "x 2"
        with pytest.raises(BotTimeout):
            bot.receive_line(0.1)  # nothing buffered: a real wait, and a real timeout


def test_ask_is_a_round_trip_whatever_is_pending_or_late():
    """``BlockingBot.ask`` takes the usual reply in one poll of its own and leaves the rest to the
    general loop: a reply past the first watch, a pending interrupt (raised, not outrun by the
    reply), a timeout, and a line already read (given at once, even with no time left)."""
    with start("echo.py") as bot:
        assert bot.ask("a", 5) == "ready"  # (its greeting)
        assert bot.receive_line(5) == "a"
        hub().interrupt()  # a caller cancelled: this ask's wait raises, once, even as the echo comes
        with pytest.raises(Interrupted):
            bot.ask("b", 5)
        assert bot.receive_line(5) == "b"
    with start("late.py") as bot:  # every reply 0.6 s late: past the first watch
        assert bot.ask("a", 5) == "late a"
        with pytest.raises(BotTimeout):
            bot.ask("b", 0.1)
    with start("two_lines.py") as bot:
        assert bot.receive_line(5) == "one"
        assert bot.ask("x", 0) == "two"  # read with "one"
        assert bot.ask("y", 5) == "x 1"
        assert bot.receive_line(5) == "x 2"


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "general-loop"])
def test_ask_holds_the_line_limits_with_or_without_its_helper(monkeypatch, helper):
    """``ask`` takes the usual reply through its C helper (``_pipe.ask``) where it is built: every
    reply that is not one plain line within the limits must get the verdict the general loop
    gives (as when the helper is not built): the line limit, the output allowed over the bot's
    life (an ASCII reply through the helper counts too), a reply that is not ASCII, a timeout."""
    if not helper:
        monkeypatch.setattr(blocking, "_round_trip", None)
    limits = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, max_line_bytes=16, max_output_bytes=40)
    with start("echo.py", limits=limits) as bot:
        assert bot.receive_line(SLOW) == "ready"  # 6 bytes
        assert bot.ask(b"x" * 16, SLOW) == "x" * 16  # at the line limit: 23 bytes
        assert bot.ask("\u00e9t\u00e9".encode(), SLOW) == "\u00e9t\u00e9"  # 29
        assert bot.ask(b"abcdefghij", SLOW) == "abcdefghij"  # 40: all the output allowed
        with pytest.raises(OutputLimitExceeded):
            bot.ask(b"k", SLOW)
    with start("echo.py", limits=limits) as bot:
        assert bot.receive_line(SLOW) == "ready"
        with pytest.raises(LineTooLong):
            bot.ask(b"y" * 17, SLOW)
    with start("never_answers.py", limits=limits) as bot:
        with pytest.raises(BotTimeout):
            bot.ask(b"your move", 0.1)


def test_a_bots_freezer_is_its_cgroups_own_call_and_does_nothing_once_closed():
    """The referee freezes a seat through ``BotBase.freezer`` twice a decision, looked up once a
    game: the call must still be harmless after the bot is closed mid-game (its freezer's file is
    closed then, and the number may be another file's)."""
    with start("echo.py") as bot:
        if bot.cgroup is None or not bot.cgroup.freezes:
            pytest.skip("no cgroup freezer here")
        freeze = bot.freezer()
        assert freeze is not None and freeze(True) is True
        assert freeze(False) is True
        assert bot.receive_line(5) == "ready"
    assert bot.freezer() is None
    assert freeze(True) is False
    assert freeze.closed  # its file went with the group (none left open per bot started)


def test_slow_start():
    with start("slow_start.py") as bot:
        with pytest.raises(BotTimeout):
            bot.receive_line(0.1)
        assert bot.receive_line(3) == "ready"


def test_send_times_out_when_bot_never_reads():
    with start("slow_start.py") as bot:  # never reads stdin
        with pytest.raises(BotTimeout) as info:
            for _ in range(1000):  # the pipe holds 64 KiB
                bot.send_line("z" * 4000, timeout=0.3)
        assert info.value.during == "send"


# -- death -----------------------------------------------------------------------


def test_exits_immediately():
    with start("exit_now.py") as bot:
        with pytest.raises(BotExited) as info:
            bot.receive_line(5)
        assert (info.value.returncode, info.value.signal) == (3, None)
        assert info.value.reason == "crash"
        with pytest.raises(BotExited):
            bot.send_line("anyone there?")
        assert bot.returncode == 3


def test_crash_with_signal():
    with start("crash.py", "segv") as bot:
        assert bot.receive_line(5) == "ready"
        with pytest.raises(BotExited) as info:
            bot.receive_line(5)
        assert info.value.signal == signal.SIGSEGV and info.value.returncode is None


def test_crash_traceback_reaches_take_stderr():
    with start("crash.py", "raise") as bot:
        assert bot.receive_line(5) == "ready"
        with pytest.raises(BotExited) as info:
            bot.receive_line(5)
        assert info.value.returncode == 1
        err = bot.take_stderr()
        assert err[0].startswith("Traceback") and "boom from the bot" in err[-1]
        assert bot.take_stderr() == []  # only lines since the last call


def test_ignores_sigterm_still_dies_fast():
    bot = start("ignore_term.py")
    assert bot.receive_line(5) == "ready"
    t = time.monotonic()
    bot.close()
    assert time.monotonic() - t < 1.0
    assert bot.returncode == -signal.SIGKILL


# -- malformed output ------------------------------------------------------------


def test_garbage_is_returned_verbatim_and_bad_json_named():
    with start("garbage.py") as bot:
        line = bot.receive_line(5)
        assert line == "}{ this is not json \x00\x07 \u2603"  # the process layer passes it on as is
        with pytest.raises(BadJson) as info:  # and the protocol's parser (with its depth guard) names it
            parse_line(line)
        assert info.value.reason == "bad_json"
        assert bot.receive_line(5) == ""


def test_not_utf8_names_the_line_and_moves_on():
    with start("not_utf8.py") as bot:
        with pytest.raises(NotUtf8) as info:
            bot.receive_line(5)
        assert info.value.reason == "bad_encoding"
        assert info.value.raw_prefix.startswith(b"\xff\xfe")
        assert bot.receive_line(5) == "ok"


def test_100mb_line_keeps_referee_memory_bounded():
    limits = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, max_line_bytes=1 << 20)

    with start("long_line.py", limits=limits) as bot:
        tracemalloc.start()
        try:
            t = time.monotonic()
            with pytest.raises(LineTooLong) as info:
                bot.receive_line(10)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert info.value.reason == "line_too_long"
        assert time.monotonic() - t < 5
        assert bot._channel.peak_buffer <= limits.max_line_bytes + READ_CHUNK
        assert peak < 4 * limits.max_line_bytes  # a few copies of one line at most
        with pytest.raises(LineTooLong):  # sticky
            bot.receive_line(1)


def test_output_volume_cap():
    limits = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, max_output_bytes=1 << 20)

    with start("output_flood.py", limits=limits) as bot:
        with pytest.raises(OutputLimitExceeded) as info:
            for _ in range(100_000):
                bot.receive_line(5)
        assert info.value.reason == "output_limit"


def test_stderr_flood_is_capped_and_drained():
    limits = Limits(cpu_seconds=5, memory_mb=256, max_processes=16, stderr_cap_bytes=64 * 1024)
    total = 10 * 1024 * 1024

    with start("stderr_flood.py", limits=limits) as bot:
        # the bot is never blocked on a full stderr pipe, so "done" arrives
        assert bot.receive_line(10) == "done"
        bot.send_line("bye")
        with pytest.raises(BotExited):
            bot.receive_line(5)
    lines = bot.take_stderr()
    kept = sum(len(line) + 1 for line in lines)
    assert limits.stderr_cap_bytes - 1000 <= kept <= limits.stderr_cap_bytes + 1
    assert bot.stderr_dropped_bytes == total - limits.stderr_cap_bytes


# -- pipes -------------------------------------------------------------------------


def test_closes_stdin_and_keeps_running():
    with start("close_stdin.py", "stdin") as bot:
        assert bot.receive_line(5) == "closed"
        with pytest.raises(BotClosedInput) as info:
            bot.send_line("hello?")
        assert info.value.reason == "closed_input"
        assert bot.returncode is None


def test_closes_stdout_and_keeps_running():
    with start("close_stdin.py", "stdout") as bot:
        assert bot.receive_line(5) == "closing"
        t = time.monotonic()
        with pytest.raises(BotClosedOutput) as info:
            bot.receive_line(5)
        assert info.value.reason == "closed_output"
        assert time.monotonic() - t < EXIT_GRACE + 0.5


@needs_sandbox
def test_closes_stdout_in_the_sandbox_is_closed_output_not_a_timeout():
    """bwrap keeps copies of the bot's stdout, so no EOF ever comes: the referee looks at which
    processes still hold the pipe."""
    with start("close_stdin.py", "stdout", containment=Containment.BUBBLEWRAP) as bot:
        assert bot.receive_line(SLOW) == "closing"
        with pytest.raises(BotClosedOutput) as info:
            bot.receive_line(SLOW)
        assert info.value.reason == "closed_output"


def test_a_bot_process_that_starts_its_exit_during_the_look_has_not_abandoned_its_pipes(monkeypatch):
    """The kernel marks a process exiting before it closes its files: one killed between the list of
    the bot's processes and the look at their files shows no pipe, and only a question asked after
    that look sees its exit (asked before, the memory hog forfeited for ``closed_input`` again)."""
    from types import SimpleNamespace

    from arena.bots import process
    read, write = os.pipe()
    pid = 4_000_000  # no such process: its /proc is the fakes below
    began: list[bool] = []
    real_listdir = os.listdir

    def listdir(path):
        if path == f"/proc/{pid}/fd":
            began.append(True)  # killed now: its files are closed
            return []
        return real_listdir(path)

    monkeypatch.setattr(process.os, "listdir", listdir)
    monkeypatch.setattr(process, "exiting", lambda p: p == pid and bool(began))
    shell = SimpleNamespace(pid=-1, _sandbox_init=None, _live_pids=lambda: {pid})
    try:
        assert not process.BotBase._pipe_abandoned(shell, write)  # type: ignore[arg-type]
        assert began == [True]
    finally:
        os.close(read)
        os.close(write)


def test_a_bot_process_in_its_exit_has_not_abandoned_its_pipes():
    """A bot killed past its memory limit is still listed while the kernel frees it, its files
    already closed (a zombie here, until reaped): that is its exit, reported as such, not a closed
    stdin (the hostile tournament's memory hog forfeited for ``closed_input`` at load 11). One
    living process that holds neither pipe has abandoned them."""
    from types import SimpleNamespace

    from arena.bots.process import BotBase
    read, write = os.pipe()
    dead = subprocess.Popen(["true"], stdin=subprocess.DEVNULL)
    living = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
    try:
        while (info := read_proc(dead.pid)) is not None and info.state != "Z":
            time.sleep(0.01)
        shell = SimpleNamespace(pid=-1, _sandbox_init=None, _live_pids=lambda: {dead.pid})
        assert not BotBase._pipe_abandoned(shell, write)  # type: ignore[arg-type]
        shell._live_pids = lambda: {dead.pid, living.pid}
        assert BotBase._pipe_abandoned(shell, write)  # type: ignore[arg-type]
    finally:
        living.kill()
        for p in (dead, living):
            p.wait()
        os.close(read)
        os.close(write)


# -- escaping ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "bare"])
def test_setsid_grandchild_is_killed(mode):
    """full: private uid + cgroup (grandchild even scrubs its environment);
    bare: same uid, no cgroup: found as the subreaper's orphan carrying the env token."""
    kw = {} if mode == "full" else {"run_as": RunAs.REFEREE, "cgroup": False}
    if mode == "full" and not ROOT and CGROUPS is None:
        pytest.skip("neither private uids nor cgroups here")

    def main():
        args = ("scrub",) if mode == "full" else ("keep",)
        with start("setsid_grandchild.py", *args, **kw) as bot:
            grandchild = int(bot.receive_line(5))
            assert bot.receive_line(5) == "parent done"
            with pytest.raises(BotExited) as info:
                bot.receive_line(5)
            assert info.value.returncode == 0
            g = read_proc(grandchild)
            assert g is not None and g.state != "Z"
            assert g.sid != bot.pid and g.pgid != bot.pid  # escaped session and group
            assert g.ppid == os.getpid()  # handed to us, the subreaper
        return grandchild

    grandchild = main()
    assert read_proc(grandchild) is None


@pytest.mark.parametrize("cgroup", [None, False], ids=["cgroup", "nproc-only"])
def test_fork_bomb_is_bounded(cgroup):
    if cgroup is None and CGROUPS is None:
        pytest.skip(f"no usable cgroup: {CGROUP_NOTE}")
    # nproc-only: a private uid's RLIMIT_NPROC as root; unprivileged, the uid's
    # current process count plus max_processes (shared with the referee's uid)
    limits = Limits(cpu_seconds=3, memory_mb=256, max_processes=12)

    with start("fork_bomb.py", limits=limits, cgroup=cgroup) as bot:
        assert bot.receive_line(5) == "bombing"
        peak = 0
        for _ in range(20):
            time.sleep(0.02)
            peak = max(peak, len(marked_pids()))
        assert peak <= limits.max_processes
        t = time.monotonic()
    assert time.monotonic() - t < 3


@needs_cgroup
def test_memory_hog_hits_the_cgroup_limit():
    limits = Limits(cpu_seconds=5, memory_mb=96, max_processes=16)

    with start("memory_hog.py", limits=limits) as bot:
        # Generous waits: only the kernel's verdict is asserted, never how fast it came
        # (a 10 s wait read as a timeout on a loaded machine).
        assert bot.receive_line(SLOW) == "eating"
        with pytest.raises(MemoryLimitExceeded) as info:
            bot.receive_line(SLOW)
        assert info.value.reason == "memory_limit"
        assert info.value.signal == signal.SIGKILL
    usage = bot.resource_usage()
    assert usage.source.startswith("cgroup")
    assert 64 << 20 < usage.peak_memory_bytes <= (96 << 20) + (1 << 20)


def test_memory_hog_without_cgroup_hits_rlimit_as():
    limits = Limits(cpu_seconds=5, memory_mb=96, max_processes=16)

    with start("memory_hog.py", limits=limits, cgroup=False) as bot:
        assert bot.receive_line(SLOW) == "eating"
        with pytest.raises(BotExited) as info:
            bot.receive_line(SLOW)
        assert info.value.returncode == 1
        assert any("MemoryError" in line for line in bot.take_stderr())


def test_cpu_limit_without_games_counts_the_whole_life():
    limits = Limits(cpu_seconds=1, memory_mb=256, max_processes=16)

    with start("cpu_burn.py", limits=limits) as bot:
        assert bot.receive_line(SLOW) == "burning"
        with pytest.raises(CpuLimitExceeded) as info:
            bot.receive_line(SLOW)  # seen while waiting, not after the wait
        assert info.value.reason == "cpu_limit"
        assert "this game" in str(info.value)
    assert bot.resource_usage().cpu_seconds > 0.9


def test_cpu_is_counted_per_game(monkeypatch):
    """One process, three games: 0.2 s of CPU twice is fine under a 0.3 s per-game allowance (a
    per-process count forfeited the second game); 3 s in one game is not. (The allowance of a
    clock with no move time is CPU_BASE_S alone, lowered here: a whole second a game burnt 2.5 s.)"""
    monkeypatch.setattr("arena.limits.CPU_BASE_S", 0.3)
    limits = Limits(memory_mb=256, max_processes=16)
    assert limits.game_cpu_allowance(0.0, 0.0, 5) == pytest.approx(0.3)

    with start("cpu_on_demand.py", limits=limits) as bot:
        assert bot.receive_line(SLOW) == "ready"
        for _ in range(2):
            bot.begin_game(0.0, 0.0)
            bot.send_line("burn 0.2")
            assert bot.receive_line(SLOW) == "done"
            assert 0.15 < bot.game_cpu_seconds() < 0.3
        bot.begin_game(0.0, 0.0)
        bot.send_line("burn 3")
        with pytest.raises(CpuLimitExceeded):
            bot.receive_line(SLOW)
        assert bot.returncode is None  # still running: the referee closes it on the fault


def test_the_cpu_is_checked_after_quick_replies_too(monkeypatch):
    """A bot that spends its game's allowance in replies each quicker than a watch (the round
    trip's usual case: no wait long enough to look) is caught after a reply: the check after
    replies is throttled (``CPU_CHECK_S``), never skipped. (No watch during waits here, so that
    on a busy machine a slow reply is not caught by one instead.)"""
    monkeypatch.setattr("arena.limits.CPU_BASE_S", 0.3)
    monkeypatch.setattr("arena.bots.process.WATCH_S", 1000.0)
    with start("cpu_on_demand.py", limits=Limits(memory_mb=256, max_processes=16)) as bot:
        assert bot.receive_line(SLOW) == "ready"
        bot.begin_game(0.0, 0.0)
        with pytest.raises(CpuLimitExceeded):
            for _ in range(40):  # 2 s of CPU in all, against 0.3
                assert bot.ask(b"burn 0.05", SLOW) == "done"


def test_cpu_allowance_derived_from_the_clock(monkeypatch):
    monkeypatch.setattr("arena.limits.CPU_BASE_S", 0.3)
    assert Limits().game_cpu_allowance(0.05, 0.0, 3) == pytest.approx(0.3 + 2 * 0.05 * 3)
    assert Limits().game_cpu_allowance(1.0, 10.0, 100) == pytest.approx(0.3 + 10 + 200)
    assert Limits(cpu_seconds=7).game_cpu_allowance(1.0, 10.0, 100) == 7

    with start("cpu_on_demand.py", limits=Limits(memory_mb=256, max_processes=16)) as bot:
        assert bot.receive_line(SLOW) == "ready"
        bot.begin_game(0.05, 0.0)
        for _ in range(3):  # quick answers stay within 0.3 + 0.1 per decision
            bot.send_line("burn 0.01")
            assert bot.receive_line(SLOW) == "done"
        bot.send_line("burn 2")
        with pytest.raises(CpuLimitExceeded):
            bot.receive_line(SLOW)


def test_process_cpu_backstop_is_rlimit_cpu():
    limits = Limits(process_cpu_seconds=1, memory_mb=256, max_processes=16)

    with start("cpu_burn.py", limits=limits) as bot:
        assert bot.receive_line(SLOW) == "burning"
        with pytest.raises(CpuLimitExceeded) as info:
            bot.receive_line(SLOW)
        assert info.value.signal == signal.SIGXCPU


# -- end of a bot's life -------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=needs_sandbox)], ids=["plain", "sandbox"])
def test_shutdown_grace_lets_a_bot_finish_its_last_words(sandbox):
    def main():
        with start("last_words.py", containment=Containment.BUBBLEWRAP if sandbox else Containment.TRUSTED) as bot:
            assert bot.receive_line(SLOW) == "ready"
            bot.send_line("shutdown")
            bot.close_gracefully()  # returns at once: the grace runs in the hub
            assert hub().closing or bot.returncode is not None
            hub().settle()
        return bot

    bot = main()
    assert bot.returncode == 0  # it exited by itself
    assert "last words: 42 games, 0 faults" in bot.take_stderr()


def test_shutdown_grace_ends_in_a_kill(monkeypatch):
    monkeypatch.setattr(blocking, "SHUTDOWN_GRACE", 0.2)  # what the stubborn bot ignores: waited out in full

    def main():
        with start("last_words.py", "stubborn") as bot:
            assert bot.receive_line(SLOW) == "ready"
            bot.send_line("shutdown")
            bot.close_gracefully()  # returns at once: the grace runs in the hub
            assert hub().closing or bot.returncode is not None
            hub().settle()
        return bot

    assert main().returncode == -signal.SIGKILL


@needs_root
def test_cannot_read_root_only_file():
    with tempfile.NamedTemporaryFile("w", suffix=".store") as secret:
        secret.write("game store secret")
        secret.flush()
        os.chmod(secret.name, 0o600)

        def main():
            with start("probe.py", "read", secret.name) as bot:
                return bot.receive_line(5)

        assert main() == "denied PermissionError"


@needs_root
def test_cannot_read_another_bots_home():
    def main():
        with start("env_report.py") as victim:
            home = json.loads(victim.receive_line(5))["env"]["HOME"]
            (Path(home) / "notes.txt").write_text("my secret plan")
            with start("probe.py", "list", home) as thief:
                return thief.receive_line(5)

    assert main() == "denied PermissionError"


@needs_root
def test_interpreter_unreadable_by_bot_uid_is_a_start_error():
    hidden = Path(sys.executable)
    if inaccessible_reason(hidden, BOT_UID_BASE, BOT_UID_BASE, os.X_OK) is None:
        pytest.skip(f"{hidden} is usable by other uids here")

    with pytest.raises(BotStartError, match="cannot use") as info:
        start_bot([str(hidden), "-c", "pass", MARK], HOSTILE, limits=FAST)
    assert info.value.kind is StartErrorKind.UID_DENIED  # what the launcher reads, not the words


def test_start_errors():
    with pytest.raises(BotStartError, match="not found"):
        start_bot(["no-such-bot-binary", MARK], HOSTILE, limits=FAST)
    with pytest.raises(BotStartError, match="does not exist"):
        start_bot(cmd("echo.py"), HOSTILE / "nope", limits=FAST)
    with pytest.raises(BotStartError, match="empty"):
        start_bot([], HOSTILE, limits=FAST)

    if SANDBOX_PROBLEM is None:
        with pytest.raises(BotStartError, match="system directory"):
            start_bot([PY, "-c", "pass", MARK], "/tmp", limits=FAST, containment=Containment.BUBBLEWRAP)
        if not sandbox_visible(Path(sys.executable), HOSTILE, []):  # e.g. a pyenv
            with pytest.raises(BotStartError, match="not visible inside the sandbox"):
                start_bot([sys.executable, MARK], HOSTILE, limits=FAST, containment=Containment.BUBBLEWRAP)
    assert not issubclass(BotStartError, BotError)



# -- bubblewrap --------------------------------------------------------------------


@pytest.fixture
def other_bot():
    """Another bot's directory, world-readable like a checkout under /work."""
    with tempfile.TemporaryDirectory(prefix="arena-other-bot-") as d:
        (Path(d) / "bot.py").write_text("print('my secret strategy')\n")
        os.chmod(d, 0o755)
        os.chmod(Path(d) / "bot.py", 0o644)
        yield Path(d)


@needs_sandbox
def test_sandbox_network_and_filesystem(other_bot):
    with socket.socket() as listener:  # a service on the host's loopback
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = str(listener.getsockname()[1])

        def probe(*args, walled=True):
            with start("probe.py", *args, containment=Containment.BUBBLEWRAP if walled else Containment.TRUSTED) as bot:
                return bot.receive_line(10)

        def main():
            return {
                "loopback": probe("connect", "127.0.0.1", port),
                "internet": probe("connect", "1.1.1.1", "80"),
                "parent_dir": probe("list", str(HOSTILE.parent)),
                "other_bot_dir": probe("list", str(other_bot)),
                "unsandboxed_other_bot_dir": probe("list", str(other_bot), walled=False),
                "root_home": probe("list", "/root"),
                "write_own_dir": probe("write", str(HOSTILE / "x.txt")),
                "write_tmp": probe("write", "/tmp/x.txt"),
                "unsandboxed_loopback": probe("connect", "127.0.0.1", port, walled=False),
            }

        seen = main()
    assert seen["loopback"].startswith("denied")  # its own empty network namespace
    assert seen["internet"].startswith("denied")
    assert seen["parent_dir"] == "LEAK hostile"  # only our own directory was bound in
    assert seen["other_bot_dir"] == "denied FileNotFoundError"
    assert seen["unsandboxed_other_bot_dir"].startswith("LEAK")  # world-readable without bwrap
    assert seen["root_home"] == "denied FileNotFoundError"
    assert seen["write_own_dir"].startswith("denied")
    assert seen["write_tmp"] == "LEAK wrote"  # private tmpfs
    assert seen["unsandboxed_loopback"] == "LEAK connected"  # a fact worth knowing
    assert not (HOSTILE / "x.txt").exists()


@needs_sandbox
def test_sandbox_sees_only_its_own_processes_and_signal_is_mapped():
    def main():
        with start("env_report.py", containment=Containment.BUBBLEWRAP) as bot:
            report = json.loads(bot.receive_line(10))
        with start("crash.py", "segv", containment=Containment.BUBBLEWRAP) as bot:
            assert bot.receive_line(10) == "ready"
            with pytest.raises(BotExited) as info:
                bot.receive_line(10)
        return report, info.value

    report, crash = main()
    assert report["pid"] <= 3  # a fresh pid namespace
    assert report["env"]["HOME"] == "/tmp"
    if ROOT:
        assert uid_in_pool(report["uid"])
    assert (crash.returncode, crash.signal) == (128 + signal.SIGSEGV, signal.SIGSEGV)


@needs_sandbox
def test_sandbox_fork_bomb_and_grandchild():
    limits = Limits(cpu_seconds=3, memory_mb=256, max_processes=12)

    with start("fork_bomb.py", limits=limits, containment=Containment.BUBBLEWRAP) as bot:
        assert bot.receive_line(10) == "bombing"
        time.sleep(0.3)
        assert len(marked_pids()) <= limits.max_processes + 2
    with start("setsid_grandchild.py", "keep", containment=Containment.BUBBLEWRAP) as bot:
        bot.receive_line(10)
        assert bot.receive_line(5) == "parent done"


# -- namespaces (the containment without bubblewrap) ---------------------------------


NS_PROBLEM = namespaces_problem_now() if PY else "no python3"
needs_namespaces = pytest.mark.skipif(NS_PROBLEM is not None, reason=f"namespaces: {NS_PROBLEM}")


@needs_namespaces
def test_namespaces_network_filesystem_and_processes(other_bot):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = str(listener.getsockname()[1])

        def probe(*args):
            with start("probe.py", *args, containment=Containment.NAMESPACES) as bot:
                return bot.receive_line(SLOW)

        def main():
            with start("env_report.py", containment=Containment.NAMESPACES) as bot:
                report = json.loads(bot.receive_line(SLOW))
            return report, {
                "loopback": probe("connect", "127.0.0.1", port),
                "parent_dir": probe("list", str(HOSTILE.parent)),
                "other_bot_dir": probe("list", str(other_bot)),
                "root_home": probe("list", "/root"),
                "proc": probe("list", f"/proc/{os.getpid()}"),
                "pid": probe("read", "/proc/self/stat"),
                "write_own_dir": probe("write", str(HOSTILE / "x.txt")),
                "write_tmp": probe("write", "/tmp/x.txt"),
                "write_dev_shm": probe("write", "/dev/shm/x.txt"),
                "write_run_lock": probe("write", "/run/lock/x.txt"),
            }

        report, seen = main()
    assert report["env"]["HOME"] == report["env"]["TMPDIR"] == "/tmp"
    assert report["home_mode"] == "0o700" and report["home_owner"] == report["uid"]
    assert uid_in_pool(report["uid"])
    assert seen["loopback"].startswith("denied")  # a network namespace of its own: no route
    assert seen["parent_dir"] == "LEAK hostile"  # only the way down to its own directory
    assert seen["other_bot_dir"] == "denied FileNotFoundError"
    assert seen["root_home"] == "denied FileNotFoundError"
    assert seen["proc"] == "denied FileNotFoundError"  # a pid namespace of its own: the referee is not there
    assert report["pid"] == 1 and seen["pid"].split()[1] in ("1", "2")  # and it gets no host pid numbers
    assert seen["write_own_dir"].startswith("denied")
    assert seen["write_tmp"] == seen["write_dev_shm"] == "LEAK wrote"  # private tmpfs, gone with it
    assert seen["write_run_lock"].startswith("denied")  # /run is not there at all
    assert not (HOSTILE / "x.txt").exists()


@needs_namespaces
def test_namespaces_fork_bomb_and_grandchild():
    limits = Limits(memory_mb=256, max_processes=12)

    with start("fork_bomb.py", limits=limits, containment=Containment.NAMESPACES) as bot:
        assert bot.receive_line(SLOW) == "bombing"
        time.sleep(0.3)
        assert len(marked_pids()) <= limits.max_processes
    with start("setsid_grandchild.py", "scrub", containment=Containment.NAMESPACES) as bot:
        bot.receive_line(SLOW)
        assert bot.receive_line(SLOW) == "parent done"


def test_a_run_as_that_is_no_policy_is_refused():
    """Only RunAs.REFEREE means the referee's uid: an old string, None or a uid number (0 is root)
    is refused before anything is allocated, never taken for "no private uid"."""
    for wrong in ("auto", None, 0, "referee"):
        with pytest.raises(BotStartError, match="RunAs"):
            start_bot(cmd("echo.py"), HOSTILE, limits=FAST, run_as=wrong)


def test_namespaces_need_a_private_uid():
    with pytest.raises(BotStartError, match="namespace"):
        start_bot(cmd("echo.py"), HOSTILE, limits=FAST, containment=Containment.NAMESPACES, run_as=RunAs.REFEREE)


def test_missing_or_broken_bwrap_is_reported(monkeypatch):
    """What a machine with user namespaces disabled looks like, simulated."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)  # the fake must be executable by the bot uid
        fake = Path(d) / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace,"
                        " likely because the kernel does not allow non-privileged user"
                        " namespaces' >&2\nexit 1\n")
        fake.chmod(0o755)

        for path, message in ((str(Path(d) / "missing"), "bwrap not found"),
                              (str(fake), "No permissions to create new namespace")):
            monkeypatch.setattr(containment, "BWRAP", path)
            with pytest.raises(SandboxUnavailable, match=message):
                start("echo.py", containment=Containment.BUBBLEWRAP)


# -- a referee killed -9 --------------------------------------------------------------


REFEREE = textwrap.dedent("""
    import sys, time
    from arena.limits import Limits
    from arena.bots.start import start_bot
    bot = start_bot([sys.argv[1], sys.argv[2], "keep", sys.argv[3]], sys.argv[4],
                             limits=Limits(max_processes=16))
    print(bot.pid, bot.receive_line(5), flush=True)
    time.sleep(60)
""")


CLEANS = "from arena.bots.containment import cleanup_stale; cleanup_stale()"


@pytest.mark.parametrize("meanwhile", [False, True], ids=["", "another arena cleans first"])
def test_cleanup_stale_after_referee_killed(meanwhile: bool):
    """A referee killed -9 leaves its bot and the daemon the bot forked in a session of its own:
    the cleanup told of that referee's death (``dead``, as a tournament's parent is of a worker it
    reaped) returns with nothing of it left, not even a zombie. Every arena process cleans the run
    directory when it starts, so another one (the other test worker's) may clean that referee
    first or at the same time (``meanwhile``: first); then it is that one's report that names the
    referee, so what a report says is the test below, in a run directory of its own."""
    containment.process_registry()  # this process: a subreaper, as a tournament's parent is
    repo = Path(__file__).resolve().parent.parent
    referee = subprocess.Popen(
        [sys.executable, "-c", REFEREE, PY, str(HOSTILE / "setsid_grandchild.py"), MARK,
         str(HOSTILE)],
        cwd=repo, stdout=subprocess.PIPE, text=True,
    )
    try:
        bot_pid, grandchild = map(int, referee.stdout.readline().split())
    finally:
        referee.kill()
        referee.wait()
        referee.stdout.close()
    assert read_proc(grandchild) is not None  # orphaned and still running
    if meanwhile:
        subprocess.run([sys.executable, "-c", CLEANS], cwd=repo, check=True)
    cleanup_stale(dead=[referee.pid])
    assert read_proc(grandchild) is None and read_proc(bot_pid) is None
    assert not (containment.process_registry().run_dir / f"ref-{referee.pid}").exists()
    prefix = f"r{referee.pid}-"
    assert not list(Path(tempfile.gettempdir()).glob(prefix + "*"))
    if CGROUPS is not None:
        assert not [p for parent in CGROUPS.parents.values() if parent.is_dir()
                    for p in parent.glob(prefix + "*")]


def test_a_cleanup_report_names_the_dead_referee_and_what_it_removed(tmp_path: Path, monkeypatch):
    """The report of a cleanup names each dead referee that left something and counts what was
    removed: its bot's process, cgroup and copy (whose user it names: test_rough_edges). In a run directory and a cgroup folder
    of the test's own, where no other arena cleans first, and with no process of a bot uid in sight:
    a stray one of the machine's (another test's, its lease just ended) would be swept and counted too."""
    from arena.bots import uids
    from arena.bots.cgroups import CgroupRoot
    monkeypatch.setattr(uids, "uid_in_pool", lambda uid: False)
    registry = uids.Registry(tmp_path / "run")
    parent = tmp_path / "pids" / "palace-arena"
    group = parent / "r999996-b1"
    group.mkdir(parents=True)  # a plain folder for a v1 pids hierarchy: removed as an emptied group is
    copy = tmp_path / "palace-arena-bot-copy"
    copy.mkdir()
    bot = subprocess.Popen(["sleep", "600"])
    try:
        dead = tmp_path / "run" / "ref-999996"
        dead.mkdir()
        (dead / uids.TEMPS).write_text(f"{copy}\n")
        (dead / "r999996-b1.json").write_text(json.dumps(
            {"procs": [[bot.pid, read_proc(bot.pid).start]], "token": None, "uid": None, "cgroups": [str(group)]}))
        report = registry.cleanup_stale(CgroupRoot("v1", {"pids": parent}), dead=[999996])
        assert read_proc(bot.pid) is None and not dead.exists() and not group.exists() and not copy.exists()
        assert (report.referees, report.killed, report.cgroups, report.temps) == ([999996], 1, [str(group)], [str(copy)])
    finally:
        end_reaped_elsewhere(bot)


def test_the_kill_loop_reaps_a_process_that_leaves_its_group_as_it_dies():
    """A cgroup stops listing a process once it has exited, before anyone reaps it, and a killed
    process takes a while to exit (a large one, milliseconds). The kill loop must reap it all
    the same: a bot's bwrap, orphaned to this subreaper when its referee worker died, was left
    a zombie whenever the loop's next look found it gone from the group."""
    from arena.bots.procs import kill_and_reap

    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(400 << 20); print(flush=True); "
                              "import time; time.sleep(60)"], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline()  # 400 MB touched: a slow exit

        def listed_until_exited(table):  # like cgroup.procs: an exited process is not listed
            info = table.get(child.pid)
            return {child.pid} if info is not None and info.state != "Z" else set()

        assert list(kill_and_reap(listed_until_exited, time.monotonic() + 10)) == [child.pid]
        info = read_proc(child.pid)
        assert not (info is not None and info.state == "Z" and info.ppid == os.getpid()), f"left unreaped: {info}"
    finally:
        child.returncode = -9  # reaped by the loop (or, if the test failed, here)
        try:
            os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        child.stdout.close()


def test_a_bots_cgroup_survives_another_referee_removing_the_shared_parent(tmp_path: Path, monkeypatch):
    """The arena's parent group is made on demand and removed when it empties, by whichever
    referee or worker empties it. If that rmdir falls between our mkdir (which finds the parent)
    and our check of it, the bot's group must still be made: two workers starting bots at once
    failed a game with "cannot create the bot's cgroup: File exists" (seen once in 12 runs of the
    dead-worker test under load)."""
    from arena.bots import cgroups

    parent = tmp_path / "pids" / "palace-arena"  # a plain directory for a v1 pids hierarchy
    parent.parent.mkdir()
    real_mkdir = os.mkdir
    raced: list[str] = []

    def mkdir_losing_the_race(path, *args, **kw):
        if Path(path) == parent and not raced:  # it existed when we asked, and is gone now
            raced.append(str(path))
            raise FileExistsError(17, "File exists", str(path))
        return real_mkdir(path, *args, **kw)

    monkeypatch.setattr(os, "mkdir", mkdir_losing_the_race)
    group = cgroups.BotCgroup(cgroups.CgroupRoot("v1", {"pids": parent}), "r1-b1", memory_bytes=1 << 30, max_pids=64)
    assert raced and group.dirs["pids"] == parent / "r1-b1" and (parent / "r1-b1").is_dir()
    assert (parent / "r1-b1" / "pids.max").read_text().strip() == "64"


def test_a_bots_cgroup_is_made_however_often_the_shared_parent_goes(tmp_path: Path, monkeypatch):
    """The parent can be removed between our making it and making the group as many times as
    other referees empty it meanwhile; three tries were not enough for two referees starting and
    stopping bots in a tight loop. Here another referee's rmdir lands in that gap five times."""
    from arena.bots import cgroups

    parent = tmp_path / "pids" / "palace-arena"  # a plain directory for a v1 pids hierarchy
    parent.parent.mkdir()
    real_mkdir = os.mkdir
    struck: list[int] = []

    def mkdir_after_another_referee_emptied_the_parent(path, *args, **kw):
        if Path(path).parent == parent and len(struck) < 5:
            struck.append(1)
            os.rmdir(parent)  # the other referee's last group went, and the parent with it
        return real_mkdir(path, *args, **kw)

    monkeypatch.setattr(os, "mkdir", mkdir_after_another_referee_emptied_the_parent)
    group = cgroups.BotCgroup(cgroups.CgroupRoot("v1", {"pids": parent}), "r1-b1", memory_bytes=1 << 30, max_pids=64)
    assert len(struck) == 5 and group.dirs["pids"] == parent / "r1-b1"
    assert (parent / "r1-b1" / "pids.max").read_text().strip() == "64"


def _make_and_remove_groups(parent: str, rounds: int, ready, go) -> None:
    """One referee in a tight loop: a group made, then removed (and with it the parent, once empty)."""
    from arena.bots import cgroups
    root = cgroups.CgroupRoot("v1", {"pids": Path(parent)})
    ready.set()
    go.wait()
    for n in range(rounds):
        d = root.make_group("pids", f"r{os.getpid()}-b{n}")
        assert cgroups.remove_cgroup_dir(d)


def test_referees_making_and_removing_groups_at_once_never_fail(tmp_path: Path):
    """Several processes make and remove groups in the shared parent at once, which each removes
    when it empties; none may fail, however often the parent comes and goes (cheap: plain folders,
    no bots; a bounded number of rounds)."""
    import multiprocessing

    parent = tmp_path / "pids" / "palace-arena"
    parent.parent.mkdir()
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(4)]
    procs = [ctx.Process(target=_make_and_remove_groups, args=(str(parent), 300, r, go)) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        r.wait()
    go.set()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * 4
    assert not parent.exists()  # the last one out removed it


def test_a_parent_that_is_no_folder_is_an_error_not_a_loop(tmp_path: Path):
    """The group's parent is made again only where it went: a name that is there but leads nowhere
    (a dangling link) fails at once instead of being "made again" for ever."""
    from arena.bots import cgroups
    (tmp_path / "pids").mkdir()
    parent = tmp_path / "pids" / "palace-arena"
    parent.symlink_to(tmp_path / "gone")
    with pytest.raises(FileNotFoundError):
        cgroups.BotCgroup(cgroups.CgroupRoot("v1", {"pids": parent}), "r1-b1", memory_bytes=1 << 30, max_pids=64)
