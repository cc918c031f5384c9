"""The ladder's two matchmaking policies side by side on one simulated pool: balance and ratings.

    python bench/bench_balance.py [bots] [seats] [games] [seed] [seeds]

Defaults: 12 bots, 2 and then 4 seats, 3000 games, seeds 1-3. Each bot has a hidden strength (Elo, spread 200); a game's
finishing order is drawn from the Plackett-Luce model at those strengths, so no bot process runs.
Both policies run from the same seeding round-robin and the same strengths, batch by batch as
``arena ladder run`` would (matchmaking.choose_table, balance.choose_balanced; one deal a table,
every seat rotation). A newcomer joins halfway. Printed per policy: the balance audit
(games, seats, games shared by two members: spread = most less fewest), the rating fit's 95%
interval widths, and the RMS error of the fitted Elo against the hidden strengths.
Matchmaking refits the ratings as the ladder does (once the games grew by ``REFIT_SHARE``); the
balanced policy reads no rating, so it fits only at the end.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.ladder.balance import audit, choose_balanced, stated_spread  # noqa: E402
from arena.ladder.history import REFIT_SHARE  # noqa: E402
from arena.ladder.matchmaking import Candidate, choose_table, pair_key  # noqa: E402
from arena.ratings import Outcome, fit_elo  # noqa: E402


def draw(table: tuple[str, ...], strength: dict[str, float], rnd: random.Random) -> tuple[str, ...]:
    left, order = list(table), []
    while left:
        w = [10 ** (strength[b] / 400) for b in left]
        pick = rnd.choices(left, w)[0]
        order.append(pick)
        left.remove(pick)
    return tuple(order)


def simulate(policy: str, n: int, k: int, total: int, seed: int) -> None:
    rnd = random.Random(seed)
    bots = [f"bot{i:02d}" for i in range(n)]
    strength = dict(zip(bots, (random.Random(seed + 1).gauss(0, 200) for _ in bots)))
    late = bots.pop()  # joins halfway
    games: list[tuple[str, ...]] = []
    outcomes: Counter[Outcome] = Counter()
    pair_games: Counter[tuple[str, str]] = Counter()
    bot_games: Counter[str] = Counter()
    last_seen: dict[str, int] = {}

    def play(table: tuple[str, ...]) -> None:
        for r in range(len(table)):
            seats = table[r:] + table[:r]
            games.append(seats)
            outcomes[Outcome(tuple((b,) for b in draw(seats, strength, rnd)))] += 1
            bot_games.update(seats)
            last_seen.update(dict.fromkeys(seats, len(games)))
            for a, b in itertools.combinations(seats, 2):
                pair_games[pair_key(a, b)] += 1

    for t in itertools.combinations(bots, k):  # the seeding round-robin, one deal a table
        play(t)
    previous, batch = None, 0
    fit, fitted_at = {}, -1
    while len(games) < total:
        if late not in bots and len(games) >= total // 2:
            bots.append(late)
        if policy == "informative" and (fitted_at < 0 or any(b not in fit for b in bots)
                                        or len(games) - fitted_at >= REFIT_SHARE * fitted_at):
            fit, fitted_at = fit_elo(outcomes), len(games)  # as the ladder refits (history.LadderState.ratings)
        cands = [Candidate(b, bot_games[b], *((fit[b].elo, fit[b].ci_low, fit[b].ci_high) if b in fit else
                                              (None, None, None))) for b in bots]
        if policy == "balanced":
            table = choose_balanced(cands, pair_games, last_seen, seats=k, field_size=3 if k == 2 else k - 1)
        else:
            table = choose_table(cands, pair_games, seats=k, field_size=3 if k == 2 else k - 1,
                                 new_games=20 * k, explore=batch % 4 == 3, previous=previous)
        assert table is not None
        for rest in itertools.combinations(table.field, k - 1):
            play((table.focus, *rest))
        previous, batch = table.focus, batch + 1
    fit = fit_elo(outcomes)
    b = audit(games, bots, k)
    widths = [fit[x].ci_high - fit[x].ci_low for x in bots]
    mean_true = statistics.fmean(strength[x] for x in bots)
    mean_fit = statistics.fmean(fit[x].elo for x in bots)
    rms = math.sqrt(statistics.fmean(((fit[x].elo - mean_fit) - (strength[x] - mean_true)) ** 2 for x in bots))
    per_bot = sorted(r.games for r in b.rows if r.bot != late)
    stated = stated_spread(k, 3 if k == 2 else k - 1)
    print(f"{policy:>11}  games/bot of the first {n - 1}: {per_bot[0]}-{per_bot[-1]}, seat spread "
          f"{b.seat_spread}, games together {b.pair_low}-{b.pair_high} (spread {b.pair_spread}); "
          f"95% width mean {statistics.fmean(widths):.0f} max {max(widths):.0f}; RMS error {rms:.0f} Elo; "
          f"newcomer {bot_games[late]} games; all {n}: games spread {b.games_spread}, "
          f"{'within' if stated.holds(b) else 'OUTSIDE'} the stated spread (games {stated.games}, "
          f"together {stated.together})")


def main(n: int = 12, k: int = 0, total: int = 3000, seed: int = 1, seeds: int = 3) -> None:
    """Seats ``k`` (0: 2 and 4 in one run), each on ``seeds`` seeds from ``seed``."""
    for seats in ((k,) if k else (2, 4)):
        seeding = math.comb(n - 1, seats) * seats
        if seeding >= total:  # the newcomer would never join and no policy would choose a table
            sys.exit(f"{n - 1} bots' seeding round-robin at {seats} seats is {seeding} games: ask for more than that")
        for s in range(seed, seed + seeds):
            print(f"{n} bots ({n - 1} at the start, one joining halfway), {seats} seats, about {total} games, seed {s}")
            for policy in ("informative", "balanced"):
                simulate(policy, n, seats, total, s)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
