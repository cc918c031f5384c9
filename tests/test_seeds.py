"""Seeds no bot can use: ``arena check`` deals from a secret, a bot's ``start.seed`` says nothing
about its deal, and the store's secret key is refused when anyone but its owner could read it.

The seed tests check properties, not a formula: a bot seed that carried any bits of the deal
seed (say ``(deal ^ seat * K) & 0x7FFF_FFFF``) or tied two seats' seeds together fails them.
"""

from __future__ import annotations

import json
import random
import stat
from pathlib import Path

import pytest

from arena.referee import bot_seed
from arena.tournament import seeds

from .checks import reachable

INVERTER = Path(__file__).resolve().parent / "fairplay_bots" / "seed_inverter"


# ---------------------------------------------------------------- arena check, attacked

def test_a_bot_that_inverts_its_start_seed_learns_nothing_in_arena_check() -> None:
    """The seed inverter tries every deal seed below 65,536 against its ``start.seed`` and breaks
    the protocol if one matches (as it did when check games were dealt with seeds 1000 + game)."""
    from typer.testing import CliRunner

    from arena.cli.main import app
    result = CliRunner().invoke(app, ["check", str(reachable(INVERTER)), "--rules", "classic", "--games", "2",
                                      "--move-ms", "5000", "--json"])
    report = json.loads(result.stdout)
    assert report["played"] == 4 and report["requests"] > 0, (report["stopped"], report["faults"])
    assert report["faults"] == {}, report["faults"]
    assert report["ok"] and result.exit_code == 0


def test_arena_check_deals_differ_from_run_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check run has its own secret: two runs never share a deal seed."""
    import trio

    from arena.bots.manifest import load_bot
    from arena.engine import PRESETS
    from arena.tournament import check

    dealt: list[int] = []
    real = check.play_game

    def spy(players, rules, seed, **kw):
        dealt.append(seed)
        return real(players, rules, seed, **kw)
    monkeypatch.setattr(check, "play_game", spy)
    for _ in range(2):
        trio.run(lambda: check.run_check(load_bot("random"), 2, rules=PRESETS["classic"]))
    assert len(dealt) == 8 and len(set(dealt)) == 8
    assert min(dealt) > 2**32  # 63-bit seeds: none in a range a bot could search


# ---------------------------------------------------------------- start.seed carries nothing of the deal

_RNG = random.Random(25)
DEALS = [_RNG.getrandbits(63) for _ in range(4000)]  # 63-bit deal seeds, as seeds.deal_seed makes them


def _bits(x: int, n: int) -> list[int]:
    return [(x >> i) & 1 for i in range(n)]


def _worst_bias(pairs: list[tuple[int, int]], n_left: int, n_right: int) -> float:
    """The largest |P(bit i of left == bit j of right) - 1/2| over every pair of bits."""
    agree = [[0] * n_right for _ in range(n_left)]
    for left, right in pairs:
        lb, rb = _bits(left, n_left), _bits(right, n_right)
        for i in range(n_left):
            row, li = agree[i], lb[i]
            for j in range(n_right):
                row[j] += li == rb[j]
    return max(abs(a / len(pairs) - 0.5) for row in agree for a in row)


# 4,000 samples: a fair bit pair strays by 0.0079 (one sd); 0.05 is over 6 sd, and the samples are fixed
BIAS = 0.05


@pytest.mark.parametrize("seat", [0, 1, 5])
def test_no_bit_of_a_bot_seed_follows_a_bit_of_the_deal_seed(seat: int) -> None:
    assert _worst_bias([(d, bot_seed(d, seat)) for d in DEALS], 63, 31) < BIAS


def test_no_bit_of_one_seats_seed_follows_another_seats() -> None:
    """Seats are independent: what one bot is given says nothing of another's."""
    for a, b in ((0, 1), (0, 2), (1, 3)):
        assert _worst_bias([(bot_seed(d, a), bot_seed(d, b)) for d in DEALS[:2000]], 31, 31) < 2 * BIAS
    # nor does any fixed combination of two seats' seeds (the XOR of a formula's seat offsets)
    for a, b in ((0, 1), (2, 5)):
        xors = {bot_seed(d, a) ^ bot_seed(d, b) for d in DEALS[:500]}
        diffs = {(bot_seed(d, a) - bot_seed(d, b)) % 2**31 for d in DEALS[:500]}
        assert len(xors) == len(diffs) == 500


def test_a_bot_seed_changes_wholly_when_any_bit_of_the_deal_does() -> None:
    """A one-way function of the deal: flipping any one of its bits changes about half the seed's
    bits (a seed that carried the deal's bits would change in one), so nearby deals cannot be told."""
    sample = DEALS[:300]
    for bit in range(63):
        flipped = [bin(bot_seed(d, 0) ^ bot_seed(d ^ (1 << bit), 0)).count("1") for d in sample]
        mean = sum(flipped) / len(flipped)
        assert 14.0 < mean < 17.0, (bit, mean)  # 15.5 expected; one sd of the mean is 0.16


def test_bot_seeds_fill_31_bits_without_repeats() -> None:
    values = [bot_seed(d, s) for d in DEALS[:1000] for s in range(4)]
    assert all(0 <= v < 2**31 for v in values)
    assert len(set(values)) >= len(values) - 2  # a birthday collision or two in 4,000 draws at most
    assert max(values).bit_length() == 31


# ---------------------------------------------------------------- the store's secret key

@pytest.mark.parametrize("extra", [0o040, 0o020, 0o010, 0o004, 0o002, 0o001, 0o060, 0o044])
def test_a_secret_key_anyone_else_may_touch_is_refused(tmp_path: Path, extra: int) -> None:
    """Group or others: any permission bit beyond the owner's refuses the key (with how to fix it)."""
    one = seeds.load_secret(tmp_path)
    key = tmp_path / seeds.SECRET_FILE
    key.chmod(0o600 | extra)
    with pytest.raises(seeds.SecretError, match="chmod 600"):
        seeds.load_secret(tmp_path)
    key.chmod(0o600)
    assert seeds.load_secret(tmp_path) == one
    key.chmod(0o400)  # read-only for its owner is as private
    assert seeds.load_secret(tmp_path) == one
    assert stat.S_IMODE(key.stat().st_mode) == 0o400
