"""Seasons of a ladder (arena/ladder/seasons.py) and the verifier of a season from its published
files alone (arena/replay/verify.py): frozen rules and members, ends by games, ratings carried
without a jump, divisions by interval, the deal-secret commitment and three attacks on it.

Bots play in-process (tests/fakes.py); each test makes its own store under tmp_path.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from arena.cli.main import app
from arena.ladder import LadderError, load_ladder, open_store, run_ladder
from arena.ladder.seasons import (archived_standings, current, division_of, end_season, published_games, reveal,
                                  season as season_of,
                                  season_games, season_standings, start_season)
from arena.ladder.tables import _add_member
from arena.bots.manifest import load_bot
from arena.replay.verify import verify_season
from arena.tournament.seeds import commitment

from .test_ladder import bot_copy, ctx, write_ladder

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _ladder(tmp_path: Path, **fields):
    # 100 turns: most games against highest run to the cap; a capped game is a result like any other
    # (the seasons' tests read what was stored, not how a game ended)
    path = write_ladder(tmp_path, "sea", bots=["random", "lowest", "highest"],
                        **{"store": str(tmp_path / "s.sqlite"), "max_turns": 100, **fields})
    ladder = load_ladder(path)
    return path, ladder, open_store(ladder)


def _play(ladder, store, games: int):
    return trio.run(lambda: run_ladder(ladder, store, ctx(), games=games))


def _with_season(path: Path, body: str) -> None:
    path.write_text(path.read_text() + "\n[season]\n" + body + "\n")


# --------------------------------------------------------------------------- seasons

def test_the_first_standings_of_a_season_are_the_last_of_the_one_before(tmp_path: Path) -> None:
    path, ladder, store = _ladder(tmp_path)
    _play(ladder, store, 8)  # the seed round-robin: before any season
    start_season(store, ladder)
    _play(ladder, store, 30)
    assert season_games(store, ladder, current(store, ladder.name))
    end_season(store, ladder)
    last = {r.bot: r for r in archived_standings(store, ladder.name, 1)}
    s2 = start_season(store, ladder)
    first = {r.bot: r for r in season_standings(store, ladder, s2)}
    assert set(first) == set(last) and all(r.elo is not None for r in first.values())
    for bot, r in first.items():
        assert r.elo == pytest.approx(last[bot].elo, abs=1e-6), bot  # no jump
        assert r.games == 0
        widen = (r.hi - r.lo) / (last[bot].hi - last[bot].lo)  # carry 0.5: intervals wider by sqrt 2
        assert widen == pytest.approx(1 / math.sqrt(ladder.season.carry), rel=1e-4)
    _play(ladder, store, 12)  # and the season's own games move it from there
    moved = {r.bot: r for r in season_standings(store, ladder, current(store, ladder.name))}
    assert any(abs(moved[b].elo - first[b].elo) > 1e-3 for b in moved)
    assert sum(r.games for r in moved.values()) == 2 * len(season_games(store, ladder, current(store, ladder.name)))
    store.close()


def test_a_season_plays_only_the_versions_it_froze_and_refuses_a_changed_file(tmp_path: Path) -> None:
    path, ladder, store = _ladder(tmp_path)
    _play(ladder, store, 8)
    s = start_season(store, ladder)
    assert s.members == ("highest@1.0", "lowest@1.0", "random@1.0") and len(s.commitment) == 64
    late = load_bot(bot_copy(tmp_path, "heuristic", "2.0"))
    _add_member(store, ladder, late, "submitted", "test")  # joins the ladder mid-season
    _play(ladder, store, 30)
    played = {b for _, _, seats, _ in season_games(store, ladder, s) for b in seats}
    assert played == set(s.members)  # the late member waits for the next season
    with pytest.raises(LadderError, match="another season|still open"):
        start_season(store, ladder)
    path.write_text(path.read_text().replace("max_turns = 100", "max_turns = 400"))
    changed = load_ladder(path)
    assert changed.max_turns == 400
    with pytest.raises(LadderError, match="max_turns during season 1"):
        _play(changed, store, 4)
    end_season(store, ladder)
    s2 = start_season(store, changed)
    assert "heuristic@2.0" in s2.members
    store.close()


def test_a_season_ends_after_its_games_and_reveals_its_secret(tmp_path: Path) -> None:
    path, _, store = _ladder(tmp_path)
    _with_season(path, "games = 10")
    ladder = load_ladder(path)
    _play(ladder, store, 8)
    s = start_season(store, ladder)
    assert s.end_games == 10 and s.secret is None
    _play(ladder, store, 40)  # the run ends the season at the first batch after its 10th game
    assert current(store, ladder.name) is None
    from arena.ladder.seasons import season
    done = season(store, ladder.name, 1)
    assert done.secret is not None and commitment(done.secret) == s.commitment
    assert hashlib.sha256(done.secret).hexdigest() == s.commitment
    assert len(season_games(store, ladder, done)) >= 10
    assert archived_standings(store, ladder.name, 1)
    store.close()


def test_a_season_without_enough_members_or_open_twice_is_refused(tmp_path: Path) -> None:
    _, ladder, store = _ladder(tmp_path)
    with pytest.raises(LadderError, match="active member"):
        start_season(store, ladder)
    with pytest.raises(LadderError, match="no open season"):
        end_season(store, ladder)
    store.close()


# --------------------------------------------------------------------------- divisions

bounds_st = st.lists(st.floats(1000, 2000, allow_nan=False), min_size=0, max_size=4, unique=True).map(
    lambda b: sorted(b, reverse=True))


@given(bounds=bounds_st, lo=st.floats(900, 2100), width=st.floats(0, 400), now=st.integers(0, 4))
@settings(max_examples=400, deadline=None)
def test_a_bot_changes_division_only_when_its_interval_clears_the_boundary(bounds, lo, width, now) -> None:
    now = min(now, len(bounds))
    hi = lo + width
    new = division_of(lo, hi, now, bounds)
    assert 0 <= new <= len(bounds)
    if new < now:  # up: the whole interval is above the new division's floor
        assert lo >= bounds[new]
    if new > now:  # down: the whole interval is below the old division's floor
        assert hi < bounds[now]
    if now < len(bounds) and lo < bounds[now] <= hi:  # an interval across its own floor: it stays
        assert new == now
    if new == now and now > 0:
        assert lo < bounds[now - 1]  # it stayed although it could not move up


def test_divisions_from_the_ladder_file(tmp_path: Path) -> None:
    path, _, store = _ladder(tmp_path)
    _with_season(path, "divisions = [1550.0]")
    ladder = load_ladder(path)
    _play(ladder, store, 8)
    s = start_season(store, ladder)
    _play(ladder, store, 40)
    for r in season_standings(store, ladder, s):
        assert r.division == (0 if r.lo >= 1550 else 1)  # everyone starts in the bottom division
    path.write_text(path.read_text().replace("divisions = [1550.0]", "divisions = [1400.0, 1550.0]"))
    with pytest.raises(LadderError, match="highest first"):
        load_ladder(path)
    store.close()


# --------------------------------------------------------------------------- the verifier

@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory):
    """One ended season for the verifier's tests, played once: they read it (the forgeries are
    deep copies of its published items) and never write to its store."""
    path, ladder, store = _ladder(tmp_path_factory.mktemp("ended"))
    _play(ladder, store, 8)
    start_season(store, ladder)
    _play(ladder, store, 16)
    s = end_season(store, ladder)
    items = list(published_games(store, ladder, s))
    outside = [g for g in store.games(limit=10**9) if not g["tournament"].startswith(ladder.run_prefix)
               or int(g["tournament"][len(ladder.run_prefix):]) < s.first_batch]
    foreign = {**outside[0], "log": store.game_record(outside[0]["id"])}  # a real game, dealt from the store's key
    yield path, ladder, store, s, items, foreign
    store.close()


def test_an_honest_season_verifies_from_its_published_files(ended) -> None:
    _, _, _, s, items, _ = ended
    published = reveal(s)
    check = verify_season(items, bytes.fromhex(published["secret"]), s.commitment)
    assert check.ok and check.problems == [] and check.games == len(items) - 1 > 0


def test_a_game_whose_deal_was_changed_is_named(ended) -> None:
    _, _, _, s, items, foreign = ended
    forged = copy.deepcopy(items)
    victim = forged[3]
    # the strongest forgery: a whole real game, played by the rules, from another deal
    for key in ("seed", "seats", "result"):
        victim[key] = foreign[key]
    victim["log"] = foreign["log"]
    check = verify_season(forged, s.secret, s.commitment)
    assert not check.ok
    assert any(p.startswith(f"game {victim['id']}: not dealt from the season's secret") for p in check.problems)
    assert not any("not played by the rules" in p for p in check.problems)  # the game itself was legal


def test_a_game_whose_move_was_changed_is_named(ended) -> None:
    _, _, _, s, items, _ = ended
    forged = copy.deepcopy(items)
    victim = forged[2]
    step = next(st for st in victim["log"]["steps"] if "request" in st)
    step["action"] = step["action"] + 1
    check = verify_season(forged, s.secret, s.commitment)
    assert [p for p in check.problems if p.startswith(f"game {victim['id']}: not played by the rules")]
    assert len(check.problems) == 1


def test_a_secret_that_does_not_match_the_hash_is_named(ended) -> None:
    _, _, _, s, items, _ = ended
    other = bytes(32)
    check = verify_season(items, other, s.commitment)
    assert not check.ok and check.problems[0].startswith("the secret does not match the published hash")
    # a forger who also swaps the export's hash still has to match the one published at the start
    forged = copy.deepcopy(items)
    forged[0]["commitment"] = commitment(other)
    assert "the secret does not match" in verify_season(forged, other, s.commitment).problems[0]


def test_the_command_line_exports_and_the_standalone_verifier_checks(ended, tmp_path: Path, capsys) -> None:
    from arena.replay.verify import main as verify
    path, ladder, store, s, _, _ = ended
    out = tmp_path / "season1.jsonl"
    shown = runner.invoke(app, ["ladder", str(path), "season", "show", "1", "--export", str(out),
                                "--store", str(store.path)])
    assert shown.exit_code == 0, shown.output
    assert s.commitment in shown.output and s.secret.hex() in shown.output
    args = [str(out), "--secret", s.secret.hex(), "--commitment", s.commitment]
    capsys.readouterr()
    assert verify(args) == 0 and "every game was dealt from the committed secret" in capsys.readouterr().out
    assert verify(args[:2] + ["00" * 32] + args[3:]) == 1
    assert "does not match the published hash" in capsys.readouterr().out
    # the standalone program as a user runs it: its status and one error line, no traceback
    junk = subprocess.run([sys.executable, "-m", "arena.replay.verify", *args[:2], "not-hex", *args[3:]],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert junk.returncode == 2 and junk.stderr.startswith("error:") and "Traceback" not in junk.stderr
    via_replay = runner.invoke(app, ["replay", str(out), "--verify", "--secret", s.secret.hex(), "--commitment",
                                     s.commitment])
    assert via_replay.exit_code == 0, via_replay.output
    lines = out.read_text().splitlines()
    lines[1] = lines[1].replace('"seed":', '"seed":1', 1)  # a deal changed in the file itself
    out.write_text("\n".join(lines) + "\n")
    tampered = runner.invoke(app, ["replay", str(out), "--verify", "--secret", s.secret.hex(), "--commitment",
                                   s.commitment])
    assert tampered.exit_code == 1 and "not dealt from the season's secret" in tampered.output


def test_season_commands(tmp_path: Path) -> None:
    path, ladder, store = _ladder(tmp_path)
    _play(ladder, store, 8)
    where = ["--store", str(store.path)]
    started = runner.invoke(app, ["ladder", str(path), "season", "start", *where])
    assert started.exit_code == 0, started.output
    s = current(store, ladder.name)
    assert s.commitment in started.output and "revealed" not in started.output
    early = runner.invoke(app, ["ladder", str(path), "season", "show", "--export", str(tmp_path / "x.jsonl"), *where])
    assert early.exit_code == 2 and "still open" in early.output
    again = runner.invoke(app, ["ladder", str(path), "season", "start", *where])
    assert again.exit_code == 2 and again.output.startswith("error:")
    bad = runner.invoke(app, ["ladder", str(path), "season", "restart", *where])
    assert bad.exit_code == 2 and "expected one of start, end, show" in bad.output
    _play(ladder, store, 8)
    ended = runner.invoke(app, ["ladder", str(path), "season", "end", "--json", *where])
    assert ended.exit_code == 0, ended.output
    data = json.loads(ended.output)
    assert data["secret"] and hashlib.sha256(bytes.fromhex(data["secret"])).hexdigest() == data["commitment"]
    assert data["standings"] and not data["open"]
    store.close()


def test_the_web_shows_seasons_balance_and_links_them_never_an_open_seasons_secret(tmp_path: Path) -> None:
    from arena.ladder.balance import ladder_balance, ladder_stated
    from tests.test_serve import ServerProc
    path, ladder, store = _ladder(tmp_path)
    _play(ladder, store, 8)
    s1 = start_season(store, ladder)
    _play(ladder, store, 8)
    end_season(store, ladder)
    s2 = start_season(store, ladder)
    secret2 = store.db.execute("SELECT secret FROM deal_secrets WHERE name=?", (s2.secret_name,)).fetchone()[0]
    done = reveal(season_of(store, ladder.name, 1))
    b = ladder_balance(store, ladder)
    stated = ladder_stated(store, ladder)
    batches = [g["tournament"] for g in store.games(limit=10**9) if g["tournament"].startswith(ladder.run_prefix)]
    assert stated.batch == max(Counter(batches).values())  # the focus's games in the largest batch played
    store.close()
    server = ServerProc(tmp_path / "s.sqlite")
    try:
        status, _, body = server.get("/ladders/sea/seasons/1")
        page = body.decode()
        assert status == 200, server.stderr()[-3000:]
        assert s1.commitment in page and done["secret"] in page and "archived" in page
        status, _, body = server.get("/ladders/sea/seasons/2")
        page = body.decode()
        assert status == 200 and s2.commitment in page and bytes(secret2).hex() not in page
        assert "revealed when the season ends" in page
        assert server.get("/ladders/sea/seasons/3")[0] == 404
        assert server.get("/ladders/nothing/seasons/1")[0] == 404

        # a stranger verifies season 1 from the files the server publishes, and nothing else
        from arena.replay.verify import main as verify
        for file in ("games.jsonl", "secret.txt", "commitment.txt"):
            status, _, body = server.get(f"/ladders/sea/seasons/1/{file}")
            assert status == 200 and f'href="/ladders/sea/seasons/1/{file}"' in server.get("/ladders/sea/seasons/1")[2].decode()
            (tmp_path / file).write_bytes(body)
        assert (tmp_path / "commitment.txt").read_text().strip() == s1.commitment
        assert b"stderr" not in (tmp_path / "games.jsonl").read_bytes()  # no bot's private lines
        assert verify([str(tmp_path / "games.jsonl"), "--secret", str(tmp_path / "secret.txt"),
                       "--commitment", str(tmp_path / "commitment.txt")]) == 0
        assert server.get("/ladders/sea/seasons/2/commitment.txt")[2].decode().strip() == s2.commitment
        assert server.get("/ladders/sea/seasons/2/secret.txt")[0] == 404  # open: not yet
        assert server.get("/ladders/sea/seasons/2/games.jsonl")[0] == 404
        assert server.get("/ladders/sea/seasons/1/other.txt")[0] == 404

        status, _, body = server.get("/ladders/sea/balance")
        page = body.decode()
        assert status == 200, server.stderr()[-3000:]
        assert f"spread: games {b.games_spread}, seats {b.seat_spread}" in page
        assert (f"games {stated.games}, games together\n{stated.together} (B = {stated.batch}), seats even: "
                f"<strong>{'within' if stated.holds(b) else 'outside'}</strong>") in page
        assert len(b.rows) == 3
        for r in b.rows:
            shared = list(r.together.values()) or [0]
            cells = "".join(f"<td>{n}</td>" for n in r.seats) + f"<td>{min(shared)}-{max(shared)}</td>"
            assert f">{r.bot}</a></td><td>{r.games}</td>\n{cells}" in page, r.bot
        assert server.get("/ladders/nothing/balance")[0] == 404

        status, _, body = server.get("/ladders/sea")  # the ladder's page links both
        page = body.decode()
        assert status == 200 and 'href="/ladders/sea/balance"' in page
        assert 'href="/ladders/sea/seasons/1"' in page and 'href="/ladders/sea/seasons/2"' in page
    finally:
        server.stop()


def test_a_server_without_the_ladder_file_publishes_a_season_that_verifies(tmp_path: Path) -> None:
    """`arena serve` started without `--ladders` where the ladder's file is reads the copy its store
    keeps: a three-seat ladder of seed 5 publishes its season's games with 3 seats and seed 5, and
    a stranger's check passes (the server took the defaults, 2 seats and seed 1, and every game of
    an honest season was named as dealt wrong)."""
    from arena.replay.verify import main as verify
    from tests.test_serve import ServerProc
    # 100 turns, as _ladder's: a capped game is published and verified like any other
    path = write_ladder(tmp_path, "trio", bots=["random", "lowest", "highest"], seats=3, seed=5,
                        store=str(tmp_path / "data" / "s.sqlite"), max_turns=100)
    ladder = load_ladder(path)
    store = open_store(ladder)
    _play(ladder, store, 3)
    start_season(store, ladder)
    _play(ladder, store, 9)
    s = end_season(store, ladder)
    store.close()
    path.unlink()  # the server's folder of ladder files does not hold it
    out = tmp_path / "stranger"
    out.mkdir()
    server = ServerProc(tmp_path / "data" / "s.sqlite")
    try:
        for file in ("games.jsonl", "secret.txt", "commitment.txt"):
            status, _, body = server.get(f"/ladders/trio/seasons/{s.number}/{file}")
            assert status == 200, file
            (out / file).write_bytes(body)
        status, _, body = server.get("/ladders/trio/balance")
        assert status == 200 and "<th>seat 3</th>" in body.decode() and "<th>seat 4</th>" not in body.decode()
    finally:
        server.stop()
    head = json.loads((out / "games.jsonl").read_text().splitlines()[0])
    assert (head["seats"], head["ladder_seed"]) == (3, 5)
    (tmp_path / "data" / "ladders" / "trio.toml").unlink()  # no copy either: refused, never guessed
    server = ServerProc(tmp_path / "data" / "s.sqlite")
    try:
        status, _, body = server.get(f"/ladders/trio/seasons/{s.number}/games.jsonl")
        assert status == 503 and b"--ladders" in body
        assert server.get(f"/ladders/trio/seasons/{s.number}/commitment.txt")[0] == 200
    finally:
        server.stop()
    assert verify([str(out / "games.jsonl"), "--secret", str(out / "secret.txt"),
                   "--commitment", str(out / "commitment.txt")]) == 0
