"""Attacks on the bot-folder paths that no sandbox sees: hashes, ladder snapshots, cluster bundles.

* Twin folders: two folders that split the same bytes into files differently (``a = "1"``,
  ``b = "2"`` against ``a = "1b\\0002"``) had one files hash when it joined paths and bytes without
  lengths. Each path that trusts a files hash must tell them apart: the run's reading and the
  copies checked against it, a ladder's member (also one stored with the old hash), a cluster
  bundle, an upload.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from arena.bots.containment import Containment
import pytest
import trio

from arena.bots.bundles import BundleError, pack_bot, prepare_bot
from arena.bots.errors import BotCommandError
from arena.bots.folder import read_folder
from arena.bots.manifest import ManifestError, load_bot
from arena.engine import Rules
from arena.ladder import LadderError, load_ladder, members, open_store, submit
from arena.serve.upload import unpack
from tests.test_ladder import bot_copy, ctx, write_ladder
from tests.test_serve import zip_bytes

# --------------------------------------------------------------------------- twin folders

SPLIT = {"a": b"1", "b": b"2"}
JOINED = {"a": b"1b\x002"}  # "a\0" "1" "b\0" "2" read as one stream either way


def twin(tmp: Path, files: dict[str, bytes], dirname: str) -> Path:
    d = bot_copy(tmp, "random", "7", dirname)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def test_twin_folders_have_different_hashes(tmp_path: Path) -> None:
    a, b = twin(tmp_path, SPLIT, "split"), twin(tmp_path, JOINED, "joined")
    fa, fb = read_folder(a), read_folder(b)
    assert fa.digest_v1 == fb.digest_v1, "not twins: the old join gives them different hashes"
    assert fa.digest.startswith("v3:") and fa.digest != fb.digest and fa.digest_v2 != fb.digest_v2
    sa, sb = load_bot(a), load_bot(b)
    assert sa.label == sb.label and sa.files_hash() != sb.files_hash()
    assert not sb.has_files(sa.files_hash())
    assert sb.has_files(fa.digest_v1)  # an old stored hash still verifies what it always named


def test_a_folder_rearranged_into_its_twin_after_the_run_read_it_is_refused(tmp_path: Path) -> None:
    """The check's (and every run's) copies are checked against the run's reading."""
    from arena.bots.launch import bot_copy as runnable_copy
    d = twin(tmp_path, SPLIT, "bot")
    spec = load_bot(d)
    spec.files_hash()
    (d / "b").unlink()
    (d / "a").write_bytes(JOINED["a"])
    with pytest.raises(BotCommandError, match="changed since the run read them"):
        runnable_copy(spec, "palace-arena-test-")


def test_a_bundle_of_one_twin_never_stands_in_for_the_other(tmp_path: Path) -> None:
    a, b = load_bot(twin(tmp_path, SPLIT, "split")), load_bot(twin(tmp_path, JOINED, "joined"))
    blob = pack_bot(a)
    (tmp_path / "cache-a").mkdir()
    (tmp_path / "cache-b").mkdir()
    with pytest.raises(BundleError, match="unpacked to files hashing to"):
        prepare_bot(b.files_hash(), "bot.toml", blob, tmp_path / "cache-b")
    assert prepare_bot(a.files_hash(), "bot.toml", blob, tmp_path / "cache-a").files_hash() == a.files_hash()


def _submit(ladder, ref: str, store) -> None:
    trio.run(submit, ladder, ref, store, ctx())


@pytest.mark.parametrize("stored", ["v3", "v2", "v1"])
def test_a_twin_is_refused_by_a_ladder_under_the_same_label(tmp_path: Path, stored: str) -> None:
    """A member's label names its exact files: its twin, submitted from a folder or uploaded, is
    told to bump its version, also where the store holds the member's old unframed hash (it is
    rehashed from the member's own snapshot)."""
    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    try:
        _submit(ladder, str(twin(tmp_path, SPLIT, "split")), store)
        if stored != "v3":  # a store written before the framed hash, or before its modes and folders
            old = read_folder(tmp_path / "split")
            with store.tx() as db:
                db.execute("UPDATE ladder_members SET hash=? WHERE label='random@7'",
                           (old.digest_v1 if stored == "v1" else old.digest_v2,))
            _submit(ladder, str(tmp_path / "split"), store)  # the member itself is still welcome
        joined = twin(tmp_path, JOINED, "joined")
        with pytest.raises(LadderError, match="bump `version`"):
            _submit(ladder, str(joined), store)
        files = {p.name: p.read_bytes() for p in joined.iterdir() if p.is_file()}
        uploaded = unpack(zip_bytes(files), tmp_path / "upload", max_files=100, max_bytes=1 << 20)
        with pytest.raises(LadderError, match="bump `version`"):
            _submit(ladder, str(uploaded), store)
        m = next(m for m in members(store, ladder.name) if m.label == "random@7")
        assert m.hash == read_folder(tmp_path / "split").digest
    finally:
        store.close()


# --------------------------------------------------------------------------- trusted builds on a cluster


