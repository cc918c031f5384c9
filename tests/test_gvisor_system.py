"""A gVisor seat's system view per ladder and per run (arena.bots.filesystem.system_paths): the
languages a ladder or a tournament names are let in, with their libraries, locked warm like the
rest; a path no bot may see is refused with a clear message, and a language not named is refused
at the bot's start, never let in."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from arena.bots.containment import Containment
import pytest

from arena.bots.errors import BotCommandError
from arena.bots.filesystem import SystemViewError, system_paths
from arena.bots.launch import ContainmentError, Launcher
from arena.ladder.config import LadderError, load_ladder
from arena.tournament.config import ConfigError, load_config

from tests.test_gvisor import ENV, arena, needs_gvisor, scratch  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("entry, why", [
    ("usr/bin/node", "no such preset"), ("cobol", "no such preset"), ("", "preset name"),
    ("/proc/self", "refused"), ("/sys", "refused"), ("/dev/null", "refused"), ("/run", "refused"),
    ("/tmp", "refused"), ("/home", "refused"), ("/root", "refused"), ("/", "refused"), ("/var", "refused"),
    ("/usr/bin/no-such-interpreter", "not on this host")])
def test_a_system_path_no_bot_may_see_is_refused(entry: str, why: str) -> None:
    with pytest.raises(SystemViewError, match=why):
        system_paths([entry])


def test_the_store_and_its_data_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "arena-data"
    (data / "runs").mkdir(parents=True)
    link = tmp_path / "innocent"
    link.symlink_to(data / "runs")  # resolved before the check
    for p in (data, data / "runs", link, tmp_path):
        with pytest.raises(SystemViewError, match="refused"):
            system_paths([str(p)], refused=[data])


def test_presets_name_the_starters_languages() -> None:
    assert system_paths(["javascript"]) == ("/usr/bin/node",)
    assert {"/usr/bin/java", "/usr/lib/jvm/java-17-openjdk-amd64/lib"} <= set(system_paths(["java"]))
    assert system_paths(["python", "bash", "/usr/bin/python3"]) == ()  # the base view already


def test_ladder_and_tournament_files_check_their_system_list(tmp_path: Path) -> None:
    (tmp_path / "ok.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\nsystem = ["javascript"]\n')
    assert load_ladder(tmp_path / "ok.toml", tmp_path, check_bots=False).system == ["javascript"]
    (tmp_path / "proc.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\nsystem = ["/proc"]\n')
    with pytest.raises(LadderError, match="system path /proc .* refused"):
        load_ladder(tmp_path / "proc.toml", tmp_path, check_bots=False)
    (tmp_path / "plain.toml").write_text('bots = ["random", "lowest"]\nsystem = ["javascript"]\n')
    with pytest.raises(LadderError, match="needs gvisor = true"):
        load_ladder(tmp_path / "plain.toml", tmp_path, check_bots=False)
    store = tmp_path / "data" / "arena.sqlite"
    store.parent.mkdir()
    with pytest.raises(ConfigError, match="refused"):
        load_config(None, {"bots": ["random", "lowest"], "gvisor": True, "system": [str(store.parent)],
                           "store": str(store)})


def test_the_list_reaches_every_launcher_and_is_checked_again_there(tmp_path: Path) -> None:
    from arena.ladder.placement import check_containment
    from arena.tournament.executors import BotSetup, default_launcher
    from arena.tournament.run import bot_setup
    (tmp_path / "strangers.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\nsystem = ["java"]\n')
    ladder = load_ladder(tmp_path / "strangers.toml", tmp_path, check_bots=False)
    assert check_containment(ladder)["launcher"].system == ("java",)
    cfg = ladder.tournament("t", format="round-robin", bots=ladder.bots)
    setup = BotSetup.from_wire(bot_setup(cfg, {}).wire())  # what a worker gets
    assert default_launcher(setup).system == ("java",)
    with pytest.raises(ContainmentError, match="/proc .* refused"):  # a forged wire is refused at the start
        Launcher(containment=Containment.GVISOR, system=("/proc",)).mode_now()


def test_the_shipped_strangers_ladder_lets_the_starters_languages_in() -> None:
    ladder = load_ladder("strangers-2p", ROOT / "ladders", check_bots=False)
    assert {"javascript", "java"} <= set(ladder.system)


def starter(scratch: Path, language: str) -> Path:
    bot = scratch / language
    shutil.copytree(ROOT / "examples" / "bots" / language, bot)
    for p in [bot, *bot.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return bot


@needs_gvisor
def test_a_javascript_starter_is_refused_without_its_language(scratch: Path) -> None:  # noqa: F811
    from arena.bots.start import start_bot
    bot = starter(scratch, "javascript")
    with pytest.raises(BotCommandError, match="not in a gVisor seat's system view.*system list"):
        start_bot(["node", "bot.js"], bot, containment=Containment.GVISOR)


@needs_gvisor
@pytest.mark.parametrize("language", ["javascript", "java"])
def test_a_starter_plays_under_gvisor_with_its_language(scratch: Path, language: str) -> None:  # noqa: F811
    """Through `arena tournament --gvisor --system LANGUAGE`: every game with no forfeit (Java's
    `javac` build runs under gVisor too, in the same view)."""
    bot = starter(scratch, language)
    store = scratch / "store" / "arena.sqlite"
    done = arena("tournament", "--bot", str(bot), "--bot", "lowest", "--seats", "2", "--deals", "1",
                 "--gvisor", "--system", language, "-j", "1", "--move-ms", "5000",
                 "--store", str(store), "--plain", env={**ENV, "TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(store) as db:
        results = [r for (r,) in db.execute("select result from games")]
    assert len(results) == 2 and all('"forfeits": {}' in r for r in results), results
