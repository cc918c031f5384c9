"""#35, an outside round as a bot author: the table rules a ladder names, and the game's end.

1. ``ponder = true`` on a table of strangers. The strangers' rules (gVisor, one seat per author, a
   fixed schedule) were taken with ``ponder`` beside them, which leaves each seat running on the
   other's turn. Measured through ``arena tournament --gvisor`` (fixed schedule, move 400 ms, load 20
   on the 2 CPUs): a sender spinning two processes in the 20 ms windows of a 1 and idle in those of a
   0 left a receiver counting 41,864-46,218 loops a window after a 1 against 114,804-158,586 after a 0
   (medians; 22-30% wrong with one threshold, about 1.2-2.4 bits/s on that loaded machine). Now a
   table that seats strangers refuses ``ponder``, in a tournament file and a ladder file alike.
2. A bot held its lane at every game's end. The filter lets a bot set its stdin pipe's size
   (``F_SETPIPE_SZ``): shrunk to one page, and the ``end`` left unread once its first bytes said
   what it was, the referee's send waited its 10 s timeout, the seat thawed all the while, and then
   closed the bot, which cost it nothing (the game was over; its next game got a fresh process).
   Four 4-seat shithead games took 43.1 s with such a bot against 11.4 s with the same bot reading
   its end. Now the referee grows the pipe to hold the ``end`` while the seat is still frozen, so
   the send never waits on the bot.
"""

from __future__ import annotations

import fcntl
import sys
import tempfile
import termios
import textwrap
from pathlib import Path

import pytest
import trio

from arena.bots.containment import Containment
from arena.bots.launch import Launcher
from arena.bots.manifest import BotSpec, load_bot
from arena.engine import preset
from arena.ladder import LadderError, load_ladder
from arena.referee import TimeControl
from arena.referee.blocking import BlockingPlayer, play_game, settle
from arena.referee.testing import MockBot
from arena.tournament.config import PONDER_CHANNEL

from tests.checks import arena_here, bwrap_or_skip, reachable
from tests.test_club_default import _club, _ladder
from tests.test_cpu_seats import LIMITS

STRANGERS = "one_seat_per_author = true\nfixed_schedule = true\ngvisor = true\n"


# --------------------------------------------------------------------------- 1. ponder

def test_a_tournament_file_with_the_strangers_rules_and_ponder_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "t.toml"
    file.write_text('name = "pondering"\nbots = ["random", "lowest"]\nrules = "classic"\nseats = 2\ndeals = 1\n'
                    + STRANGERS + "ponder = true\n")
    ran = arena_here("tournament", str(file), "--store", str(tmp_path / "arena.sqlite"), "--plain", cwd=tmp_path)
    assert ran.returncode == 2, ran
    assert PONDER_CHANNEL in ran.stderr and "drop ponder" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr + ran.stdout and "pondering-0" not in ran.stdout  # no game played


@pytest.mark.parametrize("rule", ["one_seat_per_author = true\ngvisor = true\n",
                                  "one_seat_per_author = true\naccept_kernel_channels = true\n"],
                         ids=["gvisor", "kernel-channels-accepted"])
def test_a_ladder_that_seats_strangers_refuses_ponder(tmp_path: Path, rule: str) -> None:
    path = _ladder(tmp_path / "ladders", "pondering", rule + "ponder = true\n")
    with pytest.raises(LadderError, match="drop ponder"):
        load_ladder(path, store=tmp_path / "arena.sqlite")
    # the same ladder without ponder loads, and ponder alone (one author's bots may share a table) does
    assert load_ladder(_ladder(tmp_path / "ladders", "plain", rule), store=tmp_path / "arena.sqlite").gvisor \
        == ("gvisor" in rule)
    assert load_ladder(_ladder(tmp_path / "ladders", "own", "ponder = true\none_seat_per_author = false\n"),
                       store=tmp_path / "arena.sqlite").ponder


