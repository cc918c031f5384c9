"""In-process bots for referee, replay and tournament tests, on the package's test double.

Everything here is :class:`arena.referee.testing.MockBot`; these helpers keep the
line-level form older tests use: ``ScriptedConnection(respond)`` runs ``respond(line)``
as the bot (the lines it prints, or None when it exits). The in-process executor plays on the
blocking shell, so these are synchronous.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from pathlib import Path

from arena import strategies
from arena.bots.manifest import BotSpec
from arena.engine import Rules
from arena.referee.blocking import BlockingPlayer, play_game
from arena.referee.core import GameRecord, TimeControl
from arena.referee.testing import EXIT, FakeClock, MockBot, Sleep, hello_line


class ScriptedConnection(MockBot):
    """A bot given as a function of the referee's line; ``delay`` seconds of thought (on its fake
    clock) before each reply."""

    def __init__(self, respond: Callable[[str], list[str] | None], *, delay: float = 0.0):
        def by_message(msg: dict) -> list | None:
            lines = respond(self._line)
            if lines is None:
                return [EXIT]
            return [item for line in lines for item in ((Sleep(delay), line) if delay else (line,))]
        self._line = ""
        super().__init__(by_message)

    @property
    def sent(self) -> list[str]:
        """Every line the referee wrote."""
        return self.lines

    def send_line(self, text: str | bytes, *, timeout: float = 10.0) -> None:
        self._line = text.decode() if isinstance(text, bytes) else text
        super().send_line(text, timeout=timeout)


class GameSeededRandom:
    """Uniformly random legal actions, seeded again from each game's ``start`` seed (as the bundled
    agents do): a bot kept between games plays a game the same whichever games came before it."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = random.Random(seed)

    def begin(self, start: dict) -> None:
        self.rng = random.Random(f"{self.seed}/{start.get('seed')}")

    def __call__(self, req: dict) -> int:
        return self.rng.randrange(len(req["actions"]))


def policy_bot(choose: Callable[[dict], int], name: str = "fake") -> Callable[[str], list[str] | None]:
    """A well-behaved bot around a request -> action id function, as a line-level ``respond``;
    a policy with a ``begin`` sees each game's start message."""
    begin = getattr(choose, "begin", None)

    def respond(line: str) -> list[str] | None:
        msg = json.loads(line)
        if msg["type"] == "hello":
            return [hello_line(name)]
        if msg["type"] == "start" and begin is not None:
            begin(msg)
        if msg["type"] == "request":
            return [json.dumps({"type": "action", "request": msg["id"], "action": choose(msg)})]
        if msg["type"] == "shutdown":
            return None
        return []
    return respond


POLICIES = {
    "random": GameSeededRandom,
    "lowest": lambda: strategies.lowest_first,
    "highest": lambda: strategies.highest_first,
    "heuristic": lambda: strategies.heuristic,
}


def policy_launcher(starts: list[str] | None = None):
    """A tournament launcher that runs bundled bots' policies in-process by bot name."""
    def launch(spec):
        if starts is not None:
            starts.append(spec.label)
        return ScriptedConnection(policy_bot(POLICIES[spec.name](), spec.name))
    return launch


def mock_players(bots: list, clock: TimeControl, *, timer: FakeClock | None = None,
                 names: list[str] | None = None, **kw) -> list[BlockingPlayer]:
    """A :class:`BlockingPlayer` per seat over the given bots: a :class:`MockBot` (set on the one
    fake clock ``timer``, which the players time on too), anything else a bot process would be,
    or an exception, which its launcher raises."""
    timer = timer if timer is not None else FakeClock()
    players = []
    for i, bot in enumerate(bots):
        if isinstance(bot, MockBot):
            bot.clock = timer

        def launch(_spec: BotSpec, bot=bot):
            if isinstance(bot, BaseException):
                raise bot
            return bot
        name = names[i] if names else f"seat{i}"
        players.append(BlockingPlayer(BotSpec(name, "1", ("fake",), Path("."), Path(".")), launch, clock,
                                      timer=timer, **kw))
    return players


def play_mocks(bots: list, rules: Rules, seed: int, *, clock: TimeControl, shutdown: bool = True,
               timer: FakeClock | None = None, names: list[str] | None = None, **kw) -> GameRecord:
    """One game on the blocking referee (the production loop) on a fake clock; the players are
    shut down afterwards unless ``shutdown`` is False."""
    timer = timer if timer is not None else FakeClock()
    players = mock_players(bots, clock, timer=timer, names=names)
    try:
        return play_game(players, rules, seed, game_id=kw.pop("game_id", "g1"), clock=clock, timer=timer, **kw)
    finally:
        if shutdown:
            for p in players:
                p.shutdown()
