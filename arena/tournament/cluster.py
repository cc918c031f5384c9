"""The Dask executor: games on Dask workers (``arena tournament --cluster tcp://HOST:PORT``).

The client (the machine running ``arena tournament``) keeps everything that is
not a game: the schedule, the secret deal seeds, the SQLite store, the reporter.
Each :meth:`DaskExecutor.play` is one Dask task carrying the game's
:class:`~arena.tournament.executors.GameTask` (rules options, deal seed, seats), the run's
clock, limits and sandbox flag, and a reference to each seated bot: the sha256 of
its files. The bots' files travel once per worker as tar.gz blobs inside a worker
plugin (:mod:`arena.bots.bundles`). Each worker process runs one referee thread: a trio
loop with an :class:`~arena.tournament.executors.InProcessExecutor` per setup, whose bot pool
keeps processes warm between games (and never lends one a deal it has seen). A
task returns :meth:`PlayedGame.to_bytes`, the same msgpack bytes a local worker
process sends.

Faults: a worker that dies mid-game has its games re-run elsewhere by the
scheduler; a task that raises is retried (``RETRIES``) and then fails its game
(:class:`~arena.tournament.executors.ExecutorError`), which the tournament reports at the end
with the rest stored. Nothing here imports Dask at module level: ``dask`` and
``distributed`` are imported only when a cluster is used, and their absence is
reported with the install hint (``pip install 'palace-arena[dask]'``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from .. import __version__
from ..bots.bundles import BundleError, manifest_path, pack_bot, prepare_bot
from ..bots.containment import cleanup_stale
from ..bots.manifest import BotSpec
from ..bots.probes import sandbox_problem
from .executors import BotSetup, ExecutorBroken, ExecutorError, GameTask, PlayedGame, open_in_process

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'palace-arena[dask]'"
RETRIES = 2  # extra tries for a task that raised; a dead worker's games are re-run by the scheduler anyway
POLL_S = 0.02  # how often the client looks for finished games (the trio loop stays responsive)
CONNECT_TIMEOUT_S = 15
IDLE_POOL_S = 120.0  # a worker shuts down bot processes no game has used for this long
REFEREE_PLUGIN = "palace-arena-referee"


class ClusterError(ExecutorBroken):
    """The cluster cannot run the games: the extra is missing, the scheduler is unreachable or a
    worker lacks the arena. The tournament turns it into a one-line error."""


# --------------------------------------------------------------------------- dask, lazily


def require_dask():
    """Import ``distributed`` (and so ``dask``), or say how to install them."""
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError as e:
        raise ClusterError(f"running on a cluster needs Dask, which is not installed ({e}); "
                           f"install it with: {INSTALL_HINT}") from None
    return distributed


def __getattr__(name: str) -> Any:
    # The worker plugins subclass distributed's WorkerPlugin, so they are defined on first use:
    # importing this module must not import Dask. Pickle finds them here by name on the workers.
    if name in ("BotBundles", "RefereePlugin"):
        _define_plugins()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _define_plugins() -> None:
    from distributed.diagnostics.plugin import WorkerPlugin

    class BotBundles(WorkerPlugin):
        """The tournament's bots as tar.gz blobs keyed by files hash; unpacked on demand."""

        idempotent = False

        def __init__(self, bundles: dict[str, tuple[str, bytes]]):
            self.bundles = bundles  # hash -> (manifest path inside the bot dir, tar.gz)

        def setup(self, worker) -> None:  # unpacking and building happen in the task's thread
            pass

        def prepare(self, digest: str) -> BotSpec:
            if digest not in self.bundles:
                raise BundleError(f"no bot with files hash {digest[:12]} was sent to this worker")
            manifest, blob = self.bundles[digest]
            return prepare_bot(digest, manifest, blob)

    class RefereePlugin(WorkerPlugin):
        """Stops the worker's referee thread (and its bot processes) when the worker closes."""

        idempotent = True

        def setup(self, worker) -> None:
            pass

        def teardown(self, worker) -> None:
            host = _HOST
            if host is not None:
                host.stop()

    for cls in (BotBundles, RefereePlugin):
        cls.__qualname__ = cls.__name__
        cls.__module__ = __name__
        globals()[cls.__name__] = cls


