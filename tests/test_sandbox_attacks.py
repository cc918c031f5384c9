"""A sandbox closed from every side, written as attacks, in both contained modes (bubblewrap and
namespaces), through the launcher and real games, ``arena tournament`` and ``arena check``:

* a bot's ``[env]`` never reaches a host process: a loader library a bot points at runs only
  inside its sandbox, the reserved keys are refused by name, and bwrap's own environment is
  exactly the arena's;
* a colluding pair at one table (tests/fairplay_bots/colluder) tries every channel two processes on
  one kernel might share (locks, /proc/locks, AIO, inotify, ptys, page-cache residency, keyrings,
  kernel-wide counters) and containment's own walls (ptrace, mount, nested user namespaces): every
  primitive fails, and the games finish with correct results;
* each layer holds by itself (bubblewrap's --disable-userns without the filter, no_new_privs), and
  a missing filter or a missing bubblewrap stops bots instead of running them with less.
docs/SANDBOX.md ties each line of the threat model to these tests.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from arena.bots.containment import Containment
from arena.bots.launch import containment_for
import pytest
from typer.testing import CliRunner

from arena.bots import containment, notes, probes, seccomp
from arena.bots.errors import SandboxUnavailable
from arena.bots.launch import Containment, ContainmentError, Launcher
from arena.bots.manifest import ManifestError, load_bot, parse_manifest
from arena.bots.process import ENV_TOKEN
from arena.bots.spawn import HOST_ENV
from arena.bots.start import start_bot
from arena.cli.main import app
from arena.config import ARENA_ENV
from arena.engine import PRESETS
from arena.referee import TimeControl
from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle
from arena.tournament.store import Store

HERE = Path(__file__).resolve().parent
COLLUDER = HERE / "fairplay_bots" / "colluder"
CLOCK = TimeControl(move_ms=3000, bank_ms=10_000, handshake_ms=30_000)

BWRAP_PROBLEM = probes.sandbox_problem_now()
NS_PROBLEM = probes.namespaces_problem_now()
MODES = [
    pytest.param(True, id="bubblewrap", marks=pytest.mark.skipif(
        BWRAP_PROBLEM is not None, reason=f"bubblewrap: {BWRAP_PROBLEM}")),
    pytest.param(False, id="namespaces", marks=pytest.mark.skipif(
        NS_PROBLEM is not None, reason=f"namespaces: {NS_PROBLEM}")),
]
FLAGS = {True: [], False: ["--no-sandbox"]}


def open_dir(prefix: str) -> Path:
    """A directory any uid can traverse, like a checkout under /work (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o755)
    return d


def copy_colluder(dest: Path, name: str) -> Path:
    dest.mkdir(mode=0o755)
    shutil.copy(COLLUDER / "collude.py", dest / "collude.py")
    (dest / "collude.py").chmod(0o644)
    (dest / "bot.toml").write_text(f'name = "{name}"\nversion = "1"\ncommand = ["python3", "collude.py", "{name}"]\n')
    (dest / "bot.toml").chmod(0o644)
    return dest


