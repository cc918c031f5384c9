"""Running a tournament's games on a Dask cluster (``arena tournament --cluster tcp://HOST:PORT``).

The client (the machine running ``arena tournament``) keeps everything that is
not a game: the schedule, the SQLite store, the reporter. Each unstored game
becomes one Dask task carrying the rules options, the deal seed, the seats and
a reference to each seated bot: the sha256 of its files
(:meth:`arena.manifest.BotSpec.files_hash`). The bots' files travel as one
tar.gz blob per bot inside a worker plugin, so each worker receives them once
(and a worker that joins or restarts later receives them when it registers).
A worker unpacks a blob into a cache directory keyed by the hash, checks the
hash of what it unpacked, and runs the manifest's build command once per
machine. Games run in a referee thread that each worker process starts once:
one trio loop with the :class:`~arena.launch.Launcher` (the tournament's limits
and sandbox flag, applied on the worker machine) and warm bot processes
reused from game to game, as the local runner does. A task returns
:meth:`GameRecord.as_json() <arena.referee.GameRecord.as_json>`; the client
stores records as they complete and feeds the same reporter as a local run.

Faults: a worker that dies mid-game has its games re-run elsewhere by the
scheduler; a task that raises is retried (``RETRIES``). A game is stored once:
:meth:`Store.save_game` refuses a second copy of an id, which is counted and
ignored. A resumed tournament submits only the games the store lacks.

Nothing here imports Dask at module level: ``dask`` and ``distributed`` are
imported only when a cluster is actually used, and their absence is reported
with the install hint (``pip install 'palace-arena[dask]'``).
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import trio

from . import __version__
from .manifest import MANIFEST, BotSpec, ManifestError, _walk, load_bot
from .tournament import ConfigError, Reporter, ScheduledGame, TournamentConfig, load_bots, schedule

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'palace-arena[dask]'"
RETRIES = 2  # extra tries for a task that raised; a dead worker's games are re-run by the scheduler anyway
POLL_S = 0.02  # how often the client looks for finished games (the trio loop stays responsive)
CONNECT_TIMEOUT_S = 15
IDLE_POOL_S = 120.0  # a worker shuts down bot processes no game has used for this long
CACHE_ENV = "PALACE_ARENA_CACHE"
REFEREE_PLUGIN = "palace-arena-referee"


class ClusterError(ConfigError):
    """The cluster cannot run the tournament: the extra is missing, the scheduler is unreachable,
    a worker lacks the arena, or games failed there. A ConfigError, so the CLI reports it plainly."""


class BundleError(RuntimeError):
    """A bot's files arrived on a worker but do not match the hash they were sent under."""


@dataclass
class ClusterStats:
    """What a cluster run did, for callers that want more than the records."""

    submitted: int = 0
    stored: int = 0
    duplicates: int = 0  # records the store already held (a game computed twice) — ignored
    failed: list[tuple[int, str]] = field(default_factory=list)  # (game index, error) not stored
    workers: int = 0


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

        def prepare(self, digest: str) -> tuple[BotSpec, str | None]:
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


# --------------------------------------------------------------------------- bot bundles


def manifest_path(ref: str, spec: BotSpec) -> str:
    """The manifest's path relative to the bot's root (``bot.toml`` unless a file was named)."""
    p = Path(ref)
    if p.is_file():
        return str(p.resolve().relative_to(spec.root))
    return MANIFEST


def pack_bot(spec: BotSpec) -> bytes:
    """The bot's files (exactly those :meth:`BotSpec.files_hash` covers) as a reproducible tar.gz."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
        # gzip's header carries a timestamp; tarfile passes mtime=None -> now, so fix it below.
        for path in sorted(_walk(spec.root)):
            data = path.read_bytes()
            info = tarfile.TarInfo(str(path.relative_to(spec.root)))
            info.size = len(data)
            info.mode = 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    # Zero gzip's MTIME field (bytes 4..7) so the same files always give the same blob.
    return raw[:4] + b"\0\0\0\0" + raw[8:]


def unpack_bot(blob: bytes, dest: Path) -> None:
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not (member.isfile() or member.isdir()):
                raise BundleError(f"bot bundle holds {member.name!r}, which is not a plain file")
            if member.name.startswith("/") or ".." in Path(member.name).parts:
                raise BundleError(f"bot bundle holds {member.name!r}, outside the bot's directory")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def cache_root() -> Path:
    """Where workers keep unpacked bots: ``$PALACE_ARENA_CACHE`` or a per-user dir under the temp dir.
    It must be readable by the bots' uid when the sandbox runs them as another user, so it is 0755
    and must belong to us and be writable by no one else."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env) if env else Path(tempfile.gettempdir()) / f"palace-arena-cache-{os.geteuid()}"
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise BundleError(f"bot cache {root} must be a directory owned by uid {os.geteuid()} and "
                          f"writable by no one else; set {CACHE_ENV} to another place")
    return root


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_PREPARED: dict[tuple[Path, str], BotSpec] = {}  # (cache, hash) -> spec, once built
_PREP_LOCKS: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_PREP_GUARD = threading.Lock()


