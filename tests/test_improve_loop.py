"""docs/IMPROVE.md end to end: from the Python starter and games it lost, find the decision with
`arena debug`, change the bot (the page's own code), prove the change with `arena match --sprt` on
a deal suite cut from its lost games, and see its win_prob in the replay and in standings.

The commands run in this process (tests.checks.arena_here); the bots they start are real processes
under the default containment. Fewer games than the page.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.checks import Ran, arena_here, fixed_secret


REPO = Path(__file__).resolve().parent.parent


def _v2_code() -> str:
    """The page's new `choose` (the python block after the improve:v2 marker)."""
    text = (REPO / "docs" / "IMPROVE.md").read_text()
    m = re.search(r"<!-- improve:v2 -->\s*```python\n(.*?)```", text, re.S)
    assert m, "docs/IMPROVE.md lost its improve:v2 code block"
    return m.group(1)


def _arena(work: Path, *args: str) -> Ran:
    """The page's commands in this process (what they print, store and exit with); the bots they
    start are real processes under the default containment. A match plays its games here too
    (-j 1: two processes per bot serve it, and no referee worker process starts; a match on
    worker processes is tests/test_ladder.py's test_a_match_plays_the_same_games_on_worker_processes)."""
    return arena_here(*args, *(["-j", "1"] if args[0] == "match" else []), cwd=work)


def _chmod(d: Path) -> None:
    for p in (d, *d.rglob("*")):
        p.chmod(0o755)


def test_the_improve_loop(open_tmp: Path):
    work = open_tmp
    fixed_secret(work / "arena-data")  # the same deals every run: what is lost, and the SPRT's games, are fixed
    # 1. the starter as it is: it already seeds from each game's start.seed (the page's first step)
    bot = work / "my-bot"
    shutil.copytree(REPO / "examples" / "bots" / "python", bot)
    source = (bot / "bot.py").read_text()
    assert 'seed = msg.get("seed", SEED)\n    RNG.seed(seed)' in source
    _chmod(bot)

    # 2. lose some games: 52 (26 deals, each lost at least once on this secret) leave the SPRT below
    # room to decide (it accepts H1 after 23 of the suite's deal pairs)
    lost = _arena(work, "match", "my-bot", "heuristic", "--max-games", "52")
    assert lost.returncode == 0, lost.stdout + lost.stderr
    games = json.loads(_arena(work, "games", "--bot", "starter-python@1.0.0", "--json", "--limit", "100").stdout)
    lost_games = [g for g in games if g["seats"][g["result"]["order"][0][0]] != "starter-python@1.0.0"]
    assert lost_games
    game = lost_games[0]
    seat = game["seats"].index("starter-python@1.0.0")

    # 3. the same build replays the lost game exactly; the changed one diverges, and says where
    same = _arena(work, "debug", game["id"], "my-bot", "--seat", str(seat))
    assert same.returncode == 0 and "no divergence" in same.stdout, same.stdout + same.stderr
    new = work / "my-bot-2"
    shutil.copytree(bot, new)
    (new / "bot.toml").write_text((new / "bot.toml").read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
    source = (new / "bot.py").read_text().replace('BOT_VERSION = "1.0.0"', 'BOT_VERSION = "1.1.0"')
    start, end = source.index("def choose(req: Request) -> int:"), source.index("def on_game_start")
    (new / "bot.py").write_text(source[:start] + _v2_code() + "\n\n" + source[end:])
    _chmod(new)
    diverged = _arena(work, "debug", game["id"], "my-bot-2", "--seat", str(seat), "--json")
    assert diverged.returncode == 1, diverged.stdout + diverged.stderr
    where = json.loads(diverged.stdout)["divergence"]
    assert where["new"]["action"] != where["recorded"]["action"] and "win_prob" in where["new"]["info"]

    # 4. a suite of the lost deals; the new version proves itself on it
    cut = _arena(work, "deals", "from-games", "lost.json", "--lost-by", "starter-python@1.0.0")
    assert cut.returncode == 0, cut.stdout + cut.stderr
    proved = _arena(work, "match", "my-bot-2", "my-bot", "--suite", "lost.json", "--sprt", "0,50",
                    "--summary", "summary.md")
    assert proved.returncode == 0, proved.stdout + proved.stderr
    assert "H1 accepted: starter-python@1.1.0 - starter-python@1.0.0" in proved.stdout
    assert "per deal of the suite" in proved.stdout
    assert (work / "summary.md").read_text().startswith("### ✅ starter-python@1.1.0 vs starter-python@1.0.0")

    # 4b. the same games cut at decision 20: a match starts each one there, and its games replay
    cut = _arena(work, "deals", "from-games", "positions.json", "--lost-by", "starter-python@1.0.0",
                 "--position-at", "20", "--limit", "5")
    assert cut.returncode == 0 and "positions (each before its game's decision 20)" in cut.stdout, cut.stderr
    from_there = _arena(work, "match", "heuristic", "my-bot", "--suite", "positions.json", "--json")
    assert from_there.returncode == 0, from_there.stderr
    at = json.loads(from_there.stdout)
    assert at["games"] == 2 * at["deals"] > 0
    first = _arena(work, "games", "--tournament", at["tournament"], "--json", "--limit", "1")
    one = json.loads(first.stdout)[0]["id"]
    assert _arena(work, "replay", one, "--verify").returncode == 0
    asked = _arena(work, "replay", one, "--as", "0", "--plain").stdout
    assert asked.startswith("Decision 1/") and " · turn 0 " not in asked.splitlines()[0]

    # 5. its win_prob in the replay, the HTML replay's chart data, and the calibration column
    played = _arena(work, "play", "my-bot-2", "heuristic", "--seed", "3", "-q")
    assert played.returncode == 0, played.stdout + played.stderr
    new_game = played.stdout.split("logged as ")[1].split()[0]
    shown = _arena(work, "replay", new_game, "--plain")
    assert "thinking: win " in shown.stdout and "plays offered" in shown.stdout
    assert _arena(work, "replay", new_game, "--html", "g.html").returncode == 0
    assert '"win_prob":' in (work / "g.html").read_text()
    tid = proved.stdout.split("arena games --tournament ")[1].split()[0].strip("'")
    rows = json.loads(_arena(work, "standings", tid, "--calibration", "--json").stdout)
    brier = {r["bot"]: r["calibration"] for r in rows}
    assert brier["starter-python@1.1.0"]["decisions"] > 0 and brier["starter-python@1.0.0"] is None
