"""`arena match` as a CI gate: the SPRT's verdict is the exit status, --summary writes Markdown,
-j counts games, --trusted-bots reaches the launcher, and the example CI workflow runs commands
that exist.

Most runs use in-process bots (tests/fakes.py); one runs the real bundled bots as processes.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from arena.bots.containment import Containment
from arena.bots.manifest import load_bot
from arena.cli.main import app
from arena.ladder import run_match

from .checks import arena_here
from .fakes import POLICIES, ScriptedConnection, policy_bot, policy_launcher

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


@pytest.fixture
def in_process(monkeypatch):
    """Bots run in-process; the Launcher's arguments are kept for the test to see."""
    import arena.bots.launch
    seen: list[dict] = []

    def launcher(*args, **kwargs):
        seen.append(kwargs)
        return policy_launcher()
    monkeypatch.setattr(arena.bots.launch, "Launcher", launcher)
    return seen


_stores = itertools.count()


def _match(at: Path, *args: str):
    """A match of in-process bots (``-j 1``: with more, worker processes would start the real bundled
    bots and the fixture's launcher would go unused) on a clock no load can run out, dealt from a
    fixed secret in a fresh store under ``at``. With a fresh random secret each run the verdicts were
    luck: `lowest` and `highest` draw about four games in five, and now and then 18 games of draws
    made the SPRT accept H0 where the test expects H1. At 200 turns the draws (two games in three
    of this pair) end sooner than at 600; the verdicts checked are the same."""
    from arena.tournament.seeds import SECRET_BYTES, SECRET_FILE
    where = at / f"store{next(_stores)}"
    where.mkdir(mode=0o700)
    (where / SECRET_FILE).write_bytes(bytes([7]) * SECRET_BYTES)
    (where / SECRET_FILE).chmod(0o600)
    return runner.invoke(app, ["match", "-j", "1", *args, "--rules", "shithead", "--max-turns", "200",
                               "--store", str(where / "games.sqlite"), "--every", "1000", "--move-ms", "60000"])


def test_exit_status_is_the_verdict_and_the_summary_says_it(in_process, tmp_path: Path):
    """The exit status is the SPRT's verdict (0 H1, 1 H0, 3 undecided, 2 a bad call), and the
    ``--summary`` markdown of each decided match says the same as its result."""
    md = tmp_path / "summary.md"
    better = _match(tmp_path, "lowest", "highest", "--sprt", "0,100", "--max-games", "400", "--json", "--summary", str(md))
    assert better.exit_code == 0, better.output
    data = json.loads(better.stdout)
    assert data["status"] == "accept_h1" and data["exit_status"] == 0
    text = md.read_text()
    assert text.startswith("### ✅ lowest@1.0 vs highest@1.0: H1 accepted")
    s = data["sprt"]
    assert f"LLR {s['llr']:+.2f} in [{s['lower']:+.2f}, {s['upper']:+.2f}]" in text
    assert f"H0 Elo 0, H1 Elo 100" in text
    assert f"| LOS | {100 * data['los']:.1f}% |" in text
    assert f"| games | {data['games']} ({data['deals']} deals): +{data['wins']} ={data['draws']} -{data['losses']} |" in text
    assert f"| Elo (A − B, from deal pairs, 95%) | {data['elo_text']} |" in text
    assert "| LL | LD | DD/WL | WD | WW |" in text
    assert "| " + " | ".join(str(v) for v in data["pairs"].values()) + " |" in text

    # the worse bot first, against a big Elo step: H0 in 4 games (at 0,100 it took 18, each a game
    # to the turn cap; the verdict is what is checked, not the step)
    worse = _match(tmp_path, "highest", "lowest", "--sprt", "0,400", "--max-games", "400", "--summary", str(md))
    assert worse.exit_code == 1, worse.output
    assert "H0 accepted: highest@1.0 - lowest@1.0" in worse.stdout
    assert md.read_text().startswith("### ❌ highest@1.0 vs lowest@1.0: H0 accepted")

    undecided = _match(tmp_path, "lowest", "highest", "--sprt", "0,100", "--max-games", "2")
    assert undecided.exit_code == 3, undecided.output
    assert "no SPRT decision within 2 games" in undecided.stdout

    plain = _match(tmp_path, "lowest", "highest", "--max-games", "4")
    assert plain.exit_code == 0 and "4 games played" in plain.stdout

    bad = _match(tmp_path, "lowest", "highest", "--sprt", "10,0")
    assert bad.exit_code == 2 and "elo1 must be above elo0" in bad.output
    missing = _match(tmp_path, "lowest", str(tmp_path / "nowhere"), "--sprt", "0,10")
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    unwritable = _match(tmp_path, "lowest", "highest", "--max-games", "2", "--summary", str(tmp_path / "no" / "dir.md"))
    assert unwritable.exit_code == 2 and "--summary: cannot write" in unwritable.output
    # a launcher for each match that got as far as its bots: all but the bad call and the missing bot
    assert len(in_process) == 5, "the matches ran on worker processes, not the in-process bots"


