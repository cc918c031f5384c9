"""A third attacker's walk, with the docs and the code but not the tests: each test is an attack
that got through before its fix, written from the bot's (or the uploader's) side, with what must be
refused written here rather than read from the code."""

from __future__ import annotations

import io
import itertools
import os
import re
import shutil
import stat
import tarfile
import textwrap
import zipfile
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from arena.bots.manifest import BUNDLED_DIR, ManifestError, load_bot
from arena.engine import PRESETS
from arena.referee import TimeControl
from arena.referee.blocking import play_game
from arena.referee.core import RefereeCore
from arena.referee.testing import FakeClock, MockBot, Sleep, action_line, hello_line
from arena.serve.upload import UploadError, unpack
from arena.tournament.executors import BlockingExecutor, BotSetup, GameTask, PlayedGame

from .checks import reachable
from .fakes import play_mocks
from .test_disk_bounds import ALL_MODES, bounded_build, mode_kw

# ---------------------------------------------------------------------------------------------
# Think time at the edge of the slot (fixed_schedule, the strangers' ladder's table rule)
# ---------------------------------------------------------------------------------------------

SCHEDULE = TimeControl(move_ms=200, bank_ms=5000, handshake_ms=1000)  # as ladders/strangers-2p.toml
SLOT = SCHEDULE.move_ms / 1000
REFEREE_WORK = 0.002
"""What the referee spends on a decision besides the bot's think time (sending the request, reading
and applying the answer, freezing the seat): measured at 0.2-1.5 ms a decision under gVisor."""


def _edge_sender(bits: list[int]):
    """Answers at once for a 0, and for a 1 half a millisecond before the move time its request
    gives it: an answer in time, which the referee's own work then carried past the slot."""
    spelled = itertools.cycle(bits)

    def respond(msg: dict[str, Any]):
        if msg["type"] == "hello":
            return [hello_line("sender")]
        if msg["type"] == "request":
            told = msg["clock"]["move_ms"] / 1000
            return [Sleep(told - 0.0005 if next(spelled) else 0.0), action_line(msg, 0)]
        return []
    return respond


def _receiver(seen: list[float], clock: FakeClock):
    def respond(msg: dict[str, Any]):
        if msg["type"] == "hello":
            return [hello_line("receiver")]
        if msg["type"] == "request":
            seen.append(clock.now())
            return [action_line(msg, 0)]
        return []
    return respond


def _receiver_times(bits: list[int], monkeypatch: pytest.MonkeyPatch, work: float = REFEREE_WORK) -> list[float]:
    """When (from its first) the receiver was asked, on a fixed schedule, against a sender spelling
    ``bits`` at the edge of its move time; the referee's own work per decision is ``work``."""
    timer = FakeClock()
    settle = RefereeCore.settle

    def working_settle(core: RefereeCore, outcome: Any) -> None:
        timer.sleep_until(timer.now() + work)
        settle(core, outcome)

    monkeypatch.setattr(RefereeCore, "settle", working_settle)
    seen: list[float] = []
    rec = play_mocks([MockBot(_receiver(seen, timer)), MockBot(_edge_sender(bits))], PRESETS["classic"], 11,
                     clock=SCHEDULE, timer=timer, names=["receiver", "sender"], game_id="g", max_turns=120,
                     fixed_schedule=True, shutdown=False)
    assert not rec.faults, rec.faults  # every answer was in time
    return [round(t - seen[0], 6) for t in seen]


def test_an_answer_at_the_edge_of_the_move_time_never_takes_a_second_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured through `arena tournament` under gVisor (fixed_schedule, one seat per author, move_ms
    200): a sender answering 199 ms after its request for a 1 and at once for a 0 passed 36 of 36
    bits in 26 s of games (1.4 bits/s), read by the receiver from the gaps between its own requests:
    the referee's own work after an answer given in time pushed the decision past its slot, and the
    schedule rounded it up to two. A bot's move time must end early enough in its slot for the
    referee's work, so an answer in time is one slot to every other seat, whatever it spells."""
    a = _receiver_times([1, 0, 0, 1, 0, 1, 1, 1], monkeypatch)
    b = _receiver_times([0, 1, 1, 0, 1, 0, 0, 0], monkeypatch)
    quiet = _receiver_times([0], monkeypatch)
    assert len(a) > 10
    assert a == b == quiet