@pytest.fixture
def base():
    d = open_dir("arena-attacks-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fresh_probes(monkeypatch):
    """Containment probed anew (the probes cache their answers per process and note a pass for the
    machine)."""
    monkeypatch.setattr(probes, "_bwrap_checked", {})
    monkeypatch.setattr(probes, "_namespaces_checked", {})
    monkeypatch.setattr(notes, "read_note", lambda note: None)
    build = seccomp.bpf
    build.cache_clear()
    yield
    build.cache_clear()


def stderr_of(record, player: BlockingPlayer, seat: int) -> list[str]:
    lines = list(record.stderr[seat]) + player.take_stderr()
    for step in record.steps:
        if step["seat"] == seat:
            lines += step.get("stderr", [])
    return list(dict.fromkeys(lines))


def reports(lines: list[str]) -> list[dict[str, str]]:
    return [json.loads(line[len("COLLUDE "):]) for line in lines if line.startswith("COLLUDE ")]


def play_table(specs, launcher: Launcher, seed: int = 7):
    launch = BlockingLaunch(launcher)
    players = [BlockingPlayer(s, launch, CLOCK) for s in specs]
    try:
        rec = play_game(players, PRESETS["classic"], seed, game_id="attack", clock=CLOCK, max_turns=400)
        return rec, [stderr_of(rec, p, i) for i, p in enumerate(players)]
    finally:
        for p in players:
            p.shutdown()
        settle()


# -- [env]: reserved keys, and nothing of it outside the sandbox -------------------------------

MUST_REFUSE = [
    # the dynamic loader: code into every program before main, or what and how it loads
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_DEBUG", "LD_DEBUG_OUTPUT", "LD_PROFILE",
    "LD_BIND_NOW", "LD_ORIGIN_PATH", "LD_HWCAP_MASK", "LD_USE_LOAD_BIAS", "LD_DYNAMIC_WEAK",
    "LD_SHOW_AUXV", "LD_TRACE_LOADED_OBJECTS", "LD_ASSUME_KERNEL",
    # the C library: modules, data files, allocator, tunables
    "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "GETCONF_DIR", "TZDIR", "MALLOC_TRACE",
    "MALLOC_CHECK_", "MALLOC_ARENA_MAX", "MALLOC_PERTURB_", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS",
    "RESOLV_HOST_CONF", "NIS_PATH",
    # shells' start files
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS",
    # what the arena sets
    "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONPATH", "PYTHONHOME", "USER", "LOGNAME", "SHELL",
    "ARENA_SECRET", ENV_TOKEN, "PALACE_ARENA_ANYTHING",
]


@pytest.mark.parametrize("key", sorted(set(MUST_REFUSE) | set(ARENA_ENV)))
def test_every_reserved_key_is_refused_with_its_reason(key):
    with pytest.raises(ManifestError) as caught:
        parse_manifest({"name": "b", "command": ["true"], "env": {key: "x"}}, Path("/nonexistent"))
    message = str(caught.value)
    assert f"{key} cannot be set by a bot: it " in message
    assert "docs/SANDBOX.md" in message


@pytest.mark.parametrize("key", ["MC_MS", "PYTHONUNBUFFERED", "JAVA_TOOL_OPTIONS", "NODE_OPTIONS", "RUST_BACKTRACE"])
def test_a_bots_own_settings_are_allowed(key):
    spec = parse_manifest({"name": "b", "command": ["true"], "env": {key: "1"}}, Path("/nonexistent"))
    assert spec.env == {key: "1"}


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bubblewrap: {BWRAP_PROBLEM}")
def test_bwrap_runs_with_the_arenas_environment_and_the_bot_gets_its_own(base, monkeypatch):
    """The host-side bwrap process: exactly the arena's environment, nothing of the referee's or
    the bot's; the bot, inside, gets its [env] and nothing of the referee's."""
    monkeypatch.setenv("REFEREE_ONLY", "referee-secret")
    (base / "env.py").write_text("import json, os, sys\nprint(json.dumps(dict(os.environ)), flush=True)\nsys.stdin.readline()\n")
    (base / "env.py").chmod(0o644)

    def main():
        bot = start_bot(["/usr/bin/python3", "env.py"], base, containment=Containment.BUBBLEWRAP,
                              extra_env={"BOT_SETTING": "42"})
        with bot:
            inside = json.loads(bot.receive_line(30))
            raw = Path(f"/proc/{bot.pid}/environ").read_bytes()
            host = dict(item.split("=", 1) for item in raw.decode().split("\0") if item)
            cmdline = Path(f"/proc/{bot.pid}/cmdline").read_bytes().split(b"\0")
            return inside, host, cmdline

    inside, host, cmdline = main()
    assert os.path.basename(cmdline[0]) == b"bwrap"
    assert not any(b"BOT_SETTING" in arg or b"42" == arg for arg in cmdline)  # nor on its command line
    assert host == {**HOST_ENV, ENV_TOKEN: host[ENV_TOKEN]}  # the arena's, and its token
    assert inside["BOT_SETTING"] == "42" and inside[ENV_TOKEN] == host[ENV_TOKEN]
    assert "REFEREE_ONLY" not in inside and "REFEREE_ONLY" not in host


EVIL_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void escape(void) {
    const char *marker = getenv("EVIL_MARKER");
    if (marker) {
        int fd = open(marker, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) { write(fd, "ran outside\n", 12); close(fd); }
    }
    write(2, "PRELOADED\n", 10);
}
"""


@pytest.fixture(scope="module")
def evil_so(tmp_path_factory) -> Path:
    """The library of :func:`evil_bot`, built once for the module."""
    d = tmp_path_factory.mktemp("evil")
    (d / "evil.c").write_text(EVIL_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "evil.so"), str(d / "evil.c")], check=True)
    return d / "evil.so"


def evil_bot(base: Path, evil_so: Path) -> Path:
    """The random bot plus a library whose constructor leaves a marker in a host directory."""
    d = base / "evil"
    shutil.copytree(HERE.parent / "bots" / "random", d)
    (d / "evil.c").write_text(EVIL_C)
    shutil.copy(evil_so, d / "evil.so")
    (d / "bot.toml").write_text('name = "evil"\nversion = "1"\ncommand = ["python3", "bot.py"]\n')
    for p in [d, *d.iterdir()]:
        p.chmod(0o755 if p.is_dir() or p.suffix == ".so" else 0o644)
    outside = base / "outside"
    outside.mkdir()
    outside.chmod(0o777)  # any uid could leave the marker here, the bot's own included
    return d


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the library")
@pytest.mark.parametrize("sandbox", MODES)
def test_a_loader_library_runs_only_inside_the_sandbox(base, evil_so, sandbox):
    """A bot whose environment preloads a library from its directory (set past the manifest's
    check, as a future config path might): the library loads into the bot's own process, inside,
    and never into a host process, so its marker never appears; the game finishes normally."""
    d = evil_bot(base, evil_so)
    marker = base / "outside" / "marker"
    # (relative: the bot runs from the arena's copy of its folder, in every contained mode)
    spec = dataclasses.replace(load_bot(d), env={"LD_PRELOAD": "./evil.so", "EVIL_MARKER": str(marker)})
    rec, stderr = play_table([spec, load_bot("random")], Launcher(containment=containment_for(sandbox)))
    assert "PRELOADED" in stderr[0]  # it did load, in the bot
    assert not marker.exists(), marker.read_text()
    assert not rec.faults and rec.result is not None


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the library")
@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize("command", ["check", "tournament"])
def test_a_loader_variable_in_bot_toml_is_refused_by_every_entry_point(base, evil_so, sandbox, command):
    d = evil_bot(base, evil_so)
    marker = base / "outside" / "marker"
    (d / "bot.toml").write_text((d / "bot.toml").read_text()
                                + f'[env]\nLD_PRELOAD = "{d / "evil.so"}"\nEVIL_MARKER = "{marker}"\n')
    args = (["check", str(d), "--games", "1"] if command == "check" else
            ["tournament", "--bot", str(d), "--bot", "random", "--deals", "1", "--plain",
             "--store", str(base / "store" / "arena.sqlite")])
    result = CliRunner().invoke(app, [*args, *FLAGS[sandbox]])
    assert result.exit_code == 2, result.output
    assert "LD_PRELOAD cannot be set by a bot" in result.output and "Traceback" not in result.output
    assert not marker.exists()


# -- a colluding pair at one table --------------------------------------------------------------

CHANNELS = {
    "flock", "F_OFD_SETLK", "F_SETLK", "F_OFD_GETLK", "F_GETLK", "read /proc/locks", "io_setup",
    "io_uring_setup", "read /proc/sys/fs/aio-nr", "inotify_init1", "fanotify_init", "open /dev/ptmx",
    "read /proc/sys/kernel/pty/nr", "posix_fadvise DONTNEED", "preadv2 RWF_NOWAIT", "mincore", "cachestat",
    "keyctl join named keyring", "add_key", "read /proc/keys", "sysinfo", "TCP socket (moves /proc/net/sockstat)",
    *(f"read {p}" for p in ("/proc/loadavg", "/proc/meminfo", "/proc/stat", "/proc/vmstat", "/proc/pressure/cpu",
                            "/proc/sys/fs/inode-nr", "/proc/sys/fs/file-nr", "/proc/interrupts",
                            "/proc/diskstats", "/proc/softirqs", "/proc/uptime")),
    "ptrace", "process_vm_readv", "bpf", "perf_event_open", "userfaultfd", "mount", "unshare user namespace",
    "setns", "init_module", "reboot", "swapon", "unshare -U -r", "no_new_privs", "seccomp",
    "futex wait on a shared file page", "pid namespace of its own",
}
SYSCALLS = {name for name in CHANNELS
            if not name.startswith(("read ", "open ", "unshare -U", "no_new", "seccomp", "futex", "pid "))}


FILTER_ANSWER = {"flock": "denied ENOSYS"}
"""Refused calls the filter answers with another errno than EPERM: flock as a file system without
locks does, so cargo builds on (it stops on EPERM)."""


def assert_closed(report: dict[str, str]) -> None:
    assert CHANNELS <= set(report), CHANNELS - set(report)
    assert {k: v for k, v in report.items() if v.startswith("LEAK")} == {}
    for name in SYSCALLS:  # the filter's answer, not a kernel's EINVAL after it ran the call
        assert report[name] == FILTER_ANSWER.get(name, "denied EPERM"), (name, report[name])
    for name in CHANNELS - SYSCALLS - {"unshare -U -r", "no_new_privs", "seccomp", "futex wait on a shared file page",
                                       "pid namespace of its own"}:
        assert report[name] in ("absent", "empty", "denied EACCES", "denied EPERM"), (name, report[name])
    assert report["unshare -U -r"] == "denied" and report["no_new_privs"] == "set" and report["seccomp"] == "filtered"
    assert report["futex wait on a shared file page"] == "denied EAGAIN"
    assert report["pid namespace of its own"] == "yes"


@pytest.mark.parametrize("sandbox", MODES)
def test_a_colluding_pair_learns_nothing(base, sandbox):
    """Two differently named bots at one 3-seat table, each sending its hand and reading the
    other's through every channel: each primitive fails, and the game ends with a result."""
    pair = [load_bot(copy_colluder(base / n, n)) for n in ("sender", "receiver")]
    rec, stderr = play_table([pair[0], load_bot("random"), pair[1]], Launcher(containment=containment_for(sandbox)))
    for seat in (0, 2):
        found = reports(stderr[seat])
        assert found, stderr[seat]  # it ran its probes
        for report in found:
            assert_closed(report)
    assert not rec.faults, rec.faults
    assert rec.result is not None and rec.result["reason"] != "forfeit"
    assert sorted(s for group in rec.result["order"] for s in group) == [0, 1, 2]  # every seat placed


FUTEX_PAIR = r"""
import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open("/usr/share/zoneinfo/UTC", os.O_RDONLY)
page = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)  # the page cache's page: keyed by the file
word = ctypes.c_uint32.from_address(page).value
if sys.argv[1] == "wait":
    print("waiting", flush=True)
    op = int(sys.argv[2])  # FUTEX_WAIT (a relative timeout) or FUTEX_WAIT_BITSET (an absolute one), shared
    at = 5 + (time.monotonic() if op == 9 else 0)
    timeout = (ctypes.c_long * 2)(int(at), 0)
    r = libc.syscall(202, ctypes.c_void_p(page), op, ctypes.c_uint32(word), timeout, None, ctypes.c_uint32(0xFFFFFFFF))
    print(f"woken {r == 0} errno {ctypes.get_errno()}", flush=True)
else:
    woke = 0
    for _ in range(20):
        woke += max(libc.syscall(202, ctypes.c_void_p(page), 1, 1, None, None, 0), 0)  # FUTEX_WAKE, shared
        time.sleep(0.05)
    print(f"woke {woke}", flush=True)
"""


@pytest.mark.parametrize("op", [pytest.param(0, id="FUTEX_WAIT"), pytest.param(9, id="FUTEX_WAIT_BITSET")])
@pytest.mark.parametrize("sandbox", MODES)
def test_a_futex_on_a_shared_file_page_wakes_no_other_seat(base, sandbox, op):
    """One seat waits on a shared futex in a page of a file both map, the other wakes it: keyed
    by the file, this passes a bit per wake between sandboxes unless waiting is refused."""
    (base / "futex.py").write_text(FUTEX_PAIR)
    (base / "futex.py").chmod(0o644)

    def main():
        kw = dict(containment=containment_for(sandbox))
        waiter = start_bot(["/usr/bin/python3", "futex.py", "wait", str(op)], base, **kw)
        with waiter:
            assert waiter.receive_line(30) == "waiting"
            waker = start_bot(["/usr/bin/python3", "futex.py", "wake"], base, **kw)
            with waker:
                woke = waker.receive_line(30)
            return woke, waiter.receive_line(30)

    woke, waited = main()
    assert woke == "woke 0"
    assert waited == f"woken False errno {errno.EAGAIN}"  # refused at once, not woken, not a timeout


@pytest.mark.parametrize("sandbox", MODES)
def test_colluders_in_arena_tournament_finish_without_a_fault(base, sandbox):
    """Through ``arena tournament``: a colluder that saw any channel open answers out of range,
    which the store would show as a forfeit."""
    bots = [str(copy_colluder(base / n, n)) for n in ("sender", "receiver")]
    store = base / "store" / "arena.sqlite"
    result = CliRunner().invoke(app, ["tournament", "--name", "collusion", "--bot", bots[0], "--bot", bots[1],
                                      "--bot", "random", "--seats", "3", "--deals", "1", "--plain",
                                      "--store", str(store), *FLAGS[sandbox]])
    assert result.exit_code == 0, result.output
    s = Store(store, readonly=True)
    try:
        games = s.games(tournament="collusion", limit=100)
    finally:
        s.close()
    assert games
    for g in games:
        assert g["result"].get("forfeits", {}) == {}, g["result"]
        assert g["reason"] != "forfeit"


@pytest.mark.parametrize("sandbox", MODES)
def test_a_colluder_in_arena_check_finds_every_channel_closed(base, sandbox):
    bot = copy_colluder(base / "colluder", "colluder")
    result = CliRunner().invoke(app, ["check", str(bot), "--games", "1", "--rules", "classic", "--json",
                                      *FLAGS[sandbox]])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["faults"] == {} and report["played"] == report["planned"] > 0


# -- each layer alone, and fail closed ------------------------------------------------------------

def test_a_mode_is_skipped_only_where_the_machine_lacks_it():
    """The tests above skip a mode whose probe fails; a probe must fail for a reason of the
    machine's, never because of our own sandbox (a skip would hide exactly that): where a plain
    ``bwrap`` runs, ours runs, and a root referee that can unshare namespaces gets namespaces mode."""
    for problem in (BWRAP_PROBLEM, NS_PROBLEM):
        assert "system-call filter" not in (problem or ""), problem
    bwrap = containment.find_bwrap()
    if bwrap and subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "--", "/usr/bin/true"],
                                capture_output=True, timeout=30).returncode == 0:
        assert BWRAP_PROBLEM is None
    if os.geteuid() == 0 and subprocess.run(["unshare", "-m", "-n", "-i", "-u", "/usr/bin/true"],
                                            capture_output=True, timeout=30).returncode == 0:
        assert NS_PROBLEM is None