def test_trusted_bots_sandbox_and_gvisor_reach_the_launcher(in_process, tmp_path: Path):
    # -j 1: one game at a time plays in this process, where the fixture sees the Launcher made
    # (with more, worker processes get the same flags through the match's BotSetup)
    assert _match(tmp_path, "lowest", "highest", "--max-games", "2", "-j", "1", "--trusted-bots").exit_code == 0
    assert _match(tmp_path, "lowest", "highest", "--max-games", "2", "-j", "1", "--no-sandbox").exit_code == 0
    assert _match(tmp_path, "lowest", "highest", "--max-games", "2", "-j", "1", "--gvisor",
                  "--system", "javascript").exit_code == 0
    assert in_process == [{"containment": Containment.TRUSTED, "system": ()},
                          {"containment": Containment.NAMESPACES, "system": ()},
                          {"containment": Containment.GVISOR, "system": ("javascript",)}]
    refused = _match(tmp_path, "lowest", "highest", "--max-games", "2", "-j", "1", "--gvisor", "--trusted-bots")
    assert refused.exit_code == 2 and refused.output.count("error:") == 1 and "contradict" in refused.output
    assert "Traceback" not in refused.output and len(in_process) == 3  # refused before any bot started


def _overlap_launcher(state: dict, j: int):
    """In-process bots that count the games in progress (seat 0's bot, from its start to its end).
    A game's start waits (on its lane's thread) until ``j`` games were once in progress at the
    same time, so the count does not depend on how the threads happen to be scheduled; an
    executor that cannot reach ``j`` makes it wait out the timeout and fail."""
    ready = threading.Condition()

    def launch(spec):
        bot = ScriptedConnection(policy_bot(POLICIES[spec.name](), spec.name))
        original, seat = bot.send_line, [None]

        def send_line(text: str, *, timeout: float = 10.0) -> None:
            msg = json.loads(text)
            if msg["type"] == "start":
                seat[0] = msg["seat"]
                if seat[0] == 0:
                    with ready:
                        state["now"] += 1
                        state["most"] = max(state["most"], state["now"])
                        ready.notify_all()
                        ready.wait_for(lambda: state["most"] >= j, timeout=30)
            elif msg["type"] == "end" and seat[0] == 0:
                with ready:
                    state["now"] -= 1
            original(text, timeout=timeout)
        bot.send_line = send_line  # type: ignore[method-assign]
        return bot
    return launch


@pytest.mark.parametrize("j", [1, 3])
def test_concurrency_counts_games(j: int):
    """(100 turns a game: this pair's draws run to the cap, and the claim is about games at a time.)"""
    from arena.engine import rules_from
    state = {"now": 0, "most": 0}
    p, _ = trio.run(lambda: run_match(load_bot("lowest"), load_bot("highest"), rules_from("shithead", {}),
                                      max_games=12, max_turns=100, concurrency=j,
                                      launcher=_overlap_launcher(state, j)))
    assert p.games == 12 and state["now"] == 0
    assert state["most"] == j


# --------------------------------------------------------------------------- end to end