def test_a_referee_running_over_the_slot_shifts_the_schedule_by_its_overrun_not_a_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the referee's own work outlasts what the slot keeps for it (a 1 MiB answer line to
    parse on a loaded machine), the next request goes when that work ends, never a whole slot
    later: what a sender could move is then the overrun, not 200 ms."""
    over = 0.05  # far more than any slot keeps for the referee
    a = _receiver_times([1, 0, 0, 1, 0, 1, 1, 1], monkeypatch, work=over)
    b = _receiver_times([0, 1, 1, 0, 1, 0, 0, 0], monkeypatch, work=over)
    assert len(a) == len(b) > 10
    gaps = [[y - x for x, y in zip(t, t[1:])] for t in (a, b)]
    assert max(abs(x - y) for x, y in zip(*gaps)) < SLOT / 2


# ---------------------------------------------------------------------------------------------
# A bot folder changed under a run: the bot's fault, never the run's end
# ---------------------------------------------------------------------------------------------

def _author_bot(root: Path) -> Path:
    root.mkdir()
    (root / "bot.toml").write_text('name = "flip"\nversion = "1"\nauthor = "fred"\ncommand = ["python3", "bot.py"]\n')
    (root / "bot.py").write_text((BUNDLED_DIR / "random" / "bot.py").read_text())
    root.chmod(0o755)
    return root


@pytest.mark.parametrize("change", ["a file edited", "bot.toml broken", "bot.toml renamed the bot", "folder gone"])
def test_a_folder_changed_after_the_run_read_it_forfeits_its_games_and_the_run_goes_on(
        tmp_path: Path, change: str) -> None:
    """A local author appended one line to their bot.py 4 s into `arena tournament -j 2`: every
    referee worker died loading the run's setup (FolderError in BotSetup.from_wire), the run
    stopped with a Python traceback in its error line and 0 of 36 games stored, the honest bots'
    games too; at every rerun the author can do it again. A worker must refuse only that bot: its
    starts fail as its own fault, naming the change, and every game still ends with a result."""
    d = _author_bot(tmp_path / "flip")
    setup = BotSetup.of([str(d), "random"], rules=PRESETS["classic"])
    wire = setup.wire()
    if change == "a file edited":
        (d / "bot.py").write_text((d / "bot.py").read_text() + "\n# edited mid-run\n")
    elif change == "bot.toml broken":
        (d / "bot.toml").write_text("name = [[[\n")
    elif change == "bot.toml renamed the bot":
        (d / "bot.toml").write_text((d / "bot.toml").read_text().replace('"flip"', '"flop"'))
    else:
        shutil.rmtree(d)
    worker = BotSetup.from_wire(wire)  # what a referee worker process does first
    assert set(worker.specs) == {"flip@1", "random@1.0"}
    ex = BlockingExecutor(worker)
    try:
        played = ex.play(GameTask("g1", 5, ("flip@1", "random@1.0"), 200))
    finally:
        ex.close()
    record = played.record
    faults = [(f["seat"], f["reason"], f["message"]) for f in record.faults]
    assert [(seat, reason) for seat, reason, _ in faults] == [(0, "start_failed")], faults
    assert "changed since the run read them" in faults[0][2], faults
    assert record.result["complete"] or record.result["reason"] == "forfeit"


# ---------------------------------------------------------------------------------------------
# Uploads: the folders an archive implies
# ---------------------------------------------------------------------------------------------

def _deep_tar(files: int, depth: int) -> bytes:
    """A tar.gz of ``files`` empty files, each ``depth`` folders deep in a folder of its own, and a
    bot.toml: no folder is an entry of the archive, every one is implied by a file's path."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for i in range(files):
            tar.addfile(tarfile.TarInfo(f"d{i:03d}/" + "a/" * depth + "f"), io.BytesIO())
        manifest = b'name = "deep"\nversion = "1"\ncommand = ["python3", "bot.py"]\n'
        info = tarfile.TarInfo("bot.toml")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return buf.getvalue()


@pytest.mark.parametrize("files,depth", [(199, 508), (1, 40), (199, 20)])
def test_the_folders_an_upload_implies_are_counted_before_anything_is_written(
        tmp_path: Path, files: int, depth: int) -> None:
    """A 3.9 KB tar.gz of 199 empty files, each 508 folders deep, passed every count of an upload
    (199 entries of 200, 0 bytes of 20 MB: the folders are not entries, only implied by the names)
    and made 101,291 folders, 396 MB on disk and 93 s of the server's time before the folder
    reader refused the depth. Refused before a byte is written: a path deeper than a bot folder may
    be (32 levels), and more folders than the archive may hold files (the server's 200)."""
    blob = _deep_tar(files, depth)
    assert len(blob) < 8192  # what the attacker sends
    dest = tmp_path / "job"
    with pytest.raises(UploadError, match="folders"):
        unpack(blob, dest, max_files=200, max_bytes=20 << 20)
    assert not dest.exists()