def prepare_bot(digest: str, manifest: str, blob: bytes, root: Path | None = None) -> tuple[BotSpec, str | None]:
    """Unpack (once per machine), verify and build (once per machine) a bot; its spec and build error.

    The unpacked tree is renamed into ``<cache>/<hash>/bot`` only after its hash checked out, so
    a directory that exists was verified. A successful build leaves ``<cache>/<hash>/BUILT``; a
    failed one is remembered by this process only (the next worker process tries again), and
    its message becomes the bots' ``start_failed`` forfeits, as in a local run.
    """
    base = root or cache_root()
    with _PREP_GUARD:
        lock = _PREP_LOCKS[digest]
    with lock:
        known = _PREPARED.get((base, digest))
        if known is not None and known.root.is_dir():  # a temp-dir cleaner may have removed it
            return known, None
        home = base / digest
        with _flock(base / f"{digest}.lock"):
            if not home.is_dir():
                tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=base))
                try:
                    unpack_bot(blob, tmp / "bot")
                    got = load_bot(tmp / "bot" / manifest).files_hash()
                    if got != digest:
                        raise BundleError(f"bot bundle {digest[:12]} unpacked to files hashing to {got[:12]}")
                    tmp.chmod(0o755)
                    tmp.rename(home)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
            try:
                spec = load_bot(home / "bot" / manifest)
            except ManifestError as e:
                raise BundleError(str(e)) from None
            error = None
            if spec.build and not (home / "BUILT").exists():
                error = _build(spec)
                if error is None:
                    (home / "BUILT").write_text(time.strftime("%Y-%m-%d %H:%M:%S\n"))
        if error is None:
            _PREPARED[(base, digest)] = spec
        return spec, error


