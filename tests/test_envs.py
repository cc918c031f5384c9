"""arena.envs: the PettingZoo AEC environment passes PettingZoo's API, seed and render tests
under every preset at 2 and 4 seats and under option mixes (its parallel test does not apply:
the game is turn-based, ``is_parallelizable`` is False); the one-seat Gymnasium env passes
Gymnasium's ``check_env`` under each illegal-action policy that lets it; observations stay in
their bounded space; masks are exactly the legal actions; the fixed action space round-trips
every request action."""

from __future__ import annotations

import random
import subprocess
import sys
import warnings

import numpy as np
import pytest

pettingzoo = pytest.importorskip("pettingzoo", reason="the rl extra is not installed: pip install '.[rl]'")
gymnasium = pytest.importorskip("gymnasium", reason="the rl extra is not installed: pip install '.[rl]'")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from pettingzoo.test import api_test, render_test, seed_test  # noqa: E402

from arena.engine import PRESETS, legal_actions  # noqa: E402
from arena.engine.views import action_json  # noqa: E402
from arena.envs import N_ACTIONS, OBS_HIGH, PalaceEnv, PalaceSingleEnv, env, json_index, request_mask  # noqa: E402
from arena.ai.actions import engine_index  # noqa: E402
from tests.test_ai import VARIANTS  # noqa: E402

TABLES = [("classic", 2, None), ("shithead", 4, None), ("skip8", 6, None), ("smeghead", 5, None),
          ("powers", 3, {"jokers": 1, "joker": "give_pile"}), ("classic", 2, {"harsh_face_up": True}),
          ("shithead", 2, {"stacking": True, "match_count": True})]


# PettingZoo's api_test warns about a dict observation ({"observation", "action_mask"}) unless the
# environment is on its own list of classic games (chess_v6, connect_four_v3, ...), which use that
# same layout; these two warnings, and no other, are the price of the action mask (docs/BOTS.md).
MASK_LAYOUT_WARNINGS = {"Observation is not a NumPy array",
                        "Observation space for each agent probably should be gymnasium.spaces.box or "
                        "gymnasium.spaces.discrete"}


def checked_api_test(environment, num_cycles: int) -> None:
    """api_test with every warning caught: any but the two of the masked dict layout fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(environment, num_cycles=num_cycles)
    assert {str(w.message) for w in caught} <= MASK_LAYOUT_WARNINGS, [str(w.message) for w in caught]


@pytest.mark.parametrize("rules,players,options", TABLES)
def test_pettingzoo_api(rules, players, options):
    checked_api_test(PalaceEnv(rules, players, options), num_cycles=200)


@pytest.mark.parametrize("players", [2, 4])
@pytest.mark.parametrize("rules", sorted(PRESETS))
def test_pettingzoo_api_and_seed_every_preset(rules, players):
    checked_api_test(PalaceEnv(rules, players), num_cycles=200)
    seed_test(lambda: PalaceEnv(rules, players), num_cycles=200)


def test_pettingzoo_render():
    render_test(lambda render_mode=None: PalaceEnv("shithead", 4, render_mode=render_mode))


def _strict_check_env(e) -> None:
    """Gymnasium's checker with its warnings as errors (an unbounded Box warns), except the one
    about render modes, which it can test only on an env made by ``gymnasium.make``."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*alternative render modes.*")
        check_env(e)


@pytest.mark.parametrize("illegal", [None, "penalize", "random_legal"])
@pytest.mark.parametrize("rules,opponents", [("classic", ["random"]), ("shithead", ["lowest", "heuristic", "random"])])
def test_gymnasium_check_env(rules, opponents, illegal):
    kw = {} if illegal is None else {"illegal": illegal}
    _strict_check_env(PalaceSingleEnv(rules, opponents, **kw))


def test_check_env_fails_when_illegal_actions_raise():
    """Why "raise" is not the default: the checker steps with unmasked random actions."""
    with pytest.raises(ValueError, match="not legal"):
        check_env(PalaceSingleEnv("classic", ["random"], illegal="raise"))
    with pytest.raises(ValueError, match="illegal must be one of"):
        PalaceSingleEnv("classic", ["random"], illegal="ignore")


def test_an_illegal_action_forfeits_under_penalize():
    g = PalaceSingleEnv("shithead", ["random", "random", "random"], seat=2)
    obs, _ = g.reset(seed=4)
    bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    obs, reward, term, trunc, info = g.step(bad)
    assert term and not trunc and info["illegal"] == bad
    assert reward == -1.0 and info["place"] == 4, "the learner forfeits into last place"
    assert [f["seat"] for f in info["faults"]] == [2] and info["faults"][0]["reason"] == "illegal_action"
    assert g.state.result is not None and not g.action_masks().any() and obs["action_mask"].sum() == 0
    with pytest.raises(RuntimeError, match="reset"):
        g.step(bad)