def test_an_upload_with_ordinary_folders_still_unpacks(tmp_path: Path) -> None:
    """A bot of 150 files spread over 30 folders a few levels deep is what an upload is for."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bot/bot.toml", 'name = "ok"\nversion = "1"\ncommand = ["python3", "bot.py"]\n')
        for i in range(150):
            z.writestr(f"bot/src/m{i % 30}/sub/x{i}.py", "pass\n")
    root = unpack(buf.getvalue(), tmp_path / "job", max_files=200, max_bytes=20 << 20)
    assert (root / "bot.toml").is_file() and len(list(root.rglob("*.py"))) == 150


# ---------------------------------------------------------------------------------------------
# A build's disk: a bound the kernel keeps, not a watcher's look every 0.2 s
# ---------------------------------------------------------------------------------------------

FALLOCATE_BUILD = textwrap.dedent("""
    import os
    got = 0
    try:  # 256 MiB in one call, under the build's RLIMIT_FSIZE: no watcher can look in between
        fd = os.open("blob", os.O_CREAT | os.O_WRONLY, 0o600)
        os.posix_fallocate(fd, 0, 256 << 20)
        got = 256
    finally:
        print("allocated", got, flush=True)
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="private uids and mounts need a root referee")
@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_build_never_holds_more_disk_than_its_bound_even_for_an_instant(tmp_path: Path, mode,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that fallocated 6 files of 511 MiB and exited put 3,067 MiB on the host's disk (its
    bound: 1 GiB) before the end-of-build look refused it; the watcher looks every 0.2 s, and 150
    such files would have filled this machine's 76 GB free. Refused: the build getting more than
    its bound at any moment (here 64 MiB of the 256 it asks for, read from what it says it got or
    from the refusal), and anything of it left afterwards. The bot is refused as its own fault."""
    from arena.bots.launch import BuildError
    build, copies = bounded_build(tmp_path, monkeypatch, mode, "alloc", FALLOCATE_BUILD)
    with pytest.raises(BuildError) as info:
        build()
    text = str(info.value)
    got = [int(n) for n in re.findall(r"allocated (\d+)", text) + re.findall(r"\((\d+) MiB in", text)]
    assert got and max(got) <= 64, text
    assert len(copies) == 1 and not copies[0].parent.exists()  # nothing of it stays


def test_a_bot_edited_while_a_cluster_run_packs_it_forfeits_and_the_run_goes_on(tmp_path: Path) -> None:
    """`arena tournament --cluster local:2` with an author appending a line to their bot.py every
    50 ms: the client read the bot, packed it again for the workers, and refused the whole run
    (`error: ... files changed since the run read them; run again`) at every try. The bot must
    travel as its refusal instead: every start of it on a worker fails, naming the change, and
    the games still end with a result."""
    from arena.tournament import cluster
    d = _author_bot(tmp_path / "flip")
    setup = BotSetup.of([str(d), "random"], rules=PRESETS["classic"])
    setup.wire()  # the run has read every bot (its files hash) before it packs them
    (d / "bot.py").write_text((d / "bot.py").read_text() + "\n# edited while packed\n")
    referee = cluster._referee(setup)  # what the client sends every worker
    try:
        played = PlayedGame.from_bytes(referee.play(GameTask("c1", 5, ("flip@1", "random@1.0"), 200).wire()),
                                       PRESETS["classic"].options())
    finally:
        referee.close()
    log = orjson.loads(zlib.decompress(played.log))  # the game's log, as the store keeps it
    faults = [(f["seat"], f["reason"], f["message"]) for f in log["faults"]]
    assert [(seat, reason) for seat, reason, _ in faults] == [(0, "start_failed")], faults
    assert "changed since the run read them" in faults[0][2], faults


# ---------------------------------------------------------------------------------------------
# A label that fills the store: what a manifest may say about itself is short
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,length", [("version", 60_000), ("author", 60_000), ("description", 60_000),
                                          ("version", 65), ("author", 65), ("description", 201)])
def test_a_manifest_s_own_words_are_short(tmp_path: Path, field: str, length: int) -> None:
    """A bot.toml whose version was 60,000 characters (the manifest may be 1 MiB) passed `arena
    check` and `arena submit`: its label went into every game row and index of the store (12
    placement games took 6 MB; a 1 MiB version, about 8 MB a game) and 545 KB of it onto the
    operator's terminal at one submission. Refused, as the bot's one-line error: a version or
    author over 64 characters, a description over 200."""
    d = tmp_path / "wordy"
    d.mkdir()
    fields = {"name": '"wordy"', "version": '"1"', "author": '"wendy"', "description": '"short"',
              field: '"' + "w" * length + '"'}
    (d / "bot.toml").write_text("".join(f"{k} = {v}\n" for k, v in fields.items()) + 'command = ["python3", "bot.py"]\n')
    with pytest.raises(ManifestError, match=f"{field}.*at most") as info:
        load_bot(d)
    assert len(str(info.value)) < 1000 and "\n" not in str(info.value)  # one line, not the 60,000
    ok = {**fields, field: '"' + "w" * (64 if field != "description" else 200) + '"'}
    (d / "bot.toml").write_text("".join(f"{k} = {v}\n" for k, v in ok.items()) + 'command = ["python3", "bot.py"]\n')
    assert load_bot(d).name == "wordy"


@pytest.mark.skipif(os.geteuid() != 0, reason="private uids and mounts need a root referee")
@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_built_bot_holds_no_memory_for_the_run_and_a_fifo_it_leaves_is_refused(tmp_path: Path, mode) -> None:
    """The bound tmpfs must not outlive the build: kept for the run, each built bot would pin up to
    its 1 GiB bound in memory in every referee process, which an author's build could fill on
    purpose at every version. Its output goes to the disk and the tmpfs is detached; a FIFO the
    build leaves (reading it would hang the referee) is refused as the build's fault."""
    from arena.bots.launch import BuildError, Launcher, copy_out
    from arena.bots.manifest import FolderError, load_bot
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "build.py").write_text("import os\nos.makedirs('out/deep')\nopen('out/deep/bin', 'w').write('built')\n"
                                  "os.symlink('deep/bin', 'out/link')\n")
    (bot / "bot.toml").write_text('name = "maker"\ncommand = ["python3", "bot.py"]\nbuild = ["python3", "build.py"]\n')
    bot = reachable(bot)
    built = Launcher(containment=mode_kw(mode)["containment"]).build_now(load_bot(bot))
    assert (built.root / "out" / "deep" / "bin").read_text() == "built"
    assert os.readlink(built.root / "out" / "link") == "deep/bin"
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(built.root.parent) not in mounts, "a tmpfs of the build is still mounted"
    (bot / "build.py").write_text("import os\nos.mkfifo('pipe')\n")
    (bot / "bot.toml").write_text('name = "fifo"\ncommand = ["python3", "bot.py"]\nbuild = ["python3", "build.py"]\n')
    try:  # the filter refuses mknod (bubblewrap, namespaces); gVisor keeps its FIFO to itself
        fifo = Launcher(containment=mode_kw(mode)["containment"]).build_now(load_bot(bot))
    except BuildError as e:
        assert "os.mkfifo('pipe')" in str(e) or "pipe: not a file, folder or link" in str(e), e
    else:
        assert not os.path.lexists(fifo.root / "pipe") or not stat.S_ISFIFO(os.lstat(fifo.root / "pipe").st_mode)
    left = tmp_path / "left"  # a FIFO on the build's tmpfs, however it got there: never opened
    left.mkdir()
    os.mkfifo(left / "pipe")
    with pytest.raises(FolderError, match="pipe: not a file, folder or link"):
        copy_out(left, tmp_path / "out")


