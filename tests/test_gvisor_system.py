"""A gVisor seat's system view per ladder and per run (arena.bots.filesystem.system_paths): the
languages a ladder or a tournament names are let in, with their libraries, locked warm like the
rest; a path no bot may see is refused with a clear message, and a language not named is refused
at the bot's start, never let in."""

from __future__ import annotations

import json
import os
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

from tests.checks import arena_here
from tests.test_gvisor import needs_gvisor

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("entry, why", [
    ("usr/bin/node", "no such preset"), ("cobol", "no such preset"), ("", "preset name"),
    ("/proc/self", "refused"), ("/sys", "refused"), ("/dev/null", "refused"), ("/run", "refused"),
    ("/tmp", "refused"), ("/home", "refused"), ("/root", "refused"), ("/", "refused"), ("/var", "refused"),
    ("/usr/bin/no-such-interpreter", "not on this host")])
def test_a_system_path_no_bot_may_see_is_refused(entry: str, why: str) -> None:
    with pytest.raises(SystemViewError, match=why):
        system_paths([entry])


def test_the_store_and_its_data_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from arena.bots import filesystem
    monkeypatch.setattr(filesystem, "SYSTEM_VIEW_ROOTS", (str(tmp_path),))  # a store below /opt, say
    monkeypatch.setattr(filesystem, "SYSTEM_OWNER", os.geteuid())
    data = tmp_path / "opt" / "arena-data"
    (data / "runs").mkdir(parents=True)
    link = tmp_path / "innocent"
    link.symlink_to(data / "runs")  # resolved before the check
    assert system_paths([str(link)]) == (str(link),)
    for p in (data, data / "runs", link, tmp_path / "opt"):
        with pytest.raises(SystemViewError, match="refused: it is or holds"):
            system_paths([str(p)], refused=[data])


def test_presets_name_the_starters_languages() -> None:
    assert system_paths(["javascript"]) == ("/usr/bin/node",)
    jdk = Path(os.path.realpath(shutil.which("java", path="/usr/local/bin:/usr/bin:/bin") or "/no/java")).parent.parent
    assert {"/usr/bin/java", str(jdk / "lib")} <= set(system_paths(["java"]))  # whichever JDK the alternative names
    assert system_paths(["python", "bash", "/usr/bin/python3"]) == ()  # the base view already