def test_a_clubs_ladder_that_leaves_the_seat_rule_out_refuses_ponder(tmp_path: Path) -> None:
    club = _club(tmp_path / "club" / "arena.sqlite")
    with pytest.raises(LadderError, match="one_seat_per_author is on by default.*drop ponder"):
        load_ladder(_ladder(tmp_path / "ladders", "pondering", "gvisor = true\nponder = true\n"), store=club)
    assert load_ladder(_ladder(tmp_path / "ladders", "shared", "ponder = true\none_seat_per_author = false\n"),
                       store=club).ponder


# --------------------------------------------------------------------------- 2. the end, unread

ENDSTALL = textwrap.dedent('''\
    import fcntl, json, os, sys, time
    fcntl.fcntl(0, 1031, 4096)  # F_SETPIPE_SZ: its stdin pipe one page long
    buf = b""
    while True:
        while b"\\n" not in buf:
            if not buf:  # every message starts {"type":"<name>": read that much first
                head = os.read(0, 16)
                if head.startswith(b'{"type":"end"'):
                    time.sleep(3600)  # and never read the rest of the end
                buf = head
                continue
            more = os.read(0, 65536)
            if not more:
                sys.exit(0)
            buf += more
        line, _, buf = buf.partition(b"\\n")
        msg = json.loads(line)
        if msg["type"] == "hello":
            os.write(1, b'{"type":"hello","protocol":1,"name":"endstall"}\\n')
        elif msg["type"] == "request":
            os.write(1, json.dumps({"type": "action", "request": msg["id"], "action": 0}).encode() + b"\\n")
        elif msg["type"] == "shutdown":
            sys.exit(0)
''')
SEED = 17  # 4-seat shithead, every seat taking action 0: seat 0's end is 8,255 bytes, twice the pipe it sets
CLOCK = TimeControl(move_ms=2000, bank_ms=0, handshake_ms=30_000)


@pytest.fixture(scope="module")
def endstall(tmp_path_factory) -> BotSpec:
    root = reachable(Path(tempfile.mkdtemp(prefix="arena-a23b-", dir=tmp_path_factory.mktemp("a23b"))))
    root.chmod(0o755)
    d = root / "endstall"
    d.mkdir(mode=0o755)
    (d / "bot.py").write_text(ENDSTALL)
    (d / "bot.toml").write_text('name = "endstall"\nauthor = "mallory"\ncommand = ["python3", "bot.py"]\n')
    for f in d.iterdir():
        f.chmod(0o644)
    return load_bot(d)


def test_a_bot_that_shrinks_its_pipe_and_leaves_its_end_unread_holds_nothing(endstall: BotSpec) -> None:
    bwrap_or_skip()
    launcher = Launcher(LIMITS, Containment.BUBBLEWRAP)
    plan = trio.run(launcher.plan, endstall)
    mocks: list[MockBot] = []

    def mock(spec: BotSpec) -> MockBot:
        mocks.append(MockBot())  # greets, always action 0
        return mocks[-1]

    attacker = BlockingPlayer(endstall, lambda spec: plan.start(), CLOCK)
    others = [BlockingPlayer(load_bot("random"), mock, CLOCK) for _ in range(3)]
    try:
        rec = play_game([attacker, *others], preset("shithead"), SEED, game_id="a23b-end", clock=CLOCK)
        assert rec.faults == [], rec.faults
        ends = [line for line in mocks[0].lines if line.startswith('{"type":"end"')]
        assert len(ends) == 1 and rec.result["reason"] == "played_out", rec.result
        conn = attacker.conn
        # the end went whole into the seat's pipe, with nothing waited for: the send did not time
        # out (the bot kept, its stdin usable), and the end is there, unread but for 16 bytes
        assert conn is not None and conn._stdin_error is None, "the end's send waited on the bot and lost it"
        queued = bytearray(4)
        fcntl.ioctl(conn._fds[0], termios.FIONREAD, queued)
        assert int.from_bytes(queued, sys.byteorder) > 4096  # more than the pipe the bot left itself
    finally:
        attacker.close()
        for p in others:
            p.shutdown()
        settle()
