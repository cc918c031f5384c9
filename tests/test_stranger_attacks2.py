"""A second attacker's walk of what the gVisor seat, the system presets and the worker's bot cache
added: each test is an attack that worked (or a guard no test held) before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arena.bots import filesystem
from arena.bots.filesystem import SystemViewError, system_paths


@pytest.mark.parametrize("entry", ["/var/log", "/var/cache", "/var/lib", "/var/mail", "/srv", "/mnt", "/media",
                                   "/usr", "/etc", "/opt"])
def test_a_system_path_outside_the_installed_system_is_refused(entry: str) -> None:
    """The list of places no seat may see was a deny list (/proc, /tmp, /home...): /var/log, a
    service's data in /var/lib, a worker's bot cache set to /var/cache/palace-arena or a mount in
    /srv passed, and every seat then read what lies there. Only paths strictly below the installed
    system (/usr, /etc, /opt, /lib...) are let in; a whole root would put all of it in every view."""
    with pytest.raises(SystemViewError, match="refused"):
        system_paths([entry])


@pytest.fixture
def fake_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system root in tmp_path, owned (as far as the check knows) by whoever runs the test."""
    root = tmp_path / "opt"
    (root / "runtime" / "lib").mkdir(parents=True)
    (root / "runtime" / "lib" / "core.so").write_bytes(b"\x7fELF")
    for d in (root, root / "runtime", root / "runtime" / "lib"):
        d.chmod(0o755)
    monkeypatch.setattr(filesystem, "SYSTEM_VIEW_ROOTS", (str(root),))
    monkeypatch.setattr(filesystem, "SYSTEM_OWNER", os.geteuid())
    return root


def test_a_system_path_someone_else_can_change_is_refused(fake_system: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every seat sees the same system view, locked in memory once per referee: a folder of it that
    a user other than the system's owner may write (or owns) lets that user change what the seats
    see while they play (a file's size or mtime as a channel, a component swapped for a link to a
    home after the check). The path, the folders above it and everything below it must be the
    system owner's and writable by no one else."""
    runtime = fake_system / "runtime"
    assert system_paths([str(runtime)]) == (str(runtime),)
    for victim, mode in ((runtime / "lib" / "core.so", 0o666), (runtime / "lib", 0o775), (runtime, 0o757),
                         (fake_system, 0o777)):
        old = victim.stat().st_mode & 0o777
        victim.chmod(mode)
        with pytest.raises(SystemViewError, match=f"refused: {victim} .*writable"):
            system_paths([str(runtime)])
        victim.chmod(old)
    monkeypatch.setattr(filesystem, "SYSTEM_OWNER", os.geteuid() + 1)
    with pytest.raises(SystemViewError, match="refused: .* is owned by uid"):
        system_paths([str(runtime)])
