"""#35, an outside round: a bot author's folder through every entry point (attack24b).

What got through on 866824f, each now closed:
- a link in a bot's folder whose text is not UTF-8 (``ln -s $'\\xff\\xfe' x``) was an arena bug
  (``UnicodeEncodeError``, exit 70) in ``arena check``, ``arena tournament`` (plain, ``-j 2``,
  ``--cluster local``) and ``arena match``: the reader checked names for UTF-8, not a link's text,
  which the hash and a cluster's bundle encode;
- under gVisor, a ``build`` that left a file name or a link text that is not UTF-8 made every game
  of its bot the arena's failure ("2 of 2 game(s) could not be played ... ArenaFailure: the arena
  could not start"): the built copy was first read by the folder reader where a gVisor seat's plan
  takes its files hash, and the refusal there was not the bot's. The run never finished and the
  bot was never blamed. The same reading used a bot folder's caps: an honest build within its own
  bounds (1 GiB, 100,000 entries) that wrote 300 MiB never played under gVisor;
- a bot.toml linked into ``.git`` (or another folder the reader leaves out) was in no files hash;
- ``arena bench``: one student's folder stopped the bench for the whole class;
- the reader listed a folder whole before counting, and never counted the names it leaves out;
- failing uploads (no quota counts them) kept a report each for ever: the store grew without end.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.bots import bundles
from arena.bots.containment import Containment
from arena.bots.folder import FolderError, read_folder
from arena.bots.launch import BuildError, Launcher
from arena.bots.manifest import load_bot
from arena.bots.probes import gvisor_problem_now
from arena.cli.main import app

REPO = Path(__file__).resolve().parent.parent
NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # surrogates in Python, two bytes that are no UTF-8 on the disk


def bot(where: Path, name: str, build: str = "") -> Path:
    d = where / name
    shutil.copytree(REPO / "bots" / "random", d)
    toml = (d / "bot.toml").read_text().replace('name = "random"', f'name = "{name}"')
    (d / "bot.toml").write_text(toml + (f"build = {build}\n" if build else ""))
    return d


def _refused_in_one_line(res, *named: str) -> None:
    """The command's result: exit 2, one ``error:`` line naming each of ``named``; no arena bug."""
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "arena bug" not in res.output and "Traceback" not in res.output, res.output
    last = [line for line in res.output.splitlines() if line.strip()][-1]
    assert last.startswith("error:") and all(n in last for n in named), res.output


def test_a_link_whose_text_is_not_utf8_is_refused_naming_it_on_every_path(open_tmp: Path) -> None:
    d = bot(open_tmp, "badlink")
    os.symlink(b"\xff\xfe", os.fsencode(d / "x"))
    with pytest.raises(FolderError, match="a link whose text is not UTF-8"):
        read_folder(d)
    with pytest.raises(FolderError, match="a link whose text is not UTF-8"):  # a cluster's bundle
        bundles.pack_bot(load_bot(d))
    runner = CliRunner()
    _refused_in_one_line(runner.invoke(app, ["check", str(d), "--games", "1"]), "x", "not UTF-8")
    store = str(open_tmp / "s" / "s.sqlite")
    for extra in ([], ["-j", "2"]):
        res = runner.invoke(app, ["tournament", "--bot", str(d), "--bot", "random", "--deals", "1",
                                  "--store", store, "--plain", *extra])
        _refused_in_one_line(res, "x", "not UTF-8")


GVISOR_PROBLEM = gvisor_problem_now()


@pytest.mark.skipif(os.geteuid() != 0 or GVISOR_PROBLEM is not None,
                    reason=f"a contained gVisor build needs a root referee and runsc ({GVISOR_PROBLEM})")