# ---------------------------------------------------------------------------------------------
# Between games: a pooled process waits frozen
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ponder", [False, True], ids=["frozen", "ponder"])
def test_a_seat_waits_for_its_next_game_frozen(ponder: bool) -> None:
    """A bot thawed to hear its game's `end` stayed thawed while the pool kept it warm for its next
    game, free to run whatever it forked at that `end` through every other game of the run: the
    docs promise a seat no CPU off its turn, and this was off every turn. (Measured once, -j 2,
    load 2-5: 24 spinners between games did not move a 15 ms-a-decision bot in the other lane,
    18.1 against 18.9 ms a decision, no fault; the machine had CPU to spare.) Refused: a seat left
    thawed once the game is over, and two seats thawed at once while a game starts (a seat's start
    can be a JVM's seconds-long handshake). A ponder table neither freezes nor thaws."""
    from .test_cpu_seats import CLOCK as SEAT_CLOCK, Logged
    log: list[tuple[str, str]] = []
    play_game([Logged("a", log), Logged("b", log)], PRESETS["classic"], 1, game_id="g", clock=SEAT_CLOCK,
              max_turns=10, ponder=ponder)
    holds = [(seat, what) for seat, what in log if what in ("freeze", "thaw")]
    if ponder:
        assert not holds
        return
    for seat in ("a", "b"):
        assert [what for s, what in holds if s == seat][-1] == "freeze", log[-6:]
    frozen = {"a": True, "b": True}
    for seat, what in log:
        if what in ("freeze", "thaw"):
            frozen[seat] = what == "freeze"
            assert sum(not f for f in frozen.values()) <= 1, log
        if what in ("start", "request", "end"):
            assert not frozen[seat], (seat, what)  # every message is sent to a thawed seat