def test_ladder_and_tournament_files_check_their_system_list(tmp_path: Path) -> None:
    (tmp_path / "ok.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\nsystem = ["javascript"]\n')
    assert load_ladder(tmp_path / "ok.toml", tmp_path, check_bots=False).system == ["javascript"]
    (tmp_path / "proc.toml").write_text('bots = ["random", "lowest"]\ngvisor = true\nsystem = ["/proc"]\n')
    with pytest.raises(LadderError, match="system path /proc .* refused"):
        load_ladder(tmp_path / "proc.toml", tmp_path, check_bots=False)
    (tmp_path / "plain.toml").write_text('bots = ["random", "lowest"]\nsystem = ["javascript"]\n')
    with pytest.raises(LadderError, match="needs gVisor"):
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


def starter(open_tmp: Path, language: str) -> Path:
    bot = open_tmp / language
    shutil.copytree(ROOT / "examples" / "bots" / language, bot)
    for p in [bot, *bot.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return bot


@needs_gvisor
def test_a_javascript_starter_is_refused_without_its_language(open_tmp: Path) -> None:
    from arena.bots.start import start_bot
    bot = starter(open_tmp, "javascript")
    with pytest.raises(BotCommandError, match="not in a gVisor seat's system view.*system list"):
        start_bot(["node", "bot.js"], bot, containment=Containment.GVISOR)


@needs_gvisor
def test_the_java_and_bash_starters_play_under_gvisor_through_a_tournament(open_tmp: Path) -> None:
    """Through `arena tournament --gvisor --system java`, the Java starter against the bash one: both
    seat orders with no forfeit, and `javac`'s build runs under gVisor too, in the same view. The
    bash starter splits each message into tokens with ``grep``, which the seat's view did not hold
    ("grep: command not found", no hello, every game a timeout forfeit): the view now holds
    ``/usr/bin/grep`` and the library it links (every grep a process gVisor starts). Planted (grep
    out of ``filesystem.STRANGER_SYSTEM``): both games forfeited on a timeout. (The JavaScript
    starter's games under gVisor are test_check_play_match_and_debug_run_under_gvisor_with_the_system_list's;
    `--system` reaching a tournament's launchers is test_the_list_reaches_every_launcher_and_is_checked_again_there's.)"""
    language = "java"
    bot = starter(open_tmp, language)
    store = open_tmp / "store" / "arena.sqlite"
    done = arena_here("tournament", "--bot", str(bot), "--bot", str(ROOT / "examples" / "bots" / "bash"),
                      "--seats", "2", "--deals", "1",
                      "--gvisor", "--system", language, "-j", "1", "--move-ms", "5000",
                      "--max-turns", "10",  # a few decisions of each seat: what is asked of the view is its start
                      "--store", str(store), "--plain")
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(store) as db:
        results = [r for (r,) in db.execute("select result from games")]
    assert len(results) == 2 and all('"forfeits": {}' in r for r in results), results


@pytest.mark.parametrize("command", [["check", "random"], ["play", "random", "lowest"], ["match", "random", "lowest"],
                                     ["debug", "some-game", "random", "--seat", "0"]])
def test_system_on_every_command_that_starts_bots_is_checked_like_a_tournament_s(command: list[str],
                                                                                tmp_path: Path) -> None:
    """`--system` on check, play, match and debug goes through the tournament's own check
    (filesystem.run_system): without --gvisor it is refused, and so is a path no seat may see,
    each in one error line before any bot starts."""
    from typer.testing import CliRunner

    from arena.cli.main import app
    store = ["--store", str(tmp_path / "arena.sqlite")] if command[0] != "check" else []
    for extra, why in ((["--system", "javascript"], "needs gVisor"), (["--gvisor", "--system", "/var/log"], "refused")):
        done = CliRunner().invoke(app, [*command, *store, *extra], env={"COLUMNS": "400"})
        assert done.exit_code == 2 and "error:" in done.output and why in done.output, done.output
        assert "Traceback" not in done.output


# A bot that plays legally only under gVisor's kernel with node in its view: under the host's kernel,
# or in a view without the javascript preset, it answers an action out of range (a fault).
PICKY_NODE = """import os
from arena.botkit import serve
HOST = {host!r}
RIGHT = os.uname().release != HOST and os.access("/usr/bin/node", os.X_OK)
serve(lambda msg: msg["actions"][0]["id"] if RIGHT else 10**6, "picky", "1.0")
"""


@needs_gvisor
def test_check_play_match_and_debug_run_under_gvisor_with_the_system_list(open_tmp: Path) -> None:
    """`--gvisor --system javascript`, as `arena tournament` takes them, on `arena check`, `play`,
    `match` and `debug`: the picky bot passes the check and plays every game without a fault, so each
    command ran it under gVisor's kernel with node in the view (any other mode, or the list lost on
    the way, is its illegal answer); the JavaScript starter plays it in the same games, and `debug`
    feeds the starter's recorded game back with no divergence (it seeds itself from the start
    message)."""
    js = starter(open_tmp, "javascript")
    picky = open_tmp / "picky"
    picky.mkdir()
    (picky / "bot.toml").write_text('name = "picky"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    (picky / "bot.py").write_text(PICKY_NODE.format(host=os.uname().release))
    store = open_tmp / "store" / "arena.sqlite"
    view = ["--gvisor", "--system", "javascript"]
    done = arena_here("check", str(picky), "--games", "1", "--rules", "classic", "-r", "max_players=2", *view)  # 2 seats
    assert done.returncode == 0 and "containment: gVisor" in done.stdout, done.stdout + done.stderr
    for args in (["play", str(js), str(picky), "--quiet"], ["match", str(js), str(picky), "--max-games", "2", "-j", "1"]):
        done = arena_here(*args, *view, "--store", str(store), "--move-ms", "5000", "--max-turns", "10")
        assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(store) as db:
        games = db.execute("SELECT id, result FROM games ORDER BY rowid").fetchall()
    assert len(games) == 3 and all('"forfeits": {}' in r for _, r in games), games
    done = arena_here("debug", games[0][0], str(js), "--seat", "0", *view, "--store", str(store), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["diverged"] is False


def _fake_jdk(root: Path, name: str) -> Path:
    """A JDK laid out as Debian's: bin/java and bin/javac, conf with a link into /etc-like settings,
    lib, release, and jmods (left out of the view)."""
    home = root / "jvm" / name
    for d in ("bin", "conf", "lib", "jmods"):
        (home / d).mkdir(parents=True)
    for exe in ("java", "javac"):
        (home / "bin" / exe).write_text("#!/bin/sh\n")
        (home / "bin" / exe).chmod(0o755)
    (home / "release").write_text('JAVA_VERSION="21"\n')
    settings = root / "etc" / f"{name}-settings"
    settings.mkdir(parents=True)
    (settings / "net.properties").write_text("")
    (home / "conf" / "net.properties").symlink_to(settings / "net.properties")
    return home


def test_the_java_preset_is_the_jdk_that_java_on_the_path_runs(tmp_path: Path) -> None:
    """The preset named Debian's JDK 17 by path: a host whose `java` is another JDK (an alternative
    set to 21, a Temurin in /usr/lib/jvm) got a view without it. It is now the JDK that `java` on
    the bots' PATH runs, its links followed (/usr/bin/java -> alternatives -> the JDK)."""
    from arena.bots.filesystem import java_preset
    home = _fake_jdk(tmp_path, "jdk-21")
    _fake_jdk(tmp_path, "jdk-17")  # installed, but not what java runs
    usr_bin, alternatives = tmp_path / "usr" / "bin", tmp_path / "alternatives"
    usr_bin.mkdir(parents=True)
    alternatives.mkdir()
    for exe in ("java", "javac"):
        (alternatives / exe).symlink_to(home / "bin" / exe)
        (usr_bin / exe).symlink_to(alternatives / exe)
    view = java_preset(path=f"{tmp_path / 'nowhere'}:{usr_bin}", java_home=str(tmp_path / "jvm" / "jdk-17"))
    assert view == (str(usr_bin / "java"), str(usr_bin / "javac"), *(str(home / p) for p in
                    ("bin", "conf", "lib", "release")), str(tmp_path / "etc" / "jdk-21-settings"))


def test_the_java_preset_falls_back_on_java_home_and_says_when_there_is_no_jdk(tmp_path: Path) -> None:
    from arena.bots.filesystem import java_preset
    home = _fake_jdk(tmp_path, "jdk-22")
    view = java_preset(path=str(tmp_path / "empty"), java_home=str(home))
    assert view[:2] == (str(home / "bin" / "java"), str(home / "bin" / "javac")) and str(home / "lib") in view
    for java_home in (None, str(tmp_path / "no-jdk")):
        with pytest.raises(SystemViewError, match="preset 'java': no java on .* and no \\$JAVA_HOME/bin/java"):
            java_preset(path=str(tmp_path / "empty"), java_home=java_home)
