"""Referee worker processes: the executor that uses every core of this machine.

One referee loop spends most of its time building requests and reading replies; on a
machine with several cores it saturates one of them. :class:`WorkerExecutor` starts
``processes`` copies of ``python -m arena.tournament.worker``; each plays the games the parent
hands it with a bot pool of its own: one game at a time on the blocking shell
(:class:`~arena.tournament.executors.BlockingExecutor`: a round trip is a write and a ``poll``)
when it has one slot, several at once on trio
(:class:`~arena.tournament.executors.InProcessExecutor`) when it has more. The parent alone writes the store, so storage
stays single-writer and resume works exactly as in one process.

Wire format: a stream of msgpack maps each way (msgpack frames itself, so no length
prefix or line splitting). Parent to worker: ``setup`` (the rules, the bots and their clock,
how many games to play at once: :meth:`BotSetup.wire`, once; and the runsc the parent's probe saw
run a bot, so a gVisor run probes once per machine), then ``deal`` maps (a deal's
:class:`GameTask` s: id, deal seed, seats, turn cap; played back to back by one pool,
:meth:`~arena.tournament.executors.BlockingExecutor.play_deal`), then ``end``. Worker to parent:
one map per deal with, per game, its :meth:`PlayedGame.to_bytes` (the packed log travels as raw
bytes, the rules stay behind) or the text of the error that kept it from being played; or one
error for the whole deal. A worker whose stdin closes
without ``end`` (the parent died, or was interrupted) stops at once; a worker is a process group of
its own, so a Ctrl-C at the terminal reaches the parent alone.

A worker that dies (killed, out of memory, a crash of the arena itself) is replaced,
and the deals it held are played again by the others: games are deterministic, so
the result is the one it would have sent. The death is kept in ``incidents`` for the
run's summary. Workers that keep dying (``max_deaths``) break the executor instead
of looping: every ``play`` then raises :class:`~arena.tournament.executors.ExecutorBroken`.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgpack
import trio

from ..bots.containment import Containment, cleanup_stale
from ..bots.probes import gvisor_problem_now, gvisor_seen_working, take_gvisor_from_parent
from ..errors import ArenaError
from .executors import (BotSetup, ExecutorBroken, ExecutorError, GameTask, Played, PlayedGame, one_deal, one_game,
                        open_in_process)

COMMAND = [sys.executable, "-P", "-m", "arena.tournament.worker"]
"""A worker's command line. -P: not the working directory first on sys.path, where a folder named
``arena`` (a checkout's parent, say) would shadow the installed package in the worker only."""
TRIES = 3  # a game whose worker dies is played again, at most this many times in all
EXIT_GRACE = 10.0  # seconds the workers get to finish and exit when a run ends; then they are killed


log = logging.getLogger(__name__)


class WorkerDied(ArenaError):
    """The worker holding a game died before sending it back (internal: the game is retried)."""


def _pack(msg: dict[str, Any]) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


async def _messages(stream: trio.abc.ReceiveStream, unpacker: msgpack.Unpacker | None = None) -> AsyncIterator[Any]:
    unpacker = unpacker or msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    for msg in unpacker:  # what came with the setup
        yield msg
    while True:
        chunk = await stream.receive_some(1 << 16)
        if not chunk:
            return
        unpacker.feed(chunk)
        for msg in unpacker:
            yield msg


# ---------------------------------------------------------------- worker side

async def _serve(first: dict[str, Any], unpacker: msgpack.Unpacker) -> None:
    """Several games at once (``slots`` > 1): the in-process executor's lanes, each a thread
    playing on the blocking shell."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    messages = _messages(stdin, unpacker)
    setup = BotSetup.from_wire(first["setup"])
    slots = trio.Semaphore(first["slots"])
    out_lock = trio.Lock()

    async def one(ex: Any, rid: int, tasks: list[GameTask]) -> None:
        async with slots:
            try:
                reply = {"id": rid, "played": [_sent(p) for p in await ex.play_deal(tasks)]}
            except Exception as e:  # noqa: BLE001 - the arena's own failure, reported for this deal
                reply = {"id": rid, "error": f"{type(e).__name__}: {e}"}
        async with out_lock:
            await stdout.send_all(_pack(reply))

    async with open_in_process(setup, capacity=first["slots"]) as ex, trio.open_nursery() as nursery:
        async for msg in messages:
            if msg["t"] == "end":
                break
            nursery.start_soon(one, ex, msg["id"], [GameTask.from_wire(t) for t in msg["tasks"]])
        else:  # the parent is gone: nobody will store what we play
            nursery.cancel_scope.cancel()


def _sent(played: Any) -> bytes | str:
    """One game of a deal as the parent reads it: its bytes, or the text of the arena's failure."""
    return played.to_bytes() if isinstance(played, PlayedGame) else f"{type(played).__name__}: {played}"


def _serve_blocking(setup: dict[str, Any], unpacker: msgpack.Unpacker) -> None:
    """One game at a time on the blocking shell: read a deal, play its games, send them back. A
    game's round trips then cost a write and a ``poll`` each, no scheduler. The parent queues the
    next deal in the pipe meanwhile; its stdin closing without ``end`` stops us at once."""
    from .executors import BlockingExecutor
    ex = BlockingExecutor(BotSetup.from_wire(setup["setup"]))
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    try:
        while True:
            for msg in unpacker:
                if msg["t"] == "end":
                    return
                tasks = [GameTask.from_wire(t) for t in msg["tasks"]]
                try:
                    reply = {"id": msg["id"], "played": [_sent(p) for p in ex.play_deal(tasks)]}
                except Exception as e:  # noqa: BLE001 - the arena's own failure, reported for this deal
                    reply = {"id": msg["id"], "error": f"{type(e).__name__}: {e}"}
                out.write(_pack(reply))
            data = os.read(0, 1 << 16)
            if not data:  # the parent is gone: nobody will store what we play
                return
            unpacker.feed(data)
    finally:
        ex.close()


def _first(unpacker: msgpack.Unpacker) -> dict[str, Any]:
    while True:
        for msg in unpacker:
            return msg
        data = os.read(0, 1 << 16)
        if not data:
            raise StopAsyncIteration  # the parent died before the setup
        unpacker.feed(data)


def main() -> None:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    try:
        first = _first(unpacker)
        take_gvisor_from_parent(first.get("gvisor"))
        if first["slots"] == 1:
            _serve_blocking(first, unpacker)
        else:
            trio.run(_serve, first, unpacker)
    except (BrokenPipeError, trio.BrokenResourceError, StopAsyncIteration):  # the parent died
        os._exit(1)


# ---------------------------------------------------------------- parent side

class _Slot:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: dict[str, Any] | None = None


class _Worker:
    """One worker process as the parent sees it: its pipe, and the games it holds."""

    def __init__(self, number: int, proc: trio.Process):
        self.number = number
        self.proc = proc
        self.held: dict[int, _Slot] = {}
        self.served = 0  # games it sent back
        self.alive = True
        self.send_lock = trio.Lock()
        self.err_tail = bytearray()

    async def play(self, rid: int, tasks: list[GameTask], rules: dict[str, Any]) -> list[Played]:
        slot = self.held[rid] = _Slot()
        try:
            async with self.send_lock:
                await self.proc.stdin.send_all(_pack({"t": "deal", "id": rid, "tasks": [t.wire() for t in tasks]}))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.held.pop(rid, None)
            self.alive = False  # dead before its reader noticed: no other game is sent here meanwhile
            raise WorkerDied() from None
        await slot.done.wait()
        reply = slot.reply
        if reply is None:
            raise WorkerDied()
        if "error" in reply:
            return [ExecutorError(f"{t.game_id}: {reply['error']}") for t in tasks]
        return [PlayedGame.from_bytes(p, rules) if isinstance(p, bytes) else ExecutorError(f"{t.game_id}: {p}")
                for t, p in zip(tasks, reply["played"])]


class WorkerExecutor:
    """Games on referee worker processes of this machine; see the module's docstring."""

    def __init__(self, setup: BotSetup, processes: int, slots: int, nursery: trio.Nursery, *,
                 max_deaths: int | None = None, on_incident: Callable[[str], None] | None = None):
        self.setup = setup
        self.rules = setup.rules.options()  # what every game sent back shares
        self.processes = processes
        self.slots = slots
        self.capacity = 2 * processes * slots  # a queued game per slot: no worker idles while results travel
        self.incidents: list[str] = []
        self.on_incident = on_incident
        self.max_deaths = 2 * processes + 2 if max_deaths is None else max_deaths
        self.deaths = 0
        self.stillborn = 0  # workers in a row that died before sending back any game: they cannot start
        self.workers: list[_Worker] = []
        self.broken: str | None = None
        self.closing = False
        self._nursery = nursery
        self._changed = trio.Event()
        self._next_id = 0
        self._started = 0
        self._spawning = trio.Lock()

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.workers if w.alive]

    async def start(self) -> None:
        if self.setup.containment is Containment.GVISOR:  # probed here once, for every worker (see _spawn)
            await trio.to_thread.run_sync(gvisor_problem_now)
        for _ in range(self.processes):
            await self._spawn()

    async def _spawn(self) -> None:
        """Start a worker, unless the executor is closing. A worker is a process group of its own:
        Ctrl-C at a terminal reaches this process alone, which stops the workers by closing their
        stdin (aclose); in the group, a worker still starting (importing, before any handler) died
        of it, and was replaced while the run stopped."""
        async with self._spawning:  # aclose waits for a start under way, so it stops that worker too
            if self.closing:
                return
            self._started += 1
            proc = await trio.lowlevel.open_process(COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE, process_group=0)
            w = _Worker(self._started, proc)
            self.workers.append(w)
            self._nursery.start_soon(self._keep_stderr, w)
            self._nursery.start_soon(self._read, w)
            # gvisor: the runsc this process saw run a bot; the workers share its machine, so they need
            # not boot a sandbox each to learn the same (probes.take_gvisor_from_parent)
            try:
                await proc.stdin.send_all(_pack({"t": "setup", "setup": self.setup.wire(), "slots": self.slots,
                                                 "gvisor": gvisor_seen_working()}))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # it died at once: its reader buries it, as any worker's death
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _keep_stderr(self, w: _Worker) -> None:
        async for chunk in w.proc.stderr:
            w.err_tail.extend(chunk)
            del w.err_tail[:-4000]

    async def _read(self, w: _Worker) -> None:
        try:
            async for msg in _messages(w.proc.stdout):
                slot = w.held.pop(msg["id"], None)
                w.served += 1
                if slot is not None:
                    slot.reply = msg
                    slot.done.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
            pass  # a torn stream is a dead worker (ValueError: msgpack saw garbage)
        await self._buried(w)

    async def _buried(self, w: _Worker) -> None:
        w.alive = False
        with trio.move_on_after(5):
            await w.proc.wait()
        if w.proc.returncode is None:
            w.proc.kill()
            await w.proc.wait()
        held, w.held = w.held, {}
        self.workers.remove(w)
        if not self.closing:
            # Said before the cleanup below, which can take seconds: a run whose other workers
            # finish every game meanwhile must still have heard of this death.
            self._report_death(w, len(held))
        try:
            if w.proc.returncode != 0:  # a worker that exits cleanly has closed its bots itself
                # Its bots were orphaned to this process (a subreaper, arena.bots.procs): kill what
                # lives on and reap the rest, or every worker death would leave zombies until we exit.
                # Before its deals are played again: a bot on turn when its worker died runs on,
                # holding a hand of the deal, and one that saw the deal's end waits frozen.
                try:
                    await trio.to_thread.run_sync(cleanup_stale)
                except Exception as e:  # noqa: BLE001 - best effort: the games go on
                    log.warning("cleaning up after worker %s failed: %s", w.number, e)
        finally:
            for slot in held.values():
                slot.done.set()  # reply None: the deal goes back to play_deal() to be played elsewhere
        if self.closing:
            return
        if self.broken is None:
            await self._spawn()
        self._notify()

    def _report_death(self, w: _Worker, held: int) -> None:
        """Count a worker's death and say it (the incident every reporter shows); too many deaths,
        or workers that die before serving anything, break the executor."""
        self.deaths += 1
        self.stillborn = self.stillborn + 1 if w.served == 0 else 0
        code = w.proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        tail = w.err_tail.decode(errors="replace").strip().splitlines()[-1:] or ["(no stderr)"]
        text = (f"referee worker {w.number} (pid {w.proc.pid}) died ({how}) holding {held} game(s); "
                f"last stderr: {tail[0][:300]}")
        if self.deaths > self.max_deaths or self.stillborn >= max(3, self.processes + 1):
            self.broken = (f"referee worker processes died {self.deaths} times; the last: "
                           f"{w.err_tail.decode(errors='replace').strip()[-1500:] or how}")
        else:
            text += "; replaced, its games rescheduled"
        self.incidents.append(text)
        if self.on_incident is not None:
            self.on_incident(text)

    async def _pick(self) -> _Worker:
        while True:
            if self.broken is not None:
                raise ExecutorBroken(self.broken)
            alive = [w for w in self.workers if w.alive]
            if alive:
                return min(alive, key=lambda w: len(w.held))
            await self._changed.wait()

    async def play_deal(self, tasks: list[GameTask]) -> list[Played]:
        """A deal's games on one worker, back to back; the whole deal again on another if it dies."""
        one_deal(tasks)
        for _ in range(TRIES):
            w = await self._pick()
            self._next_id += 1
            try:
                return await w.play(self._next_id, tasks, self.rules)
            except WorkerDied:
                continue
        last = self.incidents[-1] if self.incidents else ""
        return [ExecutorError(f"{t.game_id}: every worker that took this game died ({TRIES} tries); last: {last}")
                for t in tasks]

    async def play(self, task: GameTask) -> PlayedGame:
        return one_game(await self.play_deal([task]))

    async def aclose(self, graceful: bool = True) -> None:
        """Stop the workers: with ``end`` (they finish what they hold), or by closing their
        stdin (they drop it); those that do not exit in time are killed."""
        self.closing = True
        with trio.CancelScope(shield=True):
            async with self._spawning:  # a replacement being started is listed first, and stopped here
                pass
            for w in list(self.workers):
                try:
                    if graceful:
                        await w.proc.stdin.send_all(_pack({"t": "end"}))
                    await w.proc.stdin.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
            with trio.move_on_after(EXIT_GRACE if graceful else EXIT_GRACE / 2):
                for w in list(self.workers):
                    await w.proc.wait()
            late = [w for w in self.workers if w.proc.returncode is None]
            for w in late:
                w.proc.kill()
            for w in late:
                await w.proc.wait()
            # Then what the workers left is cleared, whether they were killed (no exit handler ran;
            # the readers that would have cleared them are cancelled with the run) or exited on
            # their own: a bot that outlived its close (left for cleanup_stale, as a frozen gVisor
            # seat once was) would otherwise stay until some later arena run.
            if self.workers:
                try:
                    await trio.to_thread.run_sync(cleanup_stale, [w.proc.pid for w in self.workers])
                except Exception as e:  # noqa: BLE001 - best effort: the next run's cleanup retries
                    log.warning("cleaning up after the workers failed: %s", e)


@asynccontextmanager
async def open_workers(setup: BotSetup, processes: int, slots: int, *,
                       on_incident: Callable[[str], None] | None = None,
                       max_deaths: int | None = None) -> AsyncIterator[WorkerExecutor]:
    """Worker processes for the block's duration. Leaving it normally lets each worker finish
    and exit; leaving it by an error or Ctrl-C closes their stdin, which stops them at once."""
    failure: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            ex = WorkerExecutor(setup, processes, slots, nursery, on_incident=on_incident, max_deaths=max_deaths)
            try:
                await ex.start()
                yield ex
            except BaseException as e:
                await ex.aclose(graceful=False)
                failure = e  # raised below, outside the nursery: the caller's error, not a group of one
            else:
                await ex.aclose(graceful=True)
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if failure is None:
            raise
        # What a worker's task met while the workers were stopped follows from the caller's failure
        # (a Ctrl-C, say), which is the one to report: before, it could replace a Ctrl-C, and the
        # command ended as an arena bug (exit 70).
        raise failure from group
    if failure is not None:
        raise failure


if __name__ == "__main__":
    main()