def _build(spec: BotSpec) -> str | None:
    from .launch import BUILD_TIMEOUT_S
    assert spec.build is not None
    cmd = list(spec.build)
    try:
        done = subprocess.run(cmd, cwd=spec.workdir, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{spec.label}: build {' '.join(cmd)!r} failed: {e}"
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        return f"{spec.label}: build exited {done.returncode}:\n{tail}"
    return None


# --------------------------------------------------------------------------- the worker's referee


class _Seats:
    """Warm bot processes for one setup (limits, sandbox, clock, restart flag), by files hash."""

    def __init__(self, limits: dict[str, int], sandbox: bool, clock, restart: bool):
        from .launch import Launcher
        from .limits import Limits
        self.launcher = Launcher(Limits(**limits), sandbox)
        self.build_errors: dict[Path, str] = {}  # bot root -> why its build failed (prepare_bot)
        self.clock = clock
        self.restart = restart
        self.idle: defaultdict[str, list] = defaultdict(list)
        self.all: list = []
        self.busy = 0
        self.last = 0.0

    async def launch(self, spec: BotSpec):
        from .launch import BuildError
        error = self.build_errors.get(spec.root)
        if error is not None:
            raise BuildError(error)  # the player turns it into a start_failed forfeit, as locally
        self.launcher.built[spec.label] = True  # built once per machine by prepare_bot
        return await self.launcher(spec)

    def take(self, digest: str, spec: BotSpec):
        from .referee import BotPlayer
        if self.idle[digest]:
            return self.idle[digest].pop()
        p = BotPlayer(spec, self.launch, self.clock, restart_each_game=self.restart)
        p.digest = digest  # type: ignore[attr-defined]
        self.all.append(p)
        return p

    def give_back(self, player) -> None:
        self.idle[player.digest].append(player)

    async def close(self) -> None:
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as n:
                for p in self.all:
                    n.start_soon(p.shutdown)


class RefereeHost:
    """One per worker process: a daemon thread running a trio loop that plays the games handed to
    it, keeping bot processes warm between games (bot processes belong to the trio run that
    started them, so a trio.run per task would restart every bot every game)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self.seats: dict[str, _Seats] = {}
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
        from .botproc import cleanup_stale
        try:
            cleanup_stale()  # bots a killed worker on this machine left behind
        except Exception as e:  # noqa: BLE001 - best effort
            log.warning("cleanup_stale failed: %s", e)
        self._stop = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        self._ready.set()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._reap)
            await self._stop.wait()
            nursery.cancel_scope.cancel()
        for s in list(self.seats.values()):
            await s.close()
        self.seats.clear()

    async def _reap(self) -> None:
        while True:
            await trio.sleep(IDLE_POOL_S / 4)
            now = trio.current_time()
            for key, s in list(self.seats.items()):
                if s.busy == 0 and now - s.last > IDLE_POOL_S:
                    del self.seats[key]
                    await s.close()

    def stop(self, timeout: float = 10.0) -> None:
        token, stop = self._token, self._stop
        if token is not None and stop is not None:
            try:
                trio.from_thread.run_sync(stop.set, trio_token=token)
            except trio.RunFinishedError:
                pass
        self.thread.join(timeout)

    def play(self, task: dict[str, Any], bots: dict[str, tuple[BotSpec, str | None]]) -> dict[str, Any]:
        assert self._token is not None
        return trio.from_thread.run(self._play, task, bots, trio_token=self._token)

    async def _play(self, task: dict[str, Any], bots: dict[str, tuple[BotSpec, str | None]]) -> dict[str, Any]:
        from .engine.rules import Rules
        from .referee import TimeControl, run_game

        clock = TimeControl(**task["clock"])
        key = json.dumps([task["limits"], task["sandbox"], task["clock"], task["restart_each_game"]],
                         sort_keys=True)
        seats = self.seats.get(key)
        if seats is None:
            seats = self.seats[key] = _Seats(task["limits"], task["sandbox"], clock, task["restart_each_game"])
        for spec, error in bots.values():
            if error is None:
                seats.build_errors.pop(spec.root, None)
            else:
                seats.build_errors[spec.root] = error
        seats.busy += 1
        players = [seats.take(d, bots[d][0]) for d in task["bots"]]
        try:
            record = await run_game(players, Rules.from_options(task["rules"]), task["seed"],
                                    game_id=task["game_id"], clock=clock, max_turns=task["max_turns"])
        finally:
            for p in players:
                seats.give_back(p)
            seats.busy -= 1
            seats.last = trio.current_time()
        return record.as_json()


_HOST: RefereeHost | None = None
_HOST_LOCK = threading.Lock()


def referee_host() -> RefereeHost:
    global _HOST
    with _HOST_LOCK:
        if _HOST is None or not _HOST.alive():
            _HOST = RefereeHost()
        return _HOST


def play_game(task: dict[str, Any]) -> dict[str, Any]:
    """The Dask task: one game on this worker; returns ``GameRecord.as_json()``."""
    from distributed import get_worker
    worker = get_worker()
    plugin = worker.plugins.get(task["plugin"])
    if plugin is None:
        raise BundleError(f"worker {worker.address} has no bots for this run ({task['plugin']})")
    bots = {d: plugin.prepare(d) for d in dict.fromkeys(task["bots"])}
    for d, label in zip(task["bots"], task["seats"]):
        if bots[d][0].label != label:
            raise BundleError(f"bot {d[:12]} unpacked as {bots[d][0].label}, expected {label}")
    return referee_host().play(task, bots)


def probe(sandbox: bool) -> dict[str, Any]:
    """Run on each worker before a tournament: its arena version, and why it cannot sandbox (if so)."""
    import sys
    info: dict[str, Any] = {"version": __version__, "python": sys.version.split()[0], "sandbox": None}
    if sandbox:  # in a thread of its own: client.run calls us on the worker's event loop
        from .botproc import sandbox_problem
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


def _connect(address: str):
    distributed = require_dask()
    check_address(address)
    if address == "local" or address.startswith("local:"):
        n = address.partition(":")[2]
        cluster = distributed.LocalCluster(n_workers=int(n) if n else (os.cpu_count() or 1),
                                           threads_per_worker=1, processes=True, dashboard_address=None)
        return distributed.Client(cluster, set_as_default=False), cluster
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    return client, None


def _preflight(client, cfg: TournamentConfig) -> int:
    try:
        infos = client.run(probe, cfg.sandbox, on_error="return")
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
    return len(infos)


async def run_on_cluster(cfg: TournamentConfig, store, reporter: Reporter | None = None, *,
                         client=None, stats: ClusterStats | None = None, keep_logs: bool = True,
                         collect: bool = True) -> list:
    """Play every scheduled game the store lacks on the Dask cluster ``cfg.cluster`` (or ``client``);
    store each as it completes and tell ``reporter``. Returns the records stored now (with their
    step logs unless ``keep_logs`` is false; none at all with ``collect=False``, as in
    :func:`arena.tournament.run_tournament`).

    Raises :class:`ClusterError` if games failed on the cluster after their retries; the games
    that did finish are stored, so running it again plays only the rest."""
    from .referee import GameRecord
    distributed = require_dask()
    if client is None:
        check_address(cfg.cluster)
    reporter = reporter or Reporter()
    stats = stats if stats is not None else ClusterStats()
    rules = cfg.ruleset()
    specs = load_bots(cfg)
    labels = {ref: spec.label for ref, spec in specs.items()}
    games = schedule(cfg, labels)
    store.begin_tournament(cfg.name, cfg.fingerprint(), len(games))
    hashes: dict[str, str] = {}
    for ref, spec in specs.items():
        hashes[spec.label] = digest = spec.files_hash()
        store.register_bot(spec.label, spec.name, spec.version, digest,
                           {"command": list(spec.command), "author": spec.author,
                            "build": list(spec.build) if spec.build else None}, str(spec.root))
    done = store.done_indexes(cfg.name)
    todo = [g for g in games if g.index not in done]
    reporter.started(cfg, len(games), len(done))
    played: list[GameRecord] = []
    interrupted = True
    t0 = time.perf_counter()
    owned = cluster = None
    futures: list = []
    plugin_name = None
    try:
        if todo:
            bundles = await trio.to_thread.run_sync(
                lambda: {hashes[s.label]: (manifest_path(ref, s), pack_bot(s)) for ref, s in specs.items()})
            if client is None:
                owned, cluster = await trio.to_thread.run_sync(_connect, cfg.cluster)
                client = owned
            log.debug("connected at %.2fs", time.perf_counter() - t0)
            stats.workers = await trio.to_thread.run_sync(_preflight, client, cfg)
            log.debug("%d worker(s) ready at %.2fs", stats.workers, time.perf_counter() - t0)
            run = uuid.uuid4().hex[:12]
            plugin_name = f"palace-arena-bots-{run}"
            plugin = distributed_plugin("BotBundles")(bundles)
            await trio.to_thread.run_sync(lambda: client.register_plugin(plugin, name=plugin_name))
            await trio.to_thread.run_sync(lambda: client.register_plugin(distributed_plugin("RefereePlugin")(),
                                                                         name=REFEREE_PLUGIN))
            common = {"rules": rules.options(), "max_turns": cfg.max_turns, "clock": cfg.clock().as_json(),
                      "limits": dict(cfg.limits), "sandbox": cfg.sandbox,
                      "restart_each_game": cfg.restart_each_game, "plugin": plugin_name}
            tasks = [{**common, "index": g.index, "game_id": f"{cfg.name}-{g.index:06d}", "seed": g.seed,
                      "seats": list(g.seats), "bots": [hashes[label] for label in g.seats]} for g in todo]
            keys = [f"palace-game-{cfg.name}-{g.index:06d}-{run}" for g in todo]
            by_key = dict(zip(keys, todo))
            futures = await trio.to_thread.run_sync(
                lambda: client.map(play_game, tasks, key=keys, retries=RETRIES, pure=False))
            stats.submitted = len(futures)
            log.debug("%d game(s) submitted at %.2fs", stats.submitted, time.perf_counter() - t0)
            pending = len(futures)
            finished = distributed.as_completed(futures, loop=client.loop, with_results=True, raise_errors=False)
            while pending:
                batch = finished.next_batch(block=False)
                if not batch:
                    await trio.sleep(POLL_S)
                    continue
                for future, result in batch:
                    pending -= 1
                    game: ScheduledGame = by_key[future.key]
                    if not isinstance(result, dict):  # play_game returns a dict; anything else is its error
                        # (the future's status is no guide: it goes back to "pending" when the worker
                        # that holds a result we already have dies, and the result is still good)
                        exc = result[1] if isinstance(result, tuple) and len(result) == 3 else result
                        stats.failed.append((game.index, f"{type(exc).__name__}: {exc}"))
                        log.error("game %d failed on the cluster: %r", game.index, exc)
                        continue
                    future.release()
                    if not store.save_game(cfg.name, game.index, list(game.seats), result):
                        stats.duplicates += 1
                        log.info("game %d was already stored; this copy is ignored", game.index)
                        continue
                    stats.stored += 1
                    record = GameRecord.from_json(result)
                    if collect:
                        played.append(record)
                    reporter.game_done(game, record)
                    if not keep_logs:
                        record.steps, record.setup_events, record.stderr = [], [], []
            if stats.failed:
                first = min(stats.failed)
                raise ClusterError(
                    f"{len(stats.failed)} of {stats.submitted} game(s) failed on the cluster and were not stored "
                    f"(first: game {first[0]}: {first[1]}); the rest are stored: run the same command again "
                    "to retry the failed ones")
        interrupted = False
        store.finish_tournament(cfg.name)
        log.debug("all games back at %.2fs", time.perf_counter() - t0)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_release, client, futures, plugin_name, owned, cluster)
        reporter.finished(interrupted)
    return played


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