def test_random_legal_plays_a_legal_action_from_the_seeded_generator():
    def run(seed):
        g = PalaceSingleEnv("classic", ["heuristic"], illegal="random_legal")
        obs, info = g.reset(seed=seed)
        played, turns = [], 0
        while True:
            legal = set(np.flatnonzero(g.action_masks()))
            assert legal == set(np.flatnonzero(obs["action_mask"]))
            bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
            before = len(g.core.record.steps)
            obs, reward, term, trunc, info = g.step(bad)
            assert info["illegal"] == bad and info["played"] in legal
            assert len(g.core.record.steps) > before, "the game moved on"
            played.append(info["played"])
            turns += 1
            if term or trunc or turns > 300:
                return played
    assert run(7) == run(7)
    assert len(run(7)) > 3


def test_observations_stay_in_their_bounds():
    space = PalaceEnv("classic", 2).observation_space("seat_0")["observation"]
    assert np.isfinite(space.high).all() and (space.low == 0).all() and (space.high == OBS_HIGH).all()


def test_tables_beyond_the_spaces_are_refused():
    from arena.engine.rules import rules_from
    big = rules_from("classic", {"decks": 4})
    with pytest.raises(ValueError, match="at most 3"):
        PalaceEnv(big, 2)
    with pytest.raises(ValueError, match="at most 3"):
        PalaceSingleEnv(big, ["random"])


def test_wrapped_env_passes_too():
    checked_api_test(env(rules="shithead", players=3), num_cycles=100)


