"""Tournaments on a Dask cluster: same stored games as a local run, no game lost or doubled when a
worker dies, resume, duplicates, bot bundles, and no Dask import unless a cluster is asked for.

The cluster tests use a real ``distributed.LocalCluster`` (two worker processes, one thread each)
and the bundled bots as real processes; they are skipped, with the reason shown, when the
``dask`` extra is not installed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
import trio

from arena.bots.containment import Containment
from arena.bots.bundles import _PREPARED, CACHE_ENV, BundleError, cache_root, pack_bot, prepare_bot, unpack_bot
from arena.bots.folder import read_folder
from arena.bots.manifest import load_bot
from arena.errors import ArenaError
from arena.tournament import cluster as C
from arena.tournament.config import TournamentConfig, load_config
from arena.tournament.executors import BotSetup, GameTask, PlayedGame
from arena.tournament.live import summary
from arena.tournament.run import Reporter, RunStats, run_tournament
from arena.tournament.store import Store
from tests.checks import boot_ticks, zombie_children

REPO = Path(__file__).resolve().parent.parent


def _have_dask() -> bool:
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


HAVE_DASK = _have_dask()
needs_dask = pytest.mark.skipif(not HAVE_DASK, reason="dask/distributed not installed: "
                                "pip install 'palace-arena[dask]' to run the cluster tests")

BOTS = ["random", "lowest", "heuristic"]  # deterministic: random reseeds from each start message
# The reference tournament: 3 pairs x 1 deal x 2 seat rotations. One deal is enough for what the
# cluster tests read (every game stored once and as locally, resumed, killed mid-game); each game
# more on the module's cluster costs its workers CPU (their bots start per deal and rotation).
GAMES = 6


def config(name: str, store: Path, **kw) -> TournamentConfig:
    base = dict(name=name, bots=list(BOTS), deals=1, seed=7, concurrency=2, store=str(store))
    base.update(kw)
    return TournamentConfig(**base)


def stored(path: Path, name: str) -> dict[int, dict]:
    """What must not depend on where a game ran: ids, seeds, seats, results, every action."""
    db = Store(path, readonly=True)
    out = {}
    for g in db.games(tournament=name, limit=10**6):
        rec = db.game_record(g["id"])
        out[g["index"]] = {
            "id": g["id"], "seed": g["seed"], "seats": g["seats"], "result": g["result"],
            "players": rec["players"], "rules": rec["rules"], "setup": rec["setup_events"],
            "faults": [(f["seat"], f["reason"]) for f in rec["faults"]],
            "actions": [(s["seat"], s.get("action"), s.get("act"), s.get("fault")) for s in rec["steps"]],
        }
    count = db.db.execute("SELECT COUNT(*), COUNT(DISTINCT idx) FROM games WHERE tournament=?", (name,)).fetchone()
    assert count[0] == count[1] == len(out), f"a game is stored twice: {count}"
    db.close()
    return out


def run(cfg: TournamentConfig, reporter: Reporter | None = None) -> list:
    db = Store(cfg.store)
    try:
        return trio.run(run_tournament, cfg, db, reporter)
    finally:
        db.close()


# --------------------------------------------------------------------------- without Dask


def test_local_runs_do_not_import_dask(tmp_path):
    code = f"""
import sys, trio
sys.path.insert(0, {str(REPO)!r})
import arena.cli.main, arena.tournament.cluster
from arena.tournament.config import TournamentConfig, load_config
from arena.tournament.run import run_tournament
from arena.tournament.store import Store
from tests.fakes import policy_launcher
cfg = TournamentConfig(name="t", bots=["lowest", "highest"], deals=1, store={str(tmp_path / 's.sqlite')!r})
trio.run(lambda: run_tournament(cfg, Store(cfg.store), launcher=policy_launcher()))
bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))
assert not bad, bad
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_missing_extra_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(C.ClusterError, match=r"pip install 'palace-arena\[dask\]'"):
        C.require_dask()
    cfg = config("nodask", tmp_path / "s.sqlite", cluster="tcp://127.0.0.1:1")
    with pytest.raises(ArenaError, match="palace-arena"):  # the CLI's one-line kind of error
        run(cfg)


