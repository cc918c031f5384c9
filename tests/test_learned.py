"""The learned bot and the training example, without the training stack.

* ``arena.ai.learned`` (pure Python) chooses exactly what a numpy forward pass of the same
  weights chooses over the environment's observation and mask, under every rule variant;
* it imports neither numpy nor torch (the sandbox's Python has neither) and refuses
  malformed weights with a clear error;
* the shipped weights are small and play whole games as a reference agent and through the
  protocol without falling back;
* ``examples/rl/wrappers.py`` gives the learner only play decisions, a mask equal to the
  legal actions and small infos;
* with torch and sb3-contrib installed, a tiny training run exports weights the bot plays
  exactly as the trained network does (skipped, and said so, where they are missing: the
  test install stays light).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the rl extra is not installed: pip install '.[rl]'")

from arena.ai.agents import reference_agent  # noqa: E402
from arena.ai.learned import WEIGHTS, LearnedAgent, MLP, load  # noqa: E402
from arena.ai.match import play  # noqa: E402
from arena.engine import preset  # noqa: E402
from arena.envs import PalaceEnv, PalaceSingleEnv, request_mask  # noqa: E402
from arena.ai.actions import N_ACTIONS  # noqa: E402
from arena.ai.features import N_FEATURES  # noqa: E402
from tests.test_ai import VARIANTS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rl"


def numpy_scores(data: dict, x: np.ndarray) -> np.ndarray:
    """The reference forward pass: dense layers, the activation between them."""
    act = np.tanh if data["activation"] == "tanh" else (lambda v: np.maximum(v, 0))
    h = x.astype(np.float64)
    layers = data["layers"]
    for k, layer in enumerate(layers):
        h = np.asarray(layer["w"]) @ h + np.asarray(layer["b"])
        if k < len(layers) - 1:
            h = act(h)
    return h


def numpy_greedy(data: dict, obs: dict) -> int:
    s = numpy_scores(data, obs["observation"])
    s[obs["action_mask"] == 0] = -np.inf
    return int(np.argmax(s))  # ties: the lowest index, as the trainer's greedy policy


def random_weights(seed: int, hidden=(16, 16)) -> dict:
    rng = np.random.default_rng(seed)
    sizes = [N_FEATURES, *hidden, N_ACTIONS]
    return {"format": "palace-mlp-1", "activation": "tanh",
            "layers": [{"w": rng.normal(0, 1 / np.sqrt(i), (o, i)).round(5).tolist(),
                        "b": rng.normal(0, 0.1, o).round(5).tolist()} for i, o in zip(sizes, sizes[1:])]}


@pytest.mark.parametrize("name,rules", VARIANTS[::2], ids=[v[0] for v in VARIANTS[::2]])
def test_the_bot_chooses_what_the_network_chooses(name, rules, tmp_path):
    data = random_weights(len(name))
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    agent = LearnedAgent(path)
    players = max(rules.min_players, min(rules.max_players, 3))
    e = PalaceEnv(rules, players)
    e.reset(seed=11)
    agent.begin({"rules": rules.options(), "players": players, "seat": 0})
    rng = random.Random(11)
    asked = 0
    for _ in e.agent_iter(3000):
        obs, _, term, trunc, info = e.last()
        if term or trunc:
            e.step(None)
            continue
        req = info["request"]
        if len(req["actions"]) > 1 and req["view"]["phase"] == "play":
            mask, ids = request_mask(req["actions"])
            assert agent.choose(req) == ids[numpy_greedy(data, obs)]
            asked += 1
        e.step(int(rng.choice(list(np.flatnonzero(obs["action_mask"])))))
    assert asked > 10 and agent.fallbacks == 0


def test_the_shipped_weights_are_small_and_well_formed():
    assert WEIGHTS.stat().st_size < 2_000_000
    net = load(WEIGHTS)
    assert net.meta["format"] == "palace-mlp-1" and net.meta["setup"] == "table"


def test_malformed_weights_are_refused(tmp_path):
    good = random_weights(0)
    for bad, why in [({**good, "format": "x"}, "format"), ({**good, "activation": "gelu"}, "activation"),
                     ({**good, "layers": good["layers"][1:]}, "inputs"),
                     ({**good, "layers": good["layers"][:-1]}, "actions")]:
        with pytest.raises(ValueError, match=why):
            MLP(bad)


@pytest.mark.parametrize("rules,players", [("classic", 2), ("shithead", 4), ("skip8", 6)])
def test_learned_plays_whole_games_without_falling_back(rules, players):
    agents = [reference_agent("learned")] + [reference_agent("heuristic") for _ in range(players - 1)]
    for seed in range(2):
        g = play(agents, preset(rules), seed)
        assert g.result is not None
    assert agents[0].fallbacks == 0


def test_the_bot_needs_neither_numpy_nor_torch():
    """The sandbox's Python has no numpy: play a request under ``python -S`` (no site-packages)."""
    e = PalaceEnv("classic", 2)
    e.reset(seed=2)
    while e.infos[e.agent_selection]["request"]["view"]["phase"] != "play" or \
            len(e.infos[e.agent_selection]["request"]["actions"]) < 2:
        obs, *_ = e.last()
        e.step(int(np.flatnonzero(obs["action_mask"])[0]))
    req = e.infos[e.agent_selection]["request"]
    start = {"rules": e.rules.options(), "players": 2, "seat": req["view"]["seat"]}
    code = ("import json, sys; from arena.ai.learned import LearnedAgent; a = LearnedAgent(); "
            "a.begin(json.loads(sys.argv[1])); print(a.choose(json.loads(sys.argv[2]))); "
            "assert 'numpy' not in sys.modules and 'torch' not in sys.modules; assert a.fallbacks == 0")
    out = subprocess.run([sys.executable, "-S", "-c", code, json.dumps(start), json.dumps(req)],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) in {a["id"] for a in req["actions"]}


