"""The pages' bounded CPU share where no cgroup can be made: the session's autogroup niced, read
back from the kernel by another process, and given back on a clean stop. (Where a cgroup can be
made, tests/test_serve_ladder.py reads the real server's group back.)"""

from __future__ import annotations

import os

from arena.serve import cpushare


def _in_child(body) -> tuple[str, int | None, int | None]:
    """Run ``body`` in a forked child in a session (so an autogroup) of its own, and read its
    autogroup's nice from here while it holds the share and after it calls ``release``:
    (how the share was applied, nice held, nice after; None where the kernel shows no autogroup)."""
    go, back = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 1
        try:
            os.setsid()
            applied = body()
            os.write(back[1], applied.how.encode().ljust(16))
            os.read(go[0], 1)
            cpushare.release(applied)
            os.write(back[1], b"2")
            os.read(go[0], 1)
            code = 0
        finally:
            os._exit(code)

    def nice_of_child():
        try:
            return cpushare.autogroup_nice_of(pid)
        except OSError:
            return None
    try:
        how = os.read(back[0], 16).decode().strip()
        held = nice_of_child()
        os.write(go[1], b"x")
        assert os.read(back[0], 1) == b"2"
        after = nice_of_child()
        os.write(go[1], b"x")
    finally:
        _, status = os.waitpid(pid, 0)
        for fd in (*go, *back):
            os.close(fd)
    assert status == 0
    return how, held, after


def _autogroups_on() -> bool:
    try:
        return cpushare.read_small("/proc/sys/kernel/sched_autogroup_enabled").strip() == "1"
    except OSError:
        return False


def test_without_a_cgroup_the_sessions_autogroup_is_niced_and_given_back(monkeypatch):
    """Where autogroups are on, the child's new session has one: it is niced and given back. Where
    they are off, the share falls back to a plain nice. (This test's own session may be the
    kernel's default group, whose file is empty, as in CI's containers: it is compared as text.)"""
    def no_cgroup(share: float):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(cpushare, "_into_cgroup", no_cgroup)
    own = cpushare.read_small("/proc/self/autogroup")
    how, held, after = _in_child(lambda: cpushare.bound_pages(0.1))
    if _autogroups_on():
        assert (how, held, after) == ("autogroup", 10, 0)  # 1.25 ** -10: about a tenth of nice 0's weight
    else:
        assert (how, held, after) == ("nice", None, None)
    assert cpushare.read_small("/proc/self/autogroup") == own  # this test's session untouched


def _bound_in_fork() -> tuple[str, int, str]:
    """``bound_pages(0.1)`` in a forked child (it changes the process it runs in): how, value, note."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            applied = cpushare.bound_pages(0.1)
            os.write(w, f"{applied.how}|{applied.value}|{applied.note}".encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    how, value, note = got.split("|")
    return how, int(value), note


def test_an_empty_autogroup_file_means_a_cgroup_is_weighed_and_a_nice_is_used(monkeypatch):
    """The kernel prints nothing in /proc/PID/autogroup for a session in its default (root) group;
    that is a reason to fall back, never a crash."""
    real = cpushare.read_small
    monkeypatch.setattr(cpushare, "_into_cgroup", lambda share: (_ for _ in ()).throw(OSError(13, "Permission denied")))
    monkeypatch.setattr(cpushare, "read_small",
                        lambda p: "1\n" if "sched_autogroup_enabled" in str(p)
                        else "" if str(p).endswith("/autogroup") else real(p))
    how, _, note = _bound_in_fork()
    assert how == "nice" and "no autogroup: this session is in the root group" in note, note


def test_a_share_is_a_weight_from_a_tenth_to_equal():
    assert [cpushare.autogroup_nice(s) for s in (1.0, 0.3, 0.1, 0.03, 0.001)] == [0, 5, 10, 16, 19]
    assert cpushare.cgroup_weight("v1", 0.1) == 102 and cpushare.cgroup_weight("v2", 0.1) == 10
    assert cpushare.cgroup_weight("v1", 1e-9) == 2 and cpushare.cgroup_weight("v2", 1e-9) == 1


def test_a_share_is_also_a_ceiling_of_that_part_of_every_cpu():
    assert cpushare.cgroup_cap(0.25, 2) == 50_000 == cpushare.PERIOD_US // 2  # half a CPU of two
    assert cpushare.cgroup_cap(0.25, 16) == 400_000 and cpushare.cgroup_cap(1.0, 2) == 200_000
    assert cpushare.cgroup_cap(1e-9, 2) == 1000  # the kernel's least quota
    assert "at most 0.5 CPUs" in cpushare.PagesShare("cgroup v1", "g", 256, cap_us=50_000).describe()


def test_the_default_share_keeps_a_two_game_ladder_at_80_percent_and_the_pages_above_a_tenth():
    """The decision (serve/cpushare.py): beside a ladder playing two games on two CPUs (two busy
    default-weight groups) the pages take at most a fifth, and beside any other busy process they
    keep more than the tenth that starved them on a shared machine."""
    from arena.cli.serve import PAGES_SHARE
    assert PAGES_SHARE / (2 + PAGES_SHARE) <= 0.2
    assert PAGES_SHARE > 0.1
    assert cpushare.cgroup_weight("v1", PAGES_SHARE) == 256 and cpushare.cgroup_weight("v2", PAGES_SHARE) == 25


def test_nothing_allowed_falls_back_to_a_nice_and_says_why(monkeypatch):
    def refused(*_):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(cpushare, "_into_cgroup", refused)
    monkeypatch.setattr(cpushare, "_nice_autogroup", refused)
    how, value, note = _bound_in_fork()
    assert how == "nice" and value >= 10
    assert "no cpu cgroup: Permission denied" in note and "no autogroup: Permission denied" in note


def test_a_share_outside_0_to_1_is_refused_before_anything_starts(tmp_path):
    from typer.testing import CliRunner

    from arena.cli.main import app
    for bad in ("0", "-0.5", "1.5"):
        done = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.sqlite"), "--port", "0",
                                        "--pages-share", bad])
        assert done.exit_code == 2, (bad, done.output)
        assert "--pages-share above 0 and at most 1" in done.output and "arena serve:" not in done.output
