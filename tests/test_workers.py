"""Several referee processes play one tournament: same games as one process, stored once each."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import trio

from arena.store import Store
from arena.tournament import load_config, run_tournament
from arena.worker import WorkerError


def _games(store: Store, name: str) -> list[tuple]:
    rows = store.games(tournament=name, limit=10**6)
    out = []
    for g in rows:
        log = store.game_record(g["id"])
        out.append((g["index"], g["seed"], tuple(g["seats"]), g["result"]["order"],
                    [s.get("action") for s in log["steps"]]))
    return out


def _run(tmp: Path, name: str, processes: int) -> Store:
    cfg = load_config(None, {"name": name, "bots": ["random", "lowest", "heuristic"], "deals": 3,
                             "concurrency": 2, "processes": processes, "store": str(tmp / f"{name}.sqlite")})
    store = Store(cfg.store)
    trio.run(run_tournament, cfg, store)
    return store


def test_two_processes_play_the_same_games_as_one(tmp_path: Path) -> None:
    one = _games(_run(tmp_path, "t", 1), "t")
    two = _games(_run(tmp_path, "t2", 2), "t2")
    assert len(one) == 18 and len(two) == 18
    assert [g[1:] for g in one] == [g[1:] for g in two]  # seeds, seats, results, every action
    assert len({g[0] for g in two}) == 18  # each game stored once


def test_a_worker_that_dies_is_an_arena_error_and_keeps_what_was_stored(tmp_path: Path, monkeypatch) -> None:
    # A config that workers cannot load (a bot path that vanished after scheduling) kills them.
    reachable = Path(tempfile.mkdtemp(prefix="arena-gone-"))  # a bot's private uid must reach it
    reachable.chmod(0o755)
    bot = reachable / "gone"
    bot.mkdir()
    bot.chmod(0o755)
    (bot / "bot.toml").write_text('name = "gone"\ncommand = ["python3", "bot.py"]\n')
    cfg = load_config(None, {"name": "w", "bots": [str(bot), "lowest"], "deals": 2, "concurrency": 2,
                             "processes": 2, "store": str(tmp_path / "w.sqlite")})
    store = Store(cfg.store)
    import arena.worker as worker
    real = worker.run_in_workers

    async def vanish_then_run(*args, **kwargs):
        (bot / "bot.toml").unlink()
        return await real(*args, **kwargs)

    monkeypatch.setattr(worker, "run_in_workers", vanish_then_run)
    try:
        trio.run(run_tournament, cfg, store)
    except* WorkerError as group:
        assert "worker exited" in str(group.exceptions[0])
    else:
        raise AssertionError("a worker that cannot start must be reported")
    assert store.tournament("w")["status"] == "running"  # resumable, not marked done
    shutil.rmtree(reachable)