def test_a_trusted_build_on_a_cluster_worker_never_changes_the_shared_cache_entry(tmp_path: Path) -> None:
    """Under ``--trusted-bots --cluster`` a worker builds as its own user: the build must run in a
    private copy, or it could rewrite the cache entry that every later run on that machine takes
    as verified files (another bot's, for a blob that hashes alike)."""
    from arena.tournament.cluster import worker_launcher
    from arena.tournament.executors import BotSetup

    src = tmp_path / "src"
    src.mkdir()
    (src / "bot.toml").write_text('name = "b"\nversion = "2"\ncommand = ["sh", "run.sh"]\n'
                                  'build = ["sh", "-c", "echo pwned > run.sh; echo x > built.txt"]\n')
    (src / "run.sh").write_text("exit 0\n")
    spec = load_bot(src)
    cache = tmp_path / "cache"
    cache.mkdir()
    cached = prepare_bot(spec.files_hash(), "bot.toml", pack_bot(spec), cache)
    setup = BotSetup.of([], rules=Rules(), containment=Containment.TRUSTED)
    built = worker_launcher(setup).build_now(cached)
    assert (built.root / "built.txt").exists() and (built.root / "run.sh").read_text() == "pwned\n"
    assert not (cached.root / "built.txt").exists() and (cached.root / "run.sh").read_text() == "exit 0\n"
    assert load_bot(cached.root).files_hash() == spec.files_hash()


# --------------------------------------------------------------------------- a member's folder by another spelling

_BIND_ATTACK = r"""
import subprocess, sys, time
from pathlib import Path
from arena.bots.manifest import ManifestError, load_bot
from arena.ladder import LadderError, load_ladder, open_store
from arena.ladder.tables import _snapshot, snapshot_dir
from tests.test_ladder import bot_copy

tmp, ladder_file = Path(sys.argv[1]), sys.argv[2]
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
ladder = load_ladder(ladder_file)
store = open_store(ladder)
newcomer = load_bot(bot_copy(tmp, "random", "3", "newcomer"))
dest = snapshot_dir(store, ladder, newcomer.label)  # where the newcomer's snapshot would go
owned = bot_copy(tmp, "lowest", "5", "owned")
dest.parent.mkdir(parents=True)
owned.rename(dest)  # another member's folder lies there ...
alias = tmp / "alias"
alias.mkdir()
subprocess.run(["mount", "--bind", str(store.path.resolve().parent), str(alias)], check=True)
spelled = alias / dest.relative_to(store.path.resolve().parent)  # ... registered by another spelling
with store.tx() as db:
    db.execute("INSERT INTO ladder_members VALUES (?,?,?,?,?,?,?,?,?)",
               (ladder.name, "lowest@5", "lowest", "5", load_bot(dest).files_hash(), str(spelled), "file", "", time.time()))
try:
    _snapshot(store, ladder, newcomer, newcomer.files_hash())
    print("REPLACED" if load_bot(dest).label != "lowest@5" else "KEPT")
except LadderError as e:
    print("REFUSED", e)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount in a private mount namespace needs root")
def test_a_members_folder_reached_by_another_spelling_is_never_replaced(tmp_path: Path) -> None:
    """A member may run from a folder whose registered path is not the text of the snapshot path
    that falls on it (here a bind mount of the store's folder, as a disk that ignores case would
    spell it too): a submission whose snapshot lands there must be refused, not remove it."""
    ladder_file = write_ladder(tmp_path, store=str(tmp_path / "data" / "s.sqlite"))
    done = subprocess.run(["unshare", "-m", sys.executable, "-c", _BIND_ATTACK, str(tmp_path), str(ladder_file)],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("REFUSED") and "belongs to the member lowest@5" in done.stdout, done.stdout


# --------------------------------------------------------------------------- versions

@pytest.mark.parametrize("version", ["1.10", "1.1", "2", "1e3", "true"])
def test_a_version_that_is_not_a_string_is_refused_naming_the_field(tmp_path: Path, version: str) -> None:
    """A TOML number loses its spelling (1.10 reads as 1.1): two versions would share one label."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "bot.toml").write_text(f'name = "b"\nversion = {version}\ncommand = ["true"]\n')
    with pytest.raises(ManifestError, match=r"version.*quoted.*version = \"") as e:
        load_bot(d)
    assert "\n" not in str(e.value).split(" (bot.toml reference")[0]
    (d / "bot.toml").write_text(f'name = "b"\nversion = "{version}"\ncommand = ["true"]\n')
    assert load_bot(d).label == f"b@{version}"


# --------------------------------------------------------------------------- the ladder for strangers

def test_the_shipped_strangers_ladder_runs_every_bot_under_gvisor() -> None:
    """Pipe inode numbers and the fdinfo eventfd-id pass hundreds of bits per second between two
    seats under bubblewrap (docs/SANDBOX.md, bench/bench_pipe_channel.py); only gVisor closes them,
    so the ladder shipped for strangers must name it, and the other rules for strangers with it."""
    from arena.ladder.config import load_ladder as load
    root = Path(__file__).resolve().parent.parent
    ladder = load(root / "ladders" / "strangers-2p.toml", root / "ladders", check_bots=False)
    assert ladder.gvisor and ladder.one_seat_per_author and ladder.fixed_schedule and not ladder.ponder
