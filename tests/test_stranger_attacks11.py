"""#35 again: what the last stop left open: an upload worker's own limits and capabilities, read-only
opens of a store below a folder others may write, and a gVisor seat's copy of its bot's folder.

As in tests/test_stranger_attacks10.py, an attacker's program takes the upload worker's place and
answers with what it managed, as a refusal the server passes on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.test_stranger_attacks10 import READ_JOB, _refusal, _view

RAISER = READ_JOB + """
import resource
raised, calls = [], []
for name in ("RLIMIT_AS", "RLIMIT_FSIZE"):
    res = getattr(resource, name)
    soft, hard = resource.getrlimit(res)
    for how, call in (("setrlimit", resource.setrlimit), ("prlimit", lambda r, l: resource.prlimit(0, r, l))):
        try:
            call(res, (soft, hard))  # the limits it has: what the call itself is allowed
            calls.append(how)
            call(res, (hard * 4, hard * 4))
            raised.append(name)
        except (OSError, ValueError):
            pass
with open("/proc/self/status") as f:
    caps = {line.split(":")[0]: line.split()[1] for line in f if line.startswith("Cap")}
answer({"raised": raised, "calls": calls, **{k: caps[k] for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")}})
"""


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_cannot_raise_its_own_limits_or_keep_capabilities(tmp_path: Path, view: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's memory and file size are rlimits set in its process before it runs (soft and
    hard alike), and its filter allowed ``setrlimit`` and ``prlimit64``: a root server's worker
    where bubblewrap cannot start keeps every capability, ``CAP_SYS_RESOURCE`` among them, so code
    a hostile archive ran in it could raise both (and a root worker could open, chown or signal
    what root may). It needs neither to read an archive: both calls are refused by its filter, and
    a root worker starts with no capability (none effective, permitted, ambient or left in its
    bounding set, so none comes back through an exec). On the old code, run as root without
    bubblewrap: RLIMIT_AS and RLIMIT_FSIZE raised by setrlimit, every capability kept. Planted
    (the two calls left in the worker's filter; the capabilities not dropped): each fails."""
    from tests.test_serve import LIMITS
    _view(view, monkeypatch)
    (tmp_path / "uploads").mkdir()
    found = _refusal(monkeypatch, RAISER, tmp_path / "uploads" / "job", LIMITS)
    assert found["raised"] == [] and found["calls"] == [], found
    assert {k: int(found[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")} == \
        {"CapEff": 0, "CapPrm": 0, "CapBnd": 0, "CapAmb": 0}, found


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs a root test")
def test_a_server_that_is_not_root_still_unpacks_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The capabilities are given up by every worker that bubblewrap does not run, and a server of
    uid 4242 cannot empty its bounding set (that needs ``CAP_SETPCAP``), nor needs to: an exec as
    any uid but 0, under ``no_new_privs``, gains nothing from it. Where bubblewrap cannot be had,
    its uploads are unpacked in the worker's tmpfs (a user namespace of its own), its capabilities
    all 0. (Where no tmpfs can be made either, uploads are refused: tests/test_stranger_attacks10.py.)
    Planted (the bounding set required empty for every uid): every upload is the arena's failure."""
    from tests.test_stranger_attacks10 import _upload_as_eve
    found, _ = _upload_as_eve(monkeypatch, RAISER, "a18-eve-")
    assert "lost" not in found and found["calls"] == [], found
    assert [int(found[k], 16) for k in ("CapEff", "CapPrm", "CapAmb")] == [0, 0, 0], found


# -- read-only opens of a store below a folder others may write -------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="another user's files and moves need a root test")
@pytest.mark.parametrize("reader", ["arena games", "the web pages"])
def test_a_store_read_below_a_folder_others_may_write_is_refused_not_shown(tmp_path: Path, reader: str) -> None:
    """``/srv`` writable by every user (no sticky bit), the arena's store in ``/srv/arena-data``: Eve
    cannot open the store, but she may rename what is in ``/srv``, so she moves ``arena-data`` away
    and puts a folder of hers with a store of hers in its place (its files hers, as a copy she made).
    The writing opens refuse that folder (tests/test_stranger_attacks10.py), but the read-only ones
    did not look: on the old code ``arena games`` and the pages of ``arena serve`` showed her
    tournament as the arena's. Now every open of a store, reading or writing, checks its place by
    one rule (``games.check_store_place``): the folders above, as spelled and as resolved, and the
    store's own files. Planted (the readers unchecked): her tournament is listed."""
    from arena.serve import data
    from arena.tournament.store import Store, StoreError
    from tests.test_stranger_attacks10 import EVE, _as_eve
    srv = tmp_path / "srv"
    srv.mkdir()
    store = srv / "arena-data" / "arena.sqlite"
    Store(store).close()  # (the writing opens refuse it below a folder others may write: made first)
    os.chmod(srv, 0o777)
    made = tmp_path / "made" / "arena.sqlite"
    db = Store(made)
    db.db.execute("INSERT INTO tournaments VALUES ('eves-own', '{}', 1, 'finished', 0, 0)")
    db.close()
    hers = srv / "eve-data"
    made.parent.rename(hers)
    for p in (hers, *hers.iterdir()):
        os.chown(p, EVE, EVE)
        os.chmod(p, 0o777 if p.is_dir() else 0o666)

    def swap() -> int:
        os.rename("arena-data", "away")
        os.rename("eve-data", "arena-data")
        return 0
    assert _as_eve(swap, srv) == 0, "Eve could not rename in a folder every user may write"
    shown, refused = [], ""
    try:
        read = Store(store, readonly=True) if reader == "arena games" else data.open_read(store)
        assert read is not None
        try:
            shown = [row[0] for row in read.db.execute("SELECT id FROM tournaments")]
        finally:
            read.db.close()
    except StoreError as e:
        refused = str(e)
    assert shown == [] and refused.startswith(f"the store's folder {srv}") and "writable by others" in refused, \
        (shown, refused)  # (her folder, or /srv above it: the first folder checked that fails is named)


# -- a gVisor seat's own copy of its bot's folder -------------------------------------------------

FAKE_RUNSC = """#!/bin/sh
# runsc's place: started where the seat's copy is bound (gvisor.bind_checked), says what it would serve
exec cat folder/bot.py
"""


def use_fake_runsc(script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gVisor's runsc replaced, for this test, by ``script`` (started where the seat's copy is bound),
    and gVisor taken as working here: a seat's plan and copy are the arena's, its sandbox is not."""
    from arena.bots import gvisor, start
    from arena.bots.containment import Containment
    from arena.bots.launch import Launcher
    runsc = tmp_path / "runsc"
    runsc.write_text(script)
    runsc.chmod(0o755)
    monkeypatch.setattr(gvisor, "RUNSC", str(runsc))
    monkeypatch.setattr(start, "gvisor_problem_now", lambda: "")
    monkeypatch.setattr(Launcher, "mode_now", lambda self: Containment.GVISOR)


def gvisor_plan_on_fake_runsc(bot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """A run's gVisor plan for the bot folder ``bot``, read by the run now (its files hash, which the
    seat's copy is checked against), whose runsc is :data:`FAKE_RUNSC`: (plan, spec, files hash)."""
    from arena.bots.containment import Containment
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    use_fake_runsc(FAKE_RUNSC, tmp_path, monkeypatch)
    spec = load_bot(bot)
    checked = spec.files_hash()  # the run reads it
    return Launcher(containment=Containment.GVISOR).plan_now(spec), spec, checked


@pytest.mark.skipif(os.geteuid() != 0, reason="a gVisor seat needs a root referee and a private uid")
def test_a_gvisor_seat_serves_only_the_files_the_run_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           request: pytest.FixtureRequest) -> None:
    """A run reads a bot once (its files hash: what standings, records and every copy are checked
    against), and a gVisor seat copies the bot's folder at its own start, long after. A local author
    who edits ``bot.py`` between the two (between games, or while the run plans) had the new file
    served to every later seat: the run recorded one bot and played another. Now the seat's copy is
    made from the arena's own copy of the bot, written from the run's reading (``launch.runnable``,
    tests/test_stranger_attacks14.py), and a copy made from any other folder is read by the folder
    reader and its hash compared with the run's: a changed folder is the bot's refusal, named.
    (runsc's place is taken by a program that prints the ``bot.py`` it would serve.) On the old
    code: ``cheat`` served. Planted (the copy not compared): the direct copy below is served."""
    from arena.bots import gvisor
    from arena.bots.errors import BotCommandError
    from arena.bots.filesystem import open_bot_dir
    home = Path(tempfile.mkdtemp(prefix="a18-author-"))  # a folder the seat's private uid can reach
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    bot = home / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "edited"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n')
    (bot / "bot.py").write_text("honest\n")
    for p in (home, bot, *bot.iterdir()):
        p.chmod(0o755)
    plan, _, checked = gvisor_plan_on_fake_runsc(bot, tmp_path, monkeypatch)
    (bot / "bot.py").write_text("cheat\n")  # the author, after the check
    with plan.start() as seat:
        assert seat.receive_line(10.0) == "honest"
    fd = open_bot_dir(bot)  # a seat's copy of the author's folder itself: refused, never served
    try:
        (tmp_path / "seat").mkdir()
        with pytest.raises(BotCommandError, match="changed since the run read them") as refused:
            gvisor.own_copy(fd, tmp_path / "seat", checked)
        assert checked in str(refused.value) and list((tmp_path / "seat").iterdir()) == []
    finally:
        os.close(fd)