@pytest.mark.parametrize("left", [
    "open(bytes([255]), 'w').write('x')",
    "import os; os.symlink(bytes([255, 254]), b'x')",
], ids=["a file name", "a link's text"])
def test_a_gvisor_build_that_leaves_a_name_that_is_not_utf8_is_the_bots_start_failure(open_tmp: Path, left: str) -> None:
    """The build's outputs are the bot's doing: a name the reader refuses in them is the bot's start
    failure (it forfeits), never the arena's (a game voided at every run)."""
    d = bot(open_tmp, "badbuild", build=f'["python3", "-c", "{left}"]')
    launcher = Launcher(containment=Containment.GVISOR)
    try:
        with pytest.raises(BuildError, match="not UTF-8") as info:
            launcher.plan_now(load_bot(d))
    finally:
        launcher.release_builds()
    assert "badbuild@1.0: the build left" in str(info.value), info.value


DEEP_OUTPUTS = """
import os
os.makedirs("/".join(["d"] * 40))
open("/".join(["d"] * 40 + ["f"]), "w").close()
"""


@pytest.mark.skipif(os.geteuid() != 0 or GVISOR_PROBLEM is not None,
                    reason=f"a contained gVisor build needs a root referee and runsc ({GVISOR_PROBLEM})")
def test_a_gvisor_build_within_its_bounds_but_past_a_bot_folders_plays(open_tmp: Path) -> None:
    """A build may leave 1 GiB and 100,000 entries; its copy was read with a bot folder's caps (256 MiB,
    10,000 names) at each gVisor seat's plan and again at the seat's own copy: a build that wrote
    300 MiB, or nested 40 folders deep (here: cheaper), never played under gVisor (every game the
    arena's failure on 866824f; measured by hand with the 300 MiB build). Now the built copy is
    read once at its build, within a folder's and a build's caps together, as the seat's own copy
    is, and the seat starts."""
    d = open_tmp / "deepout"
    d.mkdir()
    (d / "mk.py").write_text(DEEP_OUTPUTS)
    (d / "bot.py").write_text('import sys\nprint("ready", flush=True)\nsys.stdin.read()\n')
    (d / "bot.toml").write_text('name = "deepout"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n'
                                'build = ["python3", "mk.py"]\n')
    launcher = Launcher(containment=Containment.GVISOR)
    try:
        with launcher.plan_now(load_bot(d)).start() as seat:
            assert seat.receive_line(60.0) == "ready"
    finally:
        launcher.release_builds()


@pytest.mark.parametrize("inside", [".git/bot.toml", "__pycache__/bot.toml", "node_modules/m/bot.toml",
                                    "bot.toml.pyc"])
def test_a_manifest_linked_into_what_the_reader_leaves_out_is_refused(open_tmp: Path, inside: str) -> None:
    """Attack: ``bot.toml -> .git/bot.toml``. The reader takes a link to nothing it lists as a link "to
    nothing yet" (a build's output), so the manifest's text was in no files hash: edited under a
    run's reading it went unseen, and every copy held the link with nothing behind it. `arena
    check` passed; `arena submit` made the ladder's snapshot, could not load it ("no bot at
    PosixPath(...)") and left it in ``ladder-bots``. Now refused where the manifest is read, naming it."""
    d = bot(open_tmp, "hidden")
    (d / inside).parent.mkdir(parents=True, exist_ok=True)
    (d / "bot.toml").rename(d / inside)
    os.symlink(inside, d / "bot.toml")
    with pytest.raises(FolderError, match="to a file the arena leaves out of the bot"):
        load_bot(d)
    lad = open_tmp / "lad.toml"
    lad.write_text('rules = "classic"\nseats = 2\ndeals = 1\nbots = ["random", "lowest"]\n')
    store = open_tmp / "data" / "arena.sqlite"
    res = CliRunner().invoke(app, ["submit", str(d), "--ladder", str(lad), "--store", str(store), "--plain"])
    _refused_in_one_line(res, "bot.toml", "leaves out of the bot")
    assert not (store.parent / "ladder-bots").exists() or not any((store.parent / "ladder-bots").rglob("hidden*"))


