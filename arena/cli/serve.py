"""``arena serve``: the arena in a browser, added to the main command line by :func:`register`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from ..safetext import SafeConsole
from ..tournament import DEFAULT_STORE

if TYPE_CHECKING:
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
    poll: Annotated[float, typer.Option(help="Seconds between looks at the store for new games.")] = 0.5,
) -> None:
    """Serve standings, ladders, tournaments, games and replays in a browser, updated live.

    Read-only unless --allow-play or --allow-submit; listens on 127.0.0.1 unless --host says otherwise.
    Another process (arena tournament, arena ladder run) can play into the same store meanwhile."""
    import logging
    import signal

    import trio
    out, err = SafeConsole(highlight=False, soft_wrap=True), SafeConsole(stderr=True, highlight=False, soft_wrap=True)
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve

        from ..serve.app import Options, build_app, new_token
    except ImportError as e:
        hint = escape("pip install 'palace-arena[serve]'")
        err.print(f"[red]error:[/] arena serve needs {escape(e.name or str(e))}: {hint}")
        raise typer.Exit(2)
    if not 0 <= port <= 65535 or max_upload_mb <= 0 or poll <= 0:
        err.print("[red]error:[/] --port must be 0-65535, --max-upload-mb and --poll above 0")
        raise typer.Exit(2)
    try:
        sock = _listen(host, port)
    except OSError as e:
        err.print(f"[red]error:[/] cannot listen on {escape(host)}:{port}: {escape(e.strerror or str(e))}")
        raise typer.Exit(2)
    loopback = _loopback(host)
    options = Options(store=store, ladders_dir=ladders, allow_play=allow_play, allow_submit=allow_submit,
                      loopback_only=loopback, max_upload_bytes=int(max_upload_mb * 2**20), poll_s=poll)
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
    out.print("Ctrl-C stops it.")
    sys.stdout.flush()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 1.0

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            app = build_app(options, nursery)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

                async def stop() -> None:  # Ctrl-C or kill: finish the responses in flight, then leave
                    async for _ in signals:
                        return

                await hypercorn_serve(app, config, shutdown_trigger=stop)  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()

    trio.run(main)
    out.print("stopped")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
