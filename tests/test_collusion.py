"""The collusion audit (arena.tournament.collusion) on duplicate deals, with in-process bots.

A scripted pair colludes: ``feeder`` picks up the pile whenever its partner ``mate`` plays next
(handing it an empty pile) and plays the heuristic otherwise. The audit replays every table the
pair shared with ``feeder`` replaced by the reference bot; ``mate`` must be flagged as depending on
it, and an honest pair (two plain bots at the same kind of tables) must not be.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from arena import strategies as st
from arena.bots.containment import Containment
from arena.ai.agent import Agent
from arena.ai.match import play
from arena.engine.rules import Rules
from arena.tournament.collusion import Table, audit, audit_stored, interval, shared_tables
from arena.tournament.config import ConfigError, load_config
from arena.tournament.formats import points
from arena.tournament.run import run_tournament
from arena.tournament.store import Store

RULES = Rules()
DEALS = 8


class Policy(Agent):
    def __init__(self, name: str, choose: Any):
        self.name, self.choose = name, choose


class Feeder(Agent):
    """Sacrifices to its partner: picks up the pile when the partner plays next."""

    def __init__(self, name: str, partner: str):
        self.name, self.partner = name, partner

    def begin(self, msg: dict[str, Any]) -> None:
        self.names = msg["names"]

    def choose(self, req: dict[str, Any]) -> int:
        view = req["view"]
        nxt = st._next_seat(view) if "pile" in view else None
        pick = [a for a in req["actions"] if a["kind"] == "pick_up"]
        if nxt is not None and self.names[nxt] == self.partner and pick and view["pile"]:
            return pick[0]["id"]
        return st.heuristic(req)


POLICY = {"mate": st.heuristic, "ref": st.heuristic, "h1": st.lowest_first, "h2": st.lowest_first,
          "h3": st.heuristic}


def agent(name: str) -> Agent:
    return Feeder(name, "mate") if name == "feeder" else Policy(name, POLICY[name])


def play_points(seats: tuple[str, ...], seed: int, given: tuple[int, ...] = ()) -> dict[str, float]:
    result = play([agent(s) for s in seats], RULES, seed, max_turns=600).result
    return points(seats, {"order": result.order})


def duplicate(lineup: list[str]) -> list[Table]:
    """Each deal played in every rotation of the lineup, as a duplicate event seats it."""
    out = []
    for d in range(DEALS):
        for r in range(len(lineup)):
            seats = tuple(lineup[r:] + lineup[:r])
            out.append(Table(f"g{d}.{r}", 1000 + d, seats, (), play_points(seats, 1000 + d)))
    return out


def test_a_colluding_pair_is_flagged_and_an_honest_pair_is_not():
    colluding = audit(duplicate(["feeder", "mate", "h1", "h2"]), ("feeder", "mate"), "ref", play_points,
                      margin=0.25)
    mate = colluding.directions[0]
    assert (mate.bot, mate.partner, mate.tables) == ("mate", "feeder", 4 * DEALS)
    assert colluding.flagged and mate.low > 0.25, mate
    assert not colluding.two_seat_only

    honest = audit(duplicate(["h1", "h2", "h3", "mate"]), ("h1", "h2"), "ref", play_points, margin=0.25)
    assert not honest.flagged, honest.directions
    assert all(d.tables == 4 * DEALS for d in honest.directions)


def test_the_replay_keeps_deal_seats_and_opening_and_replaces_only_the_partner():
    games = [{"id": "x", "seed": 7, "seats": ["a", "b", "c"], "given": [3, 1],
              "result": {"order": [[1], [0], [2]]}},
             {"id": "y", "seed": 8, "seats": ["a", "c", "d"], "result": {"order": [[0], [1], [2]]}}]
    tables = shared_tables(games, "a", "b")
    assert [t.game_id for t in tables] == ["x"] and tables[0].points == {"b": 2, "a": 1, "c": 0}
    asked = []

    def fake(seats, seed, given):
        asked.append((seats, seed, given))
        return {s: 1.0 for s in seats}

    audit(tables, ("a", "b"), "r", fake)
    assert asked == [(("r", "b", "c"), 7, (3, 1)), (("a", "r", "c"), 7, (3, 1))]


def test_a_reference_that_sat_at_the_tables_or_a_pair_of_one_is_refused():
    tables = [Table("x", 1, ("a", "b", "r"), (), {"a": 2, "b": 1, "r": 0})]
    with pytest.raises(ConfigError, match="reference bot r sat"):
        audit(tables, ("a", "b"), "r", play_points)
    with pytest.raises(ConfigError, match="two different"):
        audit(tables, ("a", "a"), "z", play_points)


def test_the_interval_is_reproducible_and_honest_about_one_table():
    values = [1.0, 0.0, 2.0, 1.0, 1.5, 0.5]
    assert interval(values, 0.95) == interval(values, 0.95)
    low, high = interval(values, 0.95)
    assert 0.0 <= low < 1.0 < high <= 2.0
    assert interval([3.0], 0.95) == (float("-inf"), float("inf"))


def test_a_partner_who_helps_every_seat_alike_is_not_collusion():
    """Replacing a weak partner costs every seat a point: the lift is the table's, not the pair's."""
    tables = [Table(f"g{i}", i, ("a", "b", "c", "d"), (), {"a": 0, "b": 2, "c": 3, "d": 1}) for i in range(6)]
    weak = audit(tables, ("a", "b"), "r", lambda seats, seed, given: {"r": 3, "a": 0, "b": 1, "c": 2, "d": 0})
    assert weak.directions[0].per_table == (0.0,) * 6 and not weak.flagged


def test_a_lift_flags_only_when_its_whole_interval_clears_the_margin():
    lifts = [2, -1, 2, -1, 2, 0]  # a mean of 2/3 on six noisy tables: not enough to accuse anyone
    tables = [Table(f"g{i}", i, ("a", "b", "c"), (), {"a": 0, "b": 2, "c": 1}) for i in range(6)]

    def again(lifts):
        return lambda seats, seed, given: {"r": 0, "b": 2 - lifts[seed], "c": 1, "a": 0}
    noisy = audit(tables, ("a", "b"), "r", again(lifts), margin=0.25)
    assert noisy.directions[0].mean > 0.25 and noisy.directions[0].low < 0.25 and not noisy.flagged
    steady = audit(tables, ("a", "b"), "r", again([1, 1, 1, 1, 1, 0.5]), margin=0.25)
    assert steady.flagged


# ------------------------------------------------------------ a stored tournament, its bots' folders


def stored_launcher():
    """Bot folders named feeder, mate, h1, h2, ref play as the agents above, through the referee."""
    from tests.fakes import ScriptedConnection, hello_line

    def launch(spec):
        me = agent(spec.name)

        def respond(line: str) -> list[str] | None:
            msg = json.loads(line)
            if msg["type"] == "hello":
                return [hello_line(spec.name)]
            if msg["type"] == "start":
                me.begin({**msg, "names": [n.split("@")[0] for n in msg["names"]]})
            if msg["type"] == "request":
                return [json.dumps({"type": "action", "request": msg["id"], "action": me.choose(msg)})]
            return None if msg["type"] == "shutdown" else []
        return ScriptedConnection(respond)
    return launch


def test_a_stored_tournament_is_audited_on_its_own_bots_and_deals(tmp_path):
    from tests.test_formats import make_bots
    folders = {}
    for name in ("feeder", "mate", "h1", "h2", "ref"):
        d = Path(make_bots(tmp_path / name, 1)[0])
        (d / "bot.toml").write_text((d / "bot.toml").read_text().replace('name = "p0"', f'name = "{name}"'))
        folders[name] = d
    from arena.tournament.seeds import SECRET_BYTES, SECRET_FILE
    # A fixed secret, so the same deals every run: with a fresh random one the 12 tables were now
    # and then deals where feeding the partner helps little, and the pair was not flagged.
    key = tmp_path / SECRET_FILE
    key.write_bytes(bytes([1]) * SECRET_BYTES)
    key.chmod(0o600)
    cfg = load_config(None, {"name": "club", "bots": [str(folders[n]) for n in ("feeder", "mate", "h1", "h2")],
                             "seats": 4, "deals": 3, "options": {"must_play": False},  # a pick-up by choice
                             "store": str(tmp_path / "s.sqlite")})
    db = Store(cfg.store)
    trio.run(lambda: run_tournament(cfg, db, launcher=stored_launcher()))
    found = trio.run(lambda: audit_stored(db, "club", ("feeder@1.0", "mate@1.0"), str(folders["ref"]),
                                          launcher=stored_launcher(), containment=Containment.TRUSTED))
    mate = found.directions[0]
    assert found.flagged and mate.bot == "mate@1.0" and mate.tables == 3 * 4 and mate.low > 0.25
    assert db.count_games(tournament="club") == 12  # the replays are not stored

    with pytest.raises(ConfigError, match="sat at the pair's tables"):
        trio.run(lambda: audit_stored(db, "club", ("h1@1.0", "h2@1.0"), str(folders["mate"])))
    (folders["mate"] / "bot.py").write_text("# changed\n")
    with pytest.raises(ConfigError, match="changed since it played"):
        trio.run(lambda: audit_stored(db, "club", ("feeder@1.0", "mate@1.0"), str(folders["ref"])))
    with pytest.raises(ConfigError, match="nobody@1.0 played no game of club"):
        trio.run(lambda: audit_stored(db, "club", ("feeder@1.0", "nobody@1.0"), str(folders["ref"])))


def test_the_command_reports_both_directions_and_exits_1_when_flagged(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from arena.cli.main import app
    import arena.tournament.collusion as collusion
    runner = CliRunner()
    db = tmp_path / "s.sqlite"
    Store(db).close()
    missing = runner.invoke(app, ["audit", "collusion", "club", "a@1", "b@1", "--store", str(db)])
    assert missing.exit_code == 2 and "error: no tournament 'club' in the store" in missing.output
    assert "Traceback" not in missing.output

    tables = [Table(f"g{i}", i, ("a@1", "b@1", "c@1"), (), {"a@1": 0, "b@1": 2, "c@1": 1}) for i in range(4)]

    async def fake(store, tournament, pair, reference, **kw):
        return audit(tables, pair, "ref@1", lambda seats, seed, given: {s: 0.0 for s in seats},
                     confidence=kw["confidence"], margin=kw["margin"])
    monkeypatch.setattr(collusion, "audit_stored", fake)
    flagged = runner.invoke(app, ["audit", "collusion", "club", "a@1", "b@1", "--store", str(db)])
    assert flagged.exit_code == 1, flagged.output
    assert "b@1 with a@1 instead of ref@1: +1.00 points a game" in flagged.output and "flagged" in flagged.output
    calm = runner.invoke(app, ["audit", "collusion", "club", "a@1", "b@1", "--margin", "1.5", "--store", str(db)])
    assert calm.exit_code == 0 and "not flagged (margin 1.5" in calm.output