def test_one_members_folder_never_stops_a_benchs_grading_of_the_others(open_tmp: Path) -> None:
    """Attack: a course's bench grades every student's folder, copied at the deadline. On 866824f one
    student stopped the bench for the whole class, run after run, and nobody's grade was printed:
    a FIFO in her folder ("error: bench cs101: member ...: a FIFO"), her bot named as a classmate's
    ("two members are ann@1.0", naming neither folder), or as a reference bot ("random@1.0 is listed
    twice", after the members before her had played). Now such a member is not graded, with why
    (a refusal at the deadline is kept: a folder fixed after it is still not played), and the
    others are graded."""
    import csv
    import datetime as dt

    from tests.test_bench import folder

    for name in ("ann", "bob", "eve", "mia"):
        folder(open_tmp / "bots", name)
    os.mkfifo(open_tmp / "bots" / "eve" / "notes\x1b]0;owned\x07")  # its name is hers: shown escaped
    for name, label in (("bob", 'name = "ann"'), ("mia", 'name = "random"')):  # bob's as ann's; mia's as the reference
        toml = open_tmp / "bots" / name / "bot.toml"
        toml.write_text(toml.read_text().replace(f'name = "{name}"', label))
    past = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).isoformat()
    (open_tmp / "bench.toml").write_text(
        'name = "cs101"\nreferences = ["random"]\nmembers = ["bots/ann", "bots/bob", "bots/eve", "bots/mia", '
        f'"bots/zed"]\ndeals = 1\nmax_turns = 40\nstore = "data/s.sqlite"\ndeadline = "{past}"\n'
        '[bands]\nA = 0.5\nF = 0.0\n')
    folder(open_tmp / "bots", "zed")  # the one member nobody bothers: graded
    runner = CliRunner()
    grades_csv = open_tmp / "grades.csv"
    res = runner.invoke(app, ["bench", str(open_tmp / "bench.toml"), "--csv", str(grades_csv)])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output, res.output
    lines = res.output.splitlines()
    assert any(line.startswith("zed@1.0: ") for line in lines), res.output
    graded = {row["member"]: row["grade"] for row in csv.DictReader(grades_csv.open())}
    assert graded["zed@1.0"] in ("A", "F"), graded
    refused = {m: g for m, g in graded.items() if g.startswith("not graded:")}
    assert len(refused) == 4 and len(graded) == 5, graded  # ann and bob share a label: neither takes the other's
    assert any("notes\\x1b]0;owned\\x07: a FIFO" in g for g in refused.values()), refused
    assert "\x1b" not in grades_csv.read_text() and "\x1b" not in res.output
    assert sum("ann@1.0, as the bot of" in g for g in refused.values()) == 2, refused
    assert any("random@1.0, a reference bot" in g for g in refused.values()), refused
    # fixed after the deadline: still not played (its refusal was kept beside the copies)
    (open_tmp / "bots" / "eve" / "notes\x1b]0;owned\x07").unlink()
    res = runner.invoke(app, ["bench", str(open_tmp / "bench.toml")])
    assert res.exit_code == 0 and "a FIFO" in res.output and "\x1b" not in res.output, res.output
    assert not any(p.name.endswith("-eve") for p in snapshot_dir_of(open_tmp).iterdir())


def snapshot_dir_of(where: Path) -> Path:
    from arena.tournament.bench import load_bench, snapshot_dir
    return snapshot_dir(load_bench(where / "bench.toml"))


def test_a_folder_of_more_names_than_a_bot_may_hold_is_refused_whatever_they_are(tmp_path: Path) -> None:
    """Attack: a student's folder on the course machine (``arena bench``), or any local author's, with a
    subfolder of 300,000 empty files of 200-byte names: the reader listed each folder whole before
    it counted, 100 MB and a second of the referee's for that one (the disk's 15 M free inodes would
    be about 5 GB), and names it leaves out (``*.pyc``, ``*.o``, ``*.class``) were never counted at
    all, so a folder of millions of them was listed and stat'ed in full at every reading. Now every
    name counts as it is listed, and the listing stops at the cap."""
    from arena.bots.folder import Caps

    d = bot(tmp_path, "many")
    (d / "out").mkdir()
    for i in range(40):
        (d / "out" / f"{i}.pyc").touch()
    caps = Caps(files=32)
    assert len(read_folder(d, Caps(files=64)).entries) < 8  # the .pyc files are still left out of the bot
    with pytest.raises(FolderError, match="more than 32 entries"):
        read_folder(d, caps)


