"""A bot author's first hour, command by command: interrupts, failures, `arena check`, config files, help.

Interrupt tests start the real command in its own session and send SIGINT to the whole group, as a
terminal's Ctrl-C does, once the command has printed that it is playing (never after a fixed sleep).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from typer.core import TyperOption as ClickOption  # typer carries its own click
import pytest
import typer
from typer.testing import CliRunner

from arena.cli.main import app

from tests.checks import arena_here, reachable, store_count

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
# warnings off: a stale compiled engine in a checkout warns on stderr, which is not what these tests read
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "PYTHONWARNINGS": "ignore"}


def arena(*args: str, cwd: Path | None = None, timeout: float = 300, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=ENV, **popen)


def interrupt_after(marker: str, *args: str, cwd: Path, stored_in: Path | None = None) -> tuple[int, str, str]:
    """Run ``arena ARGS``, send SIGINT to its process group once ``marker`` shows on stdout or stderr
    (and, given ``stored_in``, that store holds a game: a plain run's first game line comes at game 50)."""
    p = subprocess.Popen([sys.executable, "-u", "-m", "arena.cli", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, cwd=cwd, env=ENV, start_new_session=True)
    seen = []
    assert p.stdout is not None
    for line in p.stdout:
        seen.append(line)
        if marker in line:
            while stored_in is not None and store_count(stored_in) == 0:
                assert p.poll() is None, "".join(seen) + p.stdout.read()
                time.sleep(0.05)
            os.killpg(p.pid, signal.SIGINT)
            break
    rest = p.stdout.read()
    p.wait(timeout=120)
    return p.returncode, "".join(seen), rest


def bot(tmp: Path, name: str, body: str, extra: str = "") -> Path:
    d = tmp / name
    d.mkdir()
    (d / "bot.toml").write_text(f'name = "{name}"\nversion = "1"\ncommand = ["python3", "bot.py"]\n{extra}')
    (d / "bot.py").write_text(textwrap.dedent('''
        import json, sys, time
        for line in sys.stdin:
            m = json.loads(line)
            if m["type"] == "hello":
                print(json.dumps({"type": "hello", "protocol": 1, "name": "%s"}), flush=True)
            elif m["type"] == "request":
        ''' % name) + textwrap.indent(textwrap.dedent(body), " " * 8))
    for p in (d, d / "bot.py", d / "bot.toml"):
        p.chmod(0o755)
    return reachable(d)  # a contained bot's private uid cannot enter pytest's 0700 tmp_path


# ---------------------------------------------------------------------------------------------- Ctrl-C

@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_on_tournament_is_one_line_and_resumes(tmp_path: Path, jobs: str) -> None:
    store = str(tmp_path / "s.sqlite")
    args = ["tournament", "--bot", "random", "--bot", "lowest", "--deals", "400", "--store", store, "--plain", "-j", jobs]
    # interrupted once it has stored a game (of 800: mid-run), not after the 50 its first game line needs
    code, before, after = interrupt_after("tournament ", *args, cwd=tmp_path, stored_in=Path(store))
    assert code == 130, before + after
    assert "Traceback" not in after and "Error" not in after
    # (a run may first clean up what an earlier arena process, killed elsewhere on the machine, left)
    tail = [line for line in after.splitlines() if line.strip() and not line.startswith("cleaned up: ")]
    assert len(tail) == 1 and tail[0].startswith("interrupted after ") and tail[0].endswith(
        "/800 games; run the same command again to resume"), tail
    stored = sqlite3.connect(store).execute("SELECT COUNT(*) FROM games").fetchone()[0]
    assert stored >= 1
    # no game of the interrupted run is counted as a bot's fault
    assert sqlite3.connect(store).execute("SELECT COUNT(*) FROM games WHERE faults > 0").fetchone()[0] == 0
    code, before, after = interrupt_after("resuming:", *args, cwd=tmp_path)
    assert f"resuming: {stored} of 800 games already stored" in before
    assert code == 130, before + after  # once 70 (the arena-bug path) under load, its output unseen
    assert "referee worker" not in after, after  # a worker still starting died of the Ctrl-C (18 of 40 runs)


def test_a_ctrl_c_as_a_finished_command_exits_shows_no_traceback(tmp_path: Path) -> None:
    """A Ctrl-C that lands once the command is over, in the interpreter's exit (an exit handler here;
    threading's shutdown when seen, as a resumed run finished) printed a KeyboardInterrupt traceback,
    or ended the process with SIGINT's status."""
    code = ("import atexit, signal\n"
            "atexit.register(signal.raise_signal, signal.SIGINT)\n"  # runs last, as the interpreter exits
            "from arena.cli.main import app\n"
            "app(['rules'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "classic" in done.stdout, done.stderr
    assert "KeyboardInterrupt" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_ctrl_c_on_match_and_check(tmp_path: Path) -> None:
    code, before, after = interrupt_after("games", "match", "random", "lowest", "--store", str(tmp_path / "m.sqlite"),
                                          "--max-games", "2000", "--every", "10", cwd=tmp_path)
    assert code == 130 and "Traceback" not in before + after
    code, before, after = interrupt_after("[2/", "check", "random", cwd=tmp_path)
    assert code == 130 and "Traceback" not in before + after
    assert after.strip().splitlines()[-1].startswith("interrupted after ")


# ---------------------------------------------------------------------------------------------- failures

def _small_files() -> None:
    # an empty store holds every table of the schema (about 225 KB of pages): room for some games beyond it
    resource.setrlimit(resource.RLIMIT_FSIZE, (400 * 1024, 400 * 1024))


def test_full_disk_is_one_line_and_keeps_the_stored_games(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    # The file-size limit that fills the "disk" is inherited by every child, bubblewrap included,
    # which then cannot set up its sandbox; the bundled bots run uncontained here on purpose.
    # the limit is met within the first few games (2 on the machine the suite is sized on): 20 games
    # leave room for more and keep the resumed run short
    args = ["tournament", "--bot", "random", "--bot", "lowest", "--deals", "10", "--store", str(store),
            "--plain", "-j", "1", "--trusted-bots"]
    done = arena(*args, cwd=tmp_path, preexec_fn=_small_files)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "could not store a game" in errors[0] and "resume" in errors[0]
    db = sqlite3.connect(store)
    stored = db.execute("SELECT COUNT(*) FROM games").fetchone()[0]
    assert 0 < stored < 20
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    again = arena_here(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resuming: {stored} of 20 games already stored" in again.stderr


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the tournament `demo` (random and lowest, 2 deals), played once for the
    tests that only read a copy of it."""
    where = tmp_path_factory.mktemp("demo")
    store = where / "s.sqlite"
    done = arena_here("tournament", "--bot", "random", "--bot", "lowest", "--deals", "2", "--store", str(store),
                 "--plain", "-j", "1", cwd=where)
    assert done.returncode == 0, done.stderr
    # run in this process, the command's store connection may live on until collected: move its
    # write-ahead log into the database file, which the tests copy alone
    with contextlib.closing(sqlite3.connect(store)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


def test_reading_commands_never_change_the_store(tmp_path: Path, demo_store: Path) -> None:
    store = demo_store
    # what a read-only medium holds: the database alone, with nothing allowed beside it
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "s.sqlite").write_bytes(store.read_bytes())
    before = (ro / "s.sqlite").read_bytes()
    for args in (["standings", "demo"], ["games", "-t", "demo"], ["replay", "demo-000001"],
                 ["export", str(tmp_path / "x.jsonl"), "-t", "demo"]):
        done = arena_here(*args, "--store", str(ro / "s.sqlite"), cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
    assert (ro / "s.sqlite").read_bytes() == before  # SQLite may add its WAL index beside it, never writes it


def test_read_only_media(tmp_path: Path, demo_store: Path) -> None:
    store = demo_store
    media = tmp_path / "media"
    media.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(media)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (media / "s.sqlite").write_bytes(store.read_bytes())
        assert subprocess.run(["mount", "-o", "remount,ro", str(media)], capture_output=True).returncode == 0
        for args in (["standings", "demo"], ["games"], ["replay", "demo-000000", "--verify"]):
            done = arena_here(*args, "--store", str(media / "s.sqlite"), cwd=tmp_path)
            assert done.returncode == 0, (args, done.stderr)
    finally:  # a command run in this process leaves its store's connection to the collector
        gc.collect()  # (a real one closes it on exit): collected, the mount is no longer busy
        unmounted = subprocess.run(["umount", str(media)], capture_output=True)
    assert unmounted.returncode == 0, unmounted.stderr  # a mount left behind breaks pytest's cleanup


def test_cluster_error_comes_first(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    done = arena_here("tournament", "--bot", "random", "--bot", "lowest", "--deals", "1", "--plain",
                      "--store", str(tmp_path / "s.sqlite"), "--cluster", "tcp://nohost.invalid:8786", cwd=tmp_path)
    assert done.returncode != 0
    assert "interrupted" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[0].startswith("error:")
    assert "no such host 'nohost.invalid'" in done.stderr  # said at once, not after a 15 s timeout


def test_a_scheduler_port_nobody_listens_on_is_said_at_once(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    with socket.socket() as s:  # a port held, never listened on: a connection is refused, and no
        s.bind(("127.0.0.1", 0))  # other process can start listening on it meanwhile (a port freed
        port = s.getsockname()[1]  # before the run could be taken by one)
        done = arena_here("tournament", "--bot", "random", "--bot", "lowest", "--deals", "1", "--plain",
                          "--store", str(tmp_path / "s.sqlite"), "--cluster", f"tcp://127.0.0.1:{port}", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"tcp://127.0.0.1:{port}: nothing listens there" in done.stderr


# ---------------------------------------------------------------------------------------------- arena check

def test_check_groups_a_crash_and_shows_its_traceback(tmp_path: Path) -> None:
    d = bot(tmp_path, "crashy", 'raise RuntimeError("my bug [here]")\n')
    done = arena_here("check", str(d), "--rules", "classic", cwd=tmp_path)
    assert done.returncode == 1
    out = done.stdout
    assert "crash ×2, first at classic, 2 seats, game 1, decision 1" in out
    assert "RuntimeError: my bug [here]" in out  # stderr shown, brackets kept
    assert out.count("last lines on stderr") == 1
    assert "stopped after a repeated crash fault" in out
    done = arena_here("check", str(d), "--rules", "classic", "--all", "--games", "2", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)  # 2 games at each of 2 tables, every one a crash, none stopping it
    assert report["faults"]["crash"]["count"] == 4 and report["played"] == 4 and report["stopped"] is None


def test_check_quotes_a_line_that_is_not_json(tmp_path: Path) -> None:
    d = bot(tmp_path, "chatty", 'print("my hand is", m["view"]["hand"], flush=True)\n')
    out = arena_here("check", str(d), "--rules", "shithead", cwd=tmp_path).stdout
    assert "the bot wrote: \"my hand is [" in out
    assert "stdout is for protocol lines only" in out and "stderr" in out


def test_check_explains_the_clock(tmp_path: Path) -> None:
    # 50 ms over each move: a 100 ms bank is used up at the second move and the third times out,
    # about 0.4 s a game (a 300 ms bank slept through seven moves a game for the same lines)
    d = bot(tmp_path, "slowpoke", "time.sleep(0.15)\nprint(0, flush=True)\n")
    done = arena_here("check", str(d), "--rules", "classic", "--move-ms", "100", "--bank-ms", "100", cwd=tmp_path)
    assert done.returncode == 1
    assert "100 ms per move + 100 ms bank; bank used up after " in done.stdout
    # the bot sleeps 150 ms a move: its slowest is at least that, and under load it may be far more
    # (once, at load 35, it was 200 ms or more, and a check for a number starting with 1 failed)
    slowest = re.search(r"slow move\(s\), slowest ([\d,]+) ms", done.stdout)
    assert slowest and int(slowest[1].replace(",", "")) >= 150, done.stdout
    assert "[1/4] classic, 2 seats, game 1" in done.stderr  # progress while it plays


def test_check_reports_a_failed_build_once(tmp_path: Path) -> None:
    d = bot(tmp_path, "needsgcc", "print(0, flush=True)\n", 'build = ["no-such-compiler", "main.c"]\n')
    done = arena_here("check", str(d), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.count("build ×1, first at the build") == 1 and "no-such-compiler" in done.stdout
    assert "the build failed" in done.stdout and "0 of 20 games" in done.stdout
    assert done.stderr.count("building needsgcc@1") == 1


def test_check_clean_table_and_interpreter_header(tmp_path: Path) -> None:
    done = arena_here("check", "lowest", "--rules", "classic", "--games", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "{" not in out and "[[" not in out  # no Python dicts or raw orders
    assert "python3 runs " in out and "Python 3." in out
    assert "1,000 ms per move + 5 s bank" in out
    assert "no faults" in out
    assert "against" in out and " random@1.0 " in out and "3 × random@1.0" in out  # who it played
    report = json.loads(arena_here("check", "lowest", "--rules", "classic", "--games", "1", "--json", cwd=tmp_path).stdout)
    assert [(s["seats"], s["opponents"]) for s in report["scenarios"]] == [(2, ["random@1.0"]),
                                                                           (4, ["random@1.0"] * 3)]


# ---------------------------------------------------------------------------------------------- config files

@pytest.mark.parametrize("body,needle", [
    ('bots = ["random", "lowest"]\n[time]\nseats = 3\n',
     "time.seats does not belong under [time], which takes only move_ms, bank_ms, handshake_ms"),
    ('bots = ["random", "lowest"]\n[options]\nbogus = 1\n', "rules: unknown option(s) under [options]: bogus; allowed:"),
    ('bots = ["random", "lowest"]\n[options]\nseven = "sideways"\n', "must be one of 'plain', 'at_most'"),
    ('bots = ["random", "lowest"]\n[limits]\nmemory_mb = "lots"\n', "limits: memory_mb must be an integer"),
])
def test_tournament_file_errors_name_file_key_and_allowed(tmp_path: Path, body: str, needle: str) -> None:
    f = tmp_path / "t.toml"
    f.write_text(body)
    done = arena_here("tournament", str(f), "--store", str(tmp_path / "s.sqlite"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {f}: ") and needle in done.stderr, done.stderr
    assert "__init__" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("extra,needle", [
    ("colour = 1\n", "unknown bot.toml field(s): colour"),
    ("limits = 5\n", "[limits] must be a table"),
    ("[limits]\nmemory_mb = -1\n", "limits: memory_mb must be at least 1"),
    ('[env]\nPATH = "/evil"\n', "PATH cannot be set by a bot: it is set by the arena"),
    ('[env]\nARENA_SECRET = "x"\n', "ARENA_SECRET cannot be set by a bot: it is the arena's own"),
    ('[env]\nLD_AUDIT = "./x.so"\n', "LD_AUDIT cannot be set by a bot: it is the dynamic loader's"),
    ('[env]\nMC_MS = 300\n', "env.MC_MS must be a string"),
])
def test_bot_toml_errors(tmp_path: Path, extra: str, needle: str) -> None:
    d = bot(tmp_path, "b", "print(0, flush=True)\n", extra)
    done = arena_here("check", str(d), cwd=tmp_path)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert "PROTOCOL.md#bottoml-reference" in done.stderr


def test_bot_toml_env_reaches_the_bot_and_interpreter_is_named(tmp_path: Path) -> None:
    body = 'print(0, flush=True)\nprint(os.environ.get("MY_BUDGET"), file=sys.stderr, flush=True)\n'
    d = bot(tmp_path, "envy", body, f'interpreter = "{sys.executable}"\n[env]\nMY_BUDGET = "77"\n')
    (d / "bot.py").write_text("import os\n" + (d / "bot.py").read_text())
    from arena.tournament.check import run_check
    from arena.bots.manifest import load_bot
    import trio
    spec = load_bot(d)
    assert spec.env == {"MY_BUDGET": "77"} and spec.python == sys.executable
    report = trio.run(lambda: run_check(spec, 1, rules=__import__("arena.engine", fromlist=["PRESETS"]).PRESETS["classic"]))
    assert report["interpreter"].startswith(f"python3 runs {sys.executable} (set by bot.toml)")


def test_config_schemas_are_published_and_current() -> None:
    from arena.config import SCHEMA_DIR, SCHEMAS, schema_text
    for name, model in SCHEMAS.items():
        assert (SCHEMA_DIR / name).read_text() == schema_text(model, name), f"run: python -m arena.config ({name})"


def test_shipped_files_validate() -> None:
    from arena.config import LadderFile, TournamentFile, read_toml, validate
    for f in (ROOT / "examples" / "tournaments").glob("*.toml"):
        validate(TournamentFile, read_toml(f, "tournament file"), str(f))
    for f in (ROOT / "ladders").glob("*.toml"):
        validate(LadderFile, read_toml(f, "ladder file"), str(f))


# ---------------------------------------------------------------------------------------------- listing, export

def test_listing_and_export_errors(tmp_path: Path, demo_store: Path) -> None:
    store = str(demo_store)
    done = arena_here("games", "--tournament", "no-such", "--store", store)
    assert done.returncode == 2 and "no tournament 'no-such'" in done.stderr and "known: demo" in done.stderr
    done = arena_here("export", str(tmp_path / "x.csv"), "--tournament", "no-such", "--store", store)
    assert done.returncode == 2 and "no tournament 'no-such'" in done.stderr
    assert not (tmp_path / "x.csv").exists()
    done = arena_here("export", str(tmp_path / "x.xlsx"), "--store", store)
    assert done.returncode == 2 and "must end in .jsonl or .csv" in done.stderr
    assert not (tmp_path / "x.xlsx").exists()
    assert "showing 3 of 4 game(s) (--limit for more)" in arena_here("games", "--store", store, "--limit", "3").stdout
    shown = arena_here("games", "--store", store).stdout
    assert "showing 4 of 4 game(s)" in shown and "--limit for more" not in shown
    limit = next(p for p in typer.main.get_command(app).commands["games"].params if p.name == "limit")  # type: ignore[attr-defined]
    assert limit.default == 50


def test_an_unknown_tournament_names_each_ladder_once_not_its_batches(tmp_path: Path) -> None:
    """A club night's store holds hundreds of ladder batches: the error names the real tournaments
    and each ladder once, as the game list's menus do."""
    from arena.tournament.store import Store
    store = tmp_path / "s.sqlite"
    db = Store(store)
    db.begin_tournament("spring-cup", {"format": "rr"}, 1)
    for k in range(40):
        db.begin_tournament(f"ladder:club:batch-{k:04d}", {"format": "batch"}, 12)
    db.close()
    for command in (["games"], ["standings"], ["report", "--html", str(tmp_path / "r.html")]):
        args = [*command, "--tournament", "no-such"] if command == ["games"] else [*command, "no-such"]
        done = runner.invoke(app, [*args, "--store", str(store)])
        assert done.exit_code != 0, command
        said = " ".join(done.output.split())
        assert "known: spring-cup, ladder:club:... (its batches)" in said and "batch-0001" not in said, said


@pytest.mark.parametrize("args,needle", [
    (["play", "random", "lowest", "--move-ms", "-5"], "--move-ms"),
    (["play", "random", "lowest", "--max-turns", "0"], "--max-turns"),
    (["tournament", "--move-ms", "-5"], "--move-ms"),
    (["check", "random", "--bank-ms", "-1"], "--bank-ms"),
])
def test_bad_numbers_are_one_line_errors(tmp_path: Path, args: list[str], needle: str) -> None:
    # a real process: click's usage errors reach the user through the console script's handling
    done = arena(*args, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], done.stderr


# ---------------------------------------------------------------------------------------------- help, names

def test_version_and_short_help() -> None:
    done = arena("--version")
    assert done.returncode == 0 and done.stdout.startswith("palace-arena ")
    done = arena_here("tournament", "-h")
    assert done.returncode == 0 and "--bank-ms" in done.stdout


def test_every_option_has_help() -> None:
    group = typer.main.get_command(app)
    missing, seen = [], 0
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        for p in cmd.params:
            if isinstance(p, ClickOption):
                seen += 1
                if not (p.help or "").strip() and "--help" not in p.opts:
                    missing.append(f"{name} {p.opts[0]}")
    assert seen > 20, "no options found: the check would pass vacuously"
    assert not missing, missing


def test_options_spelled_one_way() -> None:
    group = typer.main.get_command(app)
    spellings: dict[str, set[tuple[str, ...]]] = {}
    for cmd in group.commands.values():  # type: ignore[attr-defined]
        for p in cmd.params:
            if isinstance(p, ClickOption):
                spellings.setdefault(p.opts[0], set()).add(tuple(sorted(p.opts + p.secondary_opts)))
    for opt in ("--tournament", "--concurrency", "--rule", "--store", "--json", "--rules", "--move-ms", "--bank-ms"):
        assert len(spellings.get(opt, set())) <= 1, (opt, spellings.get(opt))


def test_bracketed_text_is_printed_as_written(tmp_path: Path) -> None:
    d = tmp_path / "odd[dask]"
    d.mkdir()
    done = arena_here("check", str(d / "nothing[x]"), cwd=tmp_path)
    assert done.returncode == 2 and "nothing[x]" in done.stderr


def test_rule_names_say_what_differs() -> None:
    from arena.config import rule_label
    from arena.engine import rules_from
    assert rule_label(rules_from("shithead", ["seven=at_most"])) == "shithead + seven=at_most"
    assert rule_label(rules_from("classic")) == "classic"
    done = CliRunner().invoke(app, ["play", "random", "lowest", "random", "lowest", "random", "lowest",
                                    "--rules", "shithead", "-r", "seven=at_most"])
    assert "shithead + seven=at_most is for 2-5 players" in done.output


def test_bots_lists_descriptions_and_strength() -> None:
    done = CliRunner().invoke(app, ["bots", "--json"])
    rows = {r["bot"]: r for r in json.loads(done.output)}
    assert rows["lowest@1.0"]["description"] and "vs random" in rows["lowest@1.0"]["strength"]
    assert all(r["description"] for r in rows.values())


# ---------------------------------------------------------------------------------------------- standings

def test_standings_credit_a_seat_that_went_out_before_a_draw() -> None:
    from arena.tournament.standings import tally
    seats = ["a", "b", "c", "d"]
    # a went out first; b, c and d were still in when the game was drawn (stale rule or turn cap)
    drawn = {"order": [[0], [1, 2, 3]], "draw": True, "complete": True, "reason": "stale_draw", "forfeits": {}}
    # a plain four-way draw, and a game c won outright with a forfeit by d
    everyone = {"order": [[0, 1, 2, 3]], "draw": True, "complete": True, "reason": "turn_cap", "forfeits": {}}
    won = {"order": [[2], [0], [1], [3]], "draw": False, "complete": True, "reason": "played_out",
           "forfeits": {"3": "crash"}}
    lines = tally([(seats, drawn), (seats, everyone), (seats, won)])
    a, b, c, d = (lines[x] for x in "abcd")
    assert (a.wins, a.draws) == (1, 1) and a.place_sum == 1 + 2.5 + 2
    assert (b.wins, b.draws) == (0, 2) and b.place_sum == 3 + 2.5 + 3
    assert (c.wins, c.draws) == (1, 2) and c.place_sum == 3 + 2.5 + 1
    assert d.faults["crash"] == 1 and d.lasts == 0 and d.place_sum == 3 + 2.5 + 4
    # a seat credited with a win never has a worse average place than one that never won
    assert a.avg_place < b.avg_place


def test_html_replay_carries_big_seeds_as_strings() -> None:
    from arena.replay.html import for_browser, replay_html
    seed = 4995867663529943376
    assert for_browser({"seed": seed, "n": [1, True, 2**60]}) == {"seed": str(seed), "n": [1, True, str(2**60)]}
    page = replay_html({"game": "g", "seed": seed, "frames": []})
    assert f'"seed":"{seed}"' in page


def test_standings_show_think_time(demo_store: Path) -> None:
    store = str(demo_store)
    rows = json.loads(arena_here("standings", "demo", "--store", store, "--json").stdout)
    assert all(r["ms_per_decision"] > 0 for r in rows)
    assert "ms/decision" in arena_here("standings", "demo", "--store", store).stdout


def test_ctrl_c_on_submit(tmp_path: Path) -> None:
    ladder = tmp_path / "tiny.toml"
    ladder.write_text('rules = "classic"\nseats = 2\ndeals = 200\nbots = ["random", "lowest"]\n'
                      f'store = "{tmp_path / "l.sqlite"}"\n')
    # interrupted as the seeding round-robin starts (after the placement's check)
    code, before, after = interrupt_after("tournament ladder:tiny:seed", "submit", "highest", "--ladder", str(ladder),
                                          "--plain",
                                          "-j", "1", cwd=tmp_path)
    assert code == 130, before + after
    assert "Traceback" not in before + after
    assert after.strip().splitlines()[-1].startswith(("interrupted", "error: interrupted")), after


@pytest.mark.parametrize("flag,needle", [
    ("memory_mb=lots", "--limit takes KEY=VALUE with a whole number"),
    ("shoe_size=3", "--limit: unknown field(s): shoe_size; allowed: cpu_seconds"),
    ("memory_mb=0", "--limit: memory_mb must be at least 1"),
])
def test_check_limit_flags_are_checked_like_bot_toml(flag: str, needle: str) -> None:
    done = arena_here("check", "random", "--limit", flag)
    assert done.returncode == 2 and needle in done.stderr, done.stderr


def test_unknown_rule_option_from_a_flag_is_named() -> None:
    done = arena_here("tournament", "-r", "colour=red", "--store", "/nonexistent/x.sqlite")
    assert done.returncode == 2 and "unknown rule option 'colour'" in done.stderr


def test_install_hint_keeps_its_brackets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Dask as if not installed: the command imports it when it runs, so blocking it here is enough
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "distributed", None)
    done = arena_here("tournament", "--cluster", "tcp://x:1", "--store", str(tmp_path / "c.sqlite"), "--plain")
    assert done.returncode == 2
    assert "pip install 'palace-arena[dask]'" in done.stderr and "interrupted" not in done.stdout + done.stderr


def test_standings_do_not_import_scipy_optimize(tmp_path: Path, demo_store: Path) -> None:
    """scipy.optimize takes seconds to import and only an SPRT uses it: a standings table (and a
    resumed tournament with nothing to play) must not pay for it. A fresh interpreter's imports,
    so a real process; the store is a copy of the module's demo."""
    store = str(tmp_path / "s.sqlite")
    Path(store).write_bytes(demo_store.read_bytes())
    code = ("import sys\nfrom arena.cli.main import app\n"
            "try:\n"
            f"    app(['standings', 'demo', '--store', {store!r}])\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "print('loaded:', sorted(m for m in sys.modules if m.startswith('scipy.optimize')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Standings: demo" in done.stdout and done.stdout.rstrip().endswith("loaded: []"), done.stdout[-500:]


def test_games_lost_by_lists_the_games_a_bot_did_not_win_outright(tmp_path: Path) -> None:
    """Dealt from a fixed secret: from a fresh random one, heuristic now and then won all of its
    8 games outright and had no lost game to list. One deal (heuristic in 4 games) shows both kinds."""
    from arena.tournament.seeds import SECRET_BYTES, SECRET_FILE
    (tmp_path / SECRET_FILE).write_bytes(bytes([7]) * SECRET_BYTES)
    (tmp_path / SECRET_FILE).chmod(0o600)
    store = str(tmp_path / "s.sqlite")
    assert arena_here("tournament", "--name", "t", "--bot", "random", "--bot", "lowest", "--bot", "heuristic", "--deals", "1",
                 "--store", store, "--plain", "-j", "1", cwd=tmp_path).returncode == 0
    every = json.loads(arena_here("games", "--store", store, "--json", "--limit", "1000").stdout)

    def outright(g: dict, name: str) -> bool:
        first = g["result"]["order"][0]
        return len(first) == 1 and g["seats"][first[0]].split("@")[0] == name

    def seated(g: dict, name: str) -> bool:
        return any(s.split("@")[0] == name for s in g["seats"])

    for name, ref in (("random", "random"), ("heuristic", "heuristic@1.0")):
        lost = json.loads(arena_here("games", "--store", store, "--json", "--limit", "1000", "--lost-by", ref).stdout)
        assert {g["id"] for g in lost} == {g["id"] for g in every if seated(g, name) and not outright(g, name)}, name
        assert 0 < len(lost) < len(every)
    shown = arena_here("games", "--store", store, "--lost-by", "random")
    expected = sum(seated(g, "random") and not outright(g, "random") for g in every)
    assert shown.returncode == 0 and f"of {expected} game(s)" in shown.stdout