def _bwrap_of_our_own(folder: Path, script: str, monkeypatch, request) -> Path:
    """A bwrap at a path of the test's (so its probe's note is a note of its own, removed after
    the test) running ``script``; this process's probe forgotten, and each probe from now on
    counted in the list returned."""
    fake = folder / "bwrap"
    fake.write_text(script)
    fake.chmod(0o755)
    monkeypatch.setattr(containment, "BWRAP", str(fake))
    monkeypatch.setattr(probes, "_bwrap_checked", {})
    request.addfinalizer(lambda: [p.unlink(missing_ok=True) for p in _notes_naming(fake)])
    return fake


def _notes_naming(path: Path) -> list[Path]:
    """The probe notes of this machine that list ``path`` among what they were found from (another
    test's own may be removed as they are listed)."""
    def names(note: Path) -> bool:
        try:
            return str(path) in note.read_text(errors="replace")
        except FileNotFoundError:
            return False
    return [n for n in containment.process_registry().run_dir.glob("passed-*.json") if names(n)]


def _counted(monkeypatch) -> list[str]:
    probed: list[str] = []
    tried = probes._tried

    def counted(what, *args, **kw):
        probed.append(what)
        return tried(what, *args, **kw)
    monkeypatch.setattr(probes, "_tried", counted)
    return probed


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bubblewrap: {BWRAP_PROBLEM}")
def test_a_bubblewrap_probe_that_passed_is_noted_once_a_machine(base, monkeypatch, request):
    """Each process (a test's, a worker's, a server's) started a probe bot under bubblewrap before
    its first bot (0.1 s of CPU, 0.3 s of wall). A pass is now noted for the machine: a process
    that has not probed reads it and starts no probe bot. The note is named by the bwrap it ran
    through and read only while that binary is as it was then (replaced: probed again), and only
    from a file of the referee's own (another uid's: probed again). Planted (the note never read):
    a second probe; (the binary's record not compared): no probe after the edit; (the owner not
    checked): no probe after the chown."""
    bwrap = containment.find_bwrap()
    fake = _bwrap_of_our_own(base, f'#!/bin/sh\nexec {bwrap} "$@"\n', monkeypatch, request)
    probed = _counted(monkeypatch)
    assert probes.sandbox_problem_now() is None and probed == ["bwrap"] and len(_notes_naming(fake)) == 1
    monkeypatch.setattr(probes, "_bwrap_checked", {})  # a process that has not probed
    assert probes.sandbox_problem_now() is None and probed == ["bwrap"]
    with open(fake, "a") as f:
        f.write("# replaced\n")
    monkeypatch.setattr(probes, "_bwrap_checked", {})
    assert probes.sandbox_problem_now() is None and probed == ["bwrap", "bwrap"]
    if os.geteuid() == 0:
        [note] = _notes_naming(fake)
        os.chown(note, 12345, 12345)
        monkeypatch.setattr(probes, "_bwrap_checked", {})
        assert probes.sandbox_problem_now() is None and probed == ["bwrap", "bwrap", "bwrap"]


