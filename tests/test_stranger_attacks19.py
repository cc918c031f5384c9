"""#35, across turns: what a seat does on its own turn that lands on another seat's.

A seat off its turn is frozen, but a freezer stops a process only on its way back to user space.
A bot whose processes sit inside long system calls (tests/cpu_bots/sitter.py: ``mmap`` with
``MAP_POPULATE`` of 16 GiB of zero pages, over and over) ran on, frozen, through the other seat's
turns: 0.35-1.7 s of CPU per decision of the other seat, never over its game's CPU allowance, and a
fixed-work bot forfeited on time. Now the referee waits after each answer (and after a start)
until the seat has stopped, and a seat that used more than ``OFF_TURN_CPU_S`` of CPU meanwhile, or
between then and its next request, forfeits with ``cpu_limit``: its own fault, not the other's.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import trio

from arena.bots.cgroups import OFF_TURN_CPU_S
from arena.bots.containment import Containment
from arena.bots.launch import Launcher
from arena.bots.manifest import BotSpec
from arena.engine import preset
from arena.referee import TimeControl
from arena.referee.blocking import BlockingPlayer, play_game, settle

from tests.checks import bwrap_or_skip, reachable
from tests.test_cpu_seats import GVISOR_PROBLEM, LIMITS, Watched, bot, needs_cgroups

CLOCK = TimeControl(move_ms=500, bank_ms=0, handshake_ms=30_000)
# The sitter's own turns: its children run then, in its sandbox, beside the answer: a gVisor sitter
# at a load of 20-70 took over 500 ms to answer (a timeout on its own turn, not the rule's case).
SITTER_CLOCK = TimeControl(move_ms=3000, bank_ms=0, handshake_ms=30_000)
TURNS = 30  # the sitter is asked many times over: its children start at its first request


@pytest.fixture(scope="module")
def bots(tmp_path_factory) -> dict[str, BotSpec]:
    root = reachable(Path(tempfile.mkdtemp(prefix="arena-a22-", dir=tmp_path_factory.mktemp("a22"))))
    root.chmod(0o755)
    return {"quiet": bot(root, "quiet", "starver.py", 0, author="quiet"),
            "sitter": bot(root, "sitter", "sitter.py", 2, 16, author="sitter"),
            "gvisor-sitter": bot(root, "gvisor-sitter", "sitter.py", 2, 0.125, author="gvisor-sitter")}


def _containment(mode: str) -> Containment:
    if mode == "bubblewrap":
        bwrap_or_skip()
    elif mode == "gvisor" and GVISOR_PROBLEM is not None:
        pytest.skip(f"gVisor cannot run here: {GVISOR_PROBLEM}")
    return {"bubblewrap": Containment.BUBBLEWRAP, "namespaces": Containment.NAMESPACES,
            "gvisor": Containment.GVISOR}[mode]


def _game(bots: dict[str, BotSpec], mode: str, opponent: str, clock: TimeControl = CLOCK,
          **play) -> tuple[dict, Watched]:
    launcher = Launcher(LIMITS, _containment(mode))
    plans = {s.label: trio.run(launcher.plan, s) for s in bots.values()}
    quiet = Watched(bots["quiet"], lambda spec: plans[spec.label].start(), clock)
    other = BlockingPlayer(bots[opponent], lambda spec: plans[spec.label].start(), clock)
    quiet.other = other
    try:
        rec = play_game([quiet, other], preset("classic"), 7, game_id=f"a22-{mode}-{opponent}", clock=clock,
                        **{"max_turns": TURNS, **play})
    finally:
        quiet.shutdown()
        other.shutdown()
        settle()
    quiet.steps = [(st["seat"], st.get("ms"), st.get("fault")) for st in rec.steps if "request" in st]
    return {f["seat"]: f for f in rec.faults}, quiet


@needs_cgroups
@pytest.mark.parametrize("mode", ["bubblewrap", "namespaces", "gvisor"])
def test_a_seat_that_sits_in_the_kernel_off_its_turn_forfeits_and_the_other_seat_never_does(bots, mode) -> None:
    sitter = "gvisor-sitter" if mode == "gvisor" else "sitter"
    faults, quiet = _game(bots, mode, sitter, SITTER_CLOCK)
    assert 0 not in faults, faults  # the seat on turn is never blamed for the other's CPU
    assert faults.get(1, {}).get("reason") == "cpu_limit", (faults, quiet.grew, quiet.steps)
    assert "while frozen off its turn" in faults[1]["message"], faults
    # and it was stopped before the quiet seat's clock started: none of it ran in the quiet seat's turns
    assert max(quiet.grew, default=0.0) < OFF_TURN_CPU_S, quiet.grew


@needs_cgroups
@pytest.mark.parametrize("mode", ["bubblewrap", "gvisor"])
def test_a_quiet_seat_is_never_blamed_for_cpu_off_its_turn(bots, mode) -> None:
    """The other side of the rule: two bots that stop when frozen play the game out (the freeze
    is seen at once, and nothing runs between turns), on a fixed schedule too."""
    faults, quiet = _game(bots, mode, "quiet", fixed_schedule=True, max_turns=12)
    assert faults == {}
    assert quiet.grew and max(quiet.grew) < OFF_TURN_CPU_S, quiet.grew
