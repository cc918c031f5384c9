"""Check a ladder season from its published files alone: the export of its games
(``arena ladder NAME season show N --export FILE``), the secret revealed when it ended and the
hash published when it began. Nothing else of the arena is read: no store, no bot.

Run as ``python -m arena.replay.verify FILE --secret HEX --commitment HEX`` (each may also be a
file holding the value), or ``arena replay FILE --verify --secret HEX --commitment HEX``. It
proves, or names the game that breaks:

* the secret is the one committed to (its sha256 is the published hash);
* every game was dealt from it, at the place in its batch its index gives (the batch's base seed
  is the public one of its number, the table and deal follow from the index), in the seat
  rotation that place gives: so no deal was chosen for anyone once the hash was out;
* every game was played by the rules: the engine replays its log and reaches its result.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tournament.seeds import commitment, deal_seed, ladder_batch_seed
from .simulate import ReplayError, simulate


@dataclass
class SeasonCheck:
    ladder: str = ""
    season: int = 0
    games: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.games > 0

    def as_json(self) -> dict[str, Any]:
        return {"ladder": self.ladder, "season": self.season, "games": self.games, "ok": self.ok,
                "problems": self.problems}


def verify_season(items: Iterable[dict[str, Any]], secret: bytes, published: str) -> SeasonCheck:
    """Every check of the module's docstring over an export's items (its header first)."""
    out = SeasonCheck()
    it = iter(items)
    head = next(it, None)
    if not isinstance(head, dict) or head.get("kind") != "season":
        out.problems.append("the export does not begin with its season header")
        return out
    out.ladder, out.season = str(head.get("ladder", "")), int(head.get("season", 0))
    if commitment(secret) != published.strip().lower():
        out.problems.append(f"the secret does not match the published hash: its sha256 is {commitment(secret)}, "
                            f"the hash published at the start was {published.strip()}")
        return out
    if head.get("commitment") != published.strip().lower():
        out.problems.append("the export names another hash than the one published")
    seats_n = int(head["seats"])
    first_seats: dict[tuple[str, int, int], list[str]] = {}
    games = [g for g in it]
    for g in games:
        gid = g.get("id", "?")
        try:
            _check_game(out, g, head, secret, seats_n, first_seats)
        except (KeyError, TypeError, ValueError) as e:
            out.problems.append(f"game {gid}: unreadable entry ({e})")
    out.games = len(games)
    if head.get("games") != len(games):
        out.problems.append(f"the header says {head.get('games')} games; the export holds {len(games)}")
    if not games:
        out.problems.append("the export holds no games")
    return out


def _check_game(out: SeasonCheck, g: dict[str, Any], head: dict[str, Any], secret: bytes, k: int,
                first_seats: dict[tuple[str, int, int], list[str]]) -> None:
    gid, batch, index = g["id"], g["batch"], int(g["index"])
    number = int(batch["number"])
    if not int(head["first_batch"]) <= number <= int(head["last_batch"]):
        out.problems.append(f"game {gid}: batch {number} is not one of the season's")
    base = ladder_batch_seed(head["ladder"], int(head["ladder_seed"]), number)
    if int(batch["base"]) != base:
        out.problems.append(f"game {gid}: its batch's base seed {batch['base']} is not batch {number}'s public one")
    tables, deals = int(batch["tables"]), int(batch["deals"])
    rotation, table, deal = index // (tables * deals), (index // deals) % tables, index % deals
    if rotation >= k:
        out.problems.append(f"game {gid}: index {index} is past its batch's {tables * deals * k} games")
        return
    if int(g["seed"]) != deal_seed(secret, base, table, deal):
        out.problems.append(f"game {gid}: not dealt from the season's secret (table {table}, deal {deal} of batch "
                            f"{number} has another deal)")
    key = (g["tournament"], table, deal)
    seats = list(g["seats"])
    if rotation == 0:
        first_seats[key] = seats
    elif key in first_seats and seats != first_seats[key][rotation:] + first_seats[key][:rotation]:
        out.problems.append(f"game {gid}: its seats are not rotation {rotation} of its table's")
    log = g.get("log")
    if not isinstance(log, dict):
        out.problems.append(f"game {gid}: the export has no log for it")
        return
    if int(log.get("seed", -1)) != int(g["seed"]) or list(log.get("players", [])) != [b.partition("@")[0] for b in seats]:
        out.problems.append(f"game {gid}: its log is of another deal or other seats")
    try:
        rp = simulate(log)
    except ReplayError as e:
        out.problems.append(f"game {gid}: its log cannot be replayed: {e}")
        return
    if not rp.ok:
        out.problems.append(f"game {gid}: not played by the rules: {rp.mismatches[0]}")
    elif rp.result != g["result"]:
        out.problems.append(f"game {gid}: the result listed is not the one its moves reach")


def read_export(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def value(text: str) -> str:
    """A value given on the command line, or the file that holds it (a published .txt or JSON)."""
    p = Path(text)
    if len(text) != 64 and p.is_file():
        raw = p.read_text(encoding="utf-8").strip()
        if raw.startswith("{"):
            data = json.loads(raw)
            return str(data.get("secret") or data.get("commitment") or "")
        return raw
    return text.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m arena.replay.verify", description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path, help="the season's exported games (JSONL)")
    ap.add_argument("--secret", required=True, help="the revealed secret (hex), or a file holding it")
    ap.add_argument("--commitment", required=True, help="the hash published at the start (hex), or a file holding it")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    try:
        items = read_export(args.export)
        secret = bytes.fromhex(value(args.secret))
        published = value(args.commitment)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    check = verify_season(items, secret, published)
    if args.json:
        print(json.dumps(check.as_json(), indent=2))
    else:
        print(report(check))
    return 0 if check.ok else 1


def report(check: SeasonCheck) -> str:
    head = f"season {check.season} of {check.ladder}: {check.games} games"
    if check.ok:
        return f"{head}: every game was dealt from the committed secret and played by the rules"
    return "\n".join([f"{head}: {len(check.problems)} problem(s)"] + [f"  {p}" for p in check.problems])


if __name__ == "__main__":
    sys.exit(main())