# --------------------------------------------------------------------------- the worker's referee


@dataclass
class _Hosted:
    """An in-process executor for one setup (clock, limits, sandbox), alive while games use it."""

    ready: trio.Event = field(default_factory=trio.Event)
    stop: trio.Event = field(default_factory=trio.Event)
    ex: Any = None
    busy: int = 0
    last: float = 0.0


class RefereeHost:
    """One per worker process: a daemon thread running a trio loop that plays the games handed to
    it, keeping bot processes warm between games (bot processes belong to the trio run that
    started them, so a trio.run per task would restart every bot every game)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._error: BaseException | None = None
        self.hosted: dict[str, _Hosted] = {}
        self.thread = threading.Thread(target=self._run, name="palace-arena-referee", daemon=True)
        self.thread.start()
        self._ready.wait()
        if self._token is None:
            raise RuntimeError(f"the referee thread did not start: {self._error!r}")

    def alive(self) -> bool:
        return self.thread.is_alive() and self._token is not None

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as e:  # noqa: BLE001 - reported to the next caller
            self._error = e
        finally:
            self._token = None
            self._ready.set()

    async def _main(self) -> None:
        try:
            cleanup_stale()  # bots a killed worker on this machine left behind
        except Exception as e:  # noqa: BLE001 - best effort
            log.warning("cleanup_stale failed: %s", e)
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            nursery.start_soon(self._reap)
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    async def _host(self, hosted: _Hosted, setup: dict[str, Any]) -> None:
        from ..bots.launch import Launcher
        from ..limits import Limits
        from ..referee import TimeControl
        launcher = Launcher(Limits(**setup["limits"]), setup["sandbox"], setup.get("trusted_bots", False))

        bots = BotSetup({}, {}, TimeControl(**setup["clock"]), setup["limits"], setup["sandbox"],
                        setup["restart_each_game"], fixed_schedule=setup.get("fixed_schedule", False))
        async with open_in_process(bots, capacity=4, launcher=launcher) as ex:
            hosted.ex = ex
            hosted.ready.set()
            await hosted.stop.wait()

    async def _reap(self) -> None:
        while True:
            await trio.sleep(IDLE_POOL_S / 4)
            now = trio.current_time()
            for key, h in list(self.hosted.items()):
                if h.busy == 0 and now - h.last > IDLE_POOL_S:
                    del self.hosted[key]
                    h.stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        token, stop = self._token, self._stop
        if token is not None and stop is not None:
            try:
                trio.from_thread.run_sync(stop.set, trio_token=token)
            except trio.RunFinishedError:
                pass
        self.thread.join(timeout)

    def play(self, payload: dict[str, Any], bots: dict[str, BotSpec]) -> bytes:
        assert self._token is not None
        return trio.from_thread.run(self._play, payload, bots, trio_token=self._token)

    async def _play(self, payload: dict[str, Any], bots: dict[str, BotSpec]) -> bytes:
        key = json.dumps(payload["setup"], sort_keys=True)
        hosted = self.hosted.get(key)
        if hosted is None:
            assert self._nursery is not None
            hosted = self.hosted[key] = _Hosted()
            self._nursery.start_soon(self._host, hosted, payload["setup"])
        await hosted.ready.wait()
        hosted.busy += 1
        try:
            played = await hosted.ex.play_with(GameTask.from_wire(payload["task"]),
                                               [bots[d] for d in payload["bots"]])
        finally:
            hosted.busy -= 1
            hosted.last = trio.current_time()
        return played.to_bytes()


_HOST: RefereeHost | None = None
_HOST_LOCK = threading.Lock()


def referee_host() -> RefereeHost:
    global _HOST
    with _HOST_LOCK:
        if _HOST is None or not _HOST.alive():
            _HOST = RefereeHost()
        return _HOST


def play_game(payload: dict[str, Any]) -> bytes:
    """The Dask task: one game on this worker; returns :meth:`PlayedGame.to_bytes`."""
    from distributed import get_worker
    worker = get_worker()
    plugin = worker.plugins.get(payload["plugin"])
    if plugin is None:
        raise BundleError(f"worker {worker.address} has no bots for this run ({payload['plugin']})")
    bots = {d: plugin.prepare(d) for d in dict.fromkeys(payload["bots"])}
    for d, label in zip(payload["bots"], payload["task"]["seats"]):
        if bots[d].label != label:
            raise BundleError(f"bot {d[:12]} unpacked as {bots[d].label}, expected {label}")
    return referee_host().play(payload, bots)


def probe(sandbox: bool) -> dict[str, Any]:
    """Run on each worker before a tournament: its arena version, and why it cannot sandbox (if so)."""
    import sys
    info: dict[str, Any] = {"version": __version__, "python": sys.version.split()[0], "sandbox": None}
    if sandbox:  # in a thread of its own: client.run calls us on the worker's event loop
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(trio.run(sandbox_problem)), daemon=True)
        t.start()
        t.join(60)
        info["sandbox"] = out[0] if out else "the sandbox check did not finish"
    return info


# --------------------------------------------------------------------------- the client


def check_address(address: Any) -> None:
    if not isinstance(address, str) or not address:
        raise ClusterError("cluster must be a Dask scheduler address, e.g. tcp://HOST:8786")
    if address == "local" or address.startswith("local:"):
        n = address.partition(":")[2]
        if n and not (n.isdigit() and int(n) > 0):
            raise ClusterError(f"cluster {address!r}: write local or local:N (N worker processes)")
    elif "://" not in address:
        raise ClusterError(f"cluster {address!r} is not a scheduler address: write tcp://HOST:PORT "
                           "(what `dask scheduler` prints), or local[:N] for workers on this machine")


def _knock(address: str) -> None:
    """For ``tcp://HOST:PORT``, fail at once where a plain connect already says why (no such
    host, nothing listening): Dask's client would retry either until its timeout, 15 s of silence
    for a typo. Anything that accepts the connection is left to the client to judge."""
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme != "tcp" or not host or not port.isdigit():
        return
    host = host.strip("[]")  # an IPv6 literal
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except socket.gaierror as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: no such host {host!r} ({e.strerror})") from None
    except ConnectionRefusedError:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: nothing listens there "
                           "(is `dask scheduler` running, and is that its port?)") from None
    except OSError as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {e.strerror or e}") from None


def _connect(address: str):
    distributed = require_dask()
    check_address(address)
    if address == "local" or address.startswith("local:"):
        n = address.partition(":")[2]
        cluster = distributed.LocalCluster(n_workers=int(n) if n else (os.cpu_count() or 1),
                                           threads_per_worker=1, processes=True, dashboard_address=None)
        return distributed.Client(cluster, set_as_default=False), cluster
    _knock(address)
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    return client, None


def _preflight(client, sandbox: bool) -> int:
    try:
        infos = client.run(probe, sandbox, on_error="return")
    except Exception as e:  # noqa: BLE001
        raise ClusterError(f"could not ask the workers what they run: {e}") from None
    problems = []
    for addr, info in sorted(infos.items()):
        if isinstance(info, BaseException):
            problems.append(f"{addr}: cannot run the arena ({type(info).__name__}: {info}); "
                            "install palace-arena on every worker")
        elif info["version"] != __version__:
            problems.append(f"{addr}: palace-arena {info['version']}, but this machine has {__version__}")
        elif info["sandbox"]:
            problems.append(f"{addr}: cannot sandbox bots: {info['sandbox']}")
    if problems:
        raise ClusterError("workers not ready:\n  " + "\n  ".join(problems))
    if not infos:
        log.warning("the cluster has no workers yet; games wait until one joins")
    threads = client.scheduler_info().get("workers", {})
    return sum(w.get("nthreads", 1) for w in threads.values()) or 1


# --------------------------------------------------------------------------- the client's executor


class _Waiting:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: Any = None


class DaskExecutor:
    """Submits one Dask task per ``play`` and wakes the caller when a poller sees it finish."""

    def __init__(self, client: Any, distributed: Any, plugin: str, hashes: dict[str, str],
                 setup: BotSetup, capacity: int):
        self.client = client
        self.plugin = plugin
        self.hashes = hashes
        self.setup = {k: v for k, v in setup.wire().items() if k != "refs"}
        self.capacity = capacity
        self.incidents: list[str] = []
        self.run = uuid.uuid4().hex[:12]
        self.futures: dict[str, Any] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._finished = distributed.as_completed(loop=client.loop, with_results=True, raise_errors=False)

    async def play(self, task: GameTask) -> PlayedGame:
        key = f"palace-game-{task.game_id}-{self.run}"
        payload = {"plugin": self.plugin, "setup": self.setup, "task": task.wire(),
                   "bots": [self.hashes[label] for label in task.seats]}
        waiting = self._waiting[key] = _Waiting()
        future = await trio.to_thread.run_sync(
            lambda: self.client.submit(play_game, payload, key=key, retries=RETRIES, pure=False))
        self.futures[key] = future
        self._finished.add(future)
        await waiting.done.wait()
        self.futures.pop(key, None)
        result = waiting.result
        if not isinstance(result, bytes):  # anything else is the task's error
            # (the future's status is no guide: it goes back to "pending" when the worker
            # that holds a result we already have dies, and the result is still good)
            exc = result[1] if isinstance(result, tuple) and len(result) == 3 else result
            raise ExecutorError(f"{task.game_id} failed on the cluster: {type(exc).__name__}: {exc}")
        future.release()
        return PlayedGame.from_bytes(result)

    async def poll(self) -> None:
        while True:
            batch = self._finished.next_batch(block=False)
            if not batch:
                await trio.sleep(POLL_S)
                continue
            for future, result in batch:
                waiting = self._waiting.pop(future.key, None)
                if waiting is not None:
                    waiting.result = result
                    waiting.done.set()


@asynccontextmanager
async def open_dask(setup: BotSetup, address: str, *, client: Any = None) -> AsyncIterator[DaskExecutor]:
    """A Dask executor on the scheduler at ``address`` (or on ``client``): connects, checks every
    worker runs this arena version (and can sandbox, if asked), sends the bots, and on leaving
    cancels what is still queued and drops this run's bots from the workers."""
    distributed = require_dask()
    if client is None:
        check_address(address)
    hashes, bundles = await trio.to_thread.run_sync(_bundles, setup)
    owned = cluster = ex = None
    plugin = f"palace-arena-bots-{uuid.uuid4().hex[:12]}"
    registered = False
    try:
        if client is None:
            owned, cluster = await trio.to_thread.run_sync(_connect, address)
            client = owned
        threads = await trio.to_thread.run_sync(_preflight, client, setup.sandbox)
        bot_plugin = distributed_plugin("BotBundles")(bundles)
        await trio.to_thread.run_sync(lambda: client.register_plugin(bot_plugin, name=plugin))
        registered = True
        await trio.to_thread.run_sync(lambda: client.register_plugin(distributed_plugin("RefereePlugin")(),
                                                                     name=REFEREE_PLUGIN))
        ex = DaskExecutor(client, distributed, plugin, hashes, setup, capacity=max(16, 4 * threads))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ex.poll)
            yield ex
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            futures = list(ex.futures.values()) if ex is not None else []
            await trio.to_thread.run_sync(_release, client, futures, plugin if registered else None,
                                          owned, cluster)


