"""What a member waits for on an idle ``arena serve``: from an upload's request to its check
starting, and from the submission's end to their webhook's post.

    python bench/bench_wakeup.py                           # this checkout, 3 rounds of 3 uploads
    python bench/bench_wakeup.py --compare /tmp/prev       # and another checkout, interleaved
    python bench/bench_wakeup.py --rounds 2 --uploads 4

Each round starts, for each checkout in turn, a fresh server (``--allow-submit --local-webhooks``,
a one-deal ladder) on a fresh store, signs a member up, sets their webhook to a receiver on
127.0.0.1, and uploads the Python starter under a new name, one upload after the last one's
webhook arrived and a pause (the queue and the deliverer idle, as a member finds them). The
times are read from the store (the job's ``started`` and ``ended``) and from the receiver's
clock, one machine's wall clock. Another checkout runs on its own ``.venv`` when it has one.
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from arena.store.people import Role, create_invitation  # noqa: E402
from arena.tournament.store import Store  # noqa: E402
from tests.test_serve import multipart  # noqa: E402
from tests.test_serve_accounts import Browser  # noqa: E402
from tests.test_serve_queue import MINI, starter_zip  # noqa: E402


class Receiver:
    """A webhook receiver on 127.0.0.1: each delivery's arrival time and body."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


class Server:
    """``arena serve`` of one checkout on a free port."""

    def __init__(self, checkout: Path, store: Path, ladders: Path):
        python = checkout / ".venv" / "bin" / "python"
        env = dict(os.environ, PYTHONPATH=str(checkout))
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [str(python if python.exists() else sys.executable), "-c", "from arena.cli.main import app; app()",
             "serve", "--store", str(store), "--port", "0", "--allow-submit", "--local-webhooks",
             "--ladders", str(ladders), "--writes-per-minute", "60000", "--submissions-per-day", "1000"],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env, cwd=store.parent)
        self.url = ""
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if m := re.match(r"arena serve: (http://\S+/)", line):
                self.url = m.group(1).rstrip("/")
            if line.startswith("Ctrl-C"):
                break
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]
        if not self.url:
            self.log.seek(0)
            raise RuntimeError(f"arena serve did not start: {self.log.read()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def job_times(store: Path, job: str) -> tuple[float, float] | None:
    db = sqlite3.connect(store, timeout=30)
    try:
        row = db.execute("SELECT started, ended, state FROM jobs WHERE id=?", (job,)).fetchone()
    finally:
        db.close()
    return (row[0], row[1]) if row and row[2] == "done" else None


def one_server(checkout: Path, uploads: int, pause: float) -> list[tuple[float, float]]:
    """(upload to check start, job end to webhook post) in seconds, for each upload."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-wakeup-"))
    (tmp / "ladders").mkdir()
    (tmp / "ladders" / "mini.toml").write_text(MINI)
    store = tmp / "data" / "arena.sqlite"
    store.parent.mkdir()
    Store(store).close()
    db = sqlite3.connect(store, isolation_level=None)
    code = create_invitation(db, Role.MEMBER, uses=1, hours=1, now=time.time(), by=None, origin="bench")
    db.close()
    receiver = Receiver()
    server = Server(checkout, store, tmp / "ladders")
    out = []
    try:
        member = Browser(server)  # type: ignore[arg-type]
        status, _, _ = member.post("/signup", {"csrf": member.csrf(f"/signup?code={code}"), "code": code,
                                               "name": "ann", "password": "correct horse battery staple"})
        assert status == 303, status
        status, _, _ = member.post("/notifications/webhook", {"csrf": member.csrf("/notifications"),
                                                              "url": receiver.url})
        assert status == 201, status
        for k in range(uploads):
            time.sleep(pause)  # the queue and the deliverer idle, as a member finds them
            name = f"bench{k}"
            body, ctype = multipart({"ladder": "mini", "csrf": member.csrf("/submit")},
                                    (f"{name}.zip", starter_zip(name)))
            asked = time.time()
            status, headers, page = member.request("POST", "/submit", body, {"Content-Type": ctype})
            assert status == 303, page[-500:]
            job = headers["location"].rsplit("/", 1)[1]
            deadline = time.monotonic() + 300
            while (times := job_times(store, job)) is None or len(receiver.got) <= k:
                if time.monotonic() > deadline:
                    raise RuntimeError("the submission or its webhook did not come within 300 s")
                time.sleep(0.02)
            started, ended = times
            out.append((started - asked, receiver.got[k][0] - ended))
    finally:
        server.stop()
        receiver.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", type=Path, help="another checkout (say the previous main), interleaved")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--uploads", type=int, default=3, help="uploads per server")
    ap.add_argument("--pause", type=float, default=3.0, help="seconds idle before each upload")
    args = ap.parse_args()
    checkouts = [("this", ROOT)] + ([("compare", args.compare.resolve())] if args.compare else [])
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in checkouts}
    for r in range(args.rounds):
        for name, checkout in (checkouts if r % 2 == 0 else checkouts[::-1]):
            seen[name] += one_server(checkout, args.uploads, args.pause)
    print(f"load {os.getloadavg()[0]:.1f}; {args.rounds} rounds x {args.uploads} uploads each")
    print(f"{'checkout':10} {'upload->check start s (median, max)':>38} {'job end->webhook s (median, max)':>36}")
    for name, checkout in checkouts:
        start = [a for a, _ in seen[name]]
        post = [b for _, b in seen[name]]
        print(f"{name:10} {statistics.median(start):24.3f} {max(start):12.3f} "
              f"{statistics.median(post):22.3f} {max(post):12.3f}   {checkout}")


if __name__ == "__main__":
    main()