def test_a_local_runs_header_counts_its_concurrency(tmp_path):
    """Only a cluster's header counts Dask workers: a local run on referee worker processes (whose
    executor has workers of its own) says its `concurrency`. The run is stopped once the header is
    written, its worker processes started: its games are not what is read."""
    import io

    from arena.tournament.live import PlainReporter

    class Stop(Exception):
        pass

    class HeaderOnly(PlainReporter):
        def started(self, *args, **kw) -> None:
            super().started(*args, **kw)
            raise Stop()

    out = io.StringIO()
    with pytest.raises(Stop):
        run(config("hdr", tmp_path / "h.sqlite", deals=1, concurrency=3, processes=2), HeaderOnly(stream=out))
    assert out.getvalue().splitlines()[0] == "tournament hdr: 6 games, 2 seats, rules classic, 3 at a time"


def test_cluster_is_a_runtime_knob_not_part_of_the_fingerprint(tmp_path):
    a = config("x", tmp_path / "s", cluster="")
    b = config("x", tmp_path / "s", cluster="tcp://10.0.0.1:8786")
    assert a.fingerprint() == b.fingerprint()


# --------------------------------------------------------------------------- bot bundles


def test_bundle_round_trip_verifies_and_leaves_the_build_to_the_launcher(tmp_path):
    bot = tmp_path / "src"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "b"\nversion = "2"\ncommand = ["sh", "run.sh"]\n'
                                  'build = ["sh", "-c", "echo x >> built.txt"]\n')
    (bot / "run.sh").write_text("exit 0\n")
    (bot / "run.sh").chmod(0o755)
    (bot / "__pycache__").mkdir()
    (bot / "__pycache__" / "junk.pyc").write_bytes(b"not shipped")
    spec = load_bot(bot)
    digest = spec.files_hash()
    blob = pack_bot(spec)
    assert blob == pack_bot(spec), "the same files must give the same blob"
    cache = tmp_path / "cache"
    cache.mkdir()
    got = prepare_bot(digest, "bot.toml", blob, cache)
    assert got.label == "b@2"
    home = cache / hashlib.sha256(blob).hexdigest() / "bot"  # an entry is named by its blob
    assert got.root == home.resolve() and os.access(home / "run.sh", os.X_OK)
    assert not (home / "__pycache__").exists()
    _PREPARED.clear()  # as if another worker process on the same machine
    assert prepare_bot(digest, "bot.toml", blob, cache) == got
    assert not (home / "built.txt").exists(), "the build is the worker's Launcher's, contained"

    # A blob whose files do not hash to the key it came under is refused and leaves nothing.
    (bot / "run.sh").write_text("exit 1\n")
    other = pack_bot(load_bot(bot))
    bad = "0" * 64
    with pytest.raises(BundleError, match="hashing to"):
        prepare_bot(bad, "bot.toml", other, cache)
    assert not (cache / hashlib.sha256(other).hexdigest()).exists()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


def _twins(tmp_path: Path, last: bytes, before: bytes = b"") -> tuple[Path, Path]:
    """Two bot folders with one unframed (v1) files hash, which joins paths and bytes without
    lengths: cutting bot.toml before its ``last`` line and naming a file by that line plus
    ``main.py`` (holding main.py's bytes) gives the same v1 hash; their framed hashes differ.
    Cutting ``version`` gives another label too."""
    victim, twin = tmp_path / "victim", tmp_path / "twin"
    victim.mkdir(), twin.mkdir()
    toml = b'name = "victim"\ncommand = ["python3", "main.py"]\n' + before + last
    (victim / "bot.toml").write_bytes(toml)
    (victim / "main.py").write_bytes(b"print('ready')\n")
    (twin / "bot.toml").write_bytes(toml[:-len(last)])
    (twin / (last + b"main.py").decode()).write_bytes(b"print('ready')\n")
    assert read_folder(twin).digest_v1 == read_folder(victim).digest_v1, "no longer twins: rewrite them"
    assert load_bot(twin).files_hash() != load_bot(victim).files_hash()
    return victim, twin


