"""What a newcomer met: help text that lost words or showed `<bool>`, a hello answer lost behind a
banner, a bot whose output was buffered, the containment line twice, SIGTERM without an
"interrupted" line, a script outside the bot's folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from arena.cli.main import app
from arena.faults import BadJson
from arena.referee import protocol

from .checks import arena_here

runner = CliRunner()


@pytest.mark.parametrize("command", ["check", "match", "tournament", "play", "debug"])
def test_help_has_no_bool_placeholder(command: str):
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "<bool>" not in shown.output and "--help" in shown.output


def test_check_help_keeps_limits():
    shown = runner.invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert "keys as in bot.toml's [limits])" in shown.output


def test_junk_before_hello_is_quoted_with_a_hint():
    with pytest.raises(BadJson) as e:
        protocol.read_bot_hello("Loading model weights... done\n")
    text = str(e.value)
    assert "the bot's first line was 'Loading model weights... done'" in text
    assert "stderr" in text
    assert protocol.read_bot_hello('{"type":"hello","protocol":1,"name":"x","version":"1"}')["name"] == "x"


def _bot(root: Path, name: str, code: str, command: str | None = None) -> Path:
    d = root / name
    d.mkdir()
    (d / "bot.py").write_text(code)
    command = command or '["python3", "bot.py"]'
    (d / "bot.toml").write_text(f'name = "{name}"\nversion = "1"\ncommand = {command}\n')
    for p in (d, *d.iterdir()):
        p.chmod(0o755)
    return d


BANNER = '''
import json, sys
print("Loading my bot v2...", flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "b", "version": "1"}), flush=True)
    elif msg["type"] == "request":
        print(0, flush=True)
'''

UNFLUSHED = '''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "u", "version": "1"}), flush=True)
    elif msg["type"] == "request":
        sys.stdout.write("0\\n")  # never flushed: a pipe is block-buffered
'''


def test_check_quotes_the_banner_and_explains_buffering(open_tmp: Path):
    banner = arena_here("check", str(_bot(open_tmp, "banner", BANNER)), "--rules", "classic", "--games", "1",
                        cwd=open_tmp)
    assert banner.returncode == 1, banner.stdout + banner.stderr
    assert "the bot's first line was 'Loading my bot v2...'" in " ".join(banner.stdout.split())
    assert banner.stdout.count("containment:") == 1
    unflushed = arena_here("check", str(_bot(open_tmp, "unflushed", UNFLUSHED)), "--rules", "classic", "--games",
                           "1", "--move-ms", "300", "--bank-ms", "0", cwd=open_tmp)
    assert unflushed.returncode == 1, unflushed.stdout + unflushed.stderr
    out = " ".join(unflushed.stdout.split())
    assert "probably buffered" in out and "flush=True" in out
    assert "one move took longer than all of it" not in out


def test_script_outside_the_bot_folder_is_named(open_tmp: Path):
    elsewhere = open_tmp / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "adapter.py").write_text(BANNER)
    bot = _bot(open_tmp, "outside", "", command=f'["python3", "{elsewhere / "adapter.py"}"]')
    done = arena_here("check", str(bot), "--rules", "classic", "--games", "1", cwd=open_tmp)
    assert done.returncode == 1
    out = " ".join(done.stdout.split())
    assert f"the command names {elsewhere / 'adapter.py'}, which the contained bot cannot see" in out


def test_sigterm_is_handled_like_ctrl_c(tmp_path: Path):
    """A match stopped with SIGTERM ends like one stopped with Ctrl-C: one interrupted line, 130."""
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "match", "montecarlo", "ismcts", "--max-games", "400",
                             "--move-ms", "300", "--store", str(tmp_path / "s.sqlite"), "-j", "1"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        head = proc.stdout.readline()  # printed before the first game
        assert head.startswith("match montecarlo@1.0 vs ismcts@1.0"), head
        # stopped while both bots play (waited for, not slept on: a fixed pause was either idle
        # time or, on a loaded machine, a stop before any bot had started)
        bots = _until(lambda: _bots_below(proc.pid) if len(_bots_below(proc.pid)) == 2 else None,
                      "the two bots never started")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "interrupted: the games played are stored" in err and "Traceback" not in err
    assert not {pid for pid in bots if _running_bot(pid)}, "a bot outlived the stopped match"


def _running_bot(pid: str) -> bool:
    """``pid`` is a bot's own process (``python3 bot.py``, not the bubblewrap around it), still
    there and not a zombie waiting for its parent."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    return state != "Z" and b"bot.py" in argv and not argv[0].endswith(b"bwrap")


