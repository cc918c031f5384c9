"""The Dask executor: games on Dask workers (``arena tournament --cluster tcp://HOST:PORT``).

The client (the machine running ``arena tournament``) keeps everything that is
not a game: the schedule, the secret deal seeds, the SQLite store, the reporter.
The run itself travels once per worker, in a worker plugin: its setup (rules, clock,
limits, containment), each bot's files hash and the bots' files as tar.gz blobs
(:mod:`arena.bots.bundles`). Each :meth:`DaskExecutor.play_deal` is then one Dask task
carrying the plugin's name and a deal's :class:`~arena.tournament.executors.GameTask` s
(id, deal seed, seats by label, turn cap), played back to back by one worker (never two seat
orders of a deal on two workers, or at once). A worker
process plays one game at a time on the blocking shell, as a local referee worker does
(:class:`~arena.tournament.executors.BlockingExecutor`, in :class:`RunReferee`): no event
loop of ours runs there, and the run's bot pool keeps processes warm between games
(never lending one a deal it has seen) until the run ends. A task returns, per game,
:meth:`PlayedGame.to_bytes` (the same msgpack bytes a local worker process sends) or the
text of the arena's failure that kept it from being played.

Faults: a worker that dies mid-game has its games re-run elsewhere by the
scheduler; a task that raises is retried (``RETRIES``) and then fails its game
(:class:`~arena.tournament.executors.ExecutorError`), which the tournament reports at the end
with the rest stored. Nothing here imports Dask at module level: ``dask`` and
``distributed`` are imported only when a cluster is used, and their absence is
reported with the install hint (``pip install 'palace-arena[dask]'``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import socket
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import trio

from .. import __version__
from ..bots.blocking import Hub, adopt_hub
from ..bots.bundles import CACHE_ENV, BundleError, BundleRefused, Holds, bundle_key, manifest_path, pack_bot, prepare_bot
from ..bots.containment import cleanup_stale, process_registry
from ..bots.filesystem import remove_tree
from ..bots.manifest import BotSpec, FolderError, refused_bot
from ..bots.containment import Containment
from ..bots.probes import gvisor_problem_now, sandbox_problem_now
from ..safetext import escape_logs
from .executors import BotSetup, ExecutorBroken, ExecutorError, GameTask, Played, PlayedGame, one_deal, one_game

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'palace-arena[dask]'"
RETRIES = 2  # extra tries for a task that raised; a dead worker's games are re-run by the scheduler anyway
POLL_S = 0.02  # how often the client looks for finished games (its trio loop stays responsive)
CONNECT_TIMEOUT_S = 15
IDLE_POOL_S = 120.0  # a worker shuts down bot processes no game has used for this long


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
    # The worker plugin subclasses distributed's WorkerPlugin, so it is defined on first use:
    # importing this module must not import Dask. Pickle finds it here by name on the workers.
    if name == "RunPlugin":
        _define_plugins()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _define_plugins() -> None:
    from distributed.diagnostics.plugin import WorkerPlugin

    class RunPlugin(WorkerPlugin):
        """One run on every worker, sent once per worker: its :class:`RunReferee`, which plays
        the run's games there; shut down with the run (or the worker), or once idle."""

        idempotent = False

        def __init__(self, referee: RunReferee):
            self.referee = referee
            self._reaper: asyncio.Task | None = None

        def setup(self, worker) -> None:  # called on the worker's event loop
            escape_logs()  # what the worker logs of a game (a task's error) is shown escaped
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

        async def _reap(self) -> None:
            loop = asyncio.get_running_loop()
            while True:
                await asyncio.sleep(IDLE_POOL_S / 4)
                await loop.run_in_executor(None, self.referee.reap, IDLE_POOL_S)

        async def teardown(self, worker) -> None:
            if self._reaper is not None:
                self._reaper.cancel()
            # in a thread: closing waits for the game in progress, and for the bots' grace
            await asyncio.get_running_loop().run_in_executor(None, self.referee.close)

    RunPlugin.__qualname__ = RunPlugin.__name__
    RunPlugin.__module__ = __name__
    globals()["RunPlugin"] = RunPlugin


# --------------------------------------------------------------------------- the worker's referee

_PLAYING = threading.Lock()  # a worker process plays one game at a time, whichever run it is for
_cleaned = False