def test_a_bundle_with_the_same_files_hash_never_stands_for_another_bots_files(tmp_path):
    """A worker that prepared the twin first (the cache outlives runs) still unpacks the victim's
    own files for the victim's bundle."""
    victim, twin = _twins(tmp_path, b'description = "plays"\n', before=b'version = "1"\n')
    v, t = load_bot(victim), load_bot(twin)
    assert t.label == v.label
    cache = tmp_path / "cache"
    cache.mkdir()
    prepare_bot(t.files_hash(), "bot.toml", pack_bot(t), cache)
    _PREPARED.clear()  # a later run's worker process on the same machine
    got = prepare_bot(v.files_hash(), "bot.toml", pack_bot(v), cache)
    assert sorted(p.name for p in got.root.iterdir()) == ["bot.toml", "main.py"]
    assert (got.root / "main.py").read_bytes() == b"print('ready')\n"


def test_two_bots_of_one_run_with_the_same_files_hash_each_reach_the_worker(tmp_path, monkeypatch):
    """The twins as two labels of one run (victim@2 and victim@0): each arrives as its own files;
    so do two bots of one folder (the same files, run from its two manifests)."""
    victim, twin = _twins(tmp_path, b'version = "2"\n')
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "bot.toml").write_text('name = "first"\ncommand = ["python3", "main.py"]\n')
    (pair / "alt.toml").write_text('name = "second"\ncommand = ["python3", "main.py"]\n')
    (pair / "main.py").write_text("print('ready')\n")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    setup = BotSetup.of([str(victim), str(twin), str(pair), str(pair / "alt.toml")], rules=TournamentConfig().ruleset())
    referee = pickle.loads(pickle.dumps(C._referee(setup)))  # as the run's plugin reaches a worker
    for label, files in (("victim@2", ["bot.toml", "main.py"]), ("victim@0", ["bot.toml", 'version = "2"\nmain.py']),
                         ("first@0", ["alt.toml", "bot.toml", "main.py"]),
                         ("second@0", ["alt.toml", "bot.toml", "main.py"])):
        got = referee.bot(label)
        assert got.label == label and sorted(p.name for p in got.root.iterdir()) == files


@pytest.mark.parametrize("place", ["/usr/bin/env/cache", "/etc/hostname/cache", "/usr/../etc/passwd/cache"])
def test_a_bot_cache_where_every_contained_bot_can_read_it_is_refused(monkeypatch, place):
    """Every contained bot sees /usr and /etc (its system view): a cache there would show each bot
    every other bot unpacked on that worker. Refused before anything is made (the places lie
    below files, so a missing guard fails here without making a folder in the system)."""
    monkeypatch.setenv(CACHE_ENV, place)
    with pytest.raises(BundleError, match="every contained bot"):
        cache_root()


def test_a_failed_build_is_a_start_failed_forfeit_as_locally(tmp_path, monkeypatch):
    """The worker side without Dask: a run's referee plays a game between a bundled bot and one
    whose build fails, which forfeits with the build's output, as a local run records."""
    bot = tmp_path / "broken"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "broken"\ncommand = ["./nothing"]\n'
                                  'build = ["sh", "-c", "echo no compiler; exit 3"]\n')
    cache = Path(tempfile.mkdtemp(prefix="arena-cache-"))  # bots' private uids must reach it
    cache.chmod(0o755)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    cfg = TournamentConfig()
    specs = [load_bot("lowest"), load_bot(bot)]
    setup = BotSetup.of({"lowest": specs[0], str(bot): specs[1]}, rules=cfg.ruleset(), clock=cfg.clock(),
                        containment=Containment.NAMESPACES)
    referee = pickle.loads(pickle.dumps(C._referee(setup)))  # as the run's plugin reaches a worker
    try:
        played = referee.play(GameTask("unit-000000", 5, tuple(s.label for s in specs), 200).wire())
        rec = PlayedGame.from_bytes(played, cfg.ruleset().options()).full_record().as_json()
        warm = referee.executor
        referee.reap(3600)  # used a moment ago: the bots stay warm for the next game
        assert referee.executor is warm and any(p.conn is not None for p in warm.pool.info)
        referee.reap(0)  # idle: its bots are shut down
        assert referee.executor is None and all(p.conn is None for p in warm.pool.info)
    finally:
        referee.close()
    assert referee.executor is None
    assert [(f["seat"], f["reason"]) for f in rec["faults"]] == [(1, "start_failed")]
    assert "build exited 3" in rec["faults"][0]["message"] and "no compiler" in rec["faults"][0]["message"]
    assert rec["result"]["order"][0] == [0]
    assert rec["rules"] == cfg.ruleset().options()
    assert list(cache.glob("*/bot/bot.toml")) and not list(cache.glob("*/bot/nothing"))
    shutil.rmtree(cache)