def _bots_below(root: int) -> set[str]:
    """The bots' processes among ``root``'s descendants (the python running bot.py, whatever wraps it)."""
    return {pid for pid in _process_tree(root) if pid != str(root) and _running_bot(pid)}


def _until(found, why: str, timeout: float = 120):
    """``found()``'s first true value, looked for every 20 ms; ``timeout`` is a bound against a hang."""
    deadline = time.monotonic() + timeout
    while not (got := found()):
        assert time.monotonic() < deadline, why
        time.sleep(0.02)
    return got


def _dead_owner(name: str) -> bool:
    """A referee directory (ref-PID) or bot cgroup (rPID-bN) whose process is gone."""
    digits = _owner(name)
    return digits.isdigit() and not Path(f"/proc/{digits}").exists()


def _owner(name: str) -> str:
    """The pid a referee directory (ref-PID) or bot cgroup (rPID-bN) belongs to."""
    return name[4:] if name.startswith("ref-") else name[1:].split("-", 1)[0]


def _process_tree(root: int) -> set[str]:
    """The pids of ``root`` and every process below it now (read from /proc)."""
    parents: dict[str, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[stat.parent.name] = fields[1]
    tree, grew = {str(root)}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree}
        grew = not below <= tree
        tree |= below
    return tree


def _leftovers(owners: set[str]) -> set[str]:
    """What the processes ``owners`` left behind them: a referee directory or bot cgroup whose
    process is gone. Only theirs: other arenas on the machine (other tests, other users) come and
    go, and one killed on purpose elsewhere leaves its directory for its next run to clean."""
    from arena.bots.uids import default_run_dir
    found = {str(p) for p in Path("/sys/fs/cgroup").glob("*/palace-arena/r*-b*")}
    found |= {str(p) for p in default_run_dir().glob("ref-*")}
    return {p for p in found if _owner(Path(p).name) in owners and _dead_owner(Path(p).name)}


def test_sigterm_stops_a_background_tournament_cleanly(tmp_path: Path):
    """A tournament a script started in the background (SIGINT ignored, as `&` leaves it) and then
    stopped with `kill -TERM`: the interrupted line, exit 130, and nothing left for the next run
    to clean (no cgroup, no referee directory of a process that is gone)."""
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "tournament", "--deals", "2000", "-j", "2"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        head = proc.stdout.readline()
        assert head.startswith("tournament demo:"), head
        from arena.bots.uids import default_run_dir

        def playing() -> set[str] | None:
            """The referee and its workers (each with its own directory), once a worker's bots play."""
            tree = _process_tree(proc.pid)
            return tree if _bots_below(proc.pid) and any((default_run_dir() / f"ref-{p}").is_dir() for p in tree) \
                else None
        owners = _until(playing, "no referee directory and bots seen")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "interrupted after" in err and "run the same command again to resume" in err and "Traceback" not in err
    assert _leftovers(owners) == set()


def test_an_empty_leftover_referee_directory_is_not_reported(tmp_path: Path):
    """A referee that died with nothing running leaves an empty directory: removed without the
    "cleaned up" warning (which a first run then printed about nothing); real leftovers are named.
    (One referee directory at a time: a whole cleanup_stale would also sweep the bot uids of
    whatever else runs arena on this machine.)"""
    from arena.bots.uids import TEMPS, Registry, StaleReport
    run = tmp_path / "run"
    registry = Registry(run)
    (run / "ref-999999").mkdir()
    (run / "ref-999999" / "lock").touch()
    report = StaleReport()
    registry._clean_referee_dir(run / "ref-999999", None, report)
    assert not report and not (run / "ref-999999").exists()
    (run / "ref-999998").mkdir()
    copy = Path(tempfile.mkdtemp(prefix="palace-arena-"))
    (run / "ref-999998" / TEMPS).write_text(f"{copy}\n")
    registry._clean_referee_dir(run / "ref-999998", None, report)
    assert report and not copy.exists()
    assert str(report) == ("1 copy(ies) of the arena or a bot removed, left by 1 earlier arena process(es) that "
                           "ended without cleaning up (killed, or crashed): pid 999998 (no record of its user)")


