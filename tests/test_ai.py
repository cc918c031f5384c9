"""The strong reference bots: fair determinization, legal complete games under every rule
set, and the bot programs speaking the protocol.

Determinization is checked against the true state the test holds (the bots never
see it): a sample must deal exactly the hidden cards into the hidden places, leave
every visible card where it is, and reproduce the request's legal actions.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from arena.ai.agents import HeuristicAgent, ISMCTSAgent, MonteCarloAgent, reference_agent
from arena.ai.budget import Budget
from arena.ai.match import play
from arena.ai.observe import Observer, action_key, parse_action
from arena.engine import PRESETS, apply_action, forfeit, legal_actions, new_game, start_game, with_options
from arena.engine.cards import make_deck
from arena.engine.views import action_json, event_for, seat_view
from arena.engine.views import decision_name
from arena.referee import protocol
from arena.referee.core import RefereeCore, TimeControl

ROOT = Path(__file__).resolve().parents[1]

OPTION_SETS = [
    {"jokers": 1, "joker": "give_pile"},
    {"jokers": 2, "joker": "reverse", "eight": "reverse"},
    {"harsh_face_up": True, "must_play": False},
    {"stacking": True},
    {"match_count": True, "four_of_a_kind": "off"},
    {"seven": "descending", "three": "see_through"},
    {"seven": "glass", "eight": "see_through", "burner_out": False},
    {"reset_again": True, "ten_on_court": False, "eight": "skip"},
    {"setup": "none", "start": "lowest_card", "face_up_multi": True},
    {"play_on": True, "stale_turns": 60},
]


def variants():
    for name, rules in PRESETS.items():
        yield name, rules
    for i, opts in enumerate(OPTION_SETS):
        base = PRESETS[["classic", "shithead", "powers", "skip8", "smeghead"][i % 5]]
        yield f"{base.name}+{i}", with_options(base, opts)


VARIANTS = list(variants())


def hidden(state, me: int) -> Counter:
    """The cards ``me`` cannot see in ``state``."""
    out = Counter(state.stock) + Counter(state.set_aside)
    for i, s in enumerate(state.seats):
        out.update(c for c in s.face_down if c is not None)
        if i != me:
            out.update(Counter(s.hand) - Counter(s.known))
    return out


def all_cards(state) -> Counter:
    out = Counter(state.stock) + Counter(state.set_aside) + Counter(state.pile) + Counter(state.burned)
    for s in state.seats:
        out.update(s.hand)
        out.update(s.face_up_cards)
        out.update(c for c in s.face_down if c is not None)
    return out


def check_sample(sample, true, me: int, req: dict, obs: Observer) -> None:
    deck = Counter(make_deck(true.rules.decks_for(true.players), true.rules.jokers))
    assert all_cards(sample) == deck, "sample does not conserve the deck"
    assert hidden(sample, me) == hidden(true, me), "sample moved a seen card into a hidden place"
    assert sample.pile == true.pile and sorted(sample.burned) == sorted(true.burned)
    assert len(sample.stock) == len(true.stock) and len(sample.set_aside) == len(true.set_aside)
    assert Counter(obs.aside_known) <= Counter(sample.set_aside)
    for i, (s, t) in enumerate(zip(sample.seats, true.seats)):
        assert s.face_up == t.face_up
        assert [c is None for c in s.face_down] == [c is None for c in t.face_down]
        assert len(s.hand) == len(t.hand) and s.place == t.place
        assert sorted(s.known) == sorted(t.known)
        assert not Counter(s.known) - Counter(s.hand), "a known card left its holder's hand"
        if i == me:
            assert s.hand == t.hand
    assert (sample.to_move, sample.direction, sample.need, sample.descending) == \
        (true.to_move, true.direction, true.need, true.descending)
    keys = sorted(action_key(action_json(a)) for a in legal_actions(sample))
    assert keys == sorted(action_key(a) for a in req["actions"])


def drive(rules, players: int, seed: int, on_request, forfeit_at: int | None = None):
    """A random game through the referee core (requests exactly as bots get them); ``on_request(state, req)``."""
    rng = random.Random(seed)
    core = RefereeCore(rules, [f"p{s}" for s in range(players)], seed, game_id="g",
                       clock=TimeControl(move_ms=1000, bank_ms=0), encode=False)
    while True:
        state = core.state
        if forfeit_at is not None and state.result is None and state.turn >= forfeit_at and state.phase == "play":
            core.forfeit((state.to_move + 1) % players, "crash")  # another seat drops out mid-game
            forfeit_at = None
        req = core.next_request()
        if req is None:
            return core.state
        on_request(core.state, req.message)
        core.answer(rng.randrange(req.n_actions), 0.0)


SAMPLE_EVERY = 3  # each seat's observer takes in every request; every third of its play requests is sampled


@pytest.mark.parametrize("name,rules", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_determinization_is_consistent(name, rules):
    """Each seat's observer follows the whole game, and a sample of every third of its requests
    (about 7,000 over these games; sampling and checking were three quarters of the time of
    sampling all 21,000) must be the true state with its hidden cards dealt again."""
    players = min(rules.max_players, 2 + len(name) % 3)
    for seed in range(2):
        observers = []
        for s in range(players):
            o = Observer()
            o.start(protocol.start("g", s, players, ["x"] * players, rules.options(), {"move_ms": 1000},
                                   seed))
            observers.append(o)
        rng = random.Random(seed)
        checked = [0]
        asked = [0] * players

        def on_request(state, req):
            me = req["view"]["seat"]
            obs = observers[me]
            obs.update(req)
            if state.phase != "play":
                return
            asked[me] += 1
            if asked[me] % SAMPLE_EVERY:
                return
            check_sample(obs.sample(rng), state, me, req, obs)
            checked[0] += 1

        drive(rules, players, seed, on_request, forfeit_at=30 if seed == 1 else None)
        assert checked[0] > 0


def test_forfeited_known_cards_stay_set_aside():
    """A forfeited seat's seen cards leave the game: the observer never deals them elsewhere."""
    rules = PRESETS["shithead"]
    found = 0
    for seed in range(40):
        obs = Observer()
        obs.start(protocol.start("g", 0, 3, ["x"] * 3, rules.options(), {"move_ms": 1000}, seed))
        rng = random.Random(seed)
        state, _ = start_game(rules, 3, seed)
        pending = []
        while state.result is None:
            acts = legal_actions(state)
            if state.to_move == 0 and len(acts) > 1:
                req = protocol.request(1, "g", decision_name(state), seat_view(state, 0), pending,
                                       [action_json(a) for a in acts], {"move_ms": 1000, "bank_ms": 0})
                pending = []
                obs.update(req)
                if obs.aside_known and state.phase == "play":
                    found += 1
                    s = obs.sample(rng)
                    assert obs.aside_known <= Counter(s.set_aside)
                    check_sample(s, state, 0, req, obs)
            if state.phase == "play" and state.seats[1].known and state.seats[1].place is None \
                    and state.to_move == 0 and len(acts) > 1:
                state, evs = forfeit(state, 1, "crash")
                pending.extend(event_for(e, 0) for e in evs)
                continue
            state, evs = apply_action(state, acts[rng.randrange(len(acts))], check=False)
            pending.extend(event_for(e, 0) for e in evs)
        if found:
            break
    assert found