def test_addresses(tmp_path):
    for good in ("tcp://10.0.0.5:8786", "tls://h:1", "local", "local:3"):
        C.check_address(good)
    for bad in ("", "10.0.0.5:8786", "local:0", "local:x", 8786):
        with pytest.raises(C.ClusterError):
            C.check_address(bad)


@pytest.mark.parametrize("target", ["/etc/passwd", "../../etc/passwd", "sub/../../y", "sub/../../x", "."])
def test_a_bundled_link_out_of_the_bot_is_refused_on_arrival(tmp_path, target):
    """A bundle is not trusted on the worker either: a link that leads out of the bot's folder is
    refused while unpacking, before any file is written through it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("evil")
        info.type = tarfile.SYMTYPE
        info.linkname = target
        tar.addfile(info)
        data = b"pwned"
        info = tarfile.TarInfo("evil/file")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "cache").mkdir()
    with pytest.raises(BundleError, match="refused|outside"):
        prepare_bot("0" * 64, "bot.toml", buf.getvalue(), root=tmp_path / "cache")
    assert {p.suffix for p in (tmp_path / "cache").iterdir()} == {".lock"}  # nothing unpacked stays


def test_a_bundle_keeps_a_link_inside_the_bot_as_a_link(tmp_path):
    """Packing never follows a link: one inside the folder arrives as the same link, and the
    unpacked folder hashes to the key it was sent under."""
    bot = tmp_path / "b"
    shutil.copytree(REPO / "bots" / "random", bot)
    (bot / "alias.py").symlink_to("bot.py")
    spec = load_bot(bot)
    blob = pack_bot(spec)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        alias = tar.getmember("alias.py")
        assert alias.issym() and alias.linkname == "bot.py"
    (tmp_path / "cache").mkdir()
    got = prepare_bot(spec.files_hash(), "bot.toml", blob, root=tmp_path / "cache")
    assert (got.root / "alias.py").is_symlink() and os.readlink(got.root / "alias.py") == "bot.py"
    assert got.files_hash() == spec.files_hash()


def test_packing_a_link_to_the_stores_secret_is_refused_by_name(tmp_path):
    """The escape through packing: a link to the store's secret.key was shipped as the key's bytes
    and read inside the sandbox on the worker. Now the bot is refused, naming the link, and no
    bundle holds a byte of the key."""
    from arena.bots.folder import FolderError
    secret = tmp_path / "secret.key"
    secret.write_bytes(b"K" * 32)
    bot = tmp_path / "b"
    shutil.copytree(REPO / "bots" / "random", bot)
    (bot / "loot").symlink_to(secret)
    with pytest.raises(FolderError, match=r"loot: a link to .*outside the bot's folder"):
        pack_bot(load_bot(bot))


# --------------------------------------------------------------------------- on a LocalCluster


@pytest.fixture(scope="module")
def dask_cluster():
    if not HAVE_DASK:
        pytest.skip("dask/distributed not installed")
    import distributed
    since = boot_ticks()  # earlier tests' daemons (tmux, chromium) may die orphaned to us during these
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40)
    client = distributed.Client(lc, set_as_default=False)
    client.wait_for_workers(2, timeout=60)
    yield lc, client
    client.close()
    lc.close()
    # What the runner does after closing a local cluster it made (cluster._release): the bots of
    # the worker a test killed were orphaned to this process, and are reaped here, not left as
    # zombies that later tests would blame on themselves (test_bot_process checks for them).
    C.cleanup_stale()
    assert zombie_children(started_since=since) == []


@pytest.fixture(scope="module")
def local_games(tmp_path_factory):
    """The reference: the tournament played by the local runner."""
    path = tmp_path_factory.mktemp("local") / "local.sqlite"
    run(config("ref", path))
    games = stored(path, "ref")
    assert len(games) == GAMES
    return path, games


def beside(local_games, path: Path) -> Path:
    """``path``, in a directory holding the reference store's secret: the same secret deals the
    same cards, which is what lets a store be resumed anywhere (another store would deal others)."""
    secret = local_games[0].parent / "secret.key"
    fd = os.open(path.parent / "secret.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secret.read_bytes())
    return path


def trio_threads() -> list[str]:
    """The threads of this process that are inside a trio run now (run on a worker). A trio loop
    hosted on a thread sits in trio's scheduler between games, so it is seen here."""
    import sys
    import threading
    root = os.path.dirname(trio.__file__)
    names = {t.ident: t.name for t in threading.enumerate()}
    inside = []
    for ident, frame in sys._current_frames().items():
        while frame is not None and not frame.f_code.co_filename.startswith(root):
            frame = frame.f_back
        if frame is not None:
            inside.append(names.get(ident, str(ident)))
    return inside