def _bundles(setup: BotSetup) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    hashes = {label: spec.files_hash() for label, spec in setup.specs.items()}
    bundles = {hashes[label]: (manifest_path(setup.refs[label], spec), pack_bot(spec))
               for label, spec in setup.specs.items()}
    return hashes, bundles


def distributed_plugin(name: str):
    return globals()[name] if name in globals() else __getattr__(name)


def _release(client, futures: list, plugin_name: str | None, owned, cluster) -> None:
    """Cancel what is still queued, drop this run's bots from the scheduler, close what we opened."""
    try:
        if client is not None:
            left = [f for f in futures if not f.done()]
            if left:
                client.cancel(left)
            if plugin_name is not None:
                try:
                    client.unregister_worker_plugin(plugin_name)
                except Exception as e:  # noqa: BLE001 - a closing cluster may not answer
                    log.debug("could not unregister %s: %s", plugin_name, e)
    finally:
        if owned is not None:
            owned.close()
        if cluster is not None:
            cluster.close()
            # Workers of a local cluster are our descendants: the bots of one that died were
            # orphaned to this process (a subreaper). Kill what lives on and reap the zombies.
            try:
                cleanup_stale()
            except Exception as e:  # noqa: BLE001 - best effort, as at start
                log.warning("cleanup_stale failed: %s", e)
