"""arena.envs with bot programs as opponents: real processes under the arena's launcher play
the same games as the same bot in process; a bot that times out, crashes or fails its
handshake forfeits the game instead of hanging or crashing the environment, and is started
afresh for the next game; closing the environment leaves no process behind."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the rl extra is not installed: pip install '.[rl]'")

from arena.envs import PalaceSingleEnv  # noqa: E402
from arena.envs.programs import Program, is_program  # noqa: E402
from arena.referee import TimeControl  # noqa: E402
from tests.checks import children  # noqa: E402

# quick faults: a silent bot is out after 0.3 s, a dead one at once
CLOCK = TimeControl(move_ms=300, bank_ms=0, handshake_ms=5000)

BOT = """\
import sys, time
from arena.botkit import serve
MODE = {mode!r}
if MODE == "no_hello":
    sys.exit("cannot load my model")

def choose(req):
    if MODE == "sleep":
        time.sleep(60)
    if MODE == "crash":
        raise SystemExit("boom in the bot")
    return req["actions"][0]["id"]

serve(choose, "bad-" + MODE, "1.0")
"""


@pytest.fixture
def bad_bot():
    """Makes a misbehaving bot in a directory its private uid may read (bots run as another
    user when the referee is root)."""
    made: list[Path] = []

    def make(mode: str) -> Path:
        d = Path(tempfile.mkdtemp(prefix="arena-test-envbot-"))
        d.chmod(0o755)
        (d / "bot.py").write_text(BOT.format(mode=mode))
        (d / "bot.toml").write_text(f'name = "bad-{mode}"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
        for f in d.iterdir():
            f.chmod(0o644)
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def play_out(env, seed: int, first: bool = True, rng=None):
    """One game; the learner takes the first legal index (deterministic) or a random one."""
    obs, info = env.reset(seed=seed)
    reward, done = 0.0, env.state.result is not None
    while not done:
        legal = np.flatnonzero(obs["action_mask"])
        obs, reward, term, trunc, info = env.step(int(legal[0] if first else rng.choice(legal)))
        done = term or trunc
    return reward, info


def test_program_plays_the_same_games_as_the_bot_in_process():
    """`lowest` as a contained process and in process: the same deals, the same moves."""
    before = children()
    proc = PalaceSingleEnv("classic", [Program("lowest")], seat=None)
    local = PalaceSingleEnv("classic", ["lowest"], seat=None)
    try:
        for seed in range(3):
            r1, i1 = play_out(proc, seed)
            r2, i2 = play_out(local, seed)
            assert [s.get("act") for s in proc.core.record.steps] == [s.get("act") for s in local.core.record.steps]
            assert (r1, i1["place"]) == (r2, i2["place"])
            assert "faults" not in i1
            assert proc.core.record.decisions[1 - proc.seat] > 0  # the process answered requests
        assert len(children() - before) == 1, "one process serves every game"
    finally:
        proc.close()
    assert children() - before == set(), "a bot process outlived env.close()"


@pytest.mark.parametrize("mode,reason", [("sleep", "timeout"), ("crash", "crash")])
def test_misbehaving_program_forfeits_and_the_env_goes_on(bad_bot, mode, reason):
    before = children()
    env = PalaceSingleEnv("classic", [bad_bot(mode)], seat=None, clock=CLOCK)
    rng = np.random.default_rng(1)
    try:
        for seed in range(3):  # every game restarts the bot, which faults again
            reward, info = play_out(env, seed, first=False, rng=rng)
            assert [f["reason"] for f in info["faults"]] == [reason]
            assert info["place"] == 1 and reward == 1.0  # two players: the learner wins by forfeit
            assert env.core.record.result["forfeits"] == {str(1 - env.seat): reason}
        if mode == "crash":
            assert any("boom in the bot" in line for step in env.core.record.steps for line in step.get("stderr", ()))
    finally:
        env.close()
    assert children() - before == set(), "a bot process outlived env.close()"


def test_program_that_never_plays_is_an_error_not_a_hang(bad_bot):
    """A bot that dies before its handshake forfeits every deal before the learner can move:
    reset says so instead of handing out finished games or retrying forever."""
    before = children()
    env = PalaceSingleEnv("classic", [bad_bot("no_hello")], clock=CLOCK)
    try:
        with pytest.raises(RuntimeError, match="forfeited 10 games in a row.*handshake.*cannot load my model"):
            env.reset(seed=0)
    finally:
        env.close()
    assert children() - before == set()


def test_program_next_to_in_process_bots_in_a_play_on_game(bad_bot):
    """Shithead, four seats: the faulting program forfeits and the others play the game out."""
    env = PalaceSingleEnv("shithead", ["lowest", bad_bot("crash"), "heuristic"], seat=0, clock=CLOCK)
    try:
        reward, info = play_out(env, 3, first=False, rng=np.random.default_rng(3))
        assert [f["seat"] for f in info["faults"]] == [2]
        assert env.state.result.reason != "forfeit" and len(env.state.result.order) >= 3
        assert -1.0 <= reward <= 1.0
    finally:
        env.close()


def test_reset_mid_game_restarts_the_program():
    before = children()
    env = PalaceSingleEnv("classic", [Program("lowest")], seat=0)
    try:
        obs, _ = env.reset(seed=1)
        obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))  # leave the game unfinished
        first = children() - before
        reward, info = play_out(env, 2)  # a fresh process plays the next game from its start
        assert "faults" not in info and children() - before != first
    finally:
        env.close()
    assert children() - before == set()


def test_which_opponents_are_programs(tmp_path):
    assert not is_program("lowest") and not is_program("ismcts")
    assert is_program(Program("lowest")) and is_program(tmp_path) and is_program("bots/lowest")
    assert is_program("my-bot/bot.toml")