def same(a: dict[int, dict], b: dict[int, dict]) -> None:
    assert sorted(a) == sorted(b)
    for i in a:
        assert a[i] == b[i], f"game {i} differs"


def rename(games: dict[int, dict], old: str, new: str) -> dict[int, dict]:
    return {i: {**g, "id": g["id"].replace(old, new, 1)} for i, g in games.items()}


@needs_dask
def test_cluster_stores_the_same_games_as_a_local_run(dask_cluster, local_games, tmp_path):
    lc, client = dask_cluster
    path = beside(local_games, tmp_path / "c.sqlite")
    cfg = config("ref", path, cluster=lc.scheduler_address)
    seen = []
    looping = {}

    class Rec(Reporter):
        def game_done(self, game, record):
            seen.append(game.index)
            if len(seen) == GAMES - 2:  # both workers have played, and keep their bots warm
                looping.update(client.run(trio_threads))

    played = run(cfg, Rec())
    assert len(played) == GAMES and sorted(seen) == list(range(GAMES))
    # the workers play on the blocking shell: no trio loop waits on a thread of theirs
    assert len(looping) == 2 and all(v == [] for v in looping.values()), looping
    # as locally: the returned records leave their step logs to the store (memory stays flat)
    assert all(r.steps == [] and r.result is not None for r in played)
    same(stored(path, "ref"), local_games[1])
    assert Store(path).tournament("ref")["status"] == "done"
    # Run again: everything is stored, nothing is submitted.
    assert run(cfg) == []


@needs_dask
def test_resume_submits_only_missing_games_and_duplicates_are_ignored(dask_cluster, local_games, tmp_path):
    lc, _ = dask_cluster
    ref_path, ref = local_games
    path = beside(local_games, tmp_path / "r.sqlite")
    cfg = config("ref", path, cluster=lc.scheduler_address)
    src = Store(ref_path, readonly=True)
    db = Store(path)
    db.begin_tournament("ref", cfg.fingerprint(), GAMES)
    for i in range(2):  # a run killed after two games
        db.save_game("ref", i, ref[i]["seats"], src.game_record(ref[i]["id"]))
    final = GAMES - 1
    last = src.game_record(ref[final]["id"])

    class Racer(Reporter):
        """Another runner stores the last game while ours is still playing it."""
        def game_done(self, game, record):
            if game.index != final and final not in db.done_indexes("ref"):
                assert db.save_game("ref", final, ref[final]["seats"], last)

    stats = RunStats()
    played = trio.run(lambda: run_tournament(cfg, db, Racer(), stats=stats))
    assert stats.submitted == GAMES - 2 and stats.failed == []
    assert stats.stored + stats.duplicates == GAMES - 2
    assert stats.duplicates == (0 if any(r.game_id.endswith(f"{final:06d}") for r in played) else 1)
    assert len(played) == stats.stored
    db.close()
    same(stored(path, "ref"), ref)


@needs_dask
def test_cli_runs_on_the_cluster(dask_cluster, local_games, tmp_path):
    from typer.testing import CliRunner
    from arena.cli.main import app
    lc, _ = dask_cluster
    path = beside(local_games, tmp_path / "cli.sqlite")
    toml = tmp_path / "t.toml"
    toml.write_text(f'name = "ref"\nbots = {json.dumps(BOTS)}\ndeals = 1\nseed = 7\n')
    res = CliRunner().invoke(app, ["tournament", str(toml), "--store", str(path), "--plain",
                                   "--cluster", lc.scheduler_address])
    assert res.exit_code == 0, res.output
    assert f"{GAMES}/{GAMES} games stored" in res.output
    # the header counts the workers connected (not the local `concurrency`)
    assert f"on the Dask cluster at {lc.scheduler_address} (2 worker(s) now, a game at a time each)" in res.output
    same(stored(path, "ref"), local_games[1])
    bad = CliRunner().invoke(app, ["tournament", str(toml), "--store", str(path), "--name", "other",
                                   "--plain", "--cluster", "localhost:8786"])
    assert bad.exit_code == 2 and "tcp://HOST:PORT" in bad.output