@pytest.mark.skipif(NS_PROBLEM is not None, reason=f"namespaces: {NS_PROBLEM}")
def test_a_note_never_puts_a_bot_in_a_weaker_mode(base, monkeypatch, request):
    """A bubblewrap that cannot make its sandbox here (user namespaces refused): its probe fails,
    nothing is noted, and a default launcher contains bots in namespaces. A note claiming it
    passed (forged in the referee's own run directory: a note's file of another's is refused) can
    only send bots to that bubblewrap, where each start fails: never a bot run in namespaces, nor
    under nothing. A note that says a probe failed cannot be written: only a pass is noted.
    Planted (the probe's answer noted, failures too, and read back): the forged failure's note
    below makes the default launcher choose namespaces where bubblewrap runs."""
    refusing = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    fake = _bwrap_of_our_own(base, refusing, monkeypatch, request)
    assert "No permissions" in probes.sandbox_problem_now()
    assert _notes_naming(fake) == []  # a failure is not noted
    assert Launcher().mode_now() is Containment.NAMESPACES
    tried = probes._tried
    monkeypatch.setattr(probes, "_bwrap_checked", {})
    monkeypatch.setattr(probes, "_tried", lambda *args, **kw: None)  # the forger's note: "it passed"
    assert probes.sandbox_problem_now() is None and len(_notes_naming(fake)) == 1
    monkeypatch.setattr(probes, "_tried", tried)
    monkeypatch.setattr(probes, "_bwrap_checked", {})
    assert Launcher().mode_now() is Containment.BUBBLEWRAP  # the note is read...
    bot = base / "bot"
    bot.mkdir(mode=0o755)
    (bot / "bot.toml").write_text('name = "b"\nversion = "1"\ncommand = ["/usr/bin/true"]\n')
    rec, stderr = play_table([load_bot(bot), load_bot(bot)], Launcher())
    assert rec.steps == [] and len(rec.faults) == 2, rec.faults  # ...and bubblewrap refused both seats
    assert all("No permissions" in " ".join(err) for err in stderr), (rec.faults, stderr)
    # a note of a bwrap that runs, its contents made to say the probe failed: still a pass
    if BWRAP_PROBLEM is None:
        good = _bwrap_of_our_own(base, f'#!/bin/sh\nexec {shutil.which("bwrap")} "$@"\n', monkeypatch, request)
        assert probes.sandbox_problem_now() is None
        [note] = _notes_naming(good)
        note.write_text(json.dumps({**json.loads(note.read_text()), "problem": "bubblewrap cannot run here"}))
        monkeypatch.setattr(probes, "_bwrap_checked", {})
        assert Launcher().mode_now() is Containment.BUBBLEWRAP


