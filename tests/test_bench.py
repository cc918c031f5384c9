"""The course bench (arena.tournament.bench): members against graded reference bots, same deals, a
deadline snapshot, grades by the organiser's bands. Bots are in-process policies by folder name."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
import trio

from arena.tournament.bench import grade_of, grades, load_bench, run_bench
from arena.tournament.config import ConfigError
from arena.tournament.seeds import SECRET_FILE
from arena.tournament.store import Store
from tests.fakes import POLICIES, ScriptedConnection, policy_bot

ROOT = Path(__file__).resolve().parents[1]
KIND = {"weak": "random", "mid": "lowest", "strong": "heuristic", "ann": "heuristic", "bob": "highest"}


def launcher(begun: list[tuple[str, str, int]] | None = None):
    def launch(spec):
        conn = ScriptedConnection(policy_bot(POLICIES[KIND[spec.name]](), spec.name))
        if begun is not None:
            send = conn.send_line

            def send_line(text: str, **kw) -> None:
                msg = json.loads(text)
                if msg.get("type") == "start":
                    begun.append((spec.name, msg["game"], msg["seat"]))
                send(text, **kw)
            conn.send_line = send_line
        return conn
    return launch


def folder(where: Path, name: str) -> None:
    shutil.copytree(ROOT / "bots" / "lowest", where / name, ignore=shutil.ignore_patterns("__pycache__"))
    toml = where / name / "bot.toml"
    toml.write_text(toml.read_text().replace('name = "lowest"', f'name = "{name}"'))


def bench_file(tmp_path: Path, deadline: str = "", deals: int = 2) -> Path:
    for n in KIND:
        folder(tmp_path / "bots", n)
    line = f'deadline = "{deadline}"\n' if deadline else ""
    (tmp_path / "bench.toml").write_text(
        'references = ["bots/weak", "bots/mid", "bots/strong"]\nmembers = ["bots/ann", "bots/bob"]\n'
        f'deals = {deals}\nstore = "s.sqlite"\n{line}[bands]\nA = 0.6\nB = 0.4\nC = 0.0\n')
    return tmp_path / "bench.toml"


def fixed_secret(store_dir: Path) -> None:
    """The same deals every run: grades are then a fact of the policies, not of a draw."""
    path = store_dir / SECRET_FILE
    path.write_bytes(bytes(range(32)))
    path.chmod(0o600)


def test_members_play_only_references_on_the_same_deals_and_are_graded(tmp_path, monkeypatch):
    bench = load_bench(bench_file(tmp_path))
    fixed_secret(Path(bench.store).parent)
    db = Store(bench.store)
    labels = trio.run(lambda: run_bench(bench, db, now=dt.datetime.now(dt.timezone.utc), launcher=launcher()))
    assert labels == ["ann@1.0", "bob@1.0"]
    refs = {"weak@1.0", "mid@1.0", "strong@1.0"}
    deals: dict[str, set[tuple[int, tuple[str, ...]]]] = {}
    for member in labels:
        games = db.games(tournament=f"{bench.name}/{member}", limit=100)
        assert len(games) == 3 * 2 * 2  # a table per reference, two deals, both seatings
        for g in games:
            others = [s for s in g["seats"] if s != member]
            assert member in g["seats"] and set(others) <= refs  # never another member
        deals[member] = {(g["seed"], tuple("me" if s == member else s for s in g["seats"])) for g in games}
    assert deals["ann@1.0"] == deals["bob@1.0"]  # the same deals in the same seats

    rows = grades(bench, db, labels)
    ann, bob = rows
    assert ann.score > bob.score and ann.grade in ("A", "B") and bob.grade == "C"
    assert set(ann.by_reference) == refs and ann.by_reference["weak@1.0"] >= ann.by_reference["strong@1.0"]
    db.close()

    # the command again: it plays nothing new, prints the grades and writes them as CSV
    from typer.testing import CliRunner

    import arena.tournament.bench as module
    from arena.cli.main import app
    real = module.run_bench
    monkeypatch.setattr(module, "run_bench", lambda *a, **kw: real(*a, **kw, launcher=launcher()))
    out = tmp_path / "grades.csv"
    shown = CliRunner().invoke(app, ["bench", str(tmp_path / "bench.toml"), "--csv", str(out)])
    assert shown.exit_code == 0, shown.output
    assert f"bob@1.0: C (score {bob.score:.3f} in 12 games; " in shown.output
    assert len(Store(bench.store).games(limit=1000)) == 24
    table = list(csv.DictReader(out.open()))
    assert [r["member"] for r in table] == labels and table[1]["grade"] == "C"
    assert table[0]["vs weak@1.0"] == f"{ann.by_reference['weak@1.0']:.3f}"


def test_the_deadline_snapshots_members_and_nothing_is_played_before_it(tmp_path):
    bench = load_bench(bench_file(tmp_path, "2030-01-01T12:00:00Z", deals=1))
    db = Store(bench.store)
    early = dt.datetime(2030, 1, 1, 11, 59, tzinfo=dt.timezone.utc)
    with pytest.raises(ConfigError, match="deadline is 2030-01-01T12:00:00"):
        trio.run(lambda: run_bench(bench, db, now=early, launcher=launcher()))
    assert db.count_games() == 0
    late = dt.datetime(2030, 1, 2, tzinfo=dt.timezone.utc)
    trio.run(lambda: run_bench(bench, db, now=late, launcher=launcher()))
    row = db.bot("ann@1.0")
    assert row is not None and Path(row["path"]).parent.parent.name == "bench"  # the copy played, not the folder
    (tmp_path / "bots" / "ann" / "bot.py").write_text("# changed after the deadline\n")
    assert "changed" not in (Path(row["path"]) / "bot.py").read_text()


def test_bands_and_bad_files():
    assert grade_of(0.61, {"A": 0.6, "B": 0.4, "C": 0.0}) == "A"
    assert grade_of(0.4, {"A": 0.6, "B": 0.4, "C": 0.0}) == "B"
    assert grade_of(0.1, {"A": 0.6, "B": 0.4}) == "B"  # below every floor: the lowest band


def test_a_deadline_without_its_zone_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="give its zone"):
        load_bench(bench_file(tmp_path, "2030-01-01T12:00:00"))


def test_the_command_refuses_before_the_deadline_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from arena.cli.main import app
    shown = CliRunner().invoke(app, ["bench", str(bench_file(tmp_path, "2999-01-01T00:00:00Z"))])
    assert shown.exit_code == 2 and "error: bench bench: its deadline is 2999-01-01T00:00:00+00:00" in shown.output
    assert "Traceback" not in shown.output and not (tmp_path / "bench").exists()


def test_members_taken_from_a_ladders_active_versions_at_the_deadline(tmp_path):
    """A bench whose members are a ladder's: at its first run after the deadline it takes each bot's
    newest active version (ann@2.0, not ann@1.0; not bob, suspended) and keeps that list, so a
    version placed later (bob@2.0) joins no bench."""
    from arena.bots.manifest import load_bot
    from arena.cli.bench import ladder_versions
    from arena.ladder import load_ladder, open_store
    from arena.ladder.tables import MemberStatus, _add_member, set_status
    from tests.test_ladder import write_ladder

    ladder = load_ladder(write_ladder(tmp_path, "club", store=str(tmp_path / "l.sqlite")))
    lstore = open_store(ladder)
    for name in ("weak", "mid", "strong", "ann", "bob"):
        folder(tmp_path / "bots", name)

    def version(name: str, v: str) -> Path:
        d = tmp_path / "bots" / f"{name}-{v}"
        shutil.copytree(tmp_path / "bots" / name, d)
        (d / "bot.toml").write_text((d / "bot.toml").read_text().replace('version = "1.0"', f'version = "{v}"'))
        return d

    for d in (tmp_path / "bots" / "ann", tmp_path / "bots" / "bob", version("ann", "2.0")):
        _add_member(lstore, ladder, load_bot(str(d)), "submitted", "test")
    set_status(lstore, "club", "bob@1.0", MemberStatus.SUSPENDED, "test")
    (tmp_path / "bench.toml").write_text(
        'references = ["bots/weak", "bots/mid", "bots/strong"]\nladder = "club"\nladder_store = "l.sqlite"\n'
        'deadline = "2020-01-01T00:00:00Z"\ndeals = 1\nstore = "b.sqlite"\n')
    bench = load_bench(tmp_path / "bench.toml")
    db = Store(bench.store)
    now = dt.datetime.now(dt.timezone.utc)
    assert trio.run(lambda: run_bench(bench, db, now=now, launcher=launcher(), from_ladder=ladder_versions)) == ["ann@2.0"]
    assert db.count_games(tournament=f"{bench.name}/ann@2.0") == 6
    _add_member(lstore, ladder, load_bot(str(version("bob", "2.0"))), "submitted", "test")
    assert len(ladder_versions(bench)) == 2  # the ladder now has two active bots
    assert trio.run(lambda: run_bench(bench, db, now=now, launcher=launcher(), from_ladder=ladder_versions)) == ["ann@2.0"]
    db.close()
    lstore.close()


@pytest.mark.parametrize("body, error", [
    ('deadline = "2020-01-01T00:00:00Z"\n', "give the members' folders, or a ladder"),
    ('ladder = "club"\n', "taken at the deadline: give one"),
])
def test_a_bench_needs_members_and_a_ladder_needs_a_deadline(tmp_path, body, error):
    (tmp_path / "bench.toml").write_text('references = ["random"]\n' + body)
    with pytest.raises(ConfigError, match=error):
        load_bench(tmp_path / "bench.toml")