@pytest.mark.parametrize("name,rules", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_masks_are_the_legal_actions_and_games_finish(name, rules):
    players = max(rules.min_players, min(rules.max_players, 6, 2 + len(name) % 4))
    e = PalaceEnv(rules, players)
    e.reset(seed=len(name))
    rng = random.Random(1)
    for agent in e.agent_iter(20_000):
        obs, reward, term, trunc, info = e.last()
        if term or trunc:
            e.step(None)
            continue
        mask = obs["action_mask"]
        legal = legal_actions(e.state)
        assert mask.sum() == len(legal), "two legal actions share an index"
        assert {engine_index(a, k) for k, a in enumerate(legal)} == set(np.flatnonzero(mask))
        req = info["request"]
        assert [json_index(a, k) for k, a in enumerate(req["actions"])] == \
            [engine_index(a, k) for k, a in enumerate(legal)]
        assert req["view"]["seat"] == e.state.to_move
        e.step(int(rng.choice(list(np.flatnonzero(mask)))))
    assert not e.agents, "the game did not finish"
    assert e.state.result is not None


def test_illegal_action_is_refused():
    e = PalaceEnv("classic", 2)
    e.reset(seed=3)
    obs, *_ = e.last()
    bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.raises(ValueError, match="not legal"):
        e.step(bad)


def test_rewards_follow_places():
    e = PalaceEnv("shithead", 4, protocol=False)
    e.reset(seed=5)
    rng = random.Random(0)
    total = {a: 0.0 for a in e.possible_agents}
    for agent in e.agent_iter():
        obs, reward, term, trunc, _ = e.last()
        total[agent] += reward
        e.step(None if term or trunc else int(rng.choice(list(np.flatnonzero(obs["action_mask"])))))
    res = e.state.result
    if not res.draw:
        first, last = res.order[0][0], res.order[-1][0]
        assert total[f"seat_{first}"] == 1.0 and total[f"seat_{last}"] == -1.0
    assert abs(sum(total.values())) < 1e-9  # play-on places are symmetric around zero


@pytest.mark.parametrize("opponents", [["random"], ["heuristic", "lowest", "heuristic-setup"]])
def test_single_agent_env_plays_against_bots(opponents):
    g = PalaceSingleEnv("shithead" if len(opponents) > 1 else "classic", opponents, seat=None)
    rng = np.random.default_rng(0)
    for ep in range(3):
        obs, info = g.reset(seed=ep)
        assert g.observation_space.contains(obs)
        done, steps = False, 0
        while not done:
            assert info["request"]["view"]["seat"] == g.seat and len(info["request"]["actions"]) > 1
            obs, reward, term, trunc, info = g.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            done, steps = term or trunc, steps + 1
        assert -1.0 <= reward <= 1.0 and steps > 0
        assert info["place"] >= 1


def test_request_mask_maps_indices_to_ids():
    rules = PRESETS["classic"]
    e = PalaceEnv(rules, 2)
    e.reset(seed=9)
    req = e.infos[e.agent_selection]["request"]
    mask, ids = request_mask(req["actions"])
    assert mask.shape == (N_ACTIONS,) and sorted(ids.values()) == list(range(len(req["actions"])))
    assert [action_json(a) for a in legal_actions(e.state)] == [
        {k: v for k, v in a.items() if k != "id"} for a in req["actions"]]


@pytest.mark.parametrize("name,rules", VARIANTS[::3], ids=[v[0] for v in VARIANTS[::3]])
def test_fast_encoding_equals_the_views(name, rules):
    """The environments encode from the engine state; bots encode from the view: the same numbers."""
    from arena.engine import apply_action, start_game
    from arena.engine.views import seat_view
    from arena.envs.encode import encode, encode_state
    players = max(rules.min_players, min(rules.max_players, 4))
    state, _ = start_game(rules, players, 4)
    rng = random.Random(4)
    n = 0
    while state.result is None and n < 300:
        for seat in range(players):
            x = encode_state(state, seat)
            np.testing.assert_array_equal(x, encode(seat_view(state, seat), rules, players))
            assert (x >= 0).all() and (x <= OBS_HIGH).all(), np.flatnonzero(x > OBS_HIGH)
        acts = legal_actions(state)
        state = apply_action(state, acts[rng.randrange(len(acts))], check=False)[0]
        n += 1


@pytest.mark.parametrize("rules,players", [("classic", 2), ("shithead", 3)])
def test_the_requests_an_env_hands_out_are_the_protocols(rules, players):
    """What ``infos["request"]`` (AEC) and ``info["request"]`` (single seat) carry is a request a
    bot would be sent: it validates against protocol/schemas/request.schema.json, and a bot's
    ``choose`` answers it with an action id the env takes."""
    from tests.schema_memo import SchemaMemo
    schemas = SchemaMemo()
    rng = random.Random(3)
    e = PalaceEnv(rules, players)
    e.reset(seed=5)
    seen = 0
    for agent in e.agent_iter():
        _, _, term, trunc, info = e.last()
        if term or trunc:
            e.step(None)
            continue
        req = info["request"]
        schemas.validate("request", req)
        ids = [a["id"] for a in req["actions"]]
        assert ids == list(range(len(ids)))
        k = rng.choice(ids)
        e.step(json_index(req["actions"][k], k))
        seen += 1
        if seen == 150:  # the schema is slow to run: enough of a game, every kind of decision
            break
    assert seen > 10
    single = PalaceSingleEnv(rules, ["lowest"] * (players - 1))
    obs, info = single.reset(seed=5)
    for _ in range(150):
        schemas.validate("request", info["request"])
        legal = np.flatnonzero(obs["action_mask"])
        obs, _, term, trunc, info = single.step(int(rng.choice(legal)))
        if term or trunc:
            obs, info = single.reset()


def test_palace_v0_is_registered_and_renders():
    """gymnasium.make finds it (check_env then has a spec to test render modes against), and its
    ansi render shows the table without any seat's hidden cards."""
    import gymnasium as gym
    # from nothing but `import arena.envs` (this process may have registered it otherwise)
    fresh = subprocess.run([sys.executable, "-c", "import arena.envs, gymnasium; print(gymnasium.spec('Palace-v0').id)"],
                           capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0 and fresh.stdout.split() == ["Palace-v0"], fresh.stderr[-800:]
    e = gym.make("Palace-v0", rules="classic", opponents=["random"], render_mode="ansi")
    assert e.spec is not None and e.spec.id == "Palace-v0"
    e.reset(seed=3)
    text = e.render()
    assert text.startswith("turn ") and "seat 0: " in text and "seat 1: " in text
    state = e.unwrapped.state
    from arena.engine.cards import card_str
    assert not any(card_str(c) in text for s in state.seats for c in s.hand)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(e.unwrapped)
    e.close()
    assert PalaceSingleEnv("classic", ["random"]).render() is None
    with pytest.raises(ValueError, match="render_mode"):
        PalaceSingleEnv("classic", ["random"], render_mode="human")


def test_the_documented_feature_layout_is_what_the_features_hold():
    """LAYOUT (printed in docs/BOTS.md) tiles the 264 features, and its named blocks hold what
    their names say on a real view: the hand, the pile top, the other seat's hand size."""
    from arena.ai.features import LAYOUT, N_FEATURES, view_features
    from arena.engine.cards import card_str
    assert LAYOUT[0][0] == 0 and all(a + n == b for (a, n, _), (b, _, _) in zip(LAYOUT, LAYOUT[1:]))
    assert LAYOUT[-1][0] + LAYOUT[-1][1] == N_FEATURES == 264
    block = {what: (a, n) for a, n, what in LAYOUT}
    e = PalaceEnv("classic", 2)
    e.reset(seed=5)
    for _ in range(12):  # into play, with a pile
        obs, *_ = e.last()
        e.step(int(np.flatnonzero(obs["action_mask"])[0]))
    req = e.infos[e.agent_selection]["request"]
    view = req["view"]
    f = view_features(view, e.rules, 2)
    a, n = block["own hand, by rank"]
    ranks = "23456789TJQKA"
    want = [0.25 * sum(1 for c in view["hand"] if c[0] == r) for r in ranks] + [0.25 * sum(c[0] == "X" for c in view["hand"])]
    assert f[a:a + n] == pytest.approx(want), (view["hand"], f[a:a + n])
    a, n = block["pile top: empty, then its rank 2..joker (one-hot)"]
    top = view["pile_top"]
    assert f[a:a + n].index(1.0) == (0 if top is None else 1 + (ranks + "X").index(top if top != "10" else "T"))
    a, _ = block["seat +1 from the viewer's left: hand size / 8"]
    other = view["players"][(view["seat"] + 1) % 2]
    assert f[a] == pytest.approx(other["hand_count"] / 8)
    assert all(f[b] == 0 for b in range(block["seat +2 from the viewer's left: present (1; 0 for a seat the table lacks)"][0],
                                        N_FEATURES))  # two seats: the other blocks stay empty
