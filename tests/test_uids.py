"""The run directory's records and uid leases when a referee dies: every process the arena started
for a bot is found by whoever survives, the subreaper reaps its own zombie children whatever uid
lock another referee holds, and a uid with leftovers nobody cleared is not leased again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from arena.bots.containment import cleanup_stale, process_registry
from arena.bots.probes import sandbox_problem_now
from arena.bots.procs import read_proc
from arena.bots.spawn import DEFAULT_PATH
from arena.bots import uids
from arena.bots.uids import Registry, pids_of_uid
from tests.checks import boot_ticks, end_reaped_elsewhere, reachable, zombie_children

HOSTILE = reachable(Path(__file__).parent / "hostile")  # private uids run these
PY = shutil.which("python3", path=DEFAULT_PATH)
REPO = Path(__file__).resolve().parent.parent
SLOW = 120  # a wait only a broken test reaches
SANDBOX_PROBLEM = sandbox_problem_now() if PY else "no python3"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="private bot uids need a root referee")
needs_sandbox = pytest.mark.skipif(SANDBOX_PROBLEM is not None, reason=f"bwrap: {SANDBOX_PROBLEM}")

WORKER = textwrap.dedent("""
    import sys, time
    from arena.limits import Limits
    from arena.bots.containment import Containment, RunAs
    from arena.bots.start import start_bot
    bot = start_bot([sys.argv[1], sys.argv[2]], sys.argv[3], containment=Containment.BUBBLEWRAP,
                             run_as=RunAs.REFEREE if sys.argv[4] == "shared" else RunAs.PRIVATE,
                             limits=Limits(max_processes=16))
    print(bot.pid, bot._sandbox_init, bot.uid, bot.name, bot.receive_line(30), flush=True)
    time.sleep(600)
""")

SIBLING_LEASES = textwrap.dedent("""
    import sys
    from arena.bots.containment import process_registry
    from arena.bots.uids import BOT_UID_BASE
    registry = process_registry()
    registry._uid_next = int(sys.argv[1]) - BOT_UID_BASE  # its next lease tries the dead worker's uid first
    print(registry.lease_uid().uid, flush=True)
    sys.stdin.read()
