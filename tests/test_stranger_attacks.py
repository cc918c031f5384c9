"""What a stranger's bot or upload got through in an attacker's walk (issue 35), each held by a test
that failed before its fix: a member claiming the name of a reference bot before its ladder had
played, Rich markup in a bot's version ending the arena's commands (exit 70) or styling them, and
a cluster worker unpacking new bot versions with no look at its disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from arena.bots.containment import Containment
import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve_accounts import _rows, _upload, submit_club  # noqa: F401  (the fixture)

OWNERS = "SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account ORDER BY b.name"


def test_a_member_cannot_claim_a_reference_bot_of_a_ladder_not_yet_played(submit_club) -> None:  # noqa: F811
    """The server offers classic-2p (random, lowest, highest, heuristic), which has played no game in
    this store. A member who uploaded a bot named ``heuristic`` became the owner of that name: its
    next version on the standings, the reference bot's private lines on every game page. Each name
    a ladder file of the server lists, and each bundled bot's, is the organiser's."""
    store, _, _, bob = submit_club
    uploads = store.parent / "uploads"
    for name in ("heuristic", "random", "ismcts"):  # on classic-2p; bundled but on no ladder here
        status, _, page = _upload(bob, name, "9.0", "bob")
        assert status == 403 and "not yours" in page, (name, status, page[-2000:])
    assert _rows(store, OWNERS) == []
    assert not [p.name for p in uploads.iterdir() if not p.name.startswith(".")]  # nothing of them kept
    status, _, page = _upload(bob, "bobs-own", "1.0", "bob")  # a name nobody has is still his to take
    assert status == 303, page[-2000:]
    assert _rows(store, OWNERS) == [("bobs-own", "bob")]


# --------------------------------------------------------------------------- Rich markup in a bot's label

MARKUP = "mk@[/]1[bold red][link=http://attacker.example]x"  # a version bot.toml allows: one printable line


def _rendered(*renderables: object) -> str:
    import io

    from arena.safetext import SafeConsole
    out = io.StringIO()
    console = SafeConsole(file=out, width=400, force_terminal=True, color_system="truecolor")
    for r in renderables:
        console.print(r)
    return out.getvalue()


def test_a_version_holding_rich_markup_is_shown_as_written_by_arena_standings(tmp_path: Path) -> None:
    """A version ``[/]1`` ended `arena tournament` and `arena standings` with "MarkupError ... an arena
    bug" (exit 70) once its games were stored: a bot's label went into the standings table as Rich
    markup. It is text: shown as written, no style or link of its own."""
    from typer.testing import CliRunner

    from arena.cli.main import app
    from arena.tournament.store import Store
    from tests.test_serve import fake_record
    seats = [MARKUP, "random@1.0"]
    db = Store(tmp_path / "s.sqlite")
    db.begin_tournament("t", {"format": "round-robin", "rules": "classic", "seats": 2}, 2)
    for i in range(2):
        db.save_game("t", i, seats[::1 - 2 * i], fake_record(f"t-{i}", seats[::1 - 2 * i], [[0], [1]]))
    db.finish_tournament("t")
    db.close()
    result = CliRunner().invoke(app, ["standings", "t", "--store", str(tmp_path / "s.sqlite")],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert MARKUP in result.output


def test_every_table_of_labels_shows_markup_as_written() -> None:
    """The tables `arena tournament` draws live and at its end, `arena ladder --matrix`'s head to head and
    the provisional ratings `arena ladder run` and `arena submit` draw live: each with a label holding
    markup renders it literally, with no hyperlink (OSC 8) or colour the bot chose."""
    from types import SimpleNamespace

    from arena.cli.ladder import matrix_table
    from arena.cli.ladder_live import _Provisional
    from arena.tournament.tables import standings_table
    from arena.tournament.standings import Line, add_game
    result = {"order": [[0], [1]], "reason": "first_out", "draw": False, "complete": True, "forfeits": {}}
    lines: dict[str, Line] = {}
    add_game(lines, [MARKUP, "random@1.0"], result)
    prov = _Provisional()
    prov._prov_init(None, [([MARKUP, "random@1.0"], result)])
    cell = SimpleNamespace(games=2, score=0.5)
    st = SimpleNamespace(rows=[SimpleNamespace(label=MARKUP), SimpleNamespace(label="random@1.0")],
                         matrix={MARKUP: {"random@1.0": cell}, "random@1.0": {MARKUP: cell}})
    for table in (standings_table(list(lines.values())), standings_table(list(lines.values()), provisional=True),
                  matrix_table(st), prov._prov_table()):
        text = _rendered(table)
        assert MARKUP in text and "\x1b]8;" not in text and "attacker.example" in text


def test_arena_submit_server_shows_a_placed_label_as_written(tmp_path: Path, monkeypatch) -> None:
    """`arena submit --server` printed the placed bot's label as Rich markup: ``[/]`` in its version ended
    the submitter's command with "an arena bug" (exit 70) after the server had placed it."""
    from typer.testing import CliRunner

    from arena.cli import remote
    from arena.cli.main import app
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "mk"\nversion = "1"\ncommand = ["true"]\n')
    job = {"id": "j", "label": MARKUP, "ladder": "x", "status": "placed", "done": True, "lines": [], "report": None,
           "row": {"label": MARKUP, "rank": 1, "games": 2}, "error": None}
    monkeypatch.setattr(remote, "upload", lambda *a, **k: "http://server.example/submit/j")
    monkeypatch.setattr(remote, "follow", lambda url, say: job)
    result = CliRunner().invoke(app, ["submit", str(bot), "--ladder", "x", "--server", "http://server.example"],
                                env={"ARENA_TOKEN": "t", "COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert f"{MARKUP} is #1 on x after 2 games" in result.output


# --------------------------------------------------------------------------- a cluster worker's disk

def test_a_worker_short_of_disk_refuses_a_new_bundle_and_keeps_nothing(tmp_path: Path, monkeypatch) -> None:
    """Each new bot version a ladder plays on a cluster is unpacked into every worker's bot cache (up to
    the folder's 256 MiB), and nothing looked at the disk first: a worker filled its disk to the last
    byte (its temp directory by default, shared with everything else there). A bundle that could not
    be unpacked with the reserve left is refused, saying so, and nothing of it is kept; one already
    unpacked is still used."""
    from types import SimpleNamespace

    from arena.bots import bundles
    from arena.bots.manifest import load_bot
    from arena.bots.folder import CAPS
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "small"\nversion = "1"\ncommand = ["true"]\n')
    spec = load_bot(bot)
    blob, digest = bundles.pack_bot(spec), spec.files_hash()
    cache = tmp_path / "cache"
    cache.mkdir()
    real = bundles.shutil.disk_usage
    free = {"bytes": CAPS.bytes}  # a whole folder fits, the reserve does not

    def usage(path: object) -> object:
        u = real(path)
        return SimpleNamespace(total=u.total, used=u.used, free=free["bytes"])
    monkeypatch.setattr(bundles.shutil, "disk_usage", usage)
    with pytest.raises(bundles.BundleError, match="short of disk"):
        bundles.prepare_bot(digest, "bot.toml", blob, root=cache)
    assert not [p for p in cache.iterdir() if p.is_dir()]
    free["bytes"] = CAPS.bytes + bundles.MIN_FREE_BYTES
    assert bundles.prepare_bot(digest, "bot.toml", blob, root=cache).label == "small@1"
    free["bytes"] = 0  # unpacked already: nothing more is written
    assert bundles.prepare_bot(digest, "bot.toml", blob, root=cache).label == "small@1"


# --------------------------------------------------------------------------- the host's page cache

OUTSIDE_THE_VIEW = ("/usr/share", "/usr/bin/perl", "/usr/bin/gcc", "/usr/lib/jvm", "/usr/lib/gcc",
                    "/usr/local", "/etc/passwd", "/etc/hostname", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                    "/usr/sbin", "/var", "/home", "/root", "/opt", "/srv")
"""Host paths (on this Debian host) a gVisor seat must not see: written here, not read from the
view's own list. Any cold page in them would be a channel between two seats."""

COLD_PROBE = "/usr/lib/python3.11/pydoc_data/topics.py"
"""A large file of the view that a Python bot's start does not read."""


def _gvisor_problem() -> str | None:
    from arena.bots.probes import gvisor_problem_now
    return gvisor_problem_now()


@pytest.mark.skipif(_gvisor_problem() is not None, reason=f"gVisor: {_gvisor_problem()}")
def test_a_gvisor_seat_starts_on_a_warm_view_and_sees_no_other_system_file(tmp_path: Path) -> None:
    """A sender that warms cold system pages and a receiver that times its first reads need a cold
    page both can see: the seat's view is small, all of it is in the cache once a seat has started,
    and it stays there when the kernel is asked to drop it."""
    from arena.bots import pagecache
    from arena.bots.filesystem import stranger_system
    from arena.bots.containment import RunAs
    from arena.bots.start import start_bot
    from tests.checks import reachable

    shared = tmp_path / "shared"  # a read-only path every seat sees besides the system (the arena package)
    shared.mkdir()
    (shared / "module.py").write_bytes(b"#" * (256 << 10))
    bot = tmp_path / "bot"
    bot.mkdir()
    bot, shared = reachable(bot), reachable(shared)
    probe = f"import os; print([p for p in {OUTSIDE_THE_VIEW!r} if os.path.lexists(p)], os.path.isfile({COLD_PROBE!r}))"
    with start_bot(["python3", "-c", probe], bot, run_as=RunAs.PRIVATE, containment=Containment.GVISOR, ro_binds=[shared]) as proc:
        status, lines = proc.run_to_end(60)
    assert lines == ["[] True"], (status, lines)  # the bot ran, saw the probe's file and nothing outside
    for path in (COLD_PROBE, shared / "module.py"):  # what memory pressure does to pages nobody used lately
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)  # written pages must be clean to be dropped
        os.close(fd)
        pagecache.evict(path)
    assert pagecache.cold_files([*stranger_system()[1], str(shared)]) == []


def test_a_command_outside_a_gvisor_seats_view_is_refused_naming_it(tmp_path: Path) -> None:
    from arena.bots.errors import BotCommandError
    from arena.bots.gvisor import write_bundle
    from arena.limits import Limits
    bot = tmp_path / "bot"
    bot.mkdir()
    (tmp_path / "home").mkdir()
    with pytest.raises(BotCommandError, match="/usr/bin/perl is not in a gVisor seat's system view"):
        write_bundle(tmp_path / "home", ["/usr/bin/perl", "bot.pl"], bot, uid=12345, env={}, limits=Limits())


def test_a_system_path_missing_on_the_host_is_named() -> None:
    from arena.bots.filesystem import MissingSystemPath, stranger_system
    with pytest.raises(MissingSystemPath, match="/usr/bin/no-such-python"):
        stranger_system(("/usr/bin/python3", "/usr/bin/no-such-python"))