@needs_dask
def test_a_local_cluster_beside_another_warns_of_no_port_and_listens_on_loopback():
    """`--cluster local` while port 8787 (Dask's dashboard) was taken printed distributed's own
    UserWarning, file path and all, on the user's terminal. A local cluster's scheduler takes a
    free port of the loopback instead: no warning, nothing listening beyond this machine."""
    import socket
    import warnings
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:
        pass  # taken already: the case itself
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            client, lc = C._connect("local:1")
        try:
            assert [str(w.message) for w in seen if "in use" in str(w.message)] == []
            assert lc.scheduler.http_server.address == "127.0.0.1"
        finally:
            client.close()
            lc.close()
    finally:
        holder.close()


@needs_dask
def test_a_bot_linking_to_the_stores_secret_never_reaches_a_worker(dask_cluster, tmp_path):
    """The escape through packing, through ``arena tournament --cluster``: a bot folder holding a
    link to the store's secret.key is refused in one error line naming the link, before any bundle
    is made or game played (the key's bytes were shipped and read inside the worker's sandbox)."""
    from typer.testing import CliRunner
    from arena.cli.main import app
    lc, _ = dask_cluster
    base = Path(tempfile.mkdtemp(prefix="arena-cluster-leak-"))
    try:
        base.chmod(0o755)
        bot = base / "leaky"
        shutil.copytree(REPO / "bots" / "random", bot)
        (bot / "bot.toml").write_text((bot / "bot.toml").read_text().replace('name = "random"', 'name = "leaky"'))
        store = base / "data" / "s.sqlite"
        store.parent.mkdir()
        (bot / "loot").symlink_to(store.parent / "secret.key")
        toml = base / "t.toml"
        toml.write_text(f'name = "leak"\nbots = ["random", "{bot}"]\ndeals = 1\nseed = 7\n')
        res = CliRunner().invoke(app, ["tournament", str(toml), "--store", str(store), "--plain",
                                       "--cluster", lc.scheduler_address])
        assert res.exit_code == 2 and res.output.strip().splitlines()[-1].startswith("error:"), res.output
        assert "loot: a link to" in res.output and "outside the bot's folder" in res.output
        assert "Traceback" not in res.output
        assert not Store(store, readonly=True).games(tournament="leak")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_lost_scheduler_line_counts_the_worker_deaths_seen_before_it():
    """The run's last line (the executor's lost-scheduler error) counts the unexpected worker
    deaths the client was told of; a worker that closed on purpose is none. No Dask needed: the
    scheduler's events are handed in as the client's loop would."""
    from types import SimpleNamespace
    rules = SimpleNamespace(options=lambda: {})
    ex = C.DaskExecutor(SimpleNamespace(loop=None, status="closed"), SimpleNamespace(as_completed=lambda **_: None),
                        "plugin", SimpleNamespace(rules=rules), 1, address="tcp://10.0.0.5:8786")
    assert str(ex._broken("gone")) == "lost the connection to the Dask scheduler at tcp://10.0.0.5:8786"
    for worker, expected in (("tcp://10.0.0.7:1", False), ("tcp://10.0.0.7:2", True), ("tcp://10.0.0.8:1", False)):
        ex._said({"action": "remove-worker", "worker": worker, "expected": expected,
                  "processing-tasks": [f"palace-game-t-000001-{ex.run}"]})
    assert str(ex._broken("gone")) == ("lost the connection to the Dask scheduler at tcp://10.0.0.5:8786 "
                                       "after 2 Dask worker death(s) this run")


