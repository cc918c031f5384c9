"""Strangers' seats outside gVisor see the gVisor seat's small system view (docs/SANDBOX.md,
"Strangers' seats fail closed"): under bubblewrap and namespaces, a run with ``one_seat_per_author``
(its kernel channels accepted) shows each seat only ``filesystem.stranger_system()`` (Python 3, bash,
the run's ``system`` list and their libraries), and the referee warms every page of it before each
start, so the page cache carries nothing between the seats through the system files; the channels
left are the kernel counters the operator accepted. A run of one author keeps the host's /usr and /etc.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arena.bots import probes
from arena.bots.containment import Containment, RunAs
from arena.bots.filesystem import STRANGER_SYSTEM, SystemView, contained_view, stranger_system
from arena.tournament.config import ConfigError, load_config

from .test_stranger_attacks import COLD_PROBE, OUTSIDE_THE_VIEW

BWRAP_PROBLEM = probes.sandbox_problem_now()
NS_PROBLEM = probes.namespaces_problem_now()
MODES = [
    pytest.param(Containment.BUBBLEWRAP, id="bubblewrap", marks=pytest.mark.skipif(
        BWRAP_PROBLEM is not None, reason=f"bubblewrap: {BWRAP_PROBLEM}")),
    pytest.param(Containment.NAMESPACES, id="namespaces", marks=pytest.mark.skipif(
        NS_PROBLEM is not None, reason=f"namespaces: {NS_PROBLEM}")),
]
STRANGERS = {"bots": ["random", "lowest"], "one_seat_per_author": True, "accept_kernel_channels": True}


def test_the_stranger_view_binds_no_system_folder_whole(tmp_path: Path) -> None:
    links, shown, own = contained_view(tmp_path, (), SystemView.STRANGER)
    assert set(shown) == set(stranger_system()[1]) and own == [str(tmp_path)]
    for whole in ("/usr", "/etc", "/usr/lib", "/usr/bin", "/usr/share", "/lib", "/bin"):
        assert whole not in shown
    assert os.path.realpath("/usr/bin/python3") in shown or any(
        os.path.realpath("/usr/bin/python3").startswith(s + "/") for s in shown)
    host = contained_view(tmp_path, ())[1]
    assert "/usr" in host and "/etc" in host  # one author's seats: unchanged


def test_bwrap_gets_the_stranger_view(tmp_path: Path) -> None:
    from arena.bots.bwrap import bwrap_argv
    common = dict(tmp_bytes=1 << 20, env={}, seccomp_fd=3)
    host = bwrap_argv("bwrap", ["python3"], tmp_path, **common)
    narrow = bwrap_argv("bwrap", ["python3"], tmp_path, view=SystemView.STRANGER, **common)
    binds = lambda argv: {argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}  # noqa: E731
    assert "/usr" in binds(host) and "/usr" not in binds(narrow) and "/etc" not in binds(narrow)
    assert set(stranger_system()[1]) <= binds(narrow)


def test_the_namespace_root_gets_the_stranger_view(tmp_path: Path) -> None:
    from arena.bots.namespaces import NamespaceRoot
    plan = NamespaceRoot.plan(tmp_path / "root", tmp_path, (), 12345, 1 << 20, view=SystemView.STRANGER)
    assert set(plan.system) == set(stranger_system()[1]) and "/usr" not in plan.system
    assert "/usr" in NamespaceRoot.plan(tmp_path / "root", tmp_path, (), 12345, 1 << 20).system


def test_strangers_seats_get_the_stranger_view_in_every_mode() -> None:
    from arena.tournament.config import load_bots
    from arena.tournament.executors import BotSetup
    from arena.tournament.run import bot_setup
    cfg = load_config(None, STRANGERS)
    assert cfg.view is SystemView.STRANGER
    setup = bot_setup(cfg, load_bots(cfg))
    assert setup.view is SystemView.STRANGER and BotSetup.from_wire(setup.wire()).view is SystemView.STRANGER
    assert load_config(None, {"bots": ["random", "lowest"]}).view is SystemView.HOST  # one author: unchanged
    assert load_config(None, {"bots": ["random", "lowest"], "gvisor": True}).view is SystemView.STRANGER


def test_a_setup_naming_an_unknown_view_is_refused() -> None:
    from arena.bots.launch import ContainmentError
    from arena.tournament.config import load_bots
    from arena.tournament.executors import BotSetup
    from arena.tournament.run import bot_setup
    cfg = load_config(None, STRANGERS)
    wire = {**bot_setup(cfg, load_bots(cfg)).wire(), "view": "wide-open"}
    with pytest.raises(ContainmentError, match="wide-open"):
        BotSetup.from_wire(wire)


def test_a_system_list_needs_a_stranger_view() -> None:
    assert load_config(None, {**STRANGERS, "system": ["javascript"]}).system == ["javascript"]
    with pytest.raises(ConfigError, match="system names what a stranger's seat sees"):
        load_config(None, {"bots": ["random", "lowest"], "system": ["javascript"]})


def test_a_ladder_checks_an_entry_in_the_view_its_games_get(tmp_path: Path) -> None:
    from arena.ladder import load_ladder
    from arena.ladder.placement import check_containment
    from .test_ladder import write_ladder
    open_ = load_ladder(write_ladder(tmp_path, "open", one_seat_per_author=True, accept_kernel_channels=True),
                        check_bots=False)
    assert check_containment(open_)["launcher"].view is SystemView.STRANGER
    assert check_containment(load_ladder(write_ladder(tmp_path, "mine"), check_bots=False)) == {}


def test_trusted_bots_have_no_stranger_view() -> None:
    from arena.bots.launch import ContainmentError, Launcher
    with pytest.raises(ContainmentError, match="strangers' seats run contained"):
        Launcher(containment=Containment.TRUSTED, view=SystemView.STRANGER).mode_now()


@pytest.mark.parametrize("mode", MODES)
def test_a_strangers_seat_sees_only_the_view_and_starts_on_it_warm(mode: Containment, tmp_path: Path) -> None:
    """From the bot's side: none of the host's other system files (the list written here, not read
    from the view's), the view's own files readable, and, once a seat has started, every page of the
    view in the cache and kept there when the kernel is asked to drop it."""
    from arena.bots import pagecache
    from arena.bots.start import start_bot
    from tests.checks import reachable

    shared = tmp_path / "shared"  # a read-only path every seat sees besides the system (the arena package)
    shared.mkdir()
    (shared / "module.py").write_bytes(b"#" * (256 << 10))  # no other process on the machine maps this one
    bot = tmp_path / "bot"
    bot.mkdir()
    bot, shared = reachable(bot), reachable(shared)
    outside = [p for p in OUTSIDE_THE_VIEW if p != "/var"]  # both modes make /var/tmp, a link to the private /tmp
    probe = (f"import os; print([p for p in {outside!r} if os.path.lexists(p)] + [p for p in os.listdir('/var') "
             f"if p != 'tmp'], os.path.isfile({COLD_PROBE!r}))")
    with start_bot(["python3", "-c", probe], bot, run_as=RunAs.PRIVATE, containment=mode,
                   view=SystemView.STRANGER, ro_binds=[shared]) as proc:
        status, lines = proc.run_to_end(60)
    assert lines == ["[] True"], (status, lines)
    with start_bot(["python3", "-c", probe], bot, run_as=RunAs.PRIVATE, containment=mode) as proc:
        status, lines = proc.run_to_end(60)
    assert lines != ["[] True"] and lines[0].endswith("True"), (status, lines)  # the host view shows them
    for path in (COLD_PROBE, shared / "module.py"):  # what memory pressure does to pages nobody used lately
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)  # written pages must be clean to be dropped
        os.close(fd)
        pagecache.evict(path)
    assert pagecache.cold_files([*stranger_system((*STRANGER_SYSTEM,))[1], str(shared)]) == []


@pytest.mark.parametrize("mode", MODES)
def test_the_launcher_plans_the_stranger_view_and_says_so(mode: Containment) -> None:
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    narrow = Launcher(containment=mode, view=SystemView.STRANGER)
    assert narrow.plan_now(load_bot("random")).view is SystemView.STRANGER
    assert "small system view" in narrow.describe_now()
    assert Launcher(containment=mode).plan_now(load_bot("random")).view is SystemView.HOST


@pytest.mark.parametrize("mode", MODES)
def test_a_command_outside_a_strangers_view_is_refused_naming_it(mode: Containment, tmp_path: Path) -> None:
    from arena.bots.errors import BotCommandError
    from arena.bots.start import start_bot
    from tests.checks import reachable
    bot = tmp_path / "bot"
    bot.mkdir()
    with pytest.raises(BotCommandError, match="perl is not in a stranger's seat's system view"):
        start_bot(["perl", "-e", "1"], reachable(bot), run_as=RunAs.PRIVATE, containment=mode,
                  view=SystemView.STRANGER)


def test_a_view_that_is_no_system_view_or_on_no_wall_is_refused(tmp_path: Path) -> None:
    """Fail closed: a plain string is not taken for a view, and a bot with no wall has no stranger view."""
    from arena.bots.errors import BotStartError
    from arena.bots.start import start_bot
    with pytest.raises(BotStartError, match="view must be a SystemView"):
        start_bot(["python3", "-c", "pass"], tmp_path, containment=Containment.TRUSTED, run_as=RunAs.REFEREE,
                  view="stranger")  # type: ignore[arg-type]
    with pytest.raises(BotStartError, match="stranger view is for a contained bot"):
        start_bot(["python3", "-c", "pass"], tmp_path, containment=Containment.TRUSTED, run_as=RunAs.REFEREE,
                  view=SystemView.STRANGER)