def _wrappers():
    spec = importlib.util.spec_from_file_location("rl_wrappers", EXAMPLE / "wrappers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_training_wrapper_gives_play_decisions_only():
    LearnerEnv = _wrappers().LearnerEnv
    env = LearnerEnv(PalaceSingleEnv("shithead", ["heuristic", "lowest"], seat=None))
    assert env.observation_space.shape == (N_FEATURES,) and np.isfinite(env.observation_space.high).all()
    rng = np.random.default_rng(0)
    for ep in range(3):
        obs, info = env.reset(seed=ep)
        done, steps = False, 0
        while not done:
            inner = env.unwrapped
            assert inner.state.phase == "play" and "request" not in info
            assert env.observation_space.contains(obs)
            assert set(np.flatnonzero(env.action_masks())) == set(np.flatnonzero(inner.action_masks()))
            obs, reward, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            done, steps = term or trunc, steps + 1
        assert steps > 0 and info["place"] >= 1


def test_a_tiny_training_run_exports_what_the_bot_plays(tmp_path):
    """Needs the train extra (torch, sb3-contrib): skipped without it, and the skip says so."""
    pytest.importorskip("torch", reason="the train extra is not installed: pip install '.[train]'")
    pytest.importorskip("sb3_contrib", reason="the train extra is not installed: pip install '.[train]'")
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--steps", "256", "--n-steps", "16",
                          "--batch", "64", "--opponents", "heuristic:1,lowest:1", "--hidden", "16",
                          "--eval-every", "100000", "--eval-deals", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert rows[0].startswith("steps,") and len(rows) >= 3
    data = json.loads((tmp_path / "final.json").read_text())
    assert data["steps"] >= 256 and [len(x["b"]) for x in data["layers"]] == [16, N_ACTIONS]
    import torch
    from sb3_contrib import MaskablePPO
    model = MaskablePPO.load(tmp_path / "model.zip", device="cpu")
    agent = LearnedAgent(tmp_path / "final.json")  # the exported net, played as the bot plays it
    env = PalaceEnv("classic", 2)
    env.reset(seed=5)
    agent.begin({"rules": env.rules.options(), "players": 2, "seat": 0})
    rng, asked = random.Random(5), 0
    for _ in env.agent_iter(3000):
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        req = info["request"]
        if len(req["actions"]) > 1 and req["view"]["phase"] == "play":
            mask, ids = request_mask(req["actions"])
            with torch.no_grad():
                x = torch.as_tensor(obs["observation"][None])
                logits = model.policy.action_net(model.policy.mlp_extractor.forward_actor(x))[0].numpy()
            logits[mask == 0] = -np.inf
            want, got = int(np.argmax(logits)), {v: k for k, v in ids.items()}[agent.choose(req)]
            # the export rounds weights to 5 decimals: a different choice only on a near tie
            assert got == want or abs(logits[got] - logits[want]) < 1e-3
            asked += 1
        env.step(int(rng.choice(list(np.flatnonzero(obs["action_mask"])))))
    assert asked > 10 and agent.fallbacks == 0


def test_a_checkpoint_plays_as_a_bot_from_the_template(tmp_path: Path) -> None:
    """examples/rl/mybot loads a weights file copied beside it (never the package's) and answers
    the handshake as its own bot; without the file it says what to copy."""
    import shutil
    bot = tmp_path / "mybot"
    shutil.copytree(ROOT / "examples" / "rl" / "mybot", bot, ignore=shutil.ignore_patterns("weights.json"))
    hello = json.dumps({"type": "hello", "protocol": 1, "arena": "0.1.0"}) + "\n" + json.dumps({"type": "shutdown"}) + "\n"

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-S", "bot.py"], input=hello, capture_output=True, text=True,
                              timeout=120, cwd=bot, env={**os.environ, "PYTHONPATH": str(ROOT)})
    missing = run()
    assert missing.returncode == 1 and "weights.json is missing: copy a checkpoint" in missing.stderr
    weights = json.loads((ROOT / "arena" / "ai" / "learned.json").read_text())
    weights["layers"][0]["b"] = [0.0] * len(weights["layers"][0]["b"])  # a checkpoint of one's own
    (bot / "weights.json").write_text(json.dumps(weights))
    done = run()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["name"] == "my-learned"


