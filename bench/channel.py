"""What the channel benches (bench_*_channel.py) share: the two seats' bot folders, the two
ways they are run (a game between a sender and a receiver, or two seats started side by side),
the lines a seat wrote in a game, and how many bits a decoded signal carries."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence


def bot_folder(d: Path, script_name: str, script: str, toml: str) -> Path:
    """A bot folder a contained seat can read (folder 0755, files 0644): one script and its bot.toml."""
    d.mkdir(mode=0o755)
    for name, text in ((script_name, script), ("bot.toml", toml)):
        (d / name).write_text(text)
        (d / name).chmod(0o644)
    return d


def seat_lines(rec: Any, player: Any, seat: int) -> list[str]:
    """Every stderr line a seat wrote in a game (its record's, its steps', what its player still
    holds), each once, in order."""
    out = list(rec.stderr[seat]) + player.take_stderr()
    for step in rec.steps:
        if step["seat"] == seat:
            out += step.get("stderr", [])
    return list(dict.fromkeys(out))


def h2(p: float) -> float:
    """Binary entropy, in bits."""
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def capacity(error: float) -> float:
    """Bits one symbol carries through a binary channel that flips it with probability ``error``."""
    return 1 - h2(min(error, 0.5))


def medians_ms(pairs: Sequence[tuple[float, int]]) -> tuple[float, float]:
    """The median measure (seconds, given in ms) after a 0 and after a 1: nan where none was sent."""
    def med(xs: list[float]) -> float:
        return xs[len(xs) // 2] * 1000 if xs else float("nan")
    return med(sorted(g for g, b in pairs if not b)), med(sorted(g for g, b in pairs if b))


def threshold_error(pairs: Sequence[tuple[float, int]]) -> float:
    """The error rate of the best single threshold (a 1 above it), as a pair of seats could learn
    it in a first game: (measured gap, bit sent) pairs."""
    return min(sum((g > t) != bool(b) for g, b in pairs) for t in sorted(g for g, _ in pairs)) / len(pairs)


def held_out_error(pairs: list[tuple[float, int]]) -> float:
    """The error on the second half of the bits with the best threshold (a 1 above it, or below:
    an eviction could also make a probe faster) of the first half: fitting the threshold to the
    same few bits it is scored on finds structure in noise."""
    half = len(pairs) // 2
    train, test = pairs[:half], pairs[half:]
    best = min(((sum((g > t) != (bool(b) ^ flip) for g, b in train), t, flip)
                for t in sorted(g for g, _ in train) for flip in (False, True)))
    _, t, flip = best
    return sum((g > t) != (bool(b) ^ flip) for g, b in test) / len(test)


def decision_gaps(make_bot: Callable[[str, int], Path], games: int, clock: Any, launcher: Any, first_seed: int,
                  name: str, *, adjacent: bool = False, **play: Any) -> tuple[list[tuple[float, int]], float, list[str]]:
    """Play ``games`` games of a sender against a receiver through the arena's blocking referee.
    ``make_bot(role, game)`` makes each seat's folder; the sender writes ``SENT <request> <bit>``
    and the receiver ``GOT <request> <seconds>`` on stderr. Returns (gap seconds, bit) for every
    receiver gap that holds exactly one sender decision (``adjacent``: and no other request of
    its own between), the seconds of play, and the sender's faults."""
    from arena.bots.manifest import load_bot
    from arena.engine import PRESETS
    from arena.referee.blocking import BlockingLaunch, BlockingPlayer, play_game, settle
    pairs: list[tuple[float, int]] = []
    seconds, faults = 0.0, []
    launch = BlockingLaunch(launcher)
    for g in range(games):
        sender = BlockingPlayer(load_bot(make_bot("sender", g)), launch, clock)
        receiver = BlockingPlayer(load_bot(make_bot("receiver", g)), launch, clock)
        try:
            rec = play_game([sender, receiver], PRESETS["classic"], first_seed + g, game_id=f"{name}-{g}",
                            clock=clock, **play)
            sent = {int(p[1]): int(p[2]) for p in (x.split() for x in seat_lines(rec, sender, 0)) if p[0] == "SENT"}
            got = sorted((int(p[1]), float(p[2])) for p in (x.split() for x in seat_lines(rec, receiver, 1)) if p[0] == "GOT")
        finally:
            sender.shutdown()
            receiver.shutdown()
            settle()
        faults += [f["reason"] for f in rec.faults]
        seconds += rec.wall_ms / 1000
        for (a, ta), (b, tb) in zip(got, got[1:]):
            between = [i for i in sent if a < i < b]
            if len(between) == 1 and (b - a == 2 or not adjacent):
                pairs.append((tb - ta, sent[between[0]]))
    return pairs, seconds, faults


def side_by_side(base: Path, script: str, commands: dict[str, list[str]], launcher: Any, timeout: float,
                 one_folder: bool = False) -> str:
    """Start a ``recv`` and a ``send`` seat through the arena's own blocking start path (private uid,
    cgroup, filter; ``launcher``'s containment), each a bot folder under ``base`` holding
    ``seat.py`` = ``script`` run as ``commands[role]``, and return the receiver's first line.
    ``one_folder``: both seats are processes of one bot (one folder), as two games of a run seat it.
    ``base`` is removed afterwards."""
    import dataclasses
    import json
    import shutil

    from arena.bots.manifest import load_bot
    seats = {}
    try:
        for role in ("recv", "send"):
            if one_folder and seats:
                seats[role] = launcher.plan_now(dataclasses.replace(first, command=tuple(commands[role])))
                continue
            seat = bot_folder(base / role, "seat.py", script,
                              f'name = "{role}"\nversion = "1"\ncommand = {json.dumps(commands[role])}\n')
            first = load_bot(seat)
            seats[role] = launcher.plan_now(first)
        with seats["recv"].start() as recv, seats["send"].start():
            return recv.receive_line(timeout)
    finally:
        shutil.rmtree(base, ignore_errors=True)