@needs_dask
def test_a_worker_killed_mid_game_loses_and_doubles_nothing(dask_cluster, local_games, tmp_path):
    lc, client = dask_cluster
    client.wait_for_workers(2, timeout=60)
    pids = client.run(os.getpid)
    path = beside(local_games, tmp_path / "k.sqlite")
    cfg = config("ref", path, cluster=lc.scheduler_address)
    killed: dict[str, list] = {}
    said: list[str] = []

    class Killer(Reporter):
        def incident(self, text):
            said.append(text)

        def game_done(self, game, record):
            if killed or game.index < 2:
                return
            for addr, keys in client.processing().items():
                if keys and addr in pids:  # a worker in the middle of a game
                    killed[addr] = list(keys)
                    os.kill(pids[addr], signal.SIGKILL)
                    return

    stats = RunStats()
    db = Store(path)
    trio.run(lambda: run_tournament(cfg, db, Killer(), stats=stats))
    db.close()
    assert killed, "no worker was busy to kill"
    lost = [int(str(k).split("-")[-2]) for keys in killed.values() for k in keys]
    assert lost, "the killed worker had no game in flight"
    games = stored(path, "ref")
    assert all(i in games for i in lost)
    assert stats.failed == [] and stats.duplicates == 0 and stats.stored == GAMES
    same(games, local_games[1])
    # said on the client's reporter as it happened, as a local referee worker's death is
    # (a loaded machine may lose another worker too: each death is said, the killed one once)
    (addr,) = killed
    assert said == stats.incidents and all(t.startswith("Dask worker ") for t in said), said
    (text,) = [t for t in said if t.startswith(f"Dask worker {addr} died or lost its connection holding ")]
    assert int(text.split(" holding ")[1].split()[0]) >= 1  # the game in flight, at least
    assert summary(said) == f"; {len(said)} Dask worker death(s), their games played again on other workers"
    # The nanny restarts the worker; the next test (or run) gets two again.
    client.wait_for_workers(2, timeout=60)
    assert set(client.run(os.getpid).values()).isdisjoint({pids[a] for a in killed})


@needs_dask
def test_no_dask_bot_process_plays_a_deal_twice(dask_cluster, tmp_path):
    """The remembering bot of tests/memory_bot.py on the cluster: its processes, warm on the
    workers between games, are never dealt a deal they saw (checked from the store)."""
    import shutil
    import tempfile

    from tests.test_executors import MEMORY_TURNS, assert_no_process_saw_a_deal_twice
    lc, _ = dask_cluster
    bot = Path(tempfile.mkdtemp(prefix="arena-memory-bot-"))
    try:
        bot.chmod(0o755)
        shutil.copy(REPO / "tests" / "memory_bot.py", bot / "bot.py")
        (bot / "bot.toml").write_text('name = "memory"\nversion = "1"\ncommand = ["python3", "bot.py"]\n')
        cfg = config("memory", tmp_path / "m.sqlite", bots=[str(bot), "lowest", "heuristic"], deals=3,
                     max_turns=MEMORY_TURNS, cluster=lc.scheduler_address)
        run(cfg)
        db = Store(cfg.store, readonly=True)
        assert len(db.games(tournament="memory", limit=100)) == 18
        assert_no_process_saw_a_deal_twice(db, "memory")
    finally:
        shutil.rmtree(bot, ignore_errors=True)



# --------------------------------------------------------------------------- a scheduler of its own


def _scheduler_address(scheduler: subprocess.Popen, file: Path) -> str:
    """The address a `dask scheduler --port 0` took, read from its ``--scheduler-file`` (a port
    found free beforehand could be taken by another process before the scheduler binds it)."""
    deadline = time.monotonic() + 120  # a bound should it hang, not a timing
    while True:
        try:
            return json.loads(file.read_text())["address"]
        except (OSError, ValueError, KeyError):  # not written yet, or written in part
            assert scheduler.poll() is None, "the scheduler exited before it listened"
            assert time.monotonic() < deadline, "the scheduler wrote no address"
            time.sleep(0.05)


