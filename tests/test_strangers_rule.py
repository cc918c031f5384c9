"""Strangers' seats fail closed (docs/SANDBOX.md, "Strangers' seats"): ``one_seat_per_author`` runs
under gVisor, or its operator accepts the known kernel channels by name (``accept_kernel_channels``
in the file, ``--accept-kernel-channels`` on the command line); otherwise every entry point (a
tournament file or flags, a ladder file, ``arena ladder``, ``ladder run``, ``submit``, ``serve``)
refuses it with one ``error:`` line naming both ways out. An acceptance is stored with the run and
the ladder, and shown wherever their settings are.

Bots run in-process (tests/fakes.py policy_launcher); no test here needs runsc or bubblewrap.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from arena.bots.manifest import BUNDLED_DIR
from arena.cli.main import app
from arena.ladder import LadderError, ensure_seeded, load_ladder, open_store
from arena.tournament.config import ACCEPTED_CHANNELS, ConfigError, load_config

from .fakes import policy_launcher
from .test_ladder import ctx, write_ladder

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()
BOTS = ["random", "lowest", "highest"]


def _refusal(text: str, *, flags: bool) -> None:
    """The one refusal: says why and names both ways out (with the flags only where there are flags)."""
    assert "one_seat_per_author" in text and "kernel" in text
    assert "gvisor = true" in text and "accept_kernel_channels = true" in text
    assert ("--gvisor" in text and "--accept-kernel-channels" in text) is flags
    assert "\n" not in text.strip()


# --------------------------------------------------------------------------- tournaments

def test_a_tournament_of_strangers_outside_gvisor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, {"bots": BOTS, "one_seat_per_author": True})
    _refusal(str(e.value), flags=True)
    f = tmp_path / "t.toml"
    f.write_text('bots = ["random", "lowest"]\none_seat_per_author = true\ndeals = 1\n')
    with pytest.raises(ConfigError):
        load_config(f)
    with pytest.raises(ConfigError):
        load_config(f, {"sandbox": False})  # namespaces share the same counters
    store = tmp_path / "s.sqlite"
    result = runner.invoke(app, ["tournament", str(f), "--store", str(store), "--plain"])
    assert result.exit_code == 2 and "error:" in result.output and "Traceback" not in result.output
    _refusal(result.output.split("error:", 1)[1].replace("\n", " "), flags=True)
    assert not store.exists()  # refused before anything starts


def test_gvisor_or_the_acceptance_lets_strangers_play(tmp_path: Path) -> None:
    sealed = load_config(None, {"bots": BOTS, "one_seat_per_author": True, "gvisor": True})
    assert not sealed.channels_accepted and "accept_kernel_channels" not in sealed.fingerprint()
    f = tmp_path / "t.toml"
    f.write_text('bots = ["random", "lowest"]\none_seat_per_author = true\naccept_kernel_channels = true\n')
    assert load_config(f).channels_accepted
    flagged = load_config(None, {"bots": BOTS, "one_seat_per_author": True, "accept_kernel_channels": True})
    assert flagged.channels_accepted and flagged.fingerprint()["accept_kernel_channels"] is True
    plain = load_config(None, {"bots": BOTS})  # one author's round-robin: no change
    assert not plain.channels_accepted and "accept_kernel_channels" not in plain.fingerprint()


@pytest.mark.parametrize("kw, needle", [
    ({"one_seat_per_author": True, "trusted_bots": True}, "drop --trusted-bots"),
    ({"one_seat_per_author": True, "trusted_bots": True, "accept_kernel_channels": True}, "drop --trusted-bots"),
    ({"one_seat_per_author": True, "gvisor": True, "accept_kernel_channels": True}, "under gVisor"),
    ({"accept_kernel_channels": True}, "accept_kernel_channels is for one_seat_per_author"),
])
def test_settings_that_contradict_the_rule_are_refused(kw: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(None, {"bots": BOTS, **kw})


def test_the_acceptance_is_stored_with_the_run_and_shown_with_it(tmp_path: Path) -> None:
    from arena.tournament.live import PlainReporter
    from arena.tournament.run import run_tournament
    from arena.tournament.store import Store

    store = tmp_path / "s.sqlite"
    cfg = load_config(None, {"name": "open", "bots": ["lowest", "highest"], "deals": 1, "max_turns": 60,
                             "one_seat_per_author": True, "accept_kernel_channels": True, "store": str(store)})
    out = io.StringIO()
    trio.run(lambda: run_tournament(cfg, Store(cfg.store), PlainReporter(stream=out), launcher=policy_launcher()))
    assert ACCEPTED_CHANNELS in out.getvalue().splitlines()[0]  # the run's header line
    assert Store(store, readonly=True).tournament("open")["config"]["accept_kernel_channels"] is True
    shown = runner.invoke(app, ["standings", "open", "--store", str(store)])
    assert shown.exit_code == 0 and "kernel channels accepted" in shown.output
    sealed = load_config(None, {"name": "sealed", "bots": ["lowest", "highest"], "deals": 1, "max_turns": 60,
                                "store": str(store)})
    trio.run(lambda: run_tournament(sealed, Store(sealed.store), launcher=policy_launcher()))
    assert "kernel channels" not in runner.invoke(app, ["standings", "sealed", "--store", str(store)]).output


# --------------------------------------------------------------------------- ladders

def test_a_ladder_of_strangers_outside_gvisor_is_refused_everywhere(tmp_path: Path) -> None:
    path = write_ladder(tmp_path, "open", one_seat_per_author=True, store=str(tmp_path / "s.sqlite"))
    with pytest.raises(LadderError) as e:
        load_ladder(path)
    assert str(path) in str(e.value)
    _refusal(str(e.value), flags=False)  # a ladder is set in its file only
    bot = BUNDLED_DIR / "random"
    for argv in (["ladder", str(path)], ["ladder", "run", str(path), "--games", "1"],
                 ["submit", str(bot), "--ladder", str(path)]):
        result = runner.invoke(app, [*argv, "--store", str(tmp_path / "s.sqlite")])
        assert result.exit_code == 2 and "error:" in result.output and "Traceback" not in result.output, argv
        assert "accept_kernel_channels = true" in result.output.replace("\n", " "), argv
    assert not (tmp_path / "s.sqlite").exists()


def test_a_gvisor_ladder_of_strangers_needs_no_acceptance(tmp_path: Path) -> None:
    ladder = load_ladder(write_ladder(tmp_path, "sealed", one_seat_per_author=True, gvisor=True), check_bots=False)
    assert not ladder.channels_accepted
    shipped = load_ladder(REPO / "ladders" / "strangers-2p.toml", REPO / "ladders", check_bots=False)
    assert shipped.gvisor and shipped.one_seat_per_author and not shipped.channels_accepted


def test_a_ladder_that_accepts_the_channels_stores_and_shows_it(tmp_path: Path) -> None:
    from arena.ladder.seasons import frozen_of
    from arena.ladder.tables import keep_ladder_file

    store_path = tmp_path / "s.sqlite"
    path = write_ladder(tmp_path, "open", one_seat_per_author=True, accept_kernel_channels=True,
                        store=str(store_path))
    ladder = load_ladder(path)
    assert ladder.channels_accepted and frozen_of(ladder)["accept_kernel_channels"] is True
    store = open_store(ladder)
    try:
        trio.run(ensure_seeded, ladder, store, ctx())
        stored = store.tournament(ladder.seed_id)["config"]
        assert stored["accept_kernel_channels"] is True and stored["one_seat_per_author"] is True
        copy = keep_ladder_file(store, ladder)
    finally:
        store.close()
    assert load_ladder(copy).channels_accepted  # the store alone plays it on the same terms
    shown = runner.invoke(app, ["ladder", str(path), "--store", str(store_path), "--no-seed"])
    assert shown.exit_code == 0 and "kernel channels accepted" in shown.output
    as_json = runner.invoke(app, ["ladder", str(path), "--store", str(store_path), "--no-seed", "--json"])
    assert json.loads(as_json.stdout)["accept_kernel_channels"] is True


def test_a_store_copy_keeps_gvisor(tmp_path: Path) -> None:
    """The copy a store keeps names the ladder's containment: a strangers' ladder played from it
    alone is sealed as the original, not refused nor weaker."""
    from arena.ladder.config import ladder_toml
    ladder = load_ladder(write_ladder(tmp_path, "sealed", one_seat_per_author=True, gvisor=True, system=["java"]),
                         check_bots=False)
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "sealed.toml"
    copy.write_text(ladder_toml(ladder, ladder.bots))
    again = load_ladder(copy, check_bots=False)
    assert again.gvisor and again.system == ["java"] and not again.channels_accepted


def test_a_placement_begun_before_the_rule_resumes_as_it_began(tmp_path: Path) -> None:
    """A stored run's own settings decide how it resumes: one begun without the acceptance key (before
    the rule) resumes without it, so its stored config still matches."""
    ladder = load_ladder(write_ladder(tmp_path, "open", one_seat_per_author=True, accept_kernel_channels=True),
                         check_bots=False)
    fresh = ladder.tournament("x", format="round-robin", bots=ladder.bots)
    assert fresh.fingerprint()["accept_kernel_channels"] is True
    old = {k: v for k, v in fresh.fingerprint().items() if k != "accept_kernel_channels"}
    fp = {k: v for k, v in old.items() if k not in ("bots", "format")}  # as placement.ensure_seeded passes it
    assert ladder.tournament("x", format="round-robin", bots=old["bots"], **fp).fingerprint() == old


# --------------------------------------------------------------------------- a club server

def test_serve_refuses_a_ladder_of_strangers_outside_gvisor(tmp_path: Path) -> None:
    lads = tmp_path / "ladders"
    lads.mkdir()
    write_ladder(lads, "open", one_seat_per_author=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", "from arena.cli.main import app; app()", "serve", "--store",
                           str(tmp_path / "s.sqlite"), "--port", "0", "--ladders", str(lads), "--ladder", "open"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    _refusal(done.stderr.split("error:", 1)[1].replace("\n", " "), flags=False)
    assert "arena serve:" not in done.stdout


def test_an_upload_to_a_ladder_of_strangers_outside_gvisor_fails_saying_why(tmp_path: Path) -> None:
    """The web upload loads the ladder file as every command does: refused before anything is
    written, with the file's reason on the page (its path hidden), and the bot not placed."""
    from tests.test_serve import ServerProc, multipart, zip_bytes
    lads = tmp_path / "ladders"
    lads.mkdir()
    write_ladder(lads, "open", one_seat_per_author=True, check_games=1)
    store = tmp_path / "data" / "arena.sqlite"
    store.parent.mkdir()
    bot = BUNDLED_DIR / "random"
    files = {f"mine/{p.name}": p.read_bytes() for p in bot.iterdir() if p.is_file()}
    files["mine/bot.toml"] = files["mine/bot.toml"].replace(b'name = "random"', b'name = "mine"')
    server = ServerProc(store, "--allow-submit", "--ladders", str(lads))
    try:
        body, ctype = multipart({"ladder": "open", "token": server.token}, ("mine.zip", zip_bytes(files)))
        status, _, page = server.request("POST", "/submit", body, {"Content-Type": ctype})
        text = page.decode()
        assert status == 400 and "ladder &#39;open&#39; takes no submissions" in text, text[-3000:]
        assert "one_seat_per_author" in text and "accept_kernel_channels = true" in text
        assert str(lads) not in text and "Traceback" not in text
        assert not list((store.parent / "uploads").glob("*/*"))  # nothing kept
    finally:
        server.stop()