def test_a_referee_directory_another_cleaner_removes_meanwhile_is_no_error(tmp_path: Path, monkeypatch):
    """Two arenas starting together both look through the machine's run directory: one may
    remove a dead referee's directory while the other reads it. The other goes on (it raised
    FileNotFoundError from ``Path.glob`` and its command ended with an error)."""
    import shutil
    from arena.bots import uids
    registry = uids.Registry(tmp_path / "run")
    for pid in (999991, 999992):
        (registry.run_dir / f"ref-{pid}").mkdir()
        (registry.run_dir / f"ref-{pid}" / "bot.json").write_text("{}")
    read = uids._read_record

    def read_then_the_other_cleaner_strikes(path: Path) -> dict:
        for pid in (999991, 999992):  # whichever is read first, the other goes
            if f"ref-{pid}" != path.parent.name:
                shutil.rmtree(registry.run_dir / f"ref-{pid}", ignore_errors=True)
        return read(path)
    monkeypatch.setattr(uids, "_read_record", read_then_the_other_cleaner_strikes)
    assert registry._recorded_procs() == set()
    (registry.run_dir / "ref-999993").mkdir()
    (registry.run_dir / "ref-999993" / "lock").touch()
    (registry.run_dir / "ref-999993" / "bot.json").write_text("{}")
    monkeypatch.setattr(uids, "_read_record", lambda path: shutil.rmtree(path.parent) or {})
    registry._clean_referee_dir(registry.run_dir / "ref-999993", None, uids.StaleReport())
    assert not (registry.run_dir / "ref-999993").exists()


def test_a_long_lived_referees_list_of_temporary_directories_stays_short(tmp_path: Path, monkeypatch):
    """A server starts trusted or gVisor bots for weeks, each with a temporary home noted in the
    referee's ``temps`` listing: the listing keeps the directories still there, not a line per
    start, and every directory still there stays listed (a kill -9 must find it)."""
    import shutil
    from arena.bots import uids
    monkeypatch.setattr(uids, "TEMPS_COMPACT_BYTES", 2048)
    registry = uids.Registry(tmp_path / "run")
    listing = registry.dir / uids.TEMPS
    live = []
    try:
        for n in range(200):  # each start's home is removed at its end; every tenth outlives the loop
            home = registry.temp_dir("palace-arena-test-")
            if n % 10:
                shutil.rmtree(home)
            else:
                live.append(home)
        noted = listing.read_text().splitlines()
        assert len(noted) < 200 / 4 and listing.stat().st_size < 2 * 2048
        assert {str(h) for h in live} <= set(noted)
        assert [p.name for p in uids._kept_temps(listing)] == [h.name for h in live]
    finally:
        for home in live:
            shutil.rmtree(home, ignore_errors=True)


def test_the_cleanup_says_whose_leftovers_it_removed(tmp_path: Path, monkeypatch):
    """A root arena's run directory (and uid pool) is shared by every root run on the machine, so
    "left by 1 earlier arena process(es)" on a first run may be someone else's: the message names
    each dead arena's pid and the user it ran for, and who was behind sudo, from the owner file each
    referee writes beside its lock."""
    import getpass
    import json

    from arena.bots.uids import OWNER, TEMPS, Registry, StaleReport
    monkeypatch.setenv("SUDO_USER", "alice-the-organiser")
    run = tmp_path / "run"
    registry = Registry(run)  # its owner file is what a referee that dies later leaves behind
    owner = json.loads((registry.dir / OWNER).read_text())
    me = getpass.getuser()
    assert owner["user"] == me
    for pid in (999997, 999996):
        (run / f"ref-{pid}").mkdir()
        (run / f"ref-{pid}" / OWNER).write_text((registry.dir / OWNER).read_text())
        (run / f"ref-{pid}" / TEMPS).write_text(f"{tempfile.mkdtemp(prefix='palace-arena-')}\n")
    report = StaleReport()
    for pid in (999997, 999996):
        registry._clean_referee_dir(run / f"ref-{pid}", None, report)
    login = " (logged in as alice-the-organiser)" if owner["login"] else ""
    assert owner["login"] in (None, "alice-the-organiser")  # (a kernel login uid, where set, comes first)
    assert str(report).endswith(
        f"left by 2 earlier arena process(es) that ended without cleaning up (killed, or crashed): "
        f"pid 999997 of user {me}{login}, started {owner['started']}; "
        f"pid 999996 of user {me}{login}, started {owner['started']}")


