"""#35, an outside round as a bot author at a strangers' table: what earlier games show.

1. Every placement dealt the cards the ladder had already shown. A ladder's seeding round-robin and
   every newcomer's placement gauntlet were dealt from the ladder's own seed, ``deal_seed(secret,
   ladder.seed, table, deal)``, so placement table ``t`` dealt exactly the cards of the seeding
   round-robin's table ``t`` and of every earlier placement's. Seen on 866824f with a ladder of three
   initial bots and two submissions (``arena submit``, bubblewrap): one deal seed in the seeding
   round-robin (random against lowest) and in both placements (each against random). A game's end,
   its stored record and its replay show every card, so an author who read the seeding round-robin's
   games (or his first version's placement) could ship a bot holding those deals: its first view
   names the deal, and then it knows the opponent's hand, the face-down cards and the stock through
   its whole placement, in every mode, gVisor included. Now each of a ladder's own tournaments deals
   from a public base of its own (``seeds.ladder_tournament_seed``), kept in its stored config, so a
   run begun before resumes with the cards it began with.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import trio

from arena.bots.manifest import BUNDLED_DIR
from arena.ladder import RunContext, load_ladder, open_store, submit

from .checks import fixed_secret
from .fakes import policy_launcher


async def _ok_check(spec):
    return {"ok": True, "faults": [], "bot": spec.label}


def _bot(tmp: Path, bundled: str, version: str, author: str) -> Path:
    """A copy of a bundled bot under a version and an author of its own (the fake launcher plays it
    by name)."""
    dest = tmp / f"{bundled}-{version}"
    shutil.copytree(BUNDLED_DIR / bundled, dest, ignore=shutil.ignore_patterns("__pycache__"))
    toml = dest / "bot.toml"
    text = toml.read_text().replace('version = "1.0"', f'version = "{version}"')
    toml.write_text(text.replace('author = "Palace Arena"', f'author = "{author}"'))
    return dest


# --------------------------------------------------------------------------- 1. placements' deals

def test_no_placement_deals_cards_the_ladder_has_already_shown(tmp_path: Path) -> None:
    fixed_secret(tmp_path)  # one store, one secret: what decides the cards is the seeds alone
    body = {"rules": "classic", "seats": 2, "deals": 2, "max_turns": 300, "concurrency": 1,
            "bots": ["random", "lowest", "highest"], "store": str(tmp_path / "store.sqlite")}
    (tmp_path / "open.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in body.items()))
    ladder = load_ladder(tmp_path / "open.toml")
    store = open_store(ladder)
    try:
        ctx = RunContext(launcher=policy_launcher(), checker=_ok_check, say=lambda text: None)
        first = trio.run(submit, ladder, str(_bot(tmp_path, "lowest", "2.0", "mallory")), store, ctx)
        second = trio.run(submit, ladder, str(_bot(tmp_path, "heuristic", "2.0", "mallory")), store, ctx)
        assert first.status == second.status == "placed"
        shown: dict[int, str] = {}  # deal seed -> the first of the ladder's tournaments that dealt it
        for tid in (ladder.seed_id, ladder.placement_id(first.label), ladder.placement_id(second.label)):
            games = store.games(tournament=tid, limit=1000)
            assert games, tid
            dealt = {int(g["seed"]) for g in games}
            again = {seed: shown[seed] for seed in dealt if seed in shown}
            assert not again, f"{tid} dealt {len(again)} deal(s) that earlier games showed whole: {again}"
            shown.update(dict.fromkeys(dealt, tid))
    finally:
        store.close()