class RunReferee:
    """A run's games on one worker process, played one at a time on the blocking shell by a
    :class:`~arena.tournament.executors.BlockingExecutor`, as a referee worker process plays
    them: its bot pool keeps processes warm between games (and never lends one a deal it has
    seen) until the run ends, the worker closes, or no game used them for ``IDLE_POOL_S``.

    It arrives on the worker once, pickled inside the run's plugin: the run's setup (rules,
    clock, limits, containment) as :meth:`BotSetup.wire` makes it, each label's files hash, and each
    label's bot as a tar.gz blob (unpacked and built when a game first seats it). Blobs go by
    label, not by files hash: a label is what a game seats, and each is checked on arrival."""

    def __init__(self, setup: dict[str, Any], hashes: dict[str, str], bundles: dict[str, tuple[str, bytes]],
                 refused: dict[str, str] | None = None):
        self.setup = setup  # BotSetup.wire() without refs
        self.hashes = hashes  # label -> files hash
        self.bundles = bundles  # label -> (manifest path inside the bot dir, tar.gz)
        self.refused = refused or {}  # label -> why it could not be packed as the run read it
        self.keys: dict[str, str] = {}  # label -> its blob's cache key, hashed once per worker process
        self.holds = Holds()  # the cache entries its bots run from: never evicted while its pool is up
        self.executor: Any = None
        self.hub: Hub | None = None  # its bots' hub, made on the worker (:meth:`_on_own_hub`)
        self.last = 0.0

    @contextmanager
    def _on_own_hub(self) -> Iterator[None]:
        """Run on the run's own hub, whichever thread of the worker this is. Its games are played
        on a Dask task's thread, but it is shut down (and reaped when idle) on another: a bot
        closing with a grace period is finished only by the hub it was started on, so with each
        thread's own hub a bot that ignored ``shutdown`` outlived its run, and those that exited
        stayed unreaped, their cgroups and uids held. Called with ``_PLAYING`` held: one thread
        at a time uses it."""
        if self.hub is None:
            self.hub = Hub()
        adopt_hub(self.hub)
        try:
            yield
        finally:
            adopt_hub(None)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "hub": None, "executor": None}  # a hub holds descriptors of this process

    def bot(self, label: str) -> BotSpec:
        if label in self.refused:  # its every start fails as its own fault
            return refused_bot(label, label, self.refused[label])
        digest = self.hashes.get(label)
        if digest is None or label not in self.bundles:
            raise BundleError(f"no bot {label} was sent to this worker")
        manifest, blob = self.bundles[label]
        key = self.keys.get(label) or self.keys.setdefault(label, bundle_key(blob))
        try:
            spec = prepare_bot(digest, manifest, blob, key=key, hold=self.holds)
        except BundleRefused as e:
            why = f"{label}: its {manifest} changed after the run read it and no longer loads ({e}); run again"
        else:
            if spec.label == label:
                return spec
            why = f"{label}: its {manifest} changed after the run read it (it now names {spec.label}); run again"
        # The files hashed and packed are not the bot the run seats (its author rewrote its
        # manifest in between): its forfeit, as a folder changed before packing is (_referee).
        self.refused[label] = why
        return refused_bot(label, label, why)

    def play(self, task: dict[str, Any]) -> bytes:
        """A deal of one game (:meth:`GameTask.wire`): its :meth:`PlayedGame.to_bytes`, or the
        arena's failure raised."""
        played = self._deal([task])[0]
        if not isinstance(played, PlayedGame):
            raise played
        return played.to_bytes()

    def play_deal(self, tasks: list[dict[str, Any]]) -> list[bytes | str]:
        """A deal's games (:meth:`GameTask.wire` each), back to back: per game its
        :meth:`PlayedGame.to_bytes`, or the text of the arena's failure that kept it from being played."""
        return [p.to_bytes() if isinstance(p, PlayedGame) else f"{type(p).__name__}: {p}" for p in self._deal(tasks)]

    def _deal(self, tasks: list[dict[str, Any]]) -> list[Any]:
        global _cleaned
        from ..referee.blocking import BlockingLaunch
        from .executors import BlockingExecutor
        with _PLAYING:
            if not _cleaned:
                _cleaned = True
                try:
                    cleanup_stale()  # bots a killed worker on this machine left behind
                except Exception as e:  # noqa: BLE001 - best effort
                    log.warning("cleanup_stale failed: %s", e)
            games = [GameTask.from_wire(t) for t in tasks]
            if self.executor is None:
                setup = BotSetup.from_wire({**self.setup, "refs": {}})
                self.executor = BlockingExecutor(setup, BlockingLaunch(worker_launcher(setup)))
            try:
                with self._on_own_hub():
                    try:
                        return self.executor.play_deal(games, self.bot)
                    finally:
                        # A bot that closed during the deal (a fault) was thawed to exit by itself
                        # within its grace, which this hub's waits end; a game shorter than the grace
                        # left it to this run's next game here, its close or its reaping (minutes), and
                        # a bot that ignored ``shutdown`` spun, unfrozen, through other runs' games.
                        self.hub.settle()  # type: ignore[union-attr]
            finally:
                self.last = time.monotonic()

    def reap(self, idle_s: float) -> None:
        """Shut the bots down if no game used them for ``idle_s`` (unless a game is being played)."""
        if not _PLAYING.acquire(blocking=False):
            return
        try:
            if self.executor is not None and time.monotonic() - self.last > idle_s:
                self._shut()
        finally:
            _PLAYING.release()

    def close(self) -> None:
        """Shut the bots down, once the game in progress (if any) is over."""
        with _PLAYING:
            self._shut()

    def _shut(self) -> None:
        ex, self.executor = self.executor, None
        if ex is not None:
            with self._on_own_hub():  # where its bots wait out their grace, and are killed after it
                ex.close()
            ex.pool.launcher.release()  # its bots are gone: so are their builds' copies
        self.holds.release()  # its bots are gone: their entries may be evicted


