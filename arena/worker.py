"""Tournament worker processes: more than one trio loop, so a tournament can use every core.

One referee loop spends most of its time building requests and reading replies; on a
machine with several cores it saturates one of them. ``run_in_workers`` starts
``processes`` copies of ``python -m arena.worker``; each runs its own trio loop, bot
pool and referees, and plays the games the parent hands it. The parent alone writes
the store, so storage stays single-writer and resume works exactly as in one process.

Wire format, JSON lines. Parent to worker: a ``setup`` line (the tournament config and
how many games to play at once), then ``game`` lines, then ``end``. Worker to parent:
``result`` lines carrying a game's summary and its packed log (base64). A worker
whose stdin closes without ``end`` (the parent died) stops at once.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import asdict
from typing import Any

import trio

from .referee import GameRecord
from .store import Store, pack_log, summary
from .tournament import (
    PlayerPool, Reporter, ScheduledGame, TournamentConfig, load_bots, play_scheduled,
)


class WorkerError(RuntimeError):
    """A worker process failed (not a bot: the arena itself); its stderr tail is in the message."""


# ---------------------------------------------------------------- worker side

async def _serve() -> None:
    from .launch import Launcher
    from .limits import Limits
    lines = _stdin_lines()
    setup = json.loads(next(lines))
    cfg = TournamentConfig(**setup["config"])
    rules = cfg.ruleset()
    specs = load_bots(cfg)
    pool = PlayerPool(specs, Launcher(Limits(**cfg.limits), cfg.sandbox, cfg.trusted_bots), cfg.clock(),
                      cfg.restart_each_game, max(2, setup["slots"]))
    send, receive = trio.open_memory_channel[ScheduledGame](setup["slots"] * 2)
    out_lock = trio.Lock()

    async def play(task_receive) -> None:
        async for game in task_receive:
            record = (await play_scheduled(game, pool, rules, cfg)).as_json()
            line = json.dumps({"type": "result", "index": game.index, "summary": summary(record),
                               "log": base64.b64encode(pack_log(record)).decode()}, separators=(",", ":"))
            async with out_lock:
                await trio.to_thread.run_sync(_write, line)

    async def read(nursery: trio.Nursery) -> None:
        async with send:
            while True:
                line = await trio.to_thread.run_sync(next, lines, None)
                if line is None:  # the parent is gone: nobody will store what we play
                    nursery.cancel_scope.cancel()
                    return
                msg = json.loads(line)
                if msg["type"] == "end":
                    return
                g = msg["game"]
                await send.send(ScheduledGame(g["index"], g["table"], g["deal"], g["rotation"],
                                              tuple(g["seats"]), g["seed"]))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read, nursery)
            for _ in range(setup["slots"]):
                nursery.start_soon(play, receive.clone())
            await receive.aclose()
    finally:
        await pool.close()


def _stdin_lines():
    for raw in sys.stdin.buffer:
        yield raw.decode()


def _write(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    try:
        trio.run(_serve)
    except BrokenPipeError:  # the parent died mid-write
        os._exit(1)


# ---------------------------------------------------------------- parent side

async def run_in_workers(cfg: TournamentConfig, store: Store, reporter: Reporter,
                         todo: list[ScheduledGame], processes: int, *, collect: bool = True) -> list[GameRecord]:
    """Play ``todo`` on ``processes`` worker processes, storing each result as it arrives."""
    slots = max(1, -(-cfg.workers // processes))
    queue = list(reversed(todo))
    played: list[GameRecord] = []
    by_index = {g.index: g for g in todo}
    shared_rules = cfg.ruleset().options()

    async def drive(nursery: trio.Nursery) -> None:
        proc = await trio.lowlevel.open_process([sys.executable, "-m", "arena.worker"],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
        err_tail = bytearray()

        async def keep_stderr() -> None:
            async for chunk in proc.stderr:
                err_tail.extend(chunk)
                del err_tail[:-4000]

        nursery.start_soon(keep_stderr)

        async def send(msg: dict[str, Any]) -> None:
            await proc.stdin.send_all((json.dumps(msg, separators=(",", ":")) + "\n").encode())

        async def next_game() -> bool:
            if not queue:
                return False
            g = queue.pop()
            await send({"type": "game", "game": asdict(g)})
            return True

        try:
            await send({"type": "setup", "config": asdict(cfg), "slots": slots})
            outstanding = 0
            for _ in range(slots * 2):  # keep each slot busy while results travel back
                outstanding += await next_game()
            buf = b""
            while outstanding:
                chunk = await proc.stdout.receive_some(1 << 16)
                if not chunk:
                    await proc.wait()
                    raise WorkerError(f"a tournament worker exited ({proc.returncode}):\n"
                                      f"{err_tail.decode(errors='replace')}")
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    outstanding -= 1
                    game = by_index[msg["index"]]
                    store.save_game(cfg.name, game.index, list(game.seats), msg["summary"],
                                    base64.b64decode(msg["log"]))
                    record = GameRecord.from_json(msg["summary"])
                    record.rules = shared_rules  # one copy for the whole run, not one per game
                    if collect:
                        played.append(record)
                    reporter.game_done(game, record)
                    outstanding += await next_game()
            await send({"type": "end"})
            await proc.stdin.aclose()
            await proc.wait()
        finally:
            if proc.returncode is None:
                with trio.CancelScope(shield=True):
                    await proc.stdin.aclose()  # the worker sees EOF without "end" and stops
                    with trio.move_on_after(5):
                        await proc.wait()
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()

    async with trio.open_nursery() as nursery:
        for _ in range(processes):
            nursery.start_soon(drive, nursery)
    return played


if __name__ == "__main__":
    main()
