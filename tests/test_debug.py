"""`arena debug GAME --seat N BOT`: a seat's recorded requests fed to another build, end to end.

Real bot processes under the default containment: a game is recorded with one build, then
replayed into the same build (no divergence), a changed build (diverges where the change is,
with its stderr), a crashing build, and from a later decision (--from).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.checks import Ran, arena_here

# A bot that takes action 0, except at its NTH request (counted from its start message), where it
# takes the last action offered; CRASH makes it die there instead. It logs each request to stderr.
BOT = '''
import json, os, sys
NTH = int(os.environ.get("NTH", "0"))
CRASH = os.environ.get("CRASH") == "1"
seen = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "counter", "version": os.environ["VERSION"]}), flush=True)
    elif msg["type"] == "start":
        seen = 0
    elif msg["type"] == "request":
        seen += 1
        print(f"request {msg['id']}: {len(msg['actions'])} actions", file=sys.stderr, flush=True)
        if seen == NTH and CRASH:
            raise SystemExit("giving up on purpose")
        choice = len(msg["actions"]) - 1 if seen == NTH else 0
        print(json.dumps({"type": "action", "request": msg["id"], "action": choice,
                          "info": {"win_prob": 0.5, "text": f"pick {choice}"}}), flush=True)
    elif msg["type"] == "shutdown":
        break
'''


def _bot(root: Path, version: str, **env: str) -> Path:
    d = root / f"counter-{version}"
    d.mkdir()
    (d / "bot.py").write_text(BOT)
    lines = "".join(f'{k} = "{v}"\n' for k, v in {"VERSION": version, **env}.items())
    (d / "bot.toml").write_text(f'name = "counter"\nversion = "{version}"\ncommand = ["python3", "bot.py"]\n\n[env]\n{lines}')
    for p in (d, d / "bot.py", d / "bot.toml"):
        p.chmod(0o755)
    return d


@pytest.fixture(scope="module")
def recorded():
    """A store with one game of counter v1 (always action 0) against lowest, and the bots."""
    root = Path(tempfile.mkdtemp(prefix="debug-e2e-"))
    root.chmod(0o755)
    bots = {"v1": _bot(root, "1"), "v2": _bot(root, "2", NTH="5"), "v3": _bot(root, "3", NTH="3", CRASH="1")}
    store = root / "s.sqlite"
    played = _arena("play", str(bots["v1"]), "lowest", "--seed", "11", "-q", "--store", str(store), cwd=root)
    assert played.returncode == 0, played.stdout + played.stderr
    game = played.stdout.split("logged as ")[1].split()[0]
    yield root, store, game, bots
    shutil.rmtree(root, ignore_errors=True)


def _arena(*args: str, cwd: Path) -> Ran:
    """``arena ARGS`` in this process: what debug prints and exits with is not about the process."""
    return arena_here(*args, cwd=cwd)


def _debug(recorded, bot: str, *extra: str) -> Ran:
    root, store, game, bots = recorded
    return _arena("debug", game, str(bots.get(bot, bot)), "--seat", "0", "--store", str(store), *extra, cwd=root)


def _decisions(recorded) -> int:
    root, store, game, _ = recorded
    shown = _arena("replay", game, "--as", "0", "--json", "--store", str(store), cwd=root)
    return sum(1 for line in shown.stdout.splitlines() if json.loads(line)["type"] == "request")


def test_the_same_build_does_not_diverge(recorded):
    done = _debug(recorded, "v1")
    n = _decisions(recorded)
    assert n >= 12
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no divergence: counter@1 chose as recorded at all {n} decisions 1..{n} of seat 0" in done.stdout


def test_a_changed_build_stops_where_it_chooses_differently(recorded):
    done = _debug(recorded, "v2")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "diverged at decision 5 of" in out and "after 4 decision(s) chosen as recorded" in out
    assert "Decision 5/" in out and "Actions offered:" in out  # the view of that decision
    assert "recorded (counter): [0] " in out
    assert "thinking: win 50%" in out and '"pick ' in out  # what the new build said it was thinking
    assert "stderr of counter@2 up to here (5 line(s)):" in out
    assert out.count("\n  stderr| request ") == 5  # the recorded bot's own lines are marked "recorded stderr|"

    data = json.loads(_debug(recorded, "v2", "--json").stdout)
    d = data["divergence"]
    assert data["diverged"] and data["agreed"] == 4 and d["decision"] == 5
    assert d["recorded"]["action"] == 0 and d["new"]["action"] > 0 and d["new"]["info"]["win_prob"] == 0.5
    assert len(data["stderr"]) == 5


def test_from_starts_later(recorded):
    """From decision 3 the new build's 5th request is the seat's 7th decision."""
    done = _debug(recorded, "v2", "--from", "3", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["from"] == 3 and data["agreed"] == 4 and data["divergence"]["decision"] == 7
    same = _debug(recorded, "v1", "--from", "9", "--json")
    data = json.loads(same.stdout)
    assert same.returncode == 0 and data["from"] == 9 and data["agreed"] == data["decisions"] - 8


def test_a_crashing_build_is_a_divergence_with_its_last_words(recorded):
    done = _debug(recorded, "v3")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "diverged at decision 3 of" in done.stdout
    assert "counter@3: no valid answer: crash" in done.stdout
    assert "giving up on purpose" in done.stdout


def test_bad_arguments_are_errors(recorded):
    root, store, game, bots = recorded
    n = _decisions(recorded)
    for args, needle in ((["--seat", "5"], "this game has seats 0..1"),
                         (["--seat", "0", "--from", str(n + 1)], f"made decisions 1..{n}")):
        done = _arena("debug", game, str(bots["v1"]), *args, "--store", str(store), cwd=root)
        assert done.returncode == 2 and needle in done.stderr and "Traceback" not in done.stderr
    missing = _arena("debug", "no-such-game", str(bots["v1"]), "--seat", "0", "--store", str(store), cwd=root)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_continue_plays_the_game_out_live(recorded):
    """--continue: from the divergence on, the new build and a fresh process of the recorded
    opponent (lowest, bundled) play the game to its end."""
    done = _debug(recorded, "v2", "--continue", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    live = data["continued"]
    assert data["divergence"]["decision"] == 5 and live is not None
    assert live["result"]["complete"] and live["faults"] == [] and live["steps"] > 10
    shown = _debug(recorded, "v2", "--continue")
    assert "played on from decision 5, counter@2 in seat 0 against the recorded opponents" in shown.stdout
    assert "(recorded: " in shown.stdout
    same = _debug(recorded, "v1", "--continue")  # nothing to play on from: no divergence
    assert same.returncode == 0 and "played on" not in same.stdout


def test_gvisor_is_refused_with_runscs_reason_where_it_cannot_run(recorded, tmp_path):
    """`arena debug --gvisor`, like check, play and match: where runsc cannot start its sandbox,
    one error line with runsc's words and nothing run, never the bot under bubblewrap instead."""
    import os
    root, store, game, bots = recorded
    fake = tmp_path / "bin" / "runsc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'running container: creating container: cannot create sandbox: "
                    "operation not permitted' >&2\nexit 128\n")
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    done = arena_here("debug", game, str(bots["v1"]), "--seat", "0", "--store", str(store), "--gvisor", cwd=root,
                      env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "gVisor" in errors[0], done.stderr
    assert "operation not permitted" in errors[0] or "root referee" in errors[0]
    assert "no divergence" not in done.stdout and "Traceback" not in done.stderr