def worker_launcher(setup: BotSetup) -> Any:
    """A worker's launcher: the setup's, but a trusted bot builds in a private copy, never in the
    cache entry every run on the machine shares (:func:`arena.bots.bundles.prepare_bot`)."""
    import dataclasses

    from .executors import default_launcher
    return dataclasses.replace(default_launcher(setup), build_in_copy=True)


def play_deal(plugin: str, tasks: list[dict[str, Any]]) -> list[bytes | str]:
    """The Dask task: one deal's games of the run whose plugin is named ``plugin``, on this worker."""
    from distributed import get_worker
    worker = get_worker()
    run: Any = worker.plugins.get(plugin)
    if run is None:
        raise BundleError(f"worker {worker.address} has no bots for this run ({plugin})")
    return run.referee.play_deal(tasks)


async def probe(containment: str) -> dict[str, Any]:
    """Run on each worker before a tournament: its arena version, and why it cannot contain bots
    as the run requires (``containment``: a :class:`Containment`'s value), if so. BUBBLEWRAP and
    GVISOR are required, so checked here; AUTO and NAMESPACES are resolved by the worker's Launcher."""
    import sys
    info: dict[str, Any] = {"version": __version__, "python": sys.version.split()[0], "containment": None}
    try:
        asked = Containment(containment)
    except ValueError:
        info["containment"] = f"this worker knows no containment {containment!r}"
        return info
    if asked in (Containment.BUBBLEWRAP, Containment.GVISOR):  # in a thread: client.run calls us on
        try:                                                    # the worker's event loop
            info["containment"] = await asyncio.wait_for(
                asyncio.get_running_loop().run_in_executor(None, _containment_problem, asked), 60)
        except asyncio.TimeoutError:
            info["containment"] = f"the {asked} check did not finish"
    return info


