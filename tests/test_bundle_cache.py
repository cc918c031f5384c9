"""The eviction of a worker's bot cache (arena.bots.bundles.evict): least recently used entries
first, down to the bound, and never an entry some process holds in use or is preparing."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from arena.bots import bundles
from arena.bots.bundles import Holds, bundle_key, evict, pack_bot, prepare_bot
from arena.bots.manifest import load_bot


def bundle(tmp_path: Path, name: str) -> tuple[str, bytes]:
    bot = tmp_path / "src" / name
    bot.mkdir(parents=True)
    (bot / "bot.toml").write_text(f'name = "{name}"\nversion = "1"\ncommand = ["sh", "run.sh"]\n')
    (bot / "run.sh").write_text("exit 0\n" + "#" * 50_000)
    spec = load_bot(bot)
    return spec.files_hash(), pack_bot(spec)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    d.mkdir()
    monkeypatch.setattr(bundles, "_PREPARED", {})
    return d


def aged(cache: Path, key: str, when: int) -> None:
    os.utime(cache / f"{key}.use", (when, when))


def test_an_entry_in_use_is_never_evicted_and_the_other_is(tmp_path: Path, cache: Path) -> None:
    (da, a), (db, b) = bundle(tmp_path, "a"), bundle(tmp_path, "b")
    run = Holds()
    prepare_bot(da, "bot.toml", a, cache, hold=run)
    prepare_bot(db, "bot.toml", b, cache)
    aged(cache, bundle_key(a), 1_000)  # the held one is the least recently used: first in line
    aged(cache, bundle_key(b), 2_000)
    assert evict(cache, 0) == [bundle_key(b)]
    assert (cache / bundle_key(a) / "bot" / "bot.toml").is_file() and not (cache / bundle_key(b)).exists()
    assert evict(cache, 0) == []  # still held
    run.release()
    assert evict(cache, 0) == [bundle_key(a)]
    assert [p for p in cache.iterdir() if p.is_dir()] == []  # nothing renamed away is left


def test_least_recently_used_goes_first_and_only_down_to_the_bound(tmp_path: Path, cache: Path) -> None:
    keys = []
    for i, name in enumerate(("old", "mid", "new")):
        digest, blob = bundle(tmp_path, name)
        prepare_bot(digest, "bot.toml", blob, cache)
        keys.append(bundle_key(blob))
        aged(cache, keys[-1], 1_000 * (i + 1))
    one = bundles.tree_usage(cache / keys[0], 1000)[0]
    assert evict(cache, 2 * one + one // 2) == [keys[0]]
    assert (cache / keys[1]).is_dir() and (cache / keys[2]).is_dir()


def test_a_hold_in_another_process_keeps_its_entry(tmp_path: Path, cache: Path) -> None:
    digest, blob = bundle(tmp_path, "theirs")
    prepare_bot(digest, "bot.toml", blob, cache)
    key = bundle_key(blob)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.flock(fd, fcntl.LOCK_SH); print('held', flush=True); sys.stdin.read()", str(cache / f"{key}.use")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert evict(cache, 0) == [] and (cache / key).is_dir()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert evict(cache, 0) == [key]


def test_a_new_entry_evicts_down_to_the_bound_and_spares_the_run_s_own(tmp_path: Path, cache: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bundles.CACHE_BYTES_ENV, "0")
    run = Holds()
    (da, a), (db, b), (dc, c) = bundle(tmp_path, "a"), bundle(tmp_path, "b"), bundle(tmp_path, "c")
    prepare_bot(da, "bot.toml", a, cache, hold=run)
    prepare_bot(db, "bot.toml", b, cache)  # a is held: it stays
    assert (cache / bundle_key(a)).is_dir() and (cache / bundle_key(b)).is_dir()
    assert prepare_bot(dc, "bot.toml", c, cache, hold=run).label == "c@1"  # b, unheld, goes
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == sorted([bundle_key(a), bundle_key(c)])
    assert prepare_bot(db, "bot.toml", b, cache).label == "b@1"  # unpacked again when it comes back
    run.release()


def test_holds_travel_empty_and_a_bad_bound_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not pickle.loads(pickle.dumps(Holds()))._fds
    monkeypatch.setenv(bundles.CACHE_BYTES_ENV, "lots")
    with pytest.raises(bundles.BundleError, match="PALACE_ARENA_CACHE_BYTES='lots'"):
        bundles.cache_bound()


def test_a_run_on_a_worker_holds_its_bots_until_its_pool_is_shut(tmp_path: Path, cache: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from arena.tournament.cluster import RunReferee
    monkeypatch.setenv(bundles.CACHE_ENV, str(cache))
    digest, blob = bundle(tmp_path, "a")
    run = pickle.loads(pickle.dumps(RunReferee({}, {"a@1": digest}, {"a@1": ("bot.toml", blob)})))
    assert run.bot("a@1").label == "a@1"
    assert evict(cache, 0) == []
    run.close()
    assert evict(cache, 0) == [bundle_key(blob)]