def test_gate_end_to_end_with_real_bots(tmp_path: Path):
    """The real command with the bundled bots as processes: exit status and the summary file. The
    worse bot first against a big Elo step, so the SPRT decides in a few games (most of this pair's
    games run to the turn cap). Its deals are fresh each run: at most 8 games of at most 200 turns
    keep its length from hanging on them; every verdict is accepted, the exit status must match it)."""
    md = tmp_path / "gate.md"
    done = subprocess.run([sys.executable, "-m", "arena.cli", "match", "highest", "lowest", "--rules", "shithead",
                           "--sprt", "0,400", "--max-games", "8", "--max-turns", "200", "--no-store",
                           "--summary", str(md), "-j", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    verdicts = {"H1 accepted": 0, "H0 accepted": 1, "no SPRT decision": 3}  # fresh deals each run
    said = [v for v in verdicts if v in done.stdout]
    assert len(said) == 1 and done.returncode == verdicts[said[0]], done.stdout + done.stderr
    assert f"summary written to {md}" in done.stdout
    assert "| SPRT (pentanomial) | LLR " in md.read_text()
    # (exit status 3, undecided, as a shell sees it: test_example_workflow_gate_steps_run's gate step;
    # in this process for every verdict: test_exit_status_is_the_verdict_and_the_summary_says_it)


def _workflow_commands() -> list[list[str]]:
    """Every `arena ...` command line in the example CI workflows, with the workflow's env filled in."""
    yaml = pytest.importorskip("yaml")
    found = []
    for path in sorted((REPO / "examples" / "ci").glob("*.yml")):
        flow = yaml.safe_load(path.read_text())
        env = {k: str(v) for k, v in flow.get("env", {}).items()}
        for job in flow["jobs"].values():
            for step in job["steps"]:
                text = re.sub(r"\\\n\s*", " ", step.get("run", ""))
                text = re.sub(r"\$\{\{[^}]*\}\}", "x", text)
                text = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), text)
                found += [shlex.split(line.strip()) for line in text.splitlines() if line.strip().startswith("arena ")]
    return found


def test_example_workflow_uses_real_options():
    """The example CI workflow's arena commands parse with this arena (no renamed or missing option)."""
    from typer.main import get_command
    commands = _workflow_commands()
    assert any(c[1] == "match" and "--sprt" in c and "--summary" in c for c in commands)
    assert any(c[1] == "check" for c in commands)
    cli = get_command(app)
    for argv in commands:
        sub = cli.get_command(None, argv[1])  # type: ignore[attr-defined]
        assert sub is not None, argv
        sub.make_context(argv[1], [w for w in argv[2:] if not w.startswith("${")])  # bash arrays: set above


def test_example_workflow_gate_steps_run(open_tmp: Path):
    """The workflow's own shell steps (label the baseline, the SPRT gate) on the Python starter bot
    against itself: the gate runs, writes the summary and records exit status 3 (undecided)."""
    import os
    import shutil
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load((REPO / "examples" / "ci" / "github-actions.yml").read_text())
    steps = {s.get("name"): s for s in flow["jobs"]["gate"]["steps"]}
    env = {**os.environ, **{k: str(v) for k, v in flow["env"].items()}, "MAX_GAMES": "4",
           "GITHUB_OUTPUT": str(open_tmp / "out"), "PYTHONPATH": str(REPO)}
    for side in ("new", "old"):
        shutil.copytree(REPO / "examples" / "bots" / "python", open_tmp / side / env["BOT_DIR"])
    shim = open_tmp / "bin" / "arena"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m arena.cli \"$@\"\n")
    shim.chmod(0o755)
    env["PATH"] = f"{shim.parent}:{env['PATH']}"
    assert arena_here("deals", "make", str(open_tmp / "new" / "deals.json"), "-n", "3", "--rules",
                      env["RULES"]).returncode == 0  # the suite the gate reads (not a workflow step)
    env["DEALS"] = "deals.json"
    for name in ("Label the baseline", "SPRT gate"):
        done = subprocess.run(["bash", "-e", "-c", steps[name]["run"]], cwd=open_tmp, env=env,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
    assert 'version = "base"' in (open_tmp / "old" / "bot" / "bot.toml").read_text()
    assert "starter-python@1.0.0 vs starter-python@base" in done.stdout
    assert "from the suite new/deals.json (3 deals)" in done.stdout
    assert (open_tmp / "out").read_text() == "status=3\n"
    assert (open_tmp / "summary.md").read_text().startswith("### ⚠️ starter-python@1.0.0 vs starter-python@base")