def _containment_problem(asked: Containment) -> str | None:
    with _PLAYING:  # the probe starts a bot through this process's blocking shell, as games do
        return sandbox_problem_now() if asked is Containment.BUBBLEWRAP else gvisor_problem_now()


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
        security = _local_tls(distributed)
        import dask

        from . import localcomm  # (registers its comm: the client's own connections use it)
        if (why := localcomm.check_socket_owners()) is not None:
            raise ClusterError(f"a local cluster cannot keep other local users' connections off its files: {why}")
        # no HTTP pages either (plain HTTP on the loopback, for any local user): the workers' logs (a
        # task that raised is logged with its arguments, a deal seed its retry plays again), their
        # call stacks, the games they play; nor the Bokeh dashboard, which the routes do not govern
        # (it shows the same, wherever bokeh is installed). Dask's warnings are not printed: any local
        # user who connects without the key is one ("TLS handshake failed"), a line a connection on
        # the operator's terminal, or in the log file it fills; the run says itself what it meets.
        # The workers' files go in a private folder of this run, not Dask's shared ``dask-scratch-space``
        # in the temporary directory, which the first user to name it owns: another local user's file
        # there failed every local cluster at its start, and her folder would hold the run's.
        # So does the workers' bot cache, unless the operator named one (``PALACE_ARENA_CACHE``): the
        # run's bots, in its scratch, go with it. (Its default was once a name in the temporary
        # directory, the first user's to make: another local user's folder there failed every game
        # of a local cluster. The default is now the user's own place: ``places.arena_place``.)
        scratch = process_registry().temp_dir("palace-arena-cluster-")
        workers_env = {} if os.environ.get(CACHE_ENV) else {CACHE_ENV: str(scratch / "bots")}
        # Its listeners close at once every connection another local user makes (``localcomm``):
        # the workers load that comm before they listen (a preload), or cannot join at all.
        with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": [],
                              "distributed.worker.preload": [localcomm.__name__],
                              "temporary-directory": str(scratch)}):  # the scheduler's (the workers': local_directory)
            cluster = distributed.LocalCluster(n_workers=int(n) if n else (os.cpu_count() or 1),
                                               threads_per_worker=1, processes=True, protocol=localcomm.SCHEME + "://",
                                               security=security, silence_logs=logging.ERROR,
                                               scheduler_kwargs={"dashboard": False}, local_directory=str(scratch),
                                               env=workers_env,
                                               dashboard_address="127.0.0.1:0")  # none fixed: 8787 may be taken
        weakref.finalize(cluster, remove_tree, scratch)  # once it is closed and gone, or at exit
        return distributed.Client(cluster, security=security, set_as_default=False), cluster
    _knock(address)
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    return client, None


def _local_tls(distributed: Any) -> Any:
    """The TLS identity of a ``local`` cluster, made for this run and held in memory only: one key
    and self-signed certificate that its scheduler, workers and client all present and require
    (Dask's ``Security``, as its ``temporary()`` makes without the ``cryptography`` package). A
    local cluster listens on 127.0.0.1, and Dask's plain ``tcp://`` takes any client: another
    local user connected and ran code in its workers as the arena's user (root: ``/etc/shadow``
    read). openssl makes the key; without it a local cluster is refused, never run open."""
    import shutil
    import subprocess
    import tempfile
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ClusterError("a local cluster needs openssl (Debian package: openssl) to make the TLS key that keeps "
                           "other local users out of its scheduler and workers")
    with tempfile.TemporaryDirectory(prefix="arena-cluster-tls-") as d:  # 0700, gone once read
        key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
        try:
            subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                            "-nodes", "-keyout", key, "-out", cert, "-days", "7", "-subj", "/CN=dask-internal",
                            "-addext", "subjectAltName=DNS:dask-internal"],
                           check=True, capture_output=True, timeout=60)
            key_pem, cert_pem = open(key).read(), open(cert).read()
        except (OSError, subprocess.SubprocessError) as e:
            raise ClusterError(f"a local cluster's TLS key could not be made with {openssl}: {e}") from None
    roles = {f"tls_{role}_{part}": pem for role in ("client", "scheduler", "worker")
             for part, pem in (("cert", cert_pem), ("key", key_pem))}
    return distributed.Security(tls_ca_file=cert_pem, require_encryption=True, **roles)


def _preflight(client, containment: Containment) -> int:
    try:
        infos = client.run(probe, containment.value, on_error="return")
    except Exception as e:  # noqa: BLE001
        raise ClusterError(f"could not ask the workers what they run: {e}") from None
    problems = []
    for addr, info in sorted(infos.items()):
        if isinstance(info, BaseException):
            problems.append(f"{addr}: cannot run the arena ({type(info).__name__}: {info}); "
                            "install palace-arena on every worker")
        elif info["version"] != __version__:
            problems.append(f"{addr}: palace-arena {info['version']}, but this machine has {__version__}")
        elif info["containment"]:
            problems.append(f"{addr}: cannot contain bots ({containment}): {info['containment']}")
    if problems:
        raise ClusterError("workers not ready:\n  " + "\n  ".join(problems))
    if not infos:
        log.warning("the cluster has no workers yet; games wait until one joins")
    return len(client.scheduler_info().get("workers", {}))  # each plays one game at a time


# --------------------------------------------------------------------------- the client's executor