def _stop(proc: subprocess.Popen) -> None:
    """End a process group this test started: politely (a worker shuts its bots down), then not."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _reap_orphans(since: int) -> None:
    """Reap what the killed groups left to this process (a subreaper), as the module's fixture
    would otherwise blame it for zombies: whatever was started since ``since`` and now waits here."""
    from arena.bots.procs import scan_procs
    me, deadline = os.getpid(), time.monotonic() + 30
    while True:
        for pid in zombie_children(started_since=since):
            os.waitpid(pid, 0)
        if time.monotonic() > deadline or not any(
                p.ppid == me and p.start >= since for p in scan_procs().values()):
            return
        time.sleep(0.1)


def _games_stored(store: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    except sqlite3.OperationalError:  # not made yet
        return 0
    try:
        return db.execute("SELECT COUNT(*) FROM games").fetchone()[0]
    except sqlite3.OperationalError:  # no tables yet, or busy for a moment: seen on the next look
        return 0
    finally:
        db.close()


def _kill_the_scheduler_midrun(toml: Path, store: Path, after: int) -> tuple[str, str, int]:
    """Run ``arena tournament --cluster`` on a `dask scheduler` and a `dask worker` of their own
    (real processes); kill the scheduler once the store holds more than ``after`` games. Returns
    the scheduler's address, what the command printed and its exit status."""
    import distributed
    since = boot_ticks()
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    file = store.parent.parent / f"scheduler-{time.monotonic_ns()}.json"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--scheduler-file", str(file), "--no-dashboard"], **quiet)
    worker = None
    try:
        address = _scheduler_address(scheduler, file)
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                   "--nworkers", "1", "--no-nanny", "--no-dashboard"], **quiet)  # one process
        with distributed.Client(address, timeout=60, set_as_default=False) as c:
            c.wait_for_workers(1, timeout=60)
        cli = subprocess.Popen([sys.executable, "-m", "arena.cli", "tournament", str(toml), "--store", str(store),
                                "--plain", "--cluster", address], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, cwd=toml.parent)
        deadline = time.monotonic() + 300  # a bound should it hang, not a timing
        while _games_stored(store) <= after:  # (it prints a line every 50th game: few, no pipe fills)
            assert cli.poll() is None, cli.communicate()[0]
            assert time.monotonic() < deadline, "no game was stored"
            time.sleep(0.05)
        scheduler.kill()
        out = cli.communicate(timeout=180)[0]
    finally:
        _stop(scheduler)
        if worker is not None:
            _stop(worker)
        C.cleanup_stale()  # bots the worker left, if its shutdown could not end them
        _reap_orphans(since)
    assert scheduler.returncode == -signal.SIGKILL, out
    return address, out, cli.returncode


@needs_dask
def test_a_lost_scheduler_is_one_error_line_that_says_what_is_kept(tmp_path):
    """`dask scheduler` killed mid-run: the command ends with one `error:` line naming the
    scheduler, how many games are stored (exactly the store's count, counting those of the run
    it resumed) and how to resume; no traceback, none of Dask's log lines, exit status 2. The run
    it resumes is one stopped after its first game here, its bots in this process: a first run on
    a scheduler of its own would pay the same two Dask processes again for the same line."""
    import re

    from tests.fakes import policy_launcher

    class Stopped(Exception):
        pass

    class StopAfterOne(Reporter):
        def game_done(self, game, record):
            raise Stopped()

    toml = tmp_path / "t.toml"  # far more games than are played before the kill
    toml.write_text(f'name = "long"\nbots = {json.dumps(BOTS)}\ndeals = 2000\nseed = 7\n')
    store = tmp_path / "data" / "s.sqlite"
    first = load_config(toml, {"store": str(store), "concurrency": 1})
    db = Store(first.store)
    with pytest.raises(Stopped):
        trio.run(lambda: run_tournament(first, db, StopAfterOne(), launcher=policy_launcher()))
    db.close()
    kept = len(stored(store, "long"))
    assert kept >= 1
    address, out, code = _kill_the_scheduler_midrun(toml, store, after=kept)
    assert code == 2, out
    assert "Traceback" not in out and "distributed" not in out, out
    *before, last = out.strip().splitlines()
    assert [x for x in before if not x.startswith(("tournament long:", "[", "resuming: "))] == [], out
    assert f"resuming: {kept} of 12000 games already stored" in before, out
    m = re.fullmatch(rf"error: lost the connection to the Dask scheduler at {re.escape(address)}; "
                     r"(\d+)/12000 games are stored: run the same command again to play the rest", last)
    assert m, last
    assert int(m[1]) >= kept + 1  # the kill came once a game of this run was stored
    assert len(stored(store, "long")) == int(m[1])  # (stored() also checks no game is stored twice)