def _selfplay():
    spec = importlib.util.spec_from_file_location("rl_selfplay", EXAMPLE / "selfplay.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_selfplay_opponent_plays_each_game_as_one_checkpoint_of_the_pool(tmp_path):
    """examples/rl/selfplay.py: each game's opponent is one checkpoint drawn from the pool, and it
    chooses exactly what the bundled learned bot chooses from those weights (numpy's forward pass
    against the pure-Python one); a pool keeps only its newest checkpoints."""
    sp = _selfplay()
    paths = []
    for k in (1, 2):
        paths.append(tmp_path / f"weights-{k}.json")
        paths[-1].write_text(json.dumps(random_weights(k)))
    pool = sp.Pool(size=2)
    seen: list[tuple[Path, dict, int]] = []

    class Recording(sp.PoolOpponent):
        def choose(self, req):
            answer = super().choose(req)
            seen.append((self.checkpoint, req, answer))
            return answer

    opponent = Recording(pool, seed=3)
    env = PalaceSingleEnv("classic", [opponent], seat=None)
    obs, _ = env.reset(seed=0)  # an empty pool: random legal play until the first checkpoint
    assert opponent.checkpoint is None
    for path in paths:
        pool.add(path)
    rng = np.random.default_rng(0)
    drawn = set()
    for game in range(8):
        obs, _ = env.reset(seed=game)
        drawn.add(opponent.checkpoint)
        done = False
        while not done:
            obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            done = term or trunc
    assert drawn == set(paths)
    asked = [(path, req, answer) for path, req, answer in seen if path is not None
             and len(req["actions"]) > 1 and req["view"]["phase"] == "play"]
    assert len(asked) > 20
    for path, req, answer in asked:
        reference = LearnedAgent(path)
        reference.begin({"rules": env.rules.options(), "players": 2})
        assert answer == reference.choose(req)
    assert opponent.fallbacks == 0
    newest = sp.Pool(size=1)
    newest.add(paths[0])
    newest.add(paths[1])
    assert newest.paths == [paths[1]]


def test_a_tiny_selfplay_run_trains_against_its_own_checkpoints(tmp_path):
    """Needs the train extra (torch, sb3-contrib): skipped without it, and the skip says so."""
    pytest.importorskip("torch", reason="the train extra is not installed: pip install '.[train]'")
    pytest.importorskip("sb3_contrib", reason="the train extra is not installed: pip install '.[train]'")
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--steps", "512", "--n-steps", "16",
                          "--batch", "64", "--opponents", "self:2,heuristic:1", "--hidden", "16",
                          "--eval-every", "200", "--eval-deals", "2", "--pool", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "the best policy is" in out.stdout
    checkpoints = sorted(tmp_path.glob("weights-*.json"))
    assert len(checkpoints) >= 2  # the evaluations' weights: the pool's later opponents
    assert json.loads((tmp_path / "final.json").read_text())["opponents"] == "self:2,heuristic:1"