@pytest.mark.parametrize("sandbox", MODES)
def test_without_the_filter_the_other_walls_still_hold(base, sandbox, monkeypatch, fresh_probes):
    """With the system-call filter allowing every call (as if its list had lost its rules), the channels it closes open
    (so the pair's test can tell), but bubblewrap's --disable-userns still refuses a nested user
    namespace, and no_new_privs is still set, in both modes."""
    monkeypatch.setattr(seccomp, "_rules", lambda sc, worker: [(sc.ALLOW, nr, ()) for nr in range(seccomp.MAX_NR)])
    pair = [load_bot(copy_colluder(base / n, n)) for n in ("sender", "receiver")]
    rec, stderr = play_table(pair, Launcher(containment=containment_for(sandbox)))
    report = reports(stderr[0])[0]
    assert report["F_OFD_SETLK"].startswith("LEAK") and report["inotify_init1"].startswith("LEAK")
    assert report["no_new_privs"] == "set"
    if sandbox:  # in namespaces mode the filter is the only guard against a nested user namespace
        assert report["unshare -U -r"] == "denied"


@pytest.mark.parametrize("sandbox", MODES)
def test_no_filter_no_bot(sandbox, monkeypatch, fresh_probes):
    """A filter that cannot be built stops every contained start (never a bot without it), and the
    launcher says so before any game."""
    def broken():
        raise seccomp.FilterUnavailable("the system-call filter cannot be built: test")
    monkeypatch.setattr(seccomp, "bpf", broken)
    with pytest.raises(SandboxUnavailable, match="system-call filter"):
        start_bot(["/usr/bin/true"], "/usr/bin", containment=containment_for(sandbox))
    with pytest.raises(ContainmentError, match="system-call filter"):
        Launcher(containment=containment_for(sandbox)).mode_now()


