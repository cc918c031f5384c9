"""Containment is one value (arena.bots.containment.Containment) from the user's options to the
bot: made once by launch.containment_for, carried by the config, a worker's setup and the cluster's
probe, and refused wherever it is not a Containment (fail closed: nothing else may mean a weaker
mode). Everything here is decided before a bot starts, so no test starts one."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from arena.bots import notes, probes
from arena.bots.containment import Containment
from arena.bots.errors import BotStartError
from arena.bots.launch import ContainmentError, Launcher, containment_for
from arena.cli.main import app
from arena.engine import Rules
from arena.tournament import cluster
from arena.tournament.executors import BotSetup


@pytest.mark.parametrize("sandbox, trusted, gvisor, made", [
    (None, False, False, Containment.AUTO),
    (True, False, False, Containment.BUBBLEWRAP),
    (False, False, False, Containment.NAMESPACES),
    (None, True, False, Containment.TRUSTED),
    (True, True, False, Containment.TRUSTED),  # the operator's flag over a file's sandbox = true
    (False, False, True, Containment.GVISOR),  # never weaker than asked
    (True, False, True, Containment.GVISOR),
])
def test_the_options_make_one_value(sandbox, trusted, gvisor, made) -> None:
    assert containment_for(sandbox, trusted, gvisor) is made


@pytest.mark.parametrize("sandbox", [None, True, False])
def test_gvisor_with_trusted_bots_is_refused_where_the_value_is_made(sandbox) -> None:
    with pytest.raises(ContainmentError, match="gVisor and --trusted-bots contradict"):
        containment_for(sandbox, trusted=True, gvisor=True)


@pytest.mark.parametrize("command", [["check", "random", "--gvisor", "--trusted-bots"],
                                     ["play", "random", "random", "--gvisor", "--trusted-bots"],
                                     ["tournament", "--bot", "random", "--bot", "lowest", "--gvisor", "--trusted-bots"]])
def test_the_cli_says_so_in_one_line(command, tmp_path) -> None:
    result = CliRunner().invoke(app, [*command, *(["--store", str(tmp_path / "s.sqlite")]
                                                  if command[0] != "check" else [])])
    assert result.exit_code == 2, result.output
    assert result.output.count("error:") == 1 and "contradict" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "s.sqlite").exists()  # nothing started


def _setup(containment: Containment) -> BotSetup:
    return BotSetup({}, {}, Rules(), containment=containment)


@pytest.mark.parametrize("containment", list(Containment))
def test_a_worker_gets_the_value_as_it_was_made(containment) -> None:
    wire = _setup(containment).wire()
    assert wire["containment"] == containment.value and isinstance(wire["containment"], str)
    assert BotSetup.from_wire(wire).containment is containment


@pytest.mark.parametrize("value", ["none", "TRUSTED", "", None, True, "bubblewrap "])
def test_a_containment_no_arena_knows_is_refused_on_arrival(value) -> None:
    wire = {**_setup(Containment.BUBBLEWRAP).wire(), "containment": value}
    with pytest.raises(ContainmentError, match="no known containment"):
        BotSetup.from_wire(wire)
    del wire["containment"]  # an older arena's setup (sandbox, trusted_bots) is no weaker default
    with pytest.raises(ContainmentError, match="no known containment"):
        BotSetup.from_wire(wire)


@pytest.mark.parametrize("value", ["trusted", True, False, None, Containment.AUTO])
def test_a_bot_starts_only_with_a_resolved_containment(value) -> None:
    from arena.bots.start import start_bot
    with pytest.raises(BotStartError, match="containment must be a Containment other than AUTO"):
        start_bot(["/usr/bin/true"], "/usr/bin", containment=value)


@pytest.mark.parametrize("value", ["trusted", "gvisor", None, True])
def test_a_launcher_takes_no_string_for_its_mode(value) -> None:
    with pytest.raises(ContainmentError, match="must be a Containment"):
        Launcher(containment=value).mode_now()  # type: ignore[arg-type]


def test_the_cluster_probe_checks_what_the_run_requires(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(cluster, "sandbox_problem_now", lambda: asked.append("bwrap") or "no bwrap here")
    monkeypatch.setattr(cluster, "gvisor_problem_now", lambda: asked.append("runsc") or "no runsc here")

    def probe(value: str) -> str | None:
        return asyncio.run(cluster.probe(value))["containment"]

    assert probe("bubblewrap") == "no bwrap here" and probe("gvisor") == "no runsc here"
    assert probe("auto") is None and probe("namespaces") is None and probe("trusted") is None
    assert asked == ["bwrap", "runsc"]  # AUTO and the rest are the worker's Launcher's to resolve
    assert "knows no containment 'sandbox'" in (probe("sandbox") or "")  # a value from another arena


def test_the_preflight_names_the_worker_and_the_containment() -> None:
    class Client:
        def run(self, fn, value, on_error):
            assert value == "gvisor"  # plain data across the wire, as the probe takes it
            return {"tcp://w1": {"version": cluster.__version__, "containment": "no runsc here"}}

    with pytest.raises(cluster.ClusterError, match=r"tcp://w1: cannot contain bots \(gvisor\): no runsc here"):
        cluster._preflight(Client(), Containment.GVISOR)


def test_probes_start_their_bot_in_the_mode_they_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Containment] = []

    def fake(**kw):
        seen.append(kw["containment"])
        raise BotStartError("not here")
    monkeypatch.setattr(probes, "_probe", fake)
    monkeypatch.setattr(probes, "_namespaces_checked", {})
    monkeypatch.setattr(notes, "read_note", lambda note: None)  # probed, not read from this machine's note
    monkeypatch.setattr(probes.os, "geteuid", lambda: 0)
    assert probes.namespaces_problem_now() == "not here"
    assert seen == [Containment.NAMESPACES]
