"""Issue 38's done-when, from files, without bot processes: a 24-bot 4-seat Swiss of 6 rounds
and a knockout seeded from it.

    python bench/bench_done_when.py

The two tournament files are written to a temporary folder and read by ``load_config``; the
stages come from the tournament's own staging (``formats.stages``, carrying the stages so far
from one stage to the next as ``arena tournament`` does), each game's finishing order from a
fixed strength order with a deal's luck worth a few places, and every game is saved to a real
store, from which the knockout is seeded as ``arena tournament`` seeds it. Prints per Swiss
round the repeat meetings the pairing kept and the seconds its staging took, carried and
recomputed from nothing (as a resumed run stages), then the bracket and its winner. Exit 1 when
an invariant fails: every bot once a round, every table all four rotations, the report's repeat
count equal to the pairs that really met again, carried and recomputed stages equal, the stages
read back from the store as the report and `arena serve` draw them (6 rounds of 6 tables of 4;
the bracket's 23 matches and winner), the top 8 seeds waiting out the first round, the
strongest bot winning.
(Not a test: it takes several seconds on a loaded machine.)
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.tournament.config import load_config  # noqa: E402
from arena.replay.html import stages_html  # noqa: E402
from arena.tournament.formats import event_view, pending, stages, stored_results, winner  # noqa: E402
from arena.tournament.run import seeded_order  # noqa: E402
from arena.tournament.store import Store  # noqa: E402

BOTS = [f"b{i:02d}" for i in range(24)]
SECRET = b"k" * 32


def strength(bot: str, seed: int) -> float:
    """Lower index is stronger; a deal's luck (from its seed) is worth up to 3.5 places."""
    i = int(bot[1:])
    return -i + ((seed >> (i % 40)) & 7) / 2


def record(game_id: str, seed: int, seats: list[str]) -> dict:
    order = sorted(range(len(seats)), key=lambda s: -strength(seats[s], seed))
    return {"game_id": game_id, "seed": seed, "rules": {}, "turns": 1, "wall_ms": 0, "faults": [],
            "think_ms": [0.0] * len(seats), "decisions": [1] * len(seats),
            "result": {"reason": "played_out", "order": [[s] for s in order], "draw": False, "complete": True}}


def play_out(cfg, bots: list[str], db: Store, failed: list[str]) -> tuple[list, list[float], list[float]]:
    """Plays the event stage by stage as ``arena tournament`` does (the stages so far carried from
    one stage to the next); each stage is also staged from nothing, as a resumed run does, and the
    two must agree. Returns the stages and both timings per stage."""
    stored: dict = {}
    took, again = [], []
    known: list = []
    db.begin_tournament(cfg.name, {**cfg.fingerprint(), "order": bots}, 0)  # as run.py stores a staged event
    while True:
        t = time.perf_counter()
        known = stages(cfg, bots, SECRET, stored, known=known)
        took.append(time.perf_counter() - t)
        t = time.perf_counter()
        fresh = stages(cfg, bots, SECRET, stored)
        again.append(time.perf_counter() - t)
        check(fresh == known, f"{cfg.name}: stage {len(known)} the same carried and recomputed", failed)
        stage = pending(known)
        if stage is None:
            return known, took, again
        for g in stage.games:
            seats = list(g.seats)
            rec = record(f"{cfg.name}-{g.index}", g.seed, seats)
            db.save_game(cfg.name, g.index, seats, rec)
            stored[g.index] = (seats, rec["result"])


def check(ok: bool, what: str, failed: list[str]) -> None:
    if not ok:
        failed.append(what)


def main() -> int:
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        names = "[" + ", ".join(f'"{b}"' for b in BOTS) + "]"
        (tmp / "swiss.toml").write_text(f'name = "club-swiss"\nformat = "swiss"\nseats = 4\nrounds = 6\n'
                                        f'deals = 1\nbots = {names}\n')
        (tmp / "knockout.toml").write_text('name = "club-cup"\nformat = "knockout"\ndeals = 1\n'
                                           f'seeding = "club-swiss"\nbots = {names}\n')
        db = Store(tmp / "s.sqlite")
        swiss = load_config(tmp / "swiss.toml")
        rounds, took, again = play_out(swiss, BOTS, db, failed)
        check(len(rounds) == 6, "six rounds", failed)
        met: list[frozenset[str]] = []
        for r, s, s0 in zip(rounds, took, again):
            pairs = [frozenset(p) for t in r.tables for p in itertools.combinations(t, 2)]
            again = sum(met.count(p) for p in pairs)
            met += pairs
            print(f"{r.title}: {len(r.tables)} tables, {len(r.games)} games, repeat meetings {again} "
                  f"(reported {r.pairing.repeats if r.pairing else '-'}), staging {s:.2f} s "
                  f"(recomputing every earlier round: {s0:.2f} s)")
            check(sorted(itertools.chain(*r.tables)) == sorted(BOTS) and not r.byes, f"{r.title}: every bot once", failed)
            check(len(r.games) == 4 * len(r.tables), f"{r.title}: every rotation", failed)
            check(r.pairing is not None and r.pairing.repeats == again, f"{r.title}: repeats as reported", failed)
        print(f"Swiss: {db.count_games(tournament='club-swiss')} games; pairs that met more than once: "
              f"{len(met) - len(set(met))}")
        view = event_view(db.tournament("club-swiss")["config"], stored_results(db, "club-swiss"))
        page = stages_html("swiss", view, stored=stored_results(db, "club-swiss"))
        check([s.tables for s in view] == [s.tables for s in rounds], "the store's view (report, web) seats as played",
              failed)
        check(page.count("<h3>round ") == 6 and page.count('class="table"') == 36
              and page.count('class="seat"') == 144 and "in play" not in page, "the rounds page: 6 x 6 tables of 4",
              failed)
        ko = load_config(tmp / "knockout.toml")
        order = seeded_order(ko, BOTS, db)
        print("knockout seeding (from the Swiss):", " ".join(order))
        bracket, _, _ = play_out(ko, order, db, failed)
        for s in bracket:
            print(f"{s.title}: " + " | ".join(" v ".join(t) for t in s.tables))
        drawn = stages_html("knockout", event_view(db.tournament("club-cup")["config"], stored_results(db, "club-cup")),
                            winner(ko, bracket))
        check(drawn.count('class="table"') == 23 and '<h3>winner</h3><div class="table went-on">b00' in drawn,
              "the bracket page: 23 matches and the winner", failed)
        first = set(itertools.chain(*bracket[0].tables))
        check(first == set(order[8:]), "the top 8 seeds wait out round 1 of a 24-bot bracket", failed)
        champion = winner(ko, bracket)
        print("winner:", champion)
        check(champion == "b00", "the strongest bot wins", failed)
        db.close()
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