def test_sandbox_without_bubblewrap_is_refused_never_namespaces(monkeypatch, fresh_probes):
    monkeypatch.setattr(containment, "BWRAP", "/nonexistent/bwrap")
    with pytest.raises(ContainmentError, match="bubblewrap") as caught:
        Launcher(containment=Containment.BUBBLEWRAP).mode_now()
    assert "bwrap not found" in str(caught.value)
    result = CliRunner().invoke(app, ["check", "random", "--games", "1", "--sandbox"])
    assert result.exit_code != 0 and "bubblewrap" in result.output and "Traceback" not in result.output
    assert "containment: namespaces" not in result.output
    if NS_PROBLEM is None:  # the default still falls back, and says which one it chose
        assert Launcher().mode_now() is Containment.NAMESPACES


# -- the system-call filter is an allow-list ----------------------------------------------------

EXAMPLES = HERE.parent / "examples" / "bots"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
TOOLCHAINS = {"python": "python3", "javascript": "node", "c": "gcc", "bash": "bash", "java": "javac", "rust": "cargo"}


BUILT_ONCE = {"java", "rust"}
"""Starters whose contained build (a JVM's javac, cargo) runs in the first mode only, its product
started by each: each mode's contained build of a compiled starter is the c one's (gcc, as, ld)."""