def tiny_agents():
    return {
        "heuristic-setup": lambda seed: HeuristicAgent(seed=seed),
        "montecarlo": lambda seed: MonteCarloAgent(Budget(iterations=1), seed=seed, horizon=8),
        "ismcts": lambda seed: ISMCTSAgent(Budget(iterations=6), seed=seed, horizon=8),
        "learned": lambda seed: reference_agent("learned", seed=seed),
    }


@pytest.mark.parametrize("bot", ["heuristic-setup", "montecarlo", "ismcts", "learned"])
def test_bot_plays_every_rule_set(bot):
    """Complete legal games in-process (``play`` rejects any id not offered); no fallbacks."""
    make = tiny_agents()[bot]
    from arena.strategies import heuristic
    from arena.ai.agents import PolicyAgent
    for k, (name, rules) in enumerate(VARIANTS):
        players = 2 + k % 3 if rules.max_players >= 4 else 2
        agents = [make(k)] + [PolicyAgent(heuristic, "heuristic") for _ in range(players - 1)]
        g = play(agents, rules, seed=100 + k, max_turns=600)
        assert g.result is not None
        assert agents[0].fallbacks == 0, f"{bot} fell back under {name}"


def test_action_json_round_trips():
    for name, rules in VARIANTS:
        state = new_game(rules, 2, 3)
        for _ in range(60):
            if state.result is not None:
                break
            acts = legal_actions(state)
            for a in acts:
                assert parse_action(action_json(a)) == a
            state = apply_action(state, acts[-1], check=False)[0]