def test_sandbox_false_in_a_file_names_the_file(tmp_path: Path):
    """`sandbox = false` in a tournament file is refused naming the file and the key as written
    (TOML's false, not Python's False), with the flag that does it on the command line."""
    from arena.tournament.config import ConfigError, load_config
    league = Path(__file__).resolve().parent.parent / "examples" / "tournaments" / "league-2p.toml"
    path = tmp_path / "league-2p.toml"
    path.write_text(league.read_text().replace("# sandbox = true", "sandbox = false"))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert f"{path}: sandbox = false cannot be set in a file" in str(e.value) and "--no-sandbox" in str(e.value)


def test_a_wheel_install_without_the_bundled_bots_says_how_to_get_them(tmp_path: Path, monkeypatch):
    """The bundled bots are a checkout's bots/ folder, outside the package: `pip install .` (as
    `pip install '.[train]'` once read) leaves them out, and `random` was then "no bot ... ()"."""
    from arena.bots import manifest
    monkeypatch.setattr(manifest, "BUNDLED_DIR", tmp_path / "bots")
    with pytest.raises(manifest.ManifestError, match=r"no bot at 'random'.*pip install -e \."):
        manifest.load_bot("random")


def test_the_cgroup_parent_another_arena_removes_meanwhile_is_no_error(tmp_path: Path, monkeypatch):
    """The arena's parent group is removed by whichever process empties it. The cleanup of leftovers
    looked through it as ``parent.is_dir()`` then ``parent.glob``: another arena's rmdir between the
    two ended ``arena match`` with "error: /sys/fs/cgroup/pids/palace-arena: No such file or
    directory" (seen once in a whole run of the suite)."""
    from arena.bots import uids
    from arena.bots.cgroups import CgroupRoot
    registry = uids.Registry(tmp_path / "run")
    parent = tmp_path / "pids" / "palace-arena"
    parent.mkdir(parents=True)
    real_scandir = os.scandir

    def scandir_after_the_other_arena_removed_it(path="."):
        if Path(path) == parent and parent.exists():
            parent.rmdir()
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_after_the_other_arena_removed_it)
    monkeypatch.setattr(uids, "scan_procs", dict)  # no stray bot uid of the machine's (another test's) in the report
    report = registry.cleanup_stale(CgroupRoot("v1", {"pids": parent}))
    assert not report and not parent.exists()


def _waits_on(path: Path) -> bool:
    """Whether some process (or thread) waits for a lock on ``path`` (the kernel's ``->`` lines)."""
    inode = os.stat(path).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and any(f.count(":") == 2 and f.rpartition(":")[2] == str(inode) for f in fields):
            return True
    return False


def test_a_cache_entry_set_aside_keeps_its_folder_while_another_process_makes_an_entry(tmp_path: Path, monkeypatch):
    """A cache entry found changed is moved into a temporary folder of the cache and removed; a make
    of another entry (any process) removes every temporary folder it finds, as a killed process's.
    The set-aside made its folder without the cache's make lock, so a make in between took it, and
    the set-aside's rename failed: the bot's start (or the arena package's copy) was an error."""
    import tempfile
    import threading
    from arena.bots import bundles
    base = tmp_path / "cache"
    base.mkdir()
    one, two = "a" * 64, "b" * 64

    def make(text: str):
        return lambda tmp: (tmp / "f").write_text(text)

    with bundles.cache_entry(base, one, make("first"), lambda entry: True):
        pass
    real_mkdtemp = tempfile.mkdtemp
    other: list[BaseException | str] = []

    def another_process_makes_an_entry() -> None:
        try:
            with bundles.cache_entry(base, two, make("other"), lambda entry: True) as entry:
                other.append((entry / "f").read_text())
        except BaseException as e:  # noqa: BLE001 - said by the test
            other.append(e)

    def mkdtemp_then_the_other_make(*args, **kw):
        made = real_mkdtemp(*args, **kw)
        if Path(made).name.startswith(".edited-"):
            t = threading.Thread(target=another_process_makes_an_entry)
            t.start()  # its make runs now, unless it must wait for the cache's make lock
            while t.is_alive() and not _waits_on(base / bundles.UNPACK_LOCK):
                os.sched_yield()
            threads.append(t)
        return made

    threads: list[threading.Thread] = []
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp_then_the_other_make)
    with bundles.cache_entry(base, one, make("again"), lambda entry: False) as entry:  # found changed
        assert (entry / "f").read_text() == "again"
    for t in threads:
        t.join()
    assert threads and other == ["other"]
    assert not [p.name for p in base.iterdir() if p.name.startswith(".") and p.is_dir()]