class DaskExecutor:
    """Submits one Dask task per ``play`` and wakes the caller when a poller sees it finish.

    A worker that dies unexpectedly is said as it happens (``on_incident``, as the local referee
    workers' deaths are), from the scheduler's ``remove-worker`` events; its games are the
    scheduler's to re-run. A lost scheduler breaks the executor (:class:`ExecutorBroken`): Dask
    cancels every future of a client whose scheduler went away, so no game can come back."""

    def __init__(self, client: Any, distributed: Any, plugin: str, setup: BotSetup, capacity: int,
                 *, address: str = "", workers: int = 0, on_incident: Callable[[str], None] | None = None):
        self.client = client
        self.plugin = plugin
        self.rules = setup.rules.options()  # what every game sent back shares
        self.capacity = capacity
        self.address = address
        self.workers = workers  # worker processes connected at the start, each one game at a time
        self.incidents: list[str] = []
        self.on_incident = on_incident
        self.run = uuid.uuid4().hex[:12]
        self.futures: dict[str, Any] = {}
        self._waiting: dict[str, trio.Event] = {}  # set when the game's future is done
        # Results are fetched by each play, not gathered here: a gather in flight when the
        # scheduler goes would fail inside Dask's own task, which logs a traceback.
        self._finished = distributed.as_completed(loop=client.loop, with_results=False)
        self._events: queue.SimpleQueue[dict] = queue.SimpleQueue()  # filled on the client's loop

    def lost(self) -> bool:
        """Whether the client lost its scheduler (it reconnects for a while, then closes)."""
        return self.client.status not in ("running", "newly-created")

    def _broken(self, why: BaseException | str) -> ExecutorBroken:
        log.debug("lost the scheduler: %s", why)  # Dask's words (a socket's repr) help no one else
        deaths = sum(t.startswith("Dask worker") for t in self.incidents)  # this line ends the run: count them
        seen = f" after {deaths} Dask worker death(s) this run" if deaths else ""
        return ExecutorBroken(f"lost the connection to the Dask scheduler at {self.address}{seen}")

    async def play_deal(self, tasks: list[GameTask]) -> list[Played]:
        """A deal's games as one Dask task: one worker plays them back to back (a task that raised
        is tried again whole; the worker killed the processes that saw the deal first)."""
        one_deal(tasks)
        key = f"palace-game-{tasks[0].game_id}-{self.run}"
        wire = [t.wire() for t in tasks]
        done = self._waiting[key] = trio.Event()
        try:
            future = await trio.to_thread.run_sync(
                lambda: self.client.submit(play_deal, self.plugin, wire, key=key, retries=RETRIES, pure=False))
        except Exception as e:  # noqa: BLE001 - a closed client says so in several ways
            self._waiting.pop(key, None)
            if self.lost():
                raise self._broken(f"{type(e).__name__}: {e}") from None
            raise
        self.futures[key] = future
        self._finished.add(future)
        await done.wait()
        # (the future's status alone is no guide: it goes back to "pending" when the worker
        # that held a finished result dies, and result() then waits for the game played again)
        result = await trio.to_thread.run_sync(_outcome, future, abandon_on_cancel=True)
        self.futures.pop(key, None)
        if not isinstance(result, list):  # anything else is the task's error, or the cluster's
            if _scheduler_gone(result) or self.lost():
                raise self._broken(_first_line(result))
            return [ExecutorError(f"{t.game_id} failed on the cluster: {type(result).__name__}: {result}")
                    for t in tasks]
        future.release()
        return [PlayedGame.from_bytes(p, self.rules) if isinstance(p, bytes) else ExecutorError(f"{t.game_id}: {p}")
                for t, p in zip(tasks, result)]

    async def play(self, task: GameTask) -> PlayedGame:
        return one_game(await self.play_deal([task]))

    def watch(self) -> None:
        """Hear of workers leaving the cluster (on the client's loop: queued for :meth:`poll`)."""
        self.client.subscribe_topic("all", lambda event: self._events.put(event[1]))

    def _said(self, msg: Any) -> None:
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker" or msg.get("expected"):
            return  # a worker that closed on purpose (retired, scaled down) is no incident
        mine = [k for k in msg.get("processing-tasks") or () if str(k).endswith(f"-{self.run}")]
        text = (f"Dask worker {msg.get('worker', '?')} died or lost its connection holding {len(mine)} "
                "game(s) of this run; the scheduler plays them again on another worker")
        self.incidents.append(text)
        if self.on_incident is not None:
            self.on_incident(text)

    async def poll(self) -> None:
        while True:
            while not self._events.empty():
                self._said(self._events.get())
            batch = self._finished.next_batch(block=False)
            if not batch:
                await trio.sleep(POLL_S)
                continue
            for future in batch:
                done = self._waiting.pop(future.key, None)
                if done is not None:
                    done.set()