# ---------------------------------------------------------------- bot programs

class Bot:
    def __init__(self, name: str, env: dict[str, str]):
        self.proc = subprocess.Popen([sys.executable, "bot.py"], cwd=ROOT / "bots" / name,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **env})
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 10.0):
        return json.loads(self.lines.get(timeout=timeout))


@pytest.mark.parametrize("name", ["heuristic-setup", "montecarlo", "ismcts", "learned"])
def test_bot_program_protocol(name):
    rules = PRESETS["classic"]
    bot = Bot(name, {"MC_MS": "20", "ISMCTS_MS": "20"})
    try:
        bot.send(protocol.hello())
        hello = bot.read(15)
        protocol.validate("bot_hello", hello)
        assert hello["name"] == name
        state, events = start_game(rules, 2, 11)
        bot.send(protocol.start("g1", 0, 2, [name, "other"], rules.options(), {"move_ms": 500, "bank_ms": 0}, 11))
        pending = [event_for(e, 0) for e in events]
        answered = rid = 0
        rng = random.Random(5)
        while state.result is None and answered < 6:
            acts = legal_actions(state)
            if state.to_move == 0 and len(acts) > 1:
                rid += 1
                req = protocol.request(rid, "g1", decision_name(state), seat_view(state, 0), pending,
                                       [action_json(a) for a in acts], {"move_ms": 500, "bank_ms": 0})
                pending = []
                bot.send(req)
                reply = bot.read()
                assert protocol.read_action(json.dumps(reply), rid, len(acts)) == reply["action"]
                a = acts[reply["action"]]
                answered += 1
            else:
                a = acts[rng.randrange(len(acts))]
            state, evs = apply_action(state, a, check=False)
            pending.extend(event_for(e, 0) for e in evs)
        assert answered >= 3
        bot.send(protocol.end("g1", {"reason": "forfeit", "order": [[0], [1]]}, [], pending))
        bot.send(protocol.shutdown())
        assert bot.proc.wait(timeout=10) == 0
    finally:
        if bot.proc.poll() is None:
            bot.proc.kill()
        bot.proc.wait()


def test_agents_fall_back_when_they_cannot_determinize():
    """No start message, or rules this engine cannot build: still a legal answer, never a crash."""
    rules = PRESETS["classic"]
    state = new_game(rules, 2, 4)
    while state.phase != "play" or len(legal_actions(state)) < 2:
        state = apply_action(state, legal_actions(state)[0], check=False)[0]
    acts = legal_actions(state)
    req = protocol.request(1, "g", decision_name(state), seat_view(state, state.to_move), [],
                           [action_json(a) for a in acts], {"move_ms": 1000, "bank_ms": 0})
    for make in tiny_agents().values():
        agent = make(0)
        assert 0 <= agent.choose(req) < len(acts)
        agent = make(0)
        agent.begin({"type": "start", "seat": state.to_move, "players": 2, "rules": {"no_such_rule": 1}})
        assert 0 <= agent.choose(req) < len(acts)
        assert agent.fallbacks == 1


def test_observer_knows_how_long_the_game_went_without_progress():
    """The search bots' cycle breaker reads Observer.stale: turns since a burn or a player out.
    The observer learns of progress with its next request, so it may count from a little
    earlier than the engine (by at most one gap between its requests), never later."""
    rules = PRESETS["classic"]
    for seed in range(3):
        obs = Observer()
        obs.start(protocol.start("g", 0, 2, ["x", "y"], rules.options(), {"move_ms": 1000}, seed))
        last_turn = [0]
        widest_gap = [0]
        seen = [0]

        def on_request(state, req):
            if req["view"]["seat"] != 0:
                return
            obs.update(req)
            widest_gap[0] = max(widest_gap[0], state.turn - last_turn[0])
            if state.phase == "play":
                assert state.stale <= obs.stale <= state.stale + widest_gap[0]
                seen[0] += 1
            last_turn[0] = state.turn

        drive(rules, 2, seed, on_request)
        assert seen[0] > 10


def test_unstick_picks_among_the_near_best_moves_only():
    from arena.ai.agents import NEAR_BEST, unstick
    scores = [0.5, 0.53, 0.2, 0.53 - NEAR_BEST / 2]
    picks = {unstick(1, scores, random.Random(s)) for s in range(60)}
    assert picks == {0, 1, 3}
