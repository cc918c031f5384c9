"""``arena serve``: the arena in a browser, added to the main command line by :func:`register`."""

from __future__ import annotations

import functools
import math
import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from ..safetext import SafeConsole
from ..tournament import DEFAULT_STORE

DAY_S = 86_400  # the longest wait an option of arena serve may name: 1e308 s overflowed every timer (time_t)

if TYPE_CHECKING:
    import subprocess

    import socket


def _loopback(host: str) -> bool:
    import ipaddress
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listen(host: str, port: int) -> "socket.socket":
    import socket
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def serve(
    store: Annotated[Path, typer.Option("--store", help="The game store (SQLite) to show.")] = DEFAULT_STORE,
    host: Annotated[str, typer.Option(help="Address to listen on (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8000,
    allow_play: Annotated[bool, typer.Option("--allow-play", help="Let a person play the bundled bots and the "
                                                                  "store's ladder members in the browser (needs "
                                                                  "the token printed at start).")] = False,
    allow_submit: Annotated[bool, typer.Option("--allow-submit", help="Accept bot uploads to ladders "
                                                                      "(needs the token printed at start).")] = False,
    ladders: Annotated[Optional[Path], typer.Option("--ladders", help="Folder of ladder files (default: the "
                                                                     "arena's ladders/).")] = None,
    max_upload_mb: Annotated[float, typer.Option(help="Largest upload accepted, in MB.")] = 2.0,
    writes_per_minute: Annotated[float, typer.Option(help="Form posts and uploads one person (a session or an "
                                                          "API token; anyone else: one address) may make a minute "
                                                          "(a burst of ten more).")] = 60.0,
    max_queued: Annotated[int, typer.Option(help="Unfinished submissions (waiting or running) in all; past it an "
                                                 "upload is answered 429. A class submitting at once needs about "
                                                 "--max-queued-per-person times its size.")] = 64,
    max_queued_per_person: Annotated[int, typer.Option(help="Unfinished submissions per person (or per server "
                                                            "token).")] = 2,
    uploads_at_once: Annotated[int, typer.Option(help="Uploads received and unpacked at once; one more is "
                                                      "answered 503 with Retry-After.")] = 4,
    connections_per_address: Annotated[int, typer.Option(help="Connections one client address may hold open at "
                                                              "once (a class behind one address needs about "
                                                              "two a person); one more is answered 503.")] = 64,
    min_free_mb: Annotated[float, typer.Option(help="Refuse uploads while the store's disk has less free "
                                                    "than this, in MB, beside the upload's unpacked size.")] = 256.0,
    submissions_per_day: Annotated[int, typer.Option(help="Submissions that passed arena check one person (or "
                                                          "the server token) may make in 24 hours.")] = 20,
    local_webhooks: Annotated[bool, typer.Option("--local-webhooks", help="Let people's webhooks post to this "
                                                                         "machine or a private network.")] = False,
    webhook_timeout: Annotated[float, typer.Option(help="Seconds a webhook receiver has to answer one "
                                                        "delivery.")] = 10.0,
    poll: Annotated[float, typer.Option(help="Seconds between looks at the store for new games.")] = 0.5,
    queue_look: Annotated[float, typer.Option(help="Seconds between an idle submission queue's looks at the store "
                                                   "for what this server was not told of: a job another server "
                                                   "left when it died, or ended or queued.")] = 5.0,
    settle: Annotated[float, typer.Option(help="While the store keeps changing, pages are rebuilt at most this "
                                               "often (seconds; 0: on every change).")] = 1.0,
    workers: Annotated[int, typer.Option(help="Processes serving the pages, all on the one listening socket "
                                              "(read-only servers only: play and uploads live in one process).")] = 1,
    ladder: Annotated[Optional[list[str]], typer.Option("--ladder", help="Keep this ladder playing into the store "
                                                        "while serving (repeat for more): an `arena ladder run` "
                                                        "beside the pages, which finishes its batch when the "
                                                        "server stops.")] = None,
    read_timeout: Annotated[float, typer.Option(help="Seconds a client has to send a whole request (headers and "
                                                     "body); a slower one is disconnected (read-only servers); on a writable server, the "
                                                     "seconds a request's body has to arrive after its headers (else 408), and "
                                                     "(at most 5) take over its headers; on both, at most 5 of it for an idle "
                                                     "connection.")] = 30.0,
    pages_share: Annotated[Optional[float], typer.Option(help="The serving processes' CPU weight beside a "
                                                             "ladder, as a fraction of a default group's (the ladder's "
                                                             "referee, its bots' group, any other process): 0.25 "
                                                             "takes a fifth beside one busy group, and all of it when "
                                                             "the others leave it idle. Default 0.25 with --ladder; without --ladder (an "
                                                             "`arena ladder run` started apart) only when given.")] = None,
    cluster: Annotated[Optional[str], typer.Option("--cluster", metavar="tcp://HOST:PORT",
                                                   help="Play the --ladder games on a Dask cluster.")] = None,
    bench: Annotated[Optional[list[Path]], typer.Option("--bench", help="Show this course bench (its file; repeat "
                                                        "for more) at /benches/NAME: each member sees only their "
                                                        "own games and logs. Its store must not be this one.")] = None,
    password_cost: Annotated[str, typer.Option(hidden=True, help="production, or cheapest: weak password hashes "
                                                                 "for a test server only.")] = "production",
) -> None:
    """Serve standings, ladders, tournaments, games and replays in a browser, updated live.

    Read-only unless --allow-play or --allow-submit; listens on 127.0.0.1 unless --host says otherwise.
    Another process (arena tournament, arena ladder run) can play into the same store meanwhile."""
    import logging
    import signal

    import trio
    out, err = SafeConsole(highlight=False, soft_wrap=True), SafeConsole(stderr=True, highlight=False, soft_wrap=True)
    try:
        import anyio
        import uvicorn
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve

        from ..serve.app import Options, build_app, new_token
    except ImportError as e:
        hint = escape("pip install 'palace-arena[serve]'")
        err.print(f"[red]error:[/] arena serve needs {escape(e.name or str(e))}: {hint}")
        raise typer.Exit(2)
    seconds_and_sizes = (max_upload_mb, writes_per_minute, min_free_mb, webhook_timeout, poll, queue_look, settle,
                         read_timeout, 1.0 if pages_share is None else pages_share)
    if not all(map(math.isfinite, seconds_and_sizes)):  # nan passes every comparison below; inf is no bound
        err.print("[red]error:[/] --max-upload-mb, --writes-per-minute, --min-free-mb, --webhook-timeout, --poll, "
                  "--queue-look, --settle, --read-timeout and --pages-share take finite numbers")
        raise typer.Exit(2)
    if max(webhook_timeout, poll, queue_look, settle, read_timeout) > DAY_S:  # past the clocks' range: OverflowError
        err.print(f"[red]error:[/] --webhook-timeout, --poll, --queue-look, --settle and --read-timeout are at most "
                  f"{DAY_S} seconds")
        raise typer.Exit(2)
    if not 0 <= port <= 65535 or max_upload_mb <= 0 or poll <= 0 or queue_look <= 0 or settle < 0 or min_free_mb < 0 or not 1 <= workers <= 64 \
            or writes_per_minute <= 0 or submissions_per_day < 1 or uploads_at_once < 1 \
            or max_queued < 1 or max_queued_per_person < 1 or connections_per_address < 1 \
            or webhook_timeout <= 0 or read_timeout <= 0 or (pages_share is not None and not 0 < pages_share <= 1):
        err.print("[red]error:[/] --port must be 0-65535, --max-upload-mb, --poll, --queue-look and "
                  "--writes-per-minute above 0, "
                  "--min-free-mb and --settle at least 0, --workers 1-64, --submissions-per-day, --uploads-at-once, "
                  "--connections-per-address, --max-queued and --max-queued-per-person at least 1, "
                  "--webhook-timeout and --read-timeout above 0, --pages-share above 0 and at most 1")
        raise typer.Exit(2)
    if password_cost not in ("production", "cheapest"):
        err.print("[red]error:[/] --password-cost is production or cheapest")
        raise typer.Exit(2)
    if workers > 1 and (allow_play or allow_submit):
        err.print("[red]error:[/] --workers above 1 serves read-only pages only: games in play and uploads "
                  "are kept by one process (drop --allow-play/--allow-submit, or --workers)")
        raise typer.Exit(2)
    if cluster and not ladder:
        err.print("[red]error:[/] --cluster plays --ladder games: name a ladder with --ladder")
        raise typer.Exit(2)
    ladder_refs = []
    for name in ladder or []:
        from ..ladder import LadderError
        try:
            ladder_refs.append(_ladder_ref(name, store, ladders))
        except LadderError as e:  # no such ladder, or a file that cannot be played (strangers outside gVisor)
            err.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
    benches, bench_files = {}, []
    for f in bench or []:
        from ..tournament.bench import load_bench
        from ..tournament.config import ConfigError
        try:
            b = load_bench(f)
        except ConfigError as e:
            err.print(f"[red]error:[/] --bench {escape(str(f))}: {escape(str(e))}")
            raise typer.Exit(2)
        if Path(b.store).resolve() == store.resolve():
            err.print(f"[red]error:[/] --bench {escape(str(f))}: its store is the server's; a bench keeps its games "
                      "in a store of its own, so that no public page shows them (set `store` in the bench file)")
            raise typer.Exit(2)
        if benches.setdefault(b.name, str(f.resolve())) != str(f.resolve()):
            err.print(f"[red]error:[/] two benches are named {escape(b.name)!r}")
            raise typer.Exit(2)
        bench_files.append(b)
    from ..serve.data import open_read
    if (db := open_read(store)) is not None:  # a store from an earlier arena is upgraded now, or refused
        db.db.close()
    try:
        sock = _listen(host, port)
    except OSError as e:
        err.print(f"[red]error:[/] cannot listen on {escape(host)}:{port}: {escape(e.strerror or str(e))}")
        raise typer.Exit(2)
    loopback = _loopback(host)
    options = Options(store=store, ladders_dir=ladders, allow_play=allow_play, allow_submit=allow_submit,
                      loopback_only=loopback, max_upload_bytes=int(max_upload_mb * 2**20), poll_s=poll, settle_s=settle,
                      min_free_bytes=int(min_free_mb * 2**20), writes_per_s=writes_per_minute / 60,
                      max_submissions_per_day=submissions_per_day, local_webhooks=local_webhooks,
                      webhook_timeout_s=webhook_timeout, uploads_at_once=uploads_at_once, max_queued=max_queued,
                      max_queued_per_submitter=max_queued_per_person, benches=benches,
                      read_timeout_s=read_timeout, queue_look_s=queue_look,
                      password_cost=password_cost)
    if options.writable:
        options.token = new_token()
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{shown}:{bound[1]}/"
    mode = ", ".join(x for x, on in (("play", allow_play), ("submit", allow_submit)) if on) or "read-only"
    out.print(f"arena serve: {url}  (store {escape(str(store))}; {mode})")
    if options.token:
        out.print(f"token: {options.token}  (open {url}?token={options.token} once to play or submit from that browser)")
    if not loopback:
        out.print(f"[yellow]warning:[/] listening on {escape(host)}: anyone who can reach this machine can read "
                  "the store" + (" and, with the token, play or submit" if options.writable else ""))
    if workers > 1:
        out.print(f"{workers} processes serve the pages")
    from ..ladder import list_ladders
    for name, lad, error in list_ladders(ladders, store=store):  # said, not fatal: /submit says it too
        if lad is None:
            out.print(f"[yellow]ladder {escape(name)} cannot be played on this store[/] (not offered on /submit): "
                      f"{escape(error)}")
    from ..serve.bench import owned_folders
    for b in bench_files:
        for bot, owner in owned_folders(b, store).items():
            out.print(f"bench {escape(b.name)}: the account {escape(owner)} owns the bot name {escape(bot)} of one of its "
                      "folders and sees that bot's grade, games and logs: check it is the student's", highlight=False)
    out.print("Ctrl-C stops it.")
    sys.stdout.flush()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if options.writable:  # games in play and uploads run in threads driven from trio: hypercorn on trio
        import hypercorn.trio.run

        from ..serve.limits import IDLE_S, Connections, stall_proof_server
        connections = Connections(connections_per_address)
        hypercorn.trio.run.TCPServer = stall_proof_server(connections)  # the one class hypercorn makes each connection of
        config = Config()
        config.bind = [f"fd://{sock.fileno()}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn.error")
        config.graceful_timeout = 1.0
        config.keep_alive_timeout = min(IDLE_S, read_timeout)  # idle, or slow to send a request's headers

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                app = build_app(options, nursery)
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

                    async def stop() -> None:  # Ctrl-C or kill: finish the responses in flight, then leave
                        async for _ in signals:
                            return

                    await hypercorn_serve(app, config, shutdown_trigger=stop)  # type: ignore[arg-type]
                nursery.cancel_scope.cancel()

        run: Callable[[], None] = lambda: trio.run(main)
    else:  # read-only pages: uvicorn's C parser and event loop, about a tenth of the CPU a request
        async def read_only() -> None:
            async with anyio.create_task_group() as tasks:
                app = build_app(options, tasks)
                from ..serve.limits import IDLE_S, Connections, read_deadline
                protocol = read_deadline(read_timeout, Connections(connections_per_address))
                server = uvicorn.Server(uvicorn.Config(app, http=protocol, loop="none", lifespan="off",
                                                       timeout_keep_alive=min(IDLE_S, read_timeout),
                                                       proxy_headers=False,  # a client is its address: no header names another
                                                       access_log=False, log_level="warning",
                                                       timeout_graceful_shutdown=1))
                for sig in (signal.SIGINT, signal.SIGTERM):  # uvicorn raises the signal it stopped on again
                    signal.signal(sig, lambda *_: None)         # once it has stopped: let that end here
                await server.serve(sockets=[sock])  # Ctrl-C or kill: finishes the responses in flight
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                tasks.cancel_scope.cancel()

        run = lambda: _run_asyncio(read_only)
    players = [_start_ladder(ref, store, cluster) for ref in ladder_refs]
    for ref in ladder_refs:
        out.print(f"ladder {escape(ref)} plays into the store (one `arena ladder run` process)")
    share = pages_share if pages_share is not None else PAGES_SHARE if players else None
    bounded = None
    if share is not None:  # the games come first: the pages take the CPU the ladder leaves (after it started,
        from ..serve.cpushare import bound_pages, release  # so that it keeps its own group)
        bounded = bound_pages(share)
        out.print(f"pages: CPU weight {share:g} of a default group's ({escape(bounded.describe())})")
    import gc
    gc.freeze()  # the modules and code loaded by now live as long as the server: out of the cyclic collector's
    # full collections, which visit every object it tracks with the loop stopped (bench/bench_loop_stalls.py)
    try:
        if workers > 1:
            _run_workers(workers, run)
        else:
            run()
    finally:
        _stop_ladders(players, out)
        if bounded is not None:
            release(bounded)
    out.print("stopped")


def _run_asyncio(main: Callable[[], Any]) -> None:
    """``main`` on asyncio, on uvloop's loop where it is installed (not on Windows)."""
    import asyncio
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
        return
    uvloop.run(main())


PAGES_SHARE = 0.25  # beside a ladder, the pages' CPU weight against a default group's (serve/cpushare.py says why)


def _ladder_ref(name: str, store: Path, ladders: Path | None) -> str:
    """What ``arena ladder run`` is given for ``name`` (a file of --ladders first), its file loaded
    and checked here, so a ladder that does not exist or cannot be played (a
    :class:`~arena.ladder.LadderError`) is said before anything starts."""
    from ..ladder import load_ladder
    if ladders is not None and (ladders / f"{name}.toml").is_file():
        name = str((ladders / f"{name}.toml").resolve())
    load_ladder(name, store_dir=store.resolve().parent, store=store)
    return name


def _start_ladder(ref: str, store: Path, cluster: str | None) -> subprocess.Popen:
    """``arena ladder run`` in its own session (Ctrl-C at the terminal reaches the server only,
    which then asks the ladder to finish its batch); it gets SIGTERM too if the server dies."""
    import subprocess
    cmd = [sys.executable, "-P", "-c", "from arena.cli.main import app; app()", "ladder", "run", ref,
           "--store", str(store), "--plain", *(["--cluster", cluster] if cluster else [])]
    return subprocess.Popen(cmd, start_new_session=True, preexec_fn=functools.partial(_die_with_parent, os.getpid()),
                            stdin=subprocess.DEVNULL)


def _stop_ladders(players: list, out: SafeConsole) -> None:
    """SIGTERM to each ladder run (it stops after the batch being played), then wait for them;
    a second Ctrl-C stops them at once (their batches resume on the next start)."""
    import signal
    for p in players:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    if any(p.poll() is None for p in players):
        out.print("waiting for the ladder's batch to finish (Ctrl-C again: stop it now, it resumes next time)")
    for p in players:
        try:
            p.wait()
        except KeyboardInterrupt:
            for q in players:
                if q.poll() is None:
                    q.send_signal(signal.SIGINT)
            p.wait()


def _die_with_parent(parent: int) -> None:
    """Linux: this process gets SIGTERM when ``parent``, the one that forked it, dies, however it
    died, so a killed server leaves no serving process behind. A parent that died before the
    request was made (a loaded machine may run the child late) sends nothing: then leave now."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def _run_workers(n: int, run: Callable[[], None]) -> None:
    """``run`` in ``n`` forked processes sharing the listening socket (the kernel spreads the
    connections); this process only waits, and passes SIGINT/SIGTERM on so each finishes its
    responses in flight."""
    import logging
    import signal
    children = []
    me = os.getpid()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            _die_with_parent(me)
            code = 0
            try:
                run()
            except BaseException:  # a bug: say so in the log, and let the others serve on
                logging.getLogger("arena.serve").exception("a serving process failed")
                code = 1
            os._exit(code)
        children.append(pid)

    def stop(signum: int, frame: object) -> None:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        while True:
            try:
                os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