""")

SIBLING_LOCKS = textwrap.dedent("""
    import fcntl, os, sys
    from arena.bots.containment import process_registry
    fd = os.open(process_registry().run_dir / "uids" / sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a referee that holds the uid's lease does
    print(sys.argv[1], flush=True)
    sys.stdin.read()
""")


def _dead_worker(uid: str = "private") -> tuple[int, int, str, str, int]:
    """A referee worker, child of this process (a subreaper, like the tournament's parent), starts
    a bot under bubblewrap and is killed -9. Returns once the bot's outer bwrap and the sandbox's
    init are both zombies of this process: (outer pid, init pid, uid, bot name, worker pid). The bot
    has a ``private`` uid from the pool, or the ``shared`` uid of its referee."""
    worker = subprocess.Popen([sys.executable, "-c", WORKER, PY, str(HOSTILE / "echo.py"), str(HOSTILE), uid],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        outer, init, uid, name, ready = worker.stdout.readline().split()
    finally:
        worker.kill()
        worker.wait()
        worker.stdout.close()
    assert ready == "ready"
    me = os.getpid()
    deadline = time.monotonic() + SLOW
    for pid in (int(outer), int(init)):
        while (info := read_proc(pid)) is None or info.state != "Z" or info.ppid != me:
            assert time.monotonic() < deadline, f"{pid} did not become our zombie: {info}"
            time.sleep(0.005)
    return int(outer), int(init), uid, name, worker.pid


@needs_root
@needs_sandbox
@pytest.mark.parametrize("sibling", ["leases", "holds the lock", "holds the lock, record lost"])
def test_a_dead_workers_bot_is_reaped_whatever_a_sibling_does_with_its_uid(sibling: str) -> None:
    """The race of a killed worker: its bot's processes are zombies of this subreaper, its uid's
    lock is free, and a surviving referee takes the uid (or its lock) before this process cleans
    up. Both zombies are reaped all the same, and the uid is leased again only once they are."""
    process_registry()  # this process: a subreaper with a run directory, as the tournament's parent
    since = boot_ticks()
    outer, init, bot_uid, name, worker = _dead_worker()
    uid = int(bot_uid)
    if "record lost" in sibling:  # the worker died before it wrote the record
        (process_registry().run_dir / f"ref-{worker}" / f"{name}.json").unlink()
    script = SIBLING_LEASES if sibling == "leases" else SIBLING_LOCKS
    other = subprocess.Popen([sys.executable, "-c", script, str(uid)], cwd=REPO,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None
        leased = int(other.stdout.readline())
        if sibling == "leases":
            assert leased != uid, "a uid was leased while a dead worker's processes were left under it"
        cleanup_stale()
        assert zombie_children(started_since=since) == []
        assert read_proc(outer) is None and read_proc(init) is None
        assert pids_of_uid(uid) == []
    finally:
        other.kill()
        other.wait()
        for stream in (other.stdin, other.stdout):
            stream.close()
        for pid in (outer, init):  # a failed test must not leave them to the next one
            info = read_proc(pid)
            if info is not None and info.ppid == os.getpid():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    cleanup_stale()  # the sibling's lease: it was killed holding it


CLEANS = "from arena.bots.containment import cleanup_stale; cleanup_stale()"


@needs_sandbox
def test_a_dead_workers_bot_under_the_referees_uid_is_reaped_after_another_arena_cleaned_first() -> None:
    """No private uid to find them by: the record alone names the bot's outer bwrap and the
    sandbox's init. Another arena process cleans up first; they are not its children, so it
    cannot reap them and must leave the record for this process, their parent, which reaps both."""
    process_registry()
    since = boot_ticks()
    outer, init, uid, _, _ = _dead_worker("shared")
    assert uid == "None"
    subprocess.run([sys.executable, "-c", CLEANS], cwd=REPO, check=True)
    try:
        assert read_proc(outer).state == "Z" and read_proc(init).state == "Z"  # not the other's to reap
        cleanup_stale()
        assert zombie_children(started_since=since) == []
        assert read_proc(outer) is None and read_proc(init) is None
    finally:
        for pid in (outer, init):
            info = read_proc(pid)
            if info is not None and info.ppid == os.getpid():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


ALONE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from arena.bots import containment, uids
    containment._registry = uids.Registry(Path(sys.argv.pop(1)))  # a run directory of the test's own
""")
"""The start of a script run as an arena process in the test's own run directory (its first
argument): no other arena on the machine cleans there, so each order of events is the test's (its
sweep of stray bot uids checks their leases in the machine's run directory, as every arena's does)."""

BUILDER = ALONE + textwrap.dedent("""
    from arena.bots.launch import Containment, Launcher
    from arena.bots.manifest import load_bot
    Launcher(containment=Containment.TRUSTED).build_now(load_bot(sys.argv[1]))
""")


STALLED_BUILDER = BUILDER.replace("Launcher(", """import time
uids.read_proc = lambda pid: time.sleep(3600)  # the referee stops just after the fork: its killer's moment
Launcher(""")

CLEANS_ALONE = ALONE + "containment.process_registry().cleanup_stale(None)\n"


def _alone(tmp_path: Path) -> Registry:
    """This process as an arena process in the test's own run directory, as ``ALONE`` makes a script."""
    return Registry(tmp_path / "run")


def _killed_mid_build(tmp_path: Path, builder: str) -> tuple[list[int], Path]:
    """A referee, child of this process (a subreaper), runs a trusted bot's build in place and is
    killed -9 mid-build: returns the pids of the build's shell and of the child it forked, both
    orphaned to this process and not reaped yet, and the referee's directory."""
    bot = tmp_path / "slowbuild"
    bot.mkdir()
    (bot / "bot.py").write_text("print('ready', flush=True)\n")
    (bot / "bot.toml").write_text('name = "slowbuild"\ncommand = ["python3", "bot.py"]\n'
                                  'build = ["sh", "-c", "sleep 600 & echo $$ $! > pids.tmp; mv pids.tmp pids; wait; exec sleep 600"]\n')
    referee = subprocess.Popen([sys.executable, "-c", builder, str(tmp_path / "run"), str(bot)], cwd=REPO)
    try:
        deadline = time.monotonic() + SLOW
        while not (bot / "pids").exists():
            assert time.monotonic() < deadline and referee.poll() is None, "the build did not start"
            time.sleep(0.005)
    finally:
        referee.kill()
        referee.wait()
    pids = [int(p) for p in (bot / "pids").read_text().split()]
    assert all(read_proc(p) is not None for p in pids)  # orphaned, not reaped by anyone yet
    return pids, tmp_path / "run" / f"ref-{referee.pid}"


def _described(pid: int) -> str:
    """A process as a failure message shows it: its state, parent, start, name and command line
    (a recycled pid shows a stranger's)."""
    seen = []
    for what in ("comm", "cmdline"):  # a zombie keeps its name, not its command line
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                seen.append(f.read().strip().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            seen.append("?")
    return f"{read_proc(pid)} {seen}"


def _reap_our_children(pids: list[int]) -> None:
    """Kill and reap those of ``pids`` still our children: a failed test must not leave them to the next."""
    for pid in pids:
        info = read_proc(pid)
        if info is not None and info.ppid == os.getpid():
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


@pytest.mark.parametrize("builder", [BUILDER, STALLED_BUILDER], ids=["mid-build", "right-after-the-fork"])
def test_a_trusted_build_whose_referee_died_is_killed_and_reaped(tmp_path: Path, builder: str) -> None:
    """A build run in place (``--trusted-bots``) is the referee's child with no containment: a
    referee killed mid-build orphans it, and its children, to this subreaper. The cleanup after
    the referee must find the build as it finds a bot: by the referee's record of it, which is
    written before the fork (a referee killed between the fork and noting the pid left the build
    running with nothing naming it: ``right-after-the-fork``). In a run directory of the test's
    own: an arena beside it (another test worker) cleaning first is the test below."""
    registry = _alone(tmp_path)
    since = boot_ticks()
    pids, dead = _killed_mid_build(tmp_path, builder)
    try:
        report = registry.cleanup_stale(None)
        seen = f"report: {report!r}; records: {[(r.name, r.read_text()) for r in dead.glob('*.json')]}"
        assert [_described(p) for p in pids if read_proc(p) is not None] == [], seen
        assert [_described(p) for p in zombie_children(started_since=since)] == [], seen
        assert report.killed >= len(pids) and not dead.exists(), seen
    finally:
        _reap_our_children(pids)


HOLDS_THE_DIRECTORY = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as an arena's cleanup does while it cleans a dead referee's directory
    print("held", flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("builder, meanwhile, child_first", [
    (BUILDER, False, False), (BUILDER, False, True), (STALLED_BUILDER, False, False), (STALLED_BUILDER, True, False)],
    ids=["mid-build", "mid-build, its child ended first", "right-after-the-fork", "right-after-the-fork, still cleaning"])
def test_a_trusted_build_is_reaped_by_its_parent_after_another_arena_cleaned_first(
        tmp_path: Path, builder: str, meanwhile: bool, child_first: bool) -> None:
    """Every arena process cleans the run directory when it starts, so another one may clean a dead
    referee's build first. It kills the build, whose processes become zombies of this subreaper,
    not its own to reap. The dead referee's record must still name them for this process, whether
    it cleans the directory itself or, ``still cleaning``, finds it held by another cleaner: right
    after the fork the record names the build by its environment's token alone, which a zombie no
    longer shows, and a trusted build runs as the referee's uid, not a pool uid to find it by (seen
    once beside another test worker running ``arena`` commands: the zombies outlived the cleanup).
    The build's shell waits for its child: one that ends first, as when the other arena's kill
    reaches it first, is reaped by the shell, not left to us (``its child ended first``)."""
    registry = _alone(tmp_path)
    since = boot_ticks()
    pids, dead = _killed_mid_build(tmp_path, builder)
    holder = None
    try:
        if child_first:
            os.kill(pids[1], signal.SIGKILL)
            deadline = time.monotonic() + SLOW
            while read_proc(pids[1]) is not None:  # reaped by the shell, which goes on
                assert time.monotonic() < deadline, f"the shell did not reap its child: {_described(pids[1])}"
                time.sleep(0.005)
        subprocess.run([sys.executable, "-c", CLEANS_ALONE, str(tmp_path / "run")], cwd=REPO, check=True)
        shell, *children = [read_proc(p) for p in pids]  # killed by the other, not its to reap
        ours = [i is not None and i.state == "Z" and i.ppid == os.getpid() for i in (shell, *children)]
        assert ours[0] and all(o or i is None for o, i in zip(ours[1:], children)), [shell, *children]
        assert list(dead.glob("*.json")), "the other arena dropped the record of zombies only we may reap"
        if meanwhile:
            holder = subprocess.Popen([sys.executable, "-c", HOLDS_THE_DIRECTORY, str(dead / "lock")],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        registry.cleanup_stale(None)
        left = [i for i in map(read_proc, pids) if i is not None]
        assert left == [], f"left: {left}; records: {[(r.name, r.read_text()) for r in dead.glob('*.json')]}"
        assert zombie_children(started_since=since) == []
        if holder is not None:
            holder.communicate("")
            registry.cleanup_stale(None)
        assert not dead.exists()  # the record goes with the last process it names
    finally:
        if holder is not None:
            holder.kill()
            holder.communicate()
        _reap_our_children(pids)


def test_a_bot_group_made_while_a_cleanup_runs_is_not_taken_for_a_dead_referees(tmp_path: Path, monkeypatch) -> None:
    """The cleanup removes the bot groups of referees that have no directory (a group whose record
    was never written or was lost). A referee publishes its directory before it makes a group, so
    a listed group is a dead referee's only if no directory names its referee *after* the listing.
    The directories were read once, before: a referee that started while a cleanup ran (its
    kills of other groups may take seconds) had its first bot's group taken for a dead one's,
    and that live bot killed."""
    from arena.bots.cgroups import CgroupRoot
    registry = _alone(tmp_path)
    parent = tmp_path / "pids" / "palace-arena"  # plain folders for a v1 pids hierarchy
    stale, fresh = parent / "r999990-b1", parent / "r999991-b1"
    stale.mkdir(parents=True)  # a dead referee's, its record lost
    listed = uids._entries

    def a_referee_starts_meanwhile(directory: Path, pattern: str) -> list[Path]:
        if directory == parent and not fresh.exists():
            (registry.run_dir / "ref-999991").mkdir()  # its directory first, then its bot's group
            fresh.mkdir()
        return listed(directory, pattern)

    monkeypatch.setattr(uids, "_entries", a_referee_starts_meanwhile)
    report = registry.cleanup_stale(CgroupRoot("v1", {"pids": parent}))
    assert fresh.is_dir() and not stale.exists() and report.cgroups == [str(stale)]


def test_a_referee_given_a_dead_ones_pid_does_not_give_its_bots_the_dead_ones_names(tmp_path: Path) -> None:
    """Pids come round (pid_max 32768 here, where the suite wraps it in minutes). A referee that gets
    a dead one's pid and finds its records of processes not gone yet keeps them, set aside, for a
    later cleanup, which finds their cgroups by name: a bot of the new referee given one of those
    names (``r<pid>-b1`` again) had its live group taken for the dead bot's, and was killed."""
    from arena.bots.cgroups import CgroupRoot
    run = tmp_path / "run"
    parent = tmp_path / "pids" / "palace-arena"  # plain folders for a v1 pids hierarchy
    parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDS_A_ZOMBIE], stdout=subprocess.PIPE, text=True)
    bot = None
    try:
        assert holder.stdout is not None
        zombie = int(holder.stdout.readline())  # the dead referee's leftover: no cleanup can reap it yet
        deadline = time.monotonic() + SLOW
        while (info := read_proc(zombie)) is None or info.state != "Z":
            assert time.monotonic() < deadline, f"{zombie} did not become a zombie: {info}"
            time.sleep(0.005)
        dead = run / f"ref-{os.getpid()}"  # the dead referee had the pid we have now
        dead.mkdir(parents=True)
        (dead / f"r{os.getpid()}-b1.json").write_text(json.dumps(
            {"procs": [[zombie, info.start]], "uid": None, "cgroups": [str(parent / f"r{os.getpid()}-b1")]}))
        registry = _alone(tmp_path)
        assert [d.name[:len(dead.name) + 1] for d in run.glob("ref-*-*")] == [f"{dead.name}-"]  # set aside
        bot = subprocess.Popen(["sleep", "600"])  # the new referee's bot, in a group of the name it gets
        group = parent / registry.next_name()
        group.mkdir()
        (group / "cgroup.procs").write_text(f"{bot.pid}\n")
        registry.cleanup_stale(CgroupRoot("v1", {"pids": parent}))
        assert bot.poll() is None, f"the live bot in {group.name} was killed as the dead referee's"
    finally:
        for child in (holder, bot):
            if child is not None:
                child.kill()
                child.wait()
        holder.stdout.close()


def test_the_cleanup_reaps_no_child_of_ours_that_a_popen_waits_for(tmp_path: Path) -> None:
    """The cleanup reaps the zombie children a dead referee's record names, its notes for the parent
    included, and no other: a ``subprocess.Popen`` of this process whose child it reaped would read
    its exit as 0 (Popen takes ECHILD for a success)."""
    registry = _alone(tmp_path)
    ours = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    noted = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + SLOW
        while any((info := read_proc(p.pid)) is None or info.state != "Z" for p in (ours, noted)):
            assert time.monotonic() < deadline, "the children did not exit"
            time.sleep(0.005)
        dead = tmp_path / "run" / "ref-999995"
        dead.mkdir()
        (dead / "r999995-b1.json").write_text(json.dumps(
            {"procs": [], "token": "PALACE_ARENA_RUN=x", uids.UNREAPED: [[noted.pid, read_proc(noted.pid).start]]}))
        registry.cleanup_stale(None)
        assert read_proc(noted.pid) is None and not dead.exists()  # named: reaped, and the record gone
        assert ours.wait() == 7
    finally:
        for child in (ours, noted):
            child.kill()
            child.wait()


def test_a_record_written_before_procs_existed_is_still_cleaned(tmp_path: Path) -> None:
    """A referee of an earlier version, killed, left a record naming its bot's process as ``pid``
    and ``start``: the cleanup still kills and reaps it, then removes the record and directory."""
    from arena.bots.uids import Registry, StaleReport
    registry = Registry(tmp_path / "run")
    bot = subprocess.Popen(["sleep", "600"])
    try:
        dead = tmp_path / "run" / "ref-999997"
        dead.mkdir()
        (dead / "r999997-b1.json").write_text(json.dumps(
            {"pid": bot.pid, "start": read_proc(bot.pid).start, "uid": None, "token": None, "cgroups": []}))
        report = StaleReport()
        registry._clean_referee_dir(dead, None, report)
        assert report.killed == 1 and read_proc(bot.pid) is None and not dead.exists()
    finally:
        end_reaped_elsewhere(bot)


def test_a_referee_directory_removed_while_another_arena_cleans_is_passed_over(tmp_path: Path, monkeypatch) -> None:
    """Every arena on a machine cleans the same run directory when it starts. A referee that ends
    between another's look at its directory and the open of its lock removes the directory under
    that open: the cleaner passes it over (seen once in the full suite beside other runs:
    FileNotFoundError on ``ref-N/lock`` ended a ladder run before its first game)."""
    from arena.bots import uids
    from arena.bots.uids import Registry, StaleReport
    registry = Registry(tmp_path / "run")
    gone = tmp_path / "run" / "ref-999996"
    gone.mkdir()
    real = uids._try_lock

    def its_referee_ends_first(path: Path) -> int | None:
        shutil.rmtree(path.parent)  # the referee ended and removed its directory just now
        return real(path)

    monkeypatch.setattr(uids, "_try_lock", its_referee_ends_first)
    report = StaleReport()
    registry._clean_referee_dir(gone, None, report)
    assert report == StaleReport() and not gone.exists()


HOLDS_A_ZOMBIE = """
import os, time
child = os.fork()
if child == 0:
    os._exit(0)
print(child, flush=True)
time.sleep(600)
"""


def test_a_record_of_another_parents_zombie_is_kept_until_it_is_reaped(tmp_path: Path) -> None:
    """A dead referee's record whose process is a zombie of some other live process: the cleanup
    cannot reap it, so it keeps the record (that parent's cleanup needs it), and a new referee
    that happens to get the dead one's pid sets the directory aside rather than failing. Once the
    zombie comes to us (its parent died; we are a subreaper), the next cleanup reaps it and
    removes the record."""
    from arena.bots.uids import Registry, StaleReport
    run = tmp_path / "run"
    # The holder forks a child that exits at once and never waits for it. Not a shell: a shell
    # may reap its background child on the way to exec (seen under load: the zombie vanished).
    holder = subprocess.Popen([sys.executable, "-c", HOLDS_A_ZOMBIE], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        zombie = int(holder.stdout.readline())
        deadline = time.monotonic() + SLOW
        while (info := read_proc(zombie)) is None or info.state != "Z":
            assert time.monotonic() < deadline, f"{zombie} did not become a zombie: {info}"
            time.sleep(0.005)
        assert info.ppid == holder.pid  # not ours: only the holder may reap it
        ours = run / f"ref-{os.getpid()}"  # the dead referee had the pid we have now
        ours.mkdir(parents=True)
        (ours / "r1-b1.json").write_text(json.dumps({"procs": [[zombie, info.start]], "uid": None}))
        registry = Registry(run)
        assert registry.dir == ours and not list(ours.glob("*.json"))
        aside = [d for d in run.glob(f"ref-{os.getpid()}-*")]
        assert len(aside) == 1 and (aside[0] / "r1-b1.json").exists()
        holder.kill()
        holder.wait()  # the zombie is orphaned to this process, a subreaper
        registry._clean_referee_dir(aside[0], None, StaleReport())
        assert read_proc(zombie) is None and not aside[0].exists()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a cgroup")
def test_a_frozen_bot_left_by_a_dead_referee_is_killed() -> None:
    """A seat is frozen off its turn; a referee that dies then leaves it frozen, and a frozen
    process ignores SIGKILL until thawed. The cleanup's kill loop thaws the arena's group it is in."""
    from arena.bots.procs import ARENA_CGROUP, cgroup_mounts, kill_and_reap

    mounts: dict[str, str] = {}
    for fstype, mnt, root, opts in cgroup_mounts():
        if root == "/":  # the test makes its group from the hierarchy's top
            mounts.setdefault("unified" if fstype == "cgroup2" else "freezer" if "freezer" in opts else "", mnt)
    if "freezer" in mounts:
        group, knob, frozen = Path(mounts["freezer"]) / ARENA_CGROUP / f"test-frozen-{os.getpid()}", "freezer.state", "FROZEN"
    elif "unified" in mounts:
        group, knob, frozen = Path(mounts["unified"]) / ARENA_CGROUP / f"test-frozen-{os.getpid()}", "cgroup.freeze", "1"
    else:
        pytest.skip("no cgroup freezer here")
    group.mkdir(parents=True)
    child = subprocess.Popen(["sleep", "60"])
    try:
        (group / "cgroup.procs").write_text(str(child.pid))
        (group / knob).write_text(frozen)
        killed = kill_and_reap(lambda table: {child.pid}, time.monotonic() + 3.0)
        assert list(killed) == [child.pid] and read_proc(child.pid) is None, "the frozen process outlived the kill loop"
    finally:
        child.kill()
        (group / knob).write_text("THAWED" if knob == "freezer.state" else "0")
        child.wait()
        group.rmdir()


@pytest.mark.parametrize("layout", ["v1 host", "v2 host", "v2 container without a cgroup namespace",
                                    "v2 container, a group outside the mount"])
def test_the_thaw_finds_the_frozen_group_in_every_mount_layout(tmp_path: Path, layout: str) -> None:
    """The cleanup's thaw reads where the hierarchy is mounted and what part of it the mount shows
    (/proc/self/mountinfo's root) from faked kernel files: on a host the mount shows the whole tree;
    in a container given one group of the host's tree without a cgroup namespace, /proc/PID/cgroup
    names the group from the host's top, and the mount shows only the container's part."""
    from arena.bots.procs import ARENA_CGROUP, thaw_arena_cgroups
    proc, mnt = tmp_path / "proc", tmp_path / "cg"
    (proc / "self").mkdir(parents=True)
    (proc / "42").mkdir()
    v1 = layout == "v1 host"
    root = "/docker/abc" if "container" in layout else "/"
    fstype, opts = ("cgroup", "rw,freezer") if v1 else ("cgroup2", "rw,nsdelegate")
    (proc / "self" / "mountinfo").write_text(
        "22 1 0:20 / /sys rw,nosuid - sysfs sysfs rw\n"
        f"30 22 0:26 {root} {mnt} rw,nosuid - {fstype} cgroup {opts}\n")
    seat = f"/{ARENA_CGROUP}/bot-7"
    path = ("/elsewhere" if "outside" in layout else root.rstrip("/")) + seat
    (proc / "42" / "cgroup").write_text(f"5:freezer:{path}\n" if v1 else f"0::{path}\n")
    group = mnt / seat.lstrip("/")
    group.mkdir(parents=True)
    knob = group / ("freezer.state" if v1 else "cgroup.freeze")
    knob.write_text("FROZEN" if v1 else "1")
    thaw_arena_cgroups([42], proc=str(proc))
    if "outside" in layout:  # a group the mount does not show is left alone, nothing else written
        assert knob.read_text() == "1" and sorted(p.name for p in mnt.rglob("*")) == ["bot-7", "cgroup.freeze", ARENA_CGROUP]
    else:
        assert knob.read_text() == ("THAWED" if v1 else "0")


def test_a_group_is_found_only_below_what_its_mount_shows() -> None:
    from arena.bots.procs import cgroup_dir
    assert cgroup_dir("/sys/fs/cgroup", "/", "/palace-arena/b") == "/sys/fs/cgroup/palace-arena/b"
    assert cgroup_dir("/sys/fs/cgroup", "/docker/abc", "/docker/abc/palace-arena/b") == "/sys/fs/cgroup/palace-arena/b"
    assert cgroup_dir("/sys/fs/cgroup", "/docker/abc", "/docker/abc") == "/sys/fs/cgroup"
    for outside in ("/docker/abcdef/palace-arena/b", "/elsewhere/palace-arena/b", "/docker"):
        assert cgroup_dir("/sys/fs/cgroup", "/docker/abc", outside) is None, outside


def test_a_referee_killed_while_making_a_bot_copy_leaves_no_directory_nobody_named(tmp_path: Path) -> None:
    """A referee killed the instant its copy's directory exists (before a byte is copied into it):
    the cleanup after it finds and removes that directory. Noting the name only after ``mkdtemp``
    left such an empty ``palace-arena-bot-*`` behind (seen once in CI, after a worker's kill -9)."""
    from arena.bots import launch
    from arena.bots.uids import Registry, StaleReport
    temp, run, bot = tmp_path / "temp", tmp_path / "run", tmp_path / "bot"
    temp.mkdir()
    bot.mkdir()
    (bot / "bot.py").write_text("print('hi')\n")
    pid = os.fork()
    if pid == 0:  # the referee, killed by its own hand at the worst moment
        try:
            registry = Registry(run)
            launch.process_registry = lambda: registry
            os.environ["TMPDIR"] = str(temp)
            import tempfile
            tempfile.tempdir = None
            real_mkdir = os.mkdir

            def mkdir_then_die(path, mode=0o777, *a, **kw):
                real_mkdir(path, mode, *a, **kw)
                if os.path.basename(path).startswith("palace-arena-"):
                    os.kill(os.getpid(), signal.SIGKILL)

            os.mkdir = mkdir_then_die
            launch.world_readable_copy(bot, "palace-arena-bot-")
        finally:
            os._exit(3)  # not reached when the kill came
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert [p.name[:17] for p in temp.iterdir()] == ["palace-arena-bot-"]  # it died with one made
    report = StaleReport()
    Registry(tmp_path / "other")._clean_referee_dir(run / f"ref-{pid}", None, report)
    assert list(temp.iterdir()) == [] and len(report.temps) == 1


def _leftover_path() -> Path:
    from arena.bots.filesystem import world_writable_dirs
    return Path(world_writable_dirs()[0]) / f"arena-uid-leftover-{os.getpid()}-{time.monotonic_ns()}"


def _leftover(uid: int) -> Path:
    """A file of ``uid`` in the first folder every user may write, as a bot of that uid holding
    its lease leaves one."""
    path = _leftover_path()
    path.write_text("for the next bot of this uid")
    os.chown(path, uid, uid)
    return path


WRITES_WHEN_TOLD = 'read _ && echo "for the next bot of this uid" > "$0" && exec sleep 600'
"""A process of a bot uid that leaves a file when a line comes (at the path its argument names)."""


def _told_to_write(process: subprocess.Popen, path: Path) -> Path | None:
    """``path`` once ``process`` (:data:`WRITES_WHEN_TOLD`) wrote it, or None if it died first:
    another arena's lease of its uid kills it, and a dead process writes nothing."""
    assert process.stdin is not None
    try:
        process.stdin.write("write\n")
        process.stdin.close()
    except BrokenPipeError:
        pass
    deadline = time.monotonic() + SLOW
    while not path.exists():
        if process.poll() is not None:
            return path if path.exists() else None
        assert time.monotonic() < deadline, "the process of the uid neither wrote nor ended"
        time.sleep(0.005)
    return path


def _lease_again(uid: int):
    """The next lease of ``uid`` by this process. Other arena processes lease from the same pool:
    one that holds ``uid`` a moment (another test worker's) is waited for."""
    from arena.bots.uids import BOT_UID_BASE
    registry = process_registry()
    deadline = time.monotonic() + SLOW
    while True:
        registry._uid_next = uid - BOT_UID_BASE  # the next lease tries this uid first
        lease = registry.lease_uid()
        if lease.uid == uid:
            return lease
        registry.release_uid(lease)
        assert time.monotonic() < deadline, f"uid {uid} was never free"
        time.sleep(0.01)


LEASES_AND_RELEASES = textwrap.dedent("""
    import sys
    from arena.bots.containment import process_registry
    from arena.bots.uids import BOT_UID_BASE
    registry = process_registry()
    registry._uid_next = int(sys.argv[1]) - BOT_UID_BASE  # its next lease tries this uid first
    registry.release_uid(registry.lease_uid())
""")
"""Another arena process (the other test worker's) leases the uid its argument names, or the next
free one where that one is held or a process of it outlives the kill, and releases it."""


@needs_root
@pytest.mark.parametrize("meanwhile", [False, True], ids=["", "another arena leases it meanwhile"])
@pytest.mark.parametrize("how", ["alive at the release", "started after the release", "its referee died"])
def test_a_uid_is_swept_at_its_lease_unless_its_last_release_left_nothing_of_it(how: str, meanwhile: bool) -> None:
    """A release that swept and found no process of the uid marks its lock file, and the next lease
    skips its own sweep. What must still be swept there: a process of the uid alive at the release
    (it may write after the sweep, and end before the next lease), one the next lease has to kill
    (it may have written since), and
    a uid whose referee died holding it (never released). Each leaves a file; the next lease of
    the uid, whoever takes it, must remove it.

    Each file is written by a process of the uid, or while the uid is leased, never after: a file
    the test made with no process of the uid left, after another arena (the other test worker's)
    had leased and released the uid in between, was one no bot could have written, and that
    release had rightly marked the uid swept (``meanwhile``: that other arena, at that moment)."""
    registry = process_registry()
    lease = registry.lease_uid()
    uid = lease.uid
    survivor = None
    leftover = None
    path = _leftover_path()

    def another_arena_leases_it() -> None:
        if meanwhile:
            subprocess.run([sys.executable, "-c", LEASES_AND_RELEASES, str(uid)], cwd=REPO, check=True)

    try:
        if how == "alive at the release":
            survivor = subprocess.Popen(["sh", "-c", WRITES_WHEN_TOLD, path], user=uid, group=uid, extra_groups=[],
                                        stdin=subprocess.PIPE, text=True)
            registry.release_uid(lease)
            another_arena_leases_it()
            leftover = _told_to_write(survivor, path)  # after the release's sweep
            assert leftover is None or not meanwhile, "a lease of the uid left a process of it running"
            survivor.kill()  # it ends before the next lease, which then has nothing to kill
            survivor.wait()
        elif how == "started after the release":
            registry.release_uid(lease)
            another_arena_leases_it()
            survivor = subprocess.Popen(["sh", "-c", WRITES_WHEN_TOLD, path], user=uid, group=uid, extra_groups=[],
                                        stdin=subprocess.PIPE, text=True)
            leftover = _told_to_write(survivor, path)
        else:
            registry.release_uid(lease)  # marked: then leased again, and its referee killed holding it
            lease = _lease_again(uid)
            leftover = _leftover(uid)  # by its bot
            os.close(lease.fd)
            registry._leased.discard(uid)
            another_arena_leases_it()
        lease = _lease_again(uid)
        assert leftover is None or not leftover.exists(), f"{how}: the file of uid {uid} was left for its next bot"
        registry.release_uid(lease)
    finally:
        if survivor is not None:
            survivor.kill()
            survivor.wait()
        path.unlink(missing_ok=True)


SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
LEAVES_A_FILE = """
import os, sys
wrote = []
for folder in sys.argv[1].split(":"):
    try:
        with open(os.path.join(folder, sys.argv[2]), "w") as f:
            f.write("for the next bot of this uid")
        wrote.append(folder)
    except OSError:
        pass
print(" ".join(wrote) or "-", flush=True)
sys.stdin.read()
"""


@needs_root
@pytest.mark.parametrize("mode", ["bubblewrap", "namespaces"])
def test_a_contained_seat_writes_no_host_folder_its_uid_keeps_after_it(mode: str) -> None:
    """A contained seat's release does not sweep the host's world-writable folders (the next lease
    of its uid then skips its sweep too): its mount namespace must show it no host folder it may
    write. The bot writes a file into each such folder it can name, as the host and its own view
    name them; after its close not one is in the host's."""
    from arena.bots.containment import Containment
    from arena.bots.filesystem import world_writable_dirs
    from arena.bots.start import start_bot
    from arena.limits import Limits
    if mode == "bubblewrap" and SANDBOX_PROBLEM is not None:
        pytest.skip(f"bwrap: {SANDBOX_PROBLEM}")
    containment = Containment.BUBBLEWRAP if mode == "bubblewrap" else Containment.NAMESPACES
    folders = sorted({*SHARED_FOLDERS, *world_writable_dirs()})
    name = f"arena-seat-leftover-{os.getpid()}-{time.monotonic_ns()}"
    try:
        with start_bot([PY, "-c", LEAVES_A_FILE, ":".join(folders), name], HOSTILE, containment=containment,
                       limits=Limits()) as bot:
            wrote = bot.receive_line(SLOW)
            assert bot.uid is not None
        left = [d for d in folders if os.path.lexists(os.path.join(d, name))]
        assert left == [], f"{mode}: a seat of uid {bot.uid} left {left} (it wrote in its view: {wrote})"
    finally:
        for d in folders:
            try:
                os.unlink(os.path.join(d, name))
            except OSError:
                pass


@needs_root
def test_a_non_root_referee_leaves_a_root_runs_bot_uids_alone_and_reports_no_kill() -> None:
    """A bot uid is leased by a root referee only, its lock in root's run directory; a referee of
    another user has its own run directory, where every bot uid looks free. Its cleanup took each
    running bot of a root run beside it for a leftover, tried to kill it until the deadline (it may
    not) and reported it killed: every batch of a non-root `arena ladder run` said "cleaned up: 3-9
    bot process(es) killed" while a root run played. Now it neither sweeps those uids nor counts
    a process that lives on as killed."""
    from arena.bots.procs import died, kill_and_reap
    from arena.bots.uids import BOT_UID_BASE, BOT_UID_COUNT, Registry
    uid = BOT_UID_BASE + BOT_UID_COUNT - 1
    lock = subprocess.Popen([sys.executable, "-c", SIBLING_LOCKS, str(uid)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # a live root referee holds its lease
    assert lock.stdout is not None and lock.stdout.readline().strip() == str(uid)
    bot = subprocess.Popen(["sleep", "600"], user=uid, group=uid)
    run = Path(tempfile.mkdtemp(prefix="arena-nobody-"))  # pytest's tmp_path is root's alone
    os.chown(run, 65534, 65534)
    try:
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the referee of another user: no exec (the test's python may lie below /root)
            try:
                os.close(read)
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                report = Registry(run / "run").cleanup_stale(None)
                hit = died(kill_and_reap(lambda table: {bot.pid}, time.monotonic() + 0.05))  # a bound, not a timing
                os.write(write, json.dumps([report.killed, bool(report), str(report),
                                            (run / "run" / "uids" / str(uid)).exists(), hit]).encode())
            except BaseException as e:
                os.write(write, json.dumps(repr(e)).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as f:
            got = json.loads(f.read())
        os.waitpid(child, 0)
        assert isinstance(got, list), got
        killed, said, text, swept, hit = got
        assert read_proc(bot.pid) is not None and bot.poll() is None  # the root run's bot plays on
        assert (killed, said, swept) == (0, False, False), text  # not swept, nothing reported
        assert hit == 0  # a process it may not kill is not counted as killed
    finally:
        bot.kill()
        bot.wait()
        lock.communicate("")
        shutil.rmtree(run)


@needs_root
@pytest.mark.parametrize("first_run_dir", ["the machine's", "one of its own"])
def test_a_registry_in_another_run_directory_leaves_a_live_bots_uid_alone(tmp_path: Path, first_run_dir: str) -> None:
    """The bot uid pool is the machine's: a root arena may keep its records in a run directory of
    its own (a test's, or a TMPDIR's where /run cannot be written), but the uid it leases is locked
    where every root arena looks. A second registry in a private run directory, whose own folder
    holds no lock of any uid, cleans up and leases while a bot of the first lives: the bot must
    survive both (the sweep took every pool uid with a lock free in its own run directory for a
    leftover, and killed every other arena's bots on the machine; a lease there killed the uid's
    processes before it was given out)."""
    first = process_registry() if first_run_dir == "the machine's" else Registry(tmp_path / "first")
    lease = first.lease_uid()
    bot = subprocess.Popen(["sleep", "600"], user=lease.uid, group=lease.uid, extra_groups=[])
    try:
        second = Registry(tmp_path / "second")
        second.cleanup_stale(None)
        assert bot.poll() is None, f"the cleanup of a registry in {second.run_dir} killed a live bot of uid {lease.uid}"
        second._uid_next = lease.uid - uids.BOT_UID_BASE  # its next lease tries the live bot's uid first
        other = second.lease_uid()
        second.release_uid(other)
        assert other.uid != lease.uid and bot.poll() is None, f"a lease in {second.run_dir} took a live bot's uid"
    finally:
        bot.kill()
        bot.wait()
        first.release_uid(lease)
