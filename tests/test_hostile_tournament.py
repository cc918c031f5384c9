"""Hostile bots in a real tournament: it completes, each bad bot forfeits for the right
reason, the well-behaved bots' play is untouched, memory stays bounded, nothing is left running.

Each hostile bot (tests/hostile_bots/hostile.py) plays its first decision properly and then
misbehaves one way. It sits at a three-seat table with two reference bots (a gauntlet), so
the other two must play on to a normal finish after it forfeits.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
import trio

from arena.bots.procs import proc_peak_rss
from arena.tournament.config import load_config
from arena.tournament.run import run_tournament
from arena.tournament.store import Store
from tests.checks import reachable

HOSTILE = reachable(Path(__file__).resolve().parent / "hostile_bots") / "hostile.py"  # private uids run it

# mode -> the forfeit reasons that are right for it (None: it must not forfeit at all)
EXPECTED: dict[str, set[str] | None] = {
    "never_answer": {"timeout"},
    "ignore_term": {"timeout"},
    "late": {"timeout"},
    "garbage": {"bad_json"},
    "not_utf8": {"bad_encoding"},
    "long_line": {"line_too_long"},
    "old_request": {"wrong_request"},
    "two_replies": {"wrong_request"},
    "illegal": {"illegal_action"},
    "nested": {"bad_json"},
    "close_stdin": {"closed_input", "timeout"},
    "exit_mid": {"crash"},
    "exit_handshake": {"handshake", "crash"},
    "segfault": {"crash"},
    "setsid_grandchild": {"timeout"},
    "fork_bomb": {"timeout", "crash"},
    "memory_hog": {"memory_limit", "crash"},
    "stderr_flood": None,
    "snoop": None,
}


def _open_dir() -> Path:
    """A directory every uid can read: bots run under private uids when the referee is root."""
    d = Path(tempfile.mkdtemp(prefix="arena-hostile-"))
    d.chmod(0o755)
    return d


def _resident() -> int:
    """This process's resident set now, in bytes."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) * 1024


def _leftovers() -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if HOSTILE.name.encode() in cmd:
                shown = cmd.replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{pid}: {shown}")
    return out


# Who plays which hostile bots: one referee worker process with two games at once (two lanes) plays
# them all; two worker processes, a game at a time each, play those whose harm is to processes and
# memory (a worker's, its children's, the store's), where one process per game could differ from two
# lanes in one. The protocol faults are parsed by the same shell either way, so played once.
PLAYED_BY = {"lanes": list(EXPECTED),
             "workers": ["ignore_term", "exit_mid", "segfault", "setsid_grandchild", "fork_bomb", "memory_hog",
                         "long_line", "stderr_flood", "snoop"]}


@pytest.fixture(scope="module", params=list(PLAYED_BY))
def played(request):
    """The tournament of ``PLAYED_BY[request.param]``: the same verdicts by lanes and by workers."""
    modes = PLAYED_BY[request.param]
    base = _open_dir()
    store_path = base / "store" / "arena.sqlite"
    bots = []
    for mode in modes:
        d = base / mode
        d.mkdir()
        d.chmod(0o755)
        shutil.copy(HOSTILE, d / HOSTILE.name)  # a contained bot sees its own directory only
        (d / HOSTILE.name).chmod(0o644)
        (d / "bot.toml").write_text(
            f'name = "hostile-{mode.replace("_", "-")}"\nversion = "1"\n'
            f'command = ["python3", "{HOSTILE.name}", "{mode}", "{store_path}"]\n')
        (d / "bot.toml").chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
        bots.append(str(d))
    cfg = load_config(None, {
        "name": "hostile", "format": "gauntlet", "candidates": bots, "bots": ["lowest", "heuristic"],
        "seats": 3, "deals": 1, "concurrency": 2, "processes": 1 if request.param == "lanes" else 2, "move_ms": 400, "bank_ms": 200,
        "handshake_ms": 5000, "max_turns": 400, "store": str(store_path),
        "limits": {"memory_mb": 128, "max_processes": 16}})
    store = Store(cfg.store)
    before = _resident()
    Path("/proc/self/clear_refs").write_text("5")  # the peak resident set starts again from here
    trio.run(run_tournament, cfg, store)
    peak = proc_peak_rss(os.getpid()) - before
    yield store, peak, len(modes) * 3, modes
    store.close()
    shutil.rmtree(base, ignore_errors=True)


def test_the_tournament_completes(played) -> None:
    store, _, planned, _ = played
    assert len(store.games(tournament="hostile", limit=10_000)) == planned
    assert store.tournament("hostile")["status"] == "done"


def test_each_hostile_bot_forfeits_for_the_right_reason(played) -> None:
    """Every hostile bot the run played, in each of its games; what is wrong is said per bot."""
    store, _, _, modes = played
    wrong = []
    for mode in modes:
        label = f"hostile-{mode.replace('_', '-')}@1"
        games = store.games(tournament="hostile", bot=label, limit=100)
        if len(games) != 3:
            wrong.append(f"{mode}: {len(games)} games")
        for g in games:
            seat = g["seats"].index(label)
            reason = g["result"].get("forfeits", {}).get(str(seat))
            if EXPECTED[mode] is None and reason is not None:
                wrong.append(f"{mode} forfeited ({reason}) in {g['id']}")
            elif EXPECTED[mode] is not None and reason not in EXPECTED[mode]:
                wrong.append(f"{mode}: got {reason!r} in {g['id']}")
            # the reference bots never fault, and play on to a real finish
            for other, bot in enumerate(g["seats"]):
                if bot != label and str(other) in g["result"].get("forfeits", {}):
                    wrong.append(f"{mode}: {bot} forfeited in {g['id']}")
            if g["reason"] not in ("first_out", "played_out", "forfeit", "turn_cap"):
                wrong.append(f"{mode}: the game ended by {g['reason']!r} in {g['id']}")
    assert wrong == []


def test_the_referee_never_held_the_huge_line(played) -> None:
    """The long_line bot writes 100 MiB without a newline: this process's peak resident set (its
    high-water mark, reset before the run) grew by far less. (This process: the whole referee with
    lanes, the storing parent with workers; a worker's own bound is the channel's, which
    tests/test_bot_process.py checks on both shells. Measured by the kernel rather than by
    tracemalloc, whose tracing of every allocation doubled the run's CPU.)"""
    _, peak, _, _ = played
    assert peak < 64 * 2**20, f"the referee's resident set grew by {peak / 2**20:.0f} MiB"


def test_no_hostile_process_is_left(played) -> None:
    assert _leftovers() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="bots run under a private uid only when the referee is root")
def test_a_bot_cannot_read_the_store(played) -> None:
    store, _, _, _ = played
    g = store.games(tournament="hostile", bot="hostile-snoop@1", limit=1)[0]
    log = store.game_record(g["id"])
    seat = g["seats"].index("hostile-snoop@1")
    said = "\n".join(log["stderr"][seat])
    assert "denied" in said and "READ" not in said, said