def _outcome(future: Any) -> Any:
    """The game's bytes, or why there are none (the task's error, a cancel, a lost connection)."""
    try:
        return future.result()
    except Exception as e:  # noqa: BLE001 - reported by the caller (Dask's cancel is an Exception)
        return e


def _scheduler_gone(e: Any) -> bool:
    return getattr(e, "reason", None) == "scheduler-connection-lost"


def _first_line(e: Any) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


@asynccontextmanager
async def open_dask(setup: BotSetup, address: str, *, client: Any = None,
                    on_incident: Callable[[str], None] | None = None) -> AsyncIterator[DaskExecutor]:
    """A Dask executor on the scheduler at ``address`` (or on ``client``): connects, checks every
    worker runs this arena version (and can sandbox, if asked), sends the run (its setup and
    bots, :class:`RunReferee`), and on leaving cancels what is still queued and drops the run from
    the workers, which shut its bots down. ``on_incident`` hears of each worker's death."""
    distributed = require_dask()
    if client is None:
        check_address(address)
    dask_log = logging.getLogger("distributed")
    if dask_log.level == logging.INFO:  # Dask's default; its chatter is not the arena's output
        dask_log.setLevel(logging.WARNING)  # (as LocalCluster's silence_logs does)
    referee = await trio.to_thread.run_sync(_referee, setup)
    owned = cluster = ex = None
    plugin = f"palace-arena-run-{uuid.uuid4().hex[:12]}"
    registered = False
    try:
        if client is None:
            owned, cluster = await trio.to_thread.run_sync(_connect, address)
            client = owned
        workers = await trio.to_thread.run_sync(_preflight, client, setup.containment)
        run_plugin = distributed_plugin("RunPlugin")(referee)
        await trio.to_thread.run_sync(lambda: client.register_plugin(run_plugin, name=plugin))
        registered = True
        ex = DaskExecutor(client, distributed, plugin, setup, capacity=max(16, 4 * workers),
                          address=address or client.scheduler.address, workers=workers,
                          on_incident=on_incident)
        await trio.to_thread.run_sync(ex.watch)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ex.poll)
            yield ex
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            futures = list(ex.futures.values()) if ex is not None else []
            await trio.to_thread.run_sync(_release, client, futures, plugin if registered else None,
                                          owned, cluster, ex is not None and ex.lost())


def _referee(setup: BotSetup) -> RunReferee:
    """The run as it travels to the workers. A bot whose folder changed since the run read it
    cannot be packed as read: it travels as its refusal, and forfeits its games (the run refused
    to start, at every try, while its author kept editing)."""
    hashes = {label: spec.files_hash() for label, spec in setup.specs.items()}
    bundles: dict[str, tuple[str, bytes]] = {}
    refused: dict[str, str] = {}
    for label, spec in setup.specs.items():
        try:
            bundles[label] = (manifest_path(setup.refs[label], spec), pack_bot(spec))
        except FolderError as e:
            refused[label] = str(e)
    return RunReferee({k: v for k, v in setup.wire().items() if k != "refs"}, hashes, bundles, refused)


def distributed_plugin(name: str):
    return globals()[name] if name in globals() else __getattr__(name)


def _release(client, futures: list, plugin_name: str | None, owned, cluster, lost: bool = False) -> None:
    """Cancel what is still queued, drop this run's bots from the scheduler, close what we opened.
    With the scheduler lost there is nobody to tell (each call would wait for it): only close."""
    try:
        if client is not None and not lost:
            try:
                client.unsubscribe_topic("all")
            except Exception as e:  # noqa: BLE001 - a closing cluster may not answer
                log.debug("could not unsubscribe: %s", e)
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
            quiet = _NoReconnectNotice()
            dask_log = logging.getLogger("distributed.client")
            if lost:
                dask_log.addFilter(quiet)
            try:
                owned.close()
            finally:
                dask_log.removeFilter(quiet)
        if cluster is not None:
            cluster.close()
            # Workers of a local cluster are our descendants: the bots of one that died were
            # orphaned to this process (a subreaper). Kill what lives on and reap the zombies.
            try:
                cleanup_stale()
            except Exception as e:  # noqa: BLE001 - best effort, as at start
                log.warning("cleanup_stale failed: %s", e)


class _NoReconnectNotice(logging.Filter):
    """Drops what Dask's client logs while it is closed after losing its scheduler: the reconnect
    it was trying is cancelled (a traceback) or ends ("failed to reconnect after 15 s"), and the
    arena has already said, in its own line, that the scheduler is gone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False
