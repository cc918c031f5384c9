"""Rich markup in a bot's or member's name is text: the four places walk6 escaped without a test
(the local `arena submit` line, `arena replay --as`, the season table, the arena's incident lines)
print a label like ``[/]1[bold red][link=...]`` as written, with no style, link or MarkupError
(which ended the command as "an arena bug", exit 70)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from arena.cli.main import app

MARKUP = "mk@[/]1[bold red][link=http://attacker.example]x"
ENV = {"COLUMNS": "400"}


def _shown(output: str) -> bool:
    """The label as written, and nothing the label asked the terminal for."""
    return MARKUP in output and "\x1b]8;" not in output


def test_the_local_submit_line_shows_the_label_as_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import arena.ladder
    from arena.cli import ladder as cli_ladder
    row = SimpleNamespace(label=MARKUP, rank=1, elo=None, rated=False, margin=0, games=2)
    result = SimpleNamespace(standings=SimpleNamespace(rows=[row]), row=row, status="placed", games_played=2)
    ladder = SimpleNamespace(name="club", placement_id=lambda label: f"club-place-{label}", one_seat_per_author=False)

    async def submit(*args):
        return result
    monkeypatch.setattr(cli_ladder, "_load", lambda *a: (ladder, SimpleNamespace(path=tmp_path / "s.sqlite")))
    monkeypatch.setattr(cli_ladder, "ladder_table", lambda st, highlight=None: "")
    monkeypatch.setattr(arena.ladder, "submit", submit)
    out = CliRunner().invoke(app, ["submit", "random", "--ladder", "club", "--plain"], env=ENV)
    assert out.exit_code == 0, out.output
    assert _shown(out.output) and f"{MARKUP} is #1 of 1 on club" in out.output


def test_replay_as_a_seat_shows_the_labels_as_written() -> None:
    from arena.engine import preset
    from arena.replay.simulate import requests_for, simulate
    from arena.replay.terminal import run_seat_plain
    from arena.replay.view import replay_data
    from arena.safetext import SafeConsole
    from tests.test_replay import mixed_bots, play
    played = play(preset("classic"), 5, mixed_bots(2, 5))
    rp = simulate(played.log)
    data = replay_data(rp)
    data["labels"] = [MARKUP, "random@1"]
    out = io.StringIO()
    console = SafeConsole(file=out, width=400)  # no terminal: markup parsed would drop the [..]
    run_seat_plain(console, data, requests_for(rp, 0)[:1])
    assert _shown(out.getvalue()) and "Decision 1/" in out.getvalue()


def test_the_season_table_shows_the_bots_as_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib

    from arena.cli import ladder as cli_ladder
    seasons = importlib.import_module("arena.ladder.seasons")
    s = SimpleNamespace(number=1, ends_at=None, end_games=100, ended=None, open=True, members=[MARKUP],
                        commitment="ab" * 32, frozen={"carry": 0.5})
    rows = [SimpleNamespace(rank=1, division=0, bot=MARKUP, elo=1510.0, lo=1400.0, hi=1620.0, games=40)]
    monkeypatch.setattr(cli_ladder, "_load", lambda *a: (SimpleNamespace(name="club"), SimpleNamespace()))
    monkeypatch.setattr(seasons, "current", lambda db, name: s)
    monkeypatch.setattr(seasons, "standings_of", lambda db, ladder, season: rows)
    out = CliRunner().invoke(app, ["ladder", "club", "season", "show"], env=ENV)
    assert out.exit_code == 0, out.output
    assert _shown(out.output) and "Season 1" in out.output


INCIDENT = f"referee worker 2 died during a game of {MARKUP}; replaced, its games played again"


def test_incident_lines_of_a_tournament_show_the_text_as_written() -> None:
    from arena.safetext import SafeConsole
    from arena.tournament.live import PlainReporter, RichReporter
    out = io.StringIO()
    rich = RichReporter(SafeConsole(file=out, width=400))  # no terminal: markup parsed would drop the [..]
    rich.incident(INCIDENT)
    rich.finished(False)
    plain = io.StringIO()
    PlainReporter(stream=plain).incident(INCIDENT)
    for text in (out.getvalue(), plain.getvalue()):
        assert INCIDENT in text and "\x1b]8;" not in text, text


def test_incident_lines_of_a_match_show_the_text_as_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from arena.ladder import match
    from arena.ladder.config import LadderError

    async def run_match(*args, on_incident, **kw):
        on_incident(INCIDENT)
        raise LadderError("stopped here by the test")
    monkeypatch.setattr(match, "run_match", run_match)
    out = CliRunner().invoke(app, ["match", "random", "lowest", "--no-store", "-j", "1"], env=ENV)
    assert out.exit_code == 2 and "stopped here by the test" in out.output, out.output
    assert f"arena: {INCIDENT}" in out.output


def test_the_report_warnings_show_ladder_game_ids_as_written(tmp_path: Path) -> None:
    """`arena report` warns about each game it cannot replay and lists those that do not match their
    logs, by game id; a ladder's game ids hold the bots' labels."""
    from arena.engine import preset
    from arena.replay.simulate import simulate
    from tests.test_replay import mixed_bots, play, rewrite_log, store_games
    unreadable = play(preset("classic"), 5, mixed_bots(2, 5), game_id=f"club-{MARKUP}-000001")
    tampered = play(preset("classic"), 6, mixed_bots(2, 6), game_id=f"club-{MARKUP}-000002")
    db = store_games(tmp_path / "s.sqlite", [unreadable, tampered], tid="club")
    rewrite_log(db, unreadable.record.game_id, {**unreadable.log, "rules": {"deck": "no such deck"}})
    log = tampered.log
    log["result"]["reason"] = "not what happened"
    rewrite_log(db, tampered.record.game_id, log)
    db.close()
    assert not simulate(log).ok
    out = CliRunner().invoke(app, ["report", "club", "--html", str(tmp_path / "r.html"),
                                   "--store", str(tmp_path / "s.sqlite")], env=ENV)
    assert out.exit_code == 0, out.output
    assert f"club-{MARKUP}-000001: the log's rules cannot be loaded" in out.output
    assert f"do not match their logs: club-{MARKUP}-000002" in out.output
    assert _shown(out.output)