LOUD = 'import sys\nfor i in range(8):\n    sys.stderr.write("A" * 8000 + "\\n")\nsys.stderr.flush()\nsys.exit(3)\n'


def test_a_failed_checks_report_keeps_short_lines(open_tmp: Path) -> None:
    """Attack: a bot that writes its stderr's 64 kB cap in long lines and exits at once fails its check
    in about 3-5 s here, and the server keeps every submission's report: 65.7 kB a failed upload on
    866824f (12 uploads through `arena serve`, no account: the store file 1.02 MB). Now each stderr
    line of a report is cut: 4.1 kB a report (the store file 0.28 MB after the same 12)."""
    import json

    from arena.tournament.check import STDERR_CHARS, check_bot

    d = open_tmp / "loud"
    d.mkdir()
    (d / "bot.py").write_text(LOUD)
    (d / "bot.toml").write_text('name = "loud"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    report = check_bot(load_bot(d), games=1)
    assert not report["ok"]
    lines = [line for kind in report["faults"].values() for line in kind["first"]["stderr"]]
    assert lines and all(len(line) <= STDERR_CHARS + 1 for line in lines), [len(x) for x in lines]
    assert lines[-1].startswith("AAAA") and lines[-1].endswith("…")  # what the bot wrote, cut visibly
    assert len(json.dumps(report)) < 16_000, len(json.dumps(report))


def test_a_persons_finished_submissions_that_no_quota_counts_are_bounded(tmp_path: Path) -> None:
    """Attack: submissions that fail their check count against no quota, and each finished one was kept
    for ever with its report and lines: one member uploading failing bots grew the store without
    end (with the report above, over 1 GB a day at 3-5 s a check), and once the disk was short of the
    reserve every member's upload was refused (507). Now a person keeps their newest
    ``KEEP_UNCOUNTED`` of those; the jobs the quota counts, and other people's, all stay."""
    import sqlite3

    from arena.store import jobs as q
    from arena.store import migrate
    from arena.store.jobs import Job, Limits, Outcome

    db = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    migrate(db)
    me = q.server_id()
    limits = Limits(per_submitter=9, total=99, per_day=99)
    now = 1.0

    def run(who: str, outcome: Outcome, passed: bool = False) -> str:
        nonlocal now
        now += 1
        job_id = q.new_id()
        q.enqueue(db, Job(job_id, who, "classic-2p", f"x@{now}", "b.zip", f"/up/{job_id}"), limits, now)
        job = q.claim(db, now, owner=me)
        assert job is not None and job.id == job_id
        job.passed_check, job.report = passed, {"faults": {"crash": {"first": {"stderr": ["A" * 300] * 8}}}}
        q.finish(db, job, outcome, now)
        return job_id

    others = run("account:2", Outcome.CHECK_FAILED)
    placed = [run("account:1", Outcome.PLACED, passed=True) for _ in range(3)]
    failed = [run("account:1", Outcome.CHECK_FAILED) for _ in range(q.KEEP_UNCOUNTED + 20)]
    refunded = run("account:1", Outcome.REFUNDED, passed=True)  # refunded: no quota counts it either
    kept = {row[0] for row in db.execute("SELECT id FROM jobs WHERE submitter='account:1'")}
    assert set(placed) <= kept and refunded in kept and failed[-1] in kept
    assert len(kept - set(placed)) == q.KEEP_UNCOUNTED, len(kept)
    assert not set(failed[:21]) & kept  # the oldest went
    assert q.get(db, others) is not None
    db.close()
