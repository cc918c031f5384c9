"""A second attacker's walk of what the gVisor seat, the system presets and the worker's bot cache
added: each test is an attack that worked (or a guard no test held) before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arena.bots import filesystem
from arena.bots.filesystem import SystemViewError, system_paths

from tests.test_bundle_cache import bundle as _bundle, cache  # noqa: F401 (a fixture)


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


# ------------------------------------------------------------------ a worker's bot cache


def test_no_other_process_checks_the_disk_while_a_bundle_is_unpacked(tmp_path: Path, cache: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The free-space check before an unpack was made under the entry's own lock only: a worker's
    processes unpacking different new bots at once (every new version of a ladder lands on every
    worker) each saw room for one bot and each wrote up to 256 MiB, past the reserve, to the last
    byte. Checking and unpacking hold one lock of the whole cache, which another process then cannot
    take until the unpack is over."""
    import subprocess
    import sys

    from arena.bots import bundles
    digest, blob = _bundle(tmp_path, "first")
    seen: list[str] = []
    real = bundles.unpack_bot
    probe = ("import fcntl, os, sys\nfor name in sorted(os.listdir(sys.argv[1])):\n"
             "    if name.endswith('.lock'):\n"
             "        fd = os.open(os.path.join(sys.argv[1], name), os.O_RDWR)\n"
             "        try:\n            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "        except BlockingIOError:\n            print(name)\n")

    def unpacking(blob_: bytes, dest: Path) -> None:  # another process looks at the locks meanwhile
        held = subprocess.run([sys.executable, "-c", probe, str(cache)], capture_output=True, text=True,
                              check=True).stdout.split()
        seen.extend(held)
        real(blob_, dest)
    monkeypatch.setattr(bundles, "unpack_bot", unpacking)
    bundles.prepare_bot(digest, "bot.toml", blob, root=cache)
    assert "unpack.lock" in seen, seen  # besides the entry's own
    assert f"{bundles.bundle_key(blob)}.lock" in seen


def test_what_a_killed_unpack_or_eviction_left_is_removed_by_the_next(tmp_path: Path, cache: Path) -> None:
    """A worker killed while it unpacked a bot (or removed an evicted one) left its temporary folder
    in the cache: never counted against the bound, never removed, so the disk filled a bot at a time.
    The next unpack, which holds the cache's unpack lock (so no live unpack is under way), removes them."""
    from arena.bots import bundles
    for left in (".0123456789ab-x1y2z3", ".evicted-0123456789ab-q9"):
        (cache / left / "bot").mkdir(parents=True)
        (cache / left / "bot" / "big").write_bytes(b"#" * 100_000)
    (cache / "notes.lock").write_text("")  # a lock file is never removed
    digest, blob = _bundle(tmp_path, "next")
    bundles.prepare_bot(digest, "bot.toml", blob, root=cache)
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == [bundles.bundle_key(blob)]
    assert (cache / "notes.lock").is_file()


@pytest.mark.parametrize("manifest", ["../../{other}/bot/bot.toml", "/etc/passwd", "sub/../../../{other}/bot/bot.toml"])
def test_a_manifest_path_from_the_wire_stays_in_its_own_entry(tmp_path: Path, cache: Path, manifest: str) -> None:
    """The manifest's path inside a bundle comes over the wire with it, and was joined to the entry's
    folder as given: ``../<other key>/bot/bot.toml`` loaded another cache entry's bot (another blob,
    verified against another hash) as the one this blob was checked for."""
    from arena.bots import bundles
    d1, b1 = _bundle(tmp_path, "victim")
    d2, b2 = _bundle(tmp_path, "mine")
    bundles.prepare_bot(d1, "bot.toml", b1, root=cache)
    with pytest.raises(bundles.BundleError, match="manifest path"):
        bundles.prepare_bot(d2, manifest.format(other=bundles.bundle_key(b1)), b2, root=cache)


def test_a_library_the_view_links_from_outside_the_system_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The libraries a view's programs link join the view as the loader names them, unchecked: a
    program whose RUNPATH (or an ld.so.conf entry) names a folder in a home or /var/tmp put that
    folder's library, which its owner may rewrite at any time, into every seat's view. Each
    library is held to the same rules as a listed path."""
    import subprocess

    from arena.bots.filesystem import stranger_system
    fake = subprocess.CompletedProcess([], 0, stdout="\tlibc.so.6 => /usr/lib/x86_64-linux-gnu/libc.so.6 (0x1)\n"
                                                    "\tlibevil.so => /var/tmp/libevil.so (0x2)\n", stderr="")
    monkeypatch.setattr(filesystem.subprocess, "run", lambda *a, **k: fake)
    with pytest.raises(SystemViewError, match="/var/tmp/libevil.so .*refused"):
        stranger_system.__wrapped__(("/usr/bin/sh",))


def _gvisor_problem() -> str | None:
    from arena.bots.probes import gvisor_problem_now
    return gvisor_problem_now()


@pytest.mark.skipif(_gvisor_problem() is not None, reason=f"gVisor: {_gvisor_problem()}")
def test_a_gvisor_seat_s_reads_move_no_access_time_another_seat_sees(tmp_path: Path) -> None:
    """gVisor reads the shared view through the host's files, and each read moved the host file's
    access time, which every other seat can stat: one bit per file per day under relatime, every
    read on a host mounted strictatime. runsc's own mount namespace binds the shared view read-only,
    so no seat's read moves a time another seat sees, whatever the host's mount options."""
    import time

    from arena.bots.containment import RunAs
    from arena.bots.containment import Containment
    from arena.bots.start import start_bot
    from tests.checks import reachable

    shared = tmp_path / "shared"  # a read-only path every seat sees besides the system (the arena package)
    shared.mkdir()
    (shared / "module.py").write_text("#" * 10_000)
    bot = tmp_path / "bot"
    bot.mkdir()
    bot, shared = reachable(bot), reachable(shared)
    target = shared / "module.py"
    read = ["python3", "-c", f"open({str(target)!r}).read(); print('read')"]
    for _ in range(2):  # the first start maps and locks the shared files (the referee's own read)
        old = time.time() - 3 * 86400
        os.utime(target, (old, old - 60))  # a day old: the next read moves it under relatime too
        with start_bot(read, bot, run_as=RunAs.PRIVATE, containment=Containment.GVISOR, ro_binds=[shared]) as proc:
            status, lines = proc.run_to_end(60)
        assert lines == ["read"], (status, lines)
    assert os.stat(target).st_atime == old


@pytest.mark.parametrize("mounted, kept", [
    (os.ST_RELATIME, 1 << 21), (os.ST_NOEXEC | os.ST_NOATIME, 8 | 1024),
    (os.ST_NODIRATIME | os.ST_RELATIME, 2048 | 1 << 21), (0, 1 << 24)])
def test_the_read_only_remount_keeps_what_a_container_may_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               mounted: int, kept: int) -> None:
    """In a container's user namespace the kernel locks a mount's noexec and atime mode, and refuses
    a remount that changes them (every gVisor start would then fail there): each shared path is
    remounted with the flags its own mount has (a fake statvfs, for each mode this host may not have)."""
    import json
    from types import SimpleNamespace

    from arena.bots import gvisor
    bundle = tmp_path / "home" / "bundle"
    bundle.mkdir(parents=True)
    mounts = [{"type": "proc", "source": "proc"}, {"type": "bind", "source": "/usr/lib/python3.11"},
              {"type": "bind", "source": str(gvisor.checked_folder(bundle.parent))}]
    (bundle / "config.json").write_text(json.dumps({"mounts": mounts}))
    monkeypatch.setattr(gvisor.os, "statvfs", lambda path: SimpleNamespace(f_flag=mounted | os.ST_NOSUID))
    assert gvisor.shared_binds(bundle) == ((b"/usr/lib/python3.11", kept),)


@pytest.mark.skipif(_gvisor_problem() is not None, reason=f"gVisor: {_gvisor_problem()}")
def test_a_large_system_view_still_starts_under_gvisor(tmp_path: Path) -> None:
    """runsc's gofer serves each bind with threads of its own (about 4 each here), all counted by the
    seat's pids cgroup, whose allowance for runsc was a fixed 256: a view of ~70 binds (the base,
    java and javascript are 66) left the sandbox no thread to start the bot ("failed to create new
    OS thread"), and the seat forfeited for a list its organiser wrote. The allowance grows with the
    binds of the seat's view."""
    import glob

    from arena.bots.containment import RunAs
    from arena.bots.containment import Containment
    from arena.bots.start import start_bot
    from tests.checks import reachable
    extra = sorted(glob.glob("/usr/lib/*/gconv/*.so"))[:48]  # glibc's own modules: on every Debian host
    assert len(extra) == 48
    bot = tmp_path / "bot"
    bot.mkdir()
    bot = reachable(bot)
    with start_bot(["python3", "-c", "print('up')"], bot, run_as=RunAs.PRIVATE, containment=Containment.GVISOR,
                            system=tuple(extra)) as proc:
        status, lines = proc.run_to_end(60)
    assert (status, lines) == (0, ["up"])


# ------------------------------------------------------------------ the files hash


def test_folders_that_differ_by_an_executable_bit_or_an_empty_folder_hash_apart(tmp_path: Path) -> None:
    """The framed hash named a file by path, size and bytes only: a `run` script that starts and the
    same script without its executable bit (every start a "permission denied"), or a folder with an
    empty `cache/` the bot tests for, had one hash, so the store, a ladder and a cluster took one
    for the other. Both are framed now, the old hashes still verify what they always named, and a
    cluster bundle carries the empty folder (its worker's check would refuse it otherwise)."""
    from arena.bots.bundles import pack_bot, prepare_bot
    from arena.bots.folder import read_folder
    from arena.bots.manifest import load_bot
    bots = {}
    for name in ("runs", "cannot", "empty"):
        d = tmp_path / name
        d.mkdir()
        (d / "bot.toml").write_text('name = "x"\nversion = "1"\ncommand = ["./run"]\n')
        (d / "run").write_text("#!/bin/sh\nexit 0\n")
        (d / "run").chmod(0o755 if name != "cannot" else 0o644)
        bots[name] = d
    (bots["empty"] / "cache").mkdir()
    folders = {name: read_folder(d) for name, d in bots.items()}
    assert len({f.digest for f in folders.values()}) == 3
    assert len({f.digest_v2 for f in folders.values()}) == 1  # the old hash: one for all three
    spec = load_bot(bots["empty"])
    assert spec.has_files(folders["runs"].digest_v2) and spec.has_files(folders["runs"].digest_v1)
    assert not spec.has_files(folders["runs"].digest)
    (tmp_path / "cache").mkdir()
    on_worker = prepare_bot(spec.files_hash(), "bot.toml", pack_bot(spec), tmp_path / "cache")
    assert (on_worker.root / "cache").is_dir() and on_worker.files_hash() == spec.files_hash()


def test_a_member_stored_with_the_old_hash_is_not_shared_with_its_executable_bit_twin(tmp_path: Path) -> None:
    """A ladder member recorded with a v2 hash is rehashed from its own snapshot: a folder that
    differs from it only in an executable bit, which shares its v2 hash, is told to bump its version
    instead of passing for the member."""
    from arena.bots.folder import read_folder
    from arena.ladder import LadderError, load_ladder, members, open_store
    from tests.test_folder_attacks import SPLIT, _submit, twin
    from tests.test_ladder import write_ladder
    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    try:
        plain = twin(tmp_path, SPLIT, "plain")
        _submit(ladder, str(plain), store)
        with store.tx() as db:  # a store written before v3
            db.execute("UPDATE ladder_members SET hash=? WHERE label='random@7'", (read_folder(plain).digest_v2,))
        _submit(ladder, str(plain), store)  # the member itself is still welcome, and rehashed
        assert next(m for m in members(store, ladder.name) if m.label == "random@7").hash == read_folder(plain).digest
        runs = twin(tmp_path, SPLIT, "runs")
        (runs / "a").chmod(0o755)
        assert read_folder(runs).digest_v2 == read_folder(plain).digest_v2
        with pytest.raises(LadderError, match="bump `version`"):
            _submit(ladder, str(runs), store)
    finally:
        store.close()
