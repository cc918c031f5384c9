"""`arena serve --ladder NAME`: the club in one command. The ladder plays into the store in one
`arena ladder run` process beside the pages, with the real bundled bots; stopping the server
finishes the batch being played and loses nothing."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.cli.serve import PAGES_SHARE

from .checks import store_count
from .test_ladder import write_ladder

REPO = Path(__file__).resolve().parent.parent


def test_serve_keeps_a_ladder_playing_and_a_stop_finishes_its_batch(open_tmp: Path):
    path = write_ladder(open_tmp, "night", bots=["random", "lowest"], max_turns=400, concurrency=1, deals=2)
    store = open_tmp / "s.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", "from arena.cli.main import app; app()", "serve", "--store",
                             str(store), "--port", "0", "--ladder", str(path)], cwd=open_tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    mid_batch = ("SELECT COUNT(*) FROM games g JOIN tournaments t ON t.id=g.tournament "
                 "WHERE t.id LIKE 'ladder:night:run:%' AND t.status!='done'")
    try:
        url = ""
        for line in proc.stdout:  # type: ignore[union-attr]
            if m := re.match(r"arena serve: (http://\S+?)/?\s", line):
                url = m.group(1)
            if line.startswith("Ctrl-C"):
                break
        assert url, "arena serve did not start"
        deadline = time.monotonic() + 300
        while store_count(store, "SELECT COUNT(*) FROM games") < 1:  # the ladder plays (its seed round first)
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ladder stored no game in 300 s"
            time.sleep(0.1)
        with urllib.request.urlopen(url + "/ladders/night", timeout=60) as r:  # pages served meanwhile
            assert r.status == 200 and b"random@1.0" in r.read()
        # the games come first: the pages' process is weighed at PAGES_SHARE of the ladder's runner (a default group)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        ladder = [int(c) for c in children if b"ladder" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(ladder) == 1
        (pages_group, pages_w), (ladder_group, ladder_w) = weighed(proc.pid), weighed(ladder[0])
        if pages_group == ladder_group:  # no cgroup, no autogroup: only the processes' nice ranks them
            pages_w, ladder_w = (1.25 ** -os.getpriority(os.PRIO_PROCESS, p) for p in (proc.pid, ladder[0]))
        assert abs(pages_w / ladder_w - PAGES_SHARE) <= 0.1 * PAGES_SHARE, (pages_group, pages_w, ladder_group, ladder_w)
        if pages_group.startswith("/sys/fs/cgroup"):  # and a ceiling: that share of every CPU
            assert abs(ceiling(pages_group) - PAGES_SHARE * len(os.sched_getaffinity(proc.pid))) < 0.01, pages_group
        while store_count(store, mid_batch) < 1:  # a batch of 4 games under way, one of them stored
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ladder stored no batch game in 300 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # the server alone, as a service manager stops it
        rest, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, rest
    assert "Traceback" not in rest and "error:" not in rest, rest
    assert "stopping after the batch being played" in rest and "stopped" in rest
    assert f"pages: CPU weight {PAGES_SHARE:g} of a default group's" in rest
    if pages_group.startswith("/sys/fs/cgroup"):
        assert not Path(pages_group).exists()  # a clean stop leaves no group behind
    db = sqlite3.connect(store)
    runs = db.execute("SELECT id, planned, status FROM tournaments WHERE id LIKE 'ladder:night:run:%'").fetchall()
    assert runs and all(status == "done" for _, _, status in runs), runs  # the batch under way was finished
    for tid, planned, _ in runs:
        assert db.execute("SELECT COUNT(*) FROM games WHERE tournament=?", (tid,)).fetchone()[0] == planned
    db.close()


def ceiling(group: str) -> float:
    """A cpu cgroup's ceiling in CPUs, read back from the kernel (v2 ``cpu.max``, v1 the CFS quota)."""
    if (Path(group) / "cpu.max").exists():
        quota, period = Path(group, "cpu.max").read_text().split()
    else:
        quota, period = (Path(group, f"cpu.cfs_{k}_us").read_text() for k in ("quota", "period"))
    return float("inf") if quota.strip() in ("max", "-1") else int(quota) / int(period)


def weighed(pid: int) -> tuple[str, float]:
    """The group the scheduler weighs ``pid`` in (a cpu cgroup below the root, else its session's
    autogroup) and that group's weight as a fraction of the default, read back from the kernel."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if path == "/":
            continue
        for mnt, knob, default in (("/sys/fs/cgroup/cpu", "cpu.shares", 1024), ("/sys/fs/cgroup", "cpu.weight", 100)):
            if ("cpu" in ctrls.split(",") and knob == "cpu.shares") or (ctrls == "" and knob == "cpu.weight"):
                group = Path(mnt + path)
                if (group / knob).exists():
                    return str(group), int((group / knob).read_text()) / default
    name, _, nice = Path(f"/proc/{pid}/autogroup").read_text().split()
    return name, 1.25 ** -int(nice)


def test_serve_refuses_an_unknown_ladder_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """In this process (what it says, and that it serves nothing); a refused ``arena serve`` as a
    real process, its exit status and a stderr with no traceback, is tests/test_club_default.py's
    and tests/test_serve_cache.py's."""
    from tests.checks import arena_here
    monkeypatch.chdir(tmp_path)
    code, out, err = arena_here("serve", "--store", str(tmp_path / "s.sqlite"), "--port", "0",
                                "--ladder", "no-such-ladder")
    assert code == 2
    assert "no ladder 'no-such-ladder'" in err and "Traceback" not in err
    assert "arena serve:" not in out