@pytest.fixture(scope="module")
def built_once() -> dict[str, object]:
    """A starter of BUILT_ONCE -> the spec its first contained build made."""
    return {}


@pytest.mark.parametrize("lang", sorted(TOOLCHAINS))
@pytest.mark.parametrize("sandbox", MODES)
def test_every_starter_bot_builds_and_plays_contained(base, sandbox, lang, built_once):
    """The allow-list is built from what the starters call: each one the machine has a toolchain
    for builds (under the filter too) and plays a whole game without a fault."""
    if shutil.which(TOOLCHAINS[lang], path=SYSTEM_PATH) is None:  # a contained build sees only the system's
        pytest.skip(f"no system-wide {TOOLCHAINS[lang]} on this machine")
    d = base / lang
    shutil.copytree(EXAMPLES / lang, d, ignore=shutil.ignore_patterns("target", "*.class"))
    for p in [d, *d.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    launcher, spec = Launcher(containment=containment_for(sandbox)), load_bot(d)
    if lang in built_once:
        launcher.built[spec.label] = built_once[lang]  # this mode starts what another mode's build made
    rec, stderr = play_table([spec, load_bot("random")], launcher)
    assert not rec.faults, (rec.faults, stderr[0][-5:])
    assert rec.result is not None and rec.result["reason"] != "forfeit"
    if lang in BUILT_ONCE:
        built_once.setdefault(lang, launcher.built[spec.label])


REFUSED = {
    # calls the list lacks: new mount and memory calls, the persona, numbers no kernel assigns yet
    "open_tree_attr", "listmount", "statmount", "memfd_secret", "personality", "unassigned 600",
    "unassigned 1000",
    # another ABI on this architecture (x32)
    "x32 getpid",
    # kernel-wide counters one seat moves and another reads (memfd and pidfd inode numbers, the
    # autogroup id each new session takes) and sharing a CPU's counters with another seat
    "memfd_create", "pidfd_open", "clone CLONE_PIDFD", "setsid", "sched_setaffinity",
    # the old inotify call, a waiting OFD lock, and sockets other than UNIX ones
    "inotify_init", "F_OFD_SETLKW", "AF_INET6 socket", "AF_NETLINK socket", "AF_INET socket",
}
RUN_ON_THE_HOST = REFUSED - {"unassigned 600", "unassigned 1000", "x32 getpid", "memfd_secret",
                             "open_tree_attr", "listmount", "statmount"}
"""What runs on any kernel the arena supports, as root outside the sandbox (so the probe can tell)."""


def probe_report(base: Path, sandbox: bool | None) -> dict[str, str]:
    shutil.copy(HERE / "fairplay_bots" / "syscalls.py", base / "syscalls.py")
    (base / "syscalls.py").chmod(0o644)
    if sandbox is None:  # on the host, unfiltered
        out = subprocess.run(["/usr/bin/python3", "syscalls.py"], cwd=base, capture_output=True, text=True,
                             timeout=60, check=True).stdout
        return json.loads(out)

    def main():
        bot = start_bot(["/usr/bin/python3", "syscalls.py"], base, containment=containment_for(sandbox))
        with bot:
            return json.loads(bot.receive_line(30))
    return main()


def test_the_probe_can_tell_on_the_host(base):
    report = probe_report(base, None)
    assert REFUSED <= set(report)
    if os.geteuid() == 0:
        assert {name: report[name] for name in RUN_ON_THE_HOST if report[name] != "ran"} == {}
    assert report["read /proc/zoneinfo"] == "ran"


@pytest.mark.parametrize("sandbox", MODES)
def test_calls_the_list_lacks_are_refused(base, sandbox):
    """Each call on the list above, written here and not read from the filter's own list, fails
    with the filter's EPERM (known but not allowed) or ENOSYS (newer than the list), and
    /proc/zoneinfo (every zone's free-page counters) cannot be read."""
    report = probe_report(base, sandbox)
    assert {name: report[name] for name in REFUSED if report[name] not in ("EPERM", "ENOSYS")} == {}
    assert report["x32 getpid"] == "EPERM"  # another ABI: refused as such, not left to the kernel
    assert report["read /proc/zoneinfo"] in ("ENOENT", "EACCES", "empty")


INT80 = r"""
#include <stdio.h>
#include <sys/file.h>
static char info[128];  /* a static buffer: its address fits the 32-bit ABI's registers (no PIE) */
static long i386(long nr, long a, long b) {
    long r;
    __asm__ volatile ("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b) : "memory");
    return r;
}
int main(void) {
    FILE *f = fopen("/etc/hostname", "r");
    printf("getpid %ld flock %ld inotify_init %ld sysinfo %ld\n", i386(20, 0, 0),
           i386(143, fileno(f), LOCK_SH), i386(291, 0, 0), i386(116, (long)info, 0));
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the 32-bit ABI probe")
@pytest.mark.parametrize("sandbox", MODES)
def test_the_32_bit_abi_is_refused_entirely(base, sandbox):
    """``int 0x80`` from a 64-bit program reaches the kernel's 32-bit call table, where flock,
    inotify_init and sysinfo have other numbers: every call of that ABI fails with EPERM."""
    (base / "int80.c").write_text(INT80)
    subprocess.run(["gcc", "-O0", "-no-pie", "-o", str(base / "int80"), str(base / "int80.c")], check=True)
    (base / "int80").chmod(0o755)
    host = subprocess.run([str(base / "int80")], capture_output=True, text=True, timeout=30)
    if host.returncode != 0:
        pytest.skip("this kernel runs no 32-bit system calls (no IA32 emulation)")
    values = dict(zip(*[iter(host.stdout.split())] * 2))
    assert int(values["getpid"]) > 0 and int(values["flock"]) == 0 and int(values["sysinfo"]) == 0, host.stdout

    def main():
        bot = start_bot([str(base / "int80")], base, containment=containment_for(sandbox))
        with bot:
            return bot.receive_line(30)
    eperm = -errno.EPERM
    assert main() == f"getpid {eperm} flock {eperm} inotify_init {eperm} sysinfo {eperm}"


# -- each seat has a network namespace of its own -------------------------------------------------

@pytest.mark.parametrize("sandbox", MODES)
def test_two_seats_share_no_abstract_socket_and_see_none_of_the_hosts(base, sandbox):
    """An abstract UNIX socket needs no file, only a shared network namespace: one seat listens,
    the other connects and sends a byte, and reads /proc/net/unix for the listener's name and a
    name this (host) process bound. Each seat has its own namespace: the connection is refused
    and neither name is listed."""
    shutil.copy(HERE / "fairplay_bots" / "abstract.py", base / "abstract.py")
    (base / "abstract.py").chmod(0o644)
    tag = os.urandom(6).hex()
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(f"\0arena-host-{tag}")
    host.listen(1)

    def main():
        kw = dict(containment=containment_for(sandbox))
        listener = start_bot(["/usr/bin/python3", "abstract.py", "listen", f"seat-{tag}"], base, **kw)
        with listener:
            assert listener.receive_line(30) == "listening"
            sender = start_bot(["/usr/bin/python3", "abstract.py", "send", f"seat-{tag}",
                                      f"arena-host-{tag}"], base, **kw)
            with sender:
                return sender.receive_line(30)

    try:
        assert "@arena-host-" + tag in Path("/proc/net/unix").read_text()  # the host does list it
        assert main() == "ECONNREFUSED seen none"
    finally:
        host.close()


@pytest.mark.parametrize("sandbox", MODES)
def test_a_lower_hard_limit_of_the_referee_still_starts_bots(base, sandbox):
    """Under ``prlimit --nofile=200:200`` (below a bot's default 256) the arena cannot raise a
    hard limit without CAP_SYS_RESOURCE; it keeps each limit within its own, and bots start."""
    script = ("import resource\n"
              "from arena.bots.containment import Containment\nfrom arena.bots.start import start_bot\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))\n"
              "def main():\n"
              f"    bot = start_bot(['/usr/bin/python3', '-c', 'import resource; "
              f"print(resource.getrlimit(resource.RLIMIT_NOFILE))'], '/usr/bin', "
              f"containment=Containment.{'BUBBLEWRAP' if sandbox else 'NAMESPACES'})\n"
              "    with bot:\n"
              "        print(bot.receive_line(30))\n"
              "main()\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "(200, 200)", out.stderr[-2000:]
