"""The human seat of `arena play`: it shows exactly what a bot in that seat is sent, and Ctrl-C at its prompt works."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from arena.bots.manifest import HUMAN
import arena.cli.play as play
from arena.engine import PRESETS
from arena.replay.view import pretty
from tests.checks import fixed_secret

ROOT = Path(__file__).resolve().parent.parent
CARD = re.compile(r"(?:10|[2-9JQKA])[♣♦♥♠]|red joker|black joker")


def cards_in(message: object) -> set[str]:
    """Every card a message names, written as the terminal writes cards."""
    text = json.dumps(message)
    return {pretty(c) for c in re.findall(r'"((?:[2-9TJQKA][CDHS])|X[RB])"', text)}


@pytest.mark.parametrize("preset", ["classic", "shithead", "skip8"])
def test_the_human_sees_only_what_its_seat_is_sent(tmp_path: Path, monkeypatch, preset: str) -> None:
    """Two people at the table, answering at random: at each message a seat receives, every card
    its screen has shown so far is in a message it received by then. (Before, the person saw every
    event, the other seat's drawn cards included.) Checked over the whole game only, the rule could
    not fail: by a game's end every card has been named to both seats, and a screen showing the
    other seat's draws as they happened passed. One known game a rule set (each of four seeds took
    1 s of CPU): such a leak shows at the first draw."""
    import random
    seed = 0
    fixed_secret(tmp_path)  # the same deal and the same answers on every run
    rng = random.Random(seed)
    screens: dict[int, io.StringIO] = {0: io.StringIO(), 1: io.StringIO()}
    sent: dict[int, set[str]] = {0: set(), 1: set()}
    shown: dict[int, set[str]] = {0: set(), 1: set()}
    read_to = {0: 0, 1: 0}

    def received(seat: int, message: object) -> None:
        """The seat is sent ``message``: what its screen showed until now was all sent before it."""
        text = screens[seat].getvalue()
        shown[seat] |= set(CARD.findall(text, read_to[seat]))  # a card is never split: lines end after one
        read_to[seat] = len(text)
        assert shown[seat] <= sent[seat], (seat, shown[seat] - sent[seat])
        sent[seat] |= cards_in(message)

    class Recording(play.HumanPlayer):
        def __init__(self, name: str, console: Console):
            self.index = int(name.removeprefix("human"))
            super().__init__(name, Console(file=screens[self.index], width=200, force_terminal=False))

        def begin(self, message):
            received(self.index, message)
            super().begin(message)

        def choose(self, message, timeout):
            received(self.index, message)
            monkeypatch.setattr(play, "ask", lambda prompt: str(rng.randrange(len(message["actions"]))))
            return super().choose(message, timeout)

        def finish(self, message):
            received(self.index, message)
            super().finish(message)

    monkeypatch.setattr(play, "HumanPlayer", Recording)
    quiet = Console(file=io.StringIO())
    play.play_one([HUMAN, HUMAN], PRESETS[preset], seed, 1000, 1000, 300, tmp_path / "s.sqlite", False, quiet)
    for i in (0, 1):
        received(i, {})  # what the last message showed
        assert shown[i], "the screen showed no card"
    # and what one saw differs from the other: they are not both shown the whole table
    assert screens[0].getvalue() != screens[1].getvalue()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_ctrl_c_at_the_human_prompt(tmp_path: Path) -> None:
    session = f"arena-human-{os.getpid()}"
    done = tmp_path / "exit"
    cmd = (f"cd {tmp_path} && PYTHONWARNINGS=ignore PYTHONPATH={ROOT} {sys.executable} -m arena.cli play human random "
           f"--store {tmp_path / 's.sqlite'}; echo $? > {done}; sleep 60")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", cmd], check=True)
    try:
        for _ in range(600):
            pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout
            if "action id>" in pane:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the prompt never showed:\n" + pane)
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        for _ in range(300):
            if done.exists() and done.read_text().strip():
                break
            time.sleep(0.1)
        assert done.read_text().strip() == "130"
        pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout
        assert "Traceback" not in pane
        assert pane.rstrip().splitlines()[-1] == "interrupted: the game was not stored", pane
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        # tmux's server daemonized, so it was orphaned to this process (a subreaper once any
        # bot ran here): reap it, as the arena reaps what it adopts.
        deadline = time.monotonic() + 5
        while (servers := _tmux_children()) and time.monotonic() < deadline:
            for pid, state in servers:
                if state == "Z":
                    os.waitpid(pid, os.WNOHANG)
            time.sleep(0.02)


def _tmux_children() -> list[tuple[int, str]]:
    """(pid, state) of the tmux processes whose parent is this process."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            comm, rest = d.joinpath("stat").read_text().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        state, ppid = rest.split()[:2]
        if comm.split("(", 1)[1].startswith("tmux") and int(ppid) == os.getpid():
            out.append((int(d.name), state))
    return out


def test_ctrl_c_while_a_bot_thinks_stops_the_game_and_its_bots(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C (SIGINT) while the referee waits for a bot that never answers: the game ends with
    KeyboardInterrupt (no forfeit, nothing stored) and every bot process is gone first."""
    import signal
    import stat
    import tempfile
    import threading

    from arena.bots.manifest import load_bot
    from tests.checks import reachable
    hostile = reachable(ROOT / "tests" / "hostile_bots") / "hostile.py"
    bot = Path(tempfile.mkdtemp(prefix="arena-human-"))  # private uids must read it
    try:
        bot.chmod(0o755)
        shutil.copy(hostile, bot / "hostile.py")
        (bot / "hostile.py").chmod(0o644)
        (bot / "bot.toml").write_text('name = "silent"\nversion = "1"\ncommand = ["python3", "hostile.py", "never_answer"]\n')
        (bot / "bot.toml").chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
        asked: dict[str, int] = {}
        seated: list = []
        stuck = threading.Event()

        class Watched(play.BlockingPlayer):
            def decide(self, req):
                asked[self.name] = asked.get(self.name, 0) + 1
                if self.conn is not None and self.conn not in seated:
                    seated.append(self.conn)
                if self.name == "silent" and asked[self.name] == 2:  # it answered once; now it never will
                    stuck.set()
                return super().decide(req)

        monkeypatch.setattr(play, "BlockingPlayer", Watched)
        over = threading.Event()

        def ctrl_c() -> None:  # once the silent bot has been asked (a moment for the request to go out)
            if stuck.wait(120) and not over.wait(1.0):  # to the main thread, whose poll it interrupts
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        threading.Thread(target=ctrl_c, daemon=True).start()
        store = tmp_path / "s.sqlite"
        said = io.StringIO()
        # Ctrl-C as at a terminal: a job started in the background (as a CI script may start the
        # suite) inherits SIGINT ignored, and the signal would never reach the game
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with pytest.raises(KeyboardInterrupt):
                play.play_one([load_bot(str(bot)), load_bot("random")], PRESETS["classic"], 3, 60_000, 0, 500, store,
                              True, Console(file=said))
        except BaseException:
            print(said.getvalue())  # what the game said, if it ended otherwise
            raise
        finally:
            over.set()  # no stray Ctrl-C for whatever runs next in this process
            signal.signal(signal.SIGINT, previous)
        assert stuck.is_set() and not store.exists()
        assert len(seated) == 2 and all(not Path(f"/proc/{c.pid}").exists() for c in seated)
    finally:
        shutil.rmtree(bot, ignore_errors=True)
