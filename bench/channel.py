"""What the channel benches (bench_*_channel.py) share: the two seats' bot folders, the lines a
seat wrote in a game, and how many bits a decoded signal carries."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence


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


def threshold_error(pairs: Sequence[tuple[float, int]]) -> float:
    """The error rate of the best single threshold (a 1 above it), as a pair of seats could learn
    it in a first game: (measured gap, bit sent) pairs."""
    return min(sum((g > t) != bool(b) for g, b in pairs) for t in sorted(g for g, _ in pairs)) / len(pairs)
