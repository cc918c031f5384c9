"""Text from bots is data (issue 35): a bot's version, author, stderr and ``info`` reach the
operator's terminal with control characters shown escaped, in every command that prints them;
a bot.toml whose version or author holds one is refused with a clean one-line error."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table
from rich.text import Text

from arena.safetext import SafeConsole, printable
from tests.checks import arena_here

ROOT = Path(__file__).resolve().parent.parent
# what must never reach a terminal raw: ESC (every escape sequence), BEL (ends a window title), the
# 8-bit CSI, backspace, carriage return and the right-to-left override (reverses what follows)
RAW = ("\x1b", "\x07", "\x9b", "\x08", "\r", "\u202e")
EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31mFAKE\x1b[0m\x9b1m\b\r\u202eevil"


def raw_bytes(text: str) -> list[str]:
    return [c for c in RAW if c in text]


def test_printable_escapes_everything_that_is_not_printable() -> None:
    assert printable("heuristic@1.0 Ünïcode ♠") == "heuristic@1.0 Ünïcode ♠"
    shown = printable(EVIL + "\nnext")
    assert raw_bytes(shown) == [] and "\n" not in shown
    assert shown.startswith("\\x1b]0;owned\\x07\\x1b[2J") and "\\u202eevil" in shown
    assert printable("a\nb", lines=True) == "a\nb"


def test_a_safe_console_escapes_text_and_keeps_its_own_styles() -> None:
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="truecolor", width=200, highlight=False)
    table = Table("bot", "author")
    table.add_row("evil@" + EVIL, EVIL)
    console.print(table)
    console.print(Text("  stderr| " + EVIL, style="dim cyan"))
    console.print(f"[red]error:[/] {EVIL}")
    text = out.getvalue()
    # Rich's own colour codes are the only escape sequences left: each ESC starts an SGR it made
    starts = [i for i, c in enumerate(text) if c == "\x1b"]
    assert starts and all(text[i:i + 2] == "\x1b[" and text[i + 2:].split("m", 1)[0].replace(";", "").isdigit()
                          for i in starts)
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x07" not in text and "\u202e" not in text
    assert text.count("\\x1b]0;owned") == 4


# --------------------------------------------------------------------------- through the commands

def arena(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """A real `arena` process: for the commands that run bots."""
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _bot(root: Path, name: str, toml: str, code: str = "") -> Path:
    d = root / name
    d.mkdir()
    (d / "bot.toml").write_text(toml)
    (d / "bot.py").write_text(code)
    for p in (d, *d.iterdir()):
        p.chmod(0o755)
    return d


@pytest.mark.parametrize("line", ['version = "1\\u001b]0;owned\\u0007"', 'author = "me\\u001b[2J\\u009b31m"',
                                  'description = "x\\u202eevil"'])
def test_a_bot_toml_with_control_characters_is_refused_in_one_clean_line(open_tmp: Path, line: str) -> None:
    bot = _bot(open_tmp, "evil", f'name = "evil"\n{line}\ncommand = ["python3", "bot.py"]\n')
    for args in (["check", str(bot), "--rules", "classic", "--games", "1"],
                 ["tournament", "--bot", str(bot), "--bot", "random", "--deals", "1", "--plain",
                  "--store", str(open_tmp / "s.sqlite")]):
        done = arena_here(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "must be one line of printable text" in done.stderr
        assert raw_bytes(done.stdout + done.stderr) == [], (args, done.stderr)


HOSTILE = '''
import json, sys
EVIL = %r
n = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "evil", "version": "1"}), flush=True)
    elif msg["type"] == "request":
        n += 1
        print("thinking " + EVIL, file=sys.stderr, flush=True)
        if n == %d:
            raise SystemExit(3)
        print(json.dumps({"type": "action", "request": msg["id"], "action": 0, "info": {"text": EVIL}}), flush=True)
    elif msg["type"] == "end":
        print("after the end " + EVIL, file=sys.stderr, flush=True)
'''


def test_a_bots_stderr_info_and_label_reach_no_terminal_raw(open_tmp: Path) -> None:
    """A bot writes escape sequences to stderr and in its ``info``; then its label in the store holds
    them too (a store written before bot.toml was checked, or edited by hand): every command that
    shows them prints them escaped."""
    toml = 'name = "evil"\nversion = "1"\ncommand = ["python3", "bot.py"]\n'
    bot = _bot(open_tmp, "evil", toml, HOSTILE % (EVIL, 10**6))
    crasher = _bot(open_tmp, "crasher", toml.replace('"evil"', '"crasher"'), HOSTILE % (EVIL, 3))
    store = str(open_tmp / "s.sqlite")
    done = arena("tournament", "--name", "t", "--bot", str(bot), "--bot", "random", "--deals", "1", "--plain",
                 "-j", "1", "--store", store, cwd=open_tmp)
    assert done.returncode == 0, done.stderr
    row = json.loads(arena_here("games", "--store", store, "--json").stdout)[0]
    game, seat = row["id"], str(row["seats"].index("evil@1"))

    outputs = {
        "tournament": done,
        "replay": arena_here("replay", game, "--store", store, "--plain"),
        "debug": arena("debug", game, str(crasher), "--seat", seat, "--store", store, cwd=open_tmp),
        # one 2-seat game shows the crash's stderr as well as the 4-seat one did beside it (four bots more)
        "check": arena("check", str(crasher), "--rules", "classic", "-r", "max_players=2", "--games", "1",
                       cwd=open_tmp),
    }
    assert "thinking \\x1b]0;owned" in outputs["replay"].stdout  # shown, escaped
    assert "\\x1b[2J" in outputs["check"].stdout + outputs["check"].stderr
    assert "\\x1b[2J" in outputs["debug"].stdout + outputs["debug"].stderr

    db = sqlite3.connect(store)  # the label itself, as an older store could hold it
    label = "evil@1\x1b]0;owned\x07\x1b[2J"
    as_json = json.dumps(label)[1:-1]
    db.execute("UPDATE games SET seats = replace(seats, 'evil@1', ?), result = replace(result, 'evil@1', ?)",
               (as_json, as_json))
    db.execute("UPDATE game_seats SET bot = replace(bot, 'evil@1', ?)", (label,))
    db.commit()
    db.close()
    outputs |= {
        "games": arena_here("games", "--store", store),
        "standings": arena_here("standings", "t", "--store", store),
        "standings --csv": arena_here("standings", "t", "--store", store, "--csv"),
    }
    assert "evil@1\\x1b]0;owned" in outputs["games"].stdout
    assert "evil@1\\x1b]0;owned" in outputs["standings"].stdout
    for what, out in outputs.items():
        assert out.returncode in (0, 1), (what, out.returncode, out.stderr[-2000:])
        assert raw_bytes(out.stdout + out.stderr) == [], (what, raw_bytes(out.stdout + out.stderr))
