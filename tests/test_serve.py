"""``arena serve`` without a browser: the upload checks, the charts, the store readers, and the
server's HTTP rules (read-only default, token, host check, body cap, headers), against a real
``arena serve`` process on a free port.

The browser tests (tests/test_serve_browser.py) reuse :class:`ServerProc` and :func:`build_store`.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import sqlite3
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("hypercorn", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.serve import data
from arena.serve.charts import Band, heat_map, rating_chart
from arena.serve.upload import UploadError, unpack
from arena.tournament.store import Store

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = 'evil<script>window.__pwned=1</script>"\'&@1.0'
LADDER = "test-ladder"
LADDER_BOTS = ["alpha@1.0", "beta@2.0", "gamma@1.0", HOSTILE]
MS_PER_DECISION = {"alpha@1.0": 4.0, "beta@2.0": 12.5, "gamma@1.0": 1.5, HOSTILE: 40.0}
SNAPSHOTS = 6


# --------------------------------------------------------------------------- a store built by the tests

def fake_record(gid: str, seats: list[str], order: list[list[int]], forfeits: dict[str, str] | None = None,
                decisions: int = 20) -> dict[str, Any]:
    """A stored game's record with chosen results and timings (no steps: not replayable)."""
    forfeits = forfeits or {}
    return {"game_id": gid, "rules": {"name": "classic"}, "seed": 7, "players": seats, "max_turns": 2000,
            "steps": [], "clock": {}, "setup_events": [],
            "result": {"order": order, "reason": "forfeit" if forfeits else "first_out", "draw": False,
                       "complete": True, "forfeits": forfeits},
            "faults": [{"seat": int(s), "bot": seats[int(s)], "reason": r, "message": f"{r} in game {gid}",
                        "turn": 5} for s, r in forfeits.items()],
            "think_ms": [MS_PER_DECISION.get(b, 1.0) * decisions for b in seats], "decisions": [decisions] * len(seats),
            "stderr": [["Traceback (most recent call last):", f"ValueError: <boom> {gid}"] if str(i) in forfeits else []
                       for i in range(len(seats))],
            "wall_ms": 3.0}


def ladder_games() -> list[tuple[list[str], list[list[int]], dict[str, str]]]:
    """Every pair of ladder bots, 8 games each in both seat orders; the earlier bot in the list wins
    6 of 8; the hostile bot forfeits one game against each opponent (a timeout)."""
    games = []
    for i, a in enumerate(LADDER_BOTS):
        for b in LADDER_BOTS[i + 1:]:
            for k in range(8):
                seats = [a, b] if k % 2 == 0 else [b, a]
                winner = a if k < 6 else b
                w = seats.index(winner)
                forfeits = {str(seats.index(HOSTILE)): "timeout"} if HOSTILE in seats and k == 7 else {}
                if forfeits:
                    w = 1 - int(next(iter(forfeits)))
                games.append((seats, [[w], [1 - w]], forfeits))
    return games


def build_store(path: Path) -> None:
    """A ladder of four bots (synthetic games with known numbers) and rating snapshots."""
    db = Store(path)
    tid = f"ladder:{LADDER}:seed"
    db.begin_tournament(tid, {"format": "round-robin", "rules": "classic", "seats": 2}, len(ladder_games()))
    for idx, (seats, order, forfeits) in enumerate(ladder_games()):
        db.save_game(tid, idx, seats, fake_record(f"{LADDER}-{idx:04d}", seats, order, forfeits))
    db.finish_tournament(tid)
    db.db.execute("CREATE TABLE IF NOT EXISTS rating_snapshots (ladder TEXT NOT NULL, taken_at REAL NOT NULL, "
                  "games INTEGER NOT NULL, bot TEXT NOT NULL, elo REAL NOT NULL, lo REAL NOT NULL, hi REAL NOT NULL)")
    now = time.time() - 3600
    for k in range(SNAPSHOTS):
        for j, bot in enumerate(LADDER_BOTS):
            elo = 1500 + (1.5 - j) * 40 * (k + 1) / SNAPSHOTS
            width = 400 / (k + 2)
            db.db.execute("INSERT INTO rating_snapshots VALUES (?,?,?,?,?,?,?)",
                          (LADDER, now + 60 * k, 8 * (k + 1), bot, elo, elo - width, elo + width))
    db.close()


def expected_ladder() -> dict[str, dict[str, Any]]:
    """What the standings must say, counted here from the games' definition."""
    out = {b: {"games": 0, "wins": 0, "place_sum": 0, "faults": 0} for b in LADDER_BOTS}
    for seats, order, forfeits in ladder_games():
        for place, group in enumerate(order, 1):
            for s in group:
                line = out[seats[s]]
                line["games"] += 1
                line["place_sum"] += place
                line["wins"] += place == 1
                line["faults"] += str(s) in forfeits
    return out


# --------------------------------------------------------------------------- a real server

def arena_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from arena.cli.main import app; app()", *args]


class ServerProc:
    """``arena serve`` on a free port, as a user starts it; its address and token read from its output."""

    def __init__(self, store: Path, *args: str, password_cost: str = "cheapest"):
        """``password_cost``: a test server's sign-ups and logins hash at argon2's cheapest cost (0.2 s
        of CPU each at production's); tests/test_serve_accounts.py holds what production's does."""
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # stderr goes to a file and stdout is drained after the banner: a server whose log fills
        # an unread pipe blocks on its next write and stops answering
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(arena_cmd("serve", "--store", str(store), "--port", "0", "--poll", "0.2",
                                               "--password-cost", password_cost, *args),
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
                                     cwd=next(p for p in store.parents if p.is_dir()))  # a fresh server has no store dir
        self.url, self.token, self.banner = "", "", []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"arena serve exited: {self.stderr()}")
            self.banner.append(line)
            if m := re.match(r"arena serve: (http://\S+/)", line):
                self.url = m.group(1).rstrip("/")
            if m := re.match(r"token: (\S+)", line):
                self.token = m.group(1)
            if line.startswith("Ctrl-C"):
                break
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self._wait_ready()

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self.get("/static/site.css")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("GET", path, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("serve")
    store = base / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store)
    yield server
    server.stop()


# --------------------------------------------------------------------------- HTTP rules

def test_read_only_by_default(served: ServerProc) -> None:
    assert served.token == "" and "read-only" in "".join(served.banner)
    for path in ("/play", "/submit"):
        status, _, body = served.get(path)
        assert status == 403 and b"--allow-" in body
    status, _, body = served.request("POST", "/play", b"rules=classic&opponent=random",
                                     {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403
    status, _, _ = served.request("POST", "/submit", b"x", {"Content-Type": "application/octet-stream"})
    assert status == 403


def test_pages_escape_user_text_and_set_headers(served: ServerProc) -> None:
    status, headers, body = served.get(f"/ladders/{LADDER}")
    assert status == 200
    text = body.decode()
    assert "<script>window.__pwned" not in text
    assert "evil&lt;script&gt;window.__pwned=1&lt;/script&gt;&#34;&#39;&amp;" in text
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def test_static_files_answer_with_their_content_type(served: ServerProc) -> None:
    """Every file of arena/serve/static/ is served whole, typed, as the browser needs it (starlette's
    static files run on anyio's worker threads: a mismatched anyio made each of these a 500)."""
    kinds = {".css": "text/css", ".js": "javascript"}
    files = sorted((ROOT / "arena" / "serve" / "static").iterdir())
    assert {f.suffix for f in files} >= {".css", ".js"}
    for f in files:
        status, headers, body = served.get(f"/static/{f.name}")
        assert status == 200, (f.name, status, served.stderr()[-2000:])
        assert kinds[f.suffix] in headers["content-type"], (f.name, headers["content-type"])
        assert body == f.read_bytes()


def test_unknown_pages_are_plain_404s(served: ServerProc) -> None:
    for path in ("/games/no-such-game", "/ladders/nope", "/tournaments/%3Cb%3E", "/bots/x@1", "/nothing"):
        status, _, body = served.get(path)
        assert status == 404, path
        assert b"Traceback" not in body and b"<b>" not in body


def test_other_host_headers_are_refused(served: ServerProc) -> None:
    """A page of another site that resolves its name to 127.0.0.1 (DNS rebinding) gets nothing."""
    status, _, _ = served.get("/", headers={"Host": "attacker.example:80"})
    assert status == 400


def test_events_stream_starts(served: ServerProc) -> None:
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/events")
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("content-type").startswith("text/event-stream")
    assert r.readline().startswith(b"retry:")
    conn.close()


def test_the_web_reads_only_an_up_to_date_store(tmp_path: Path) -> None:
    """Pages probe for no table: a store an earlier arena wrote is upgraded when the server opens
    it, and one it cannot upgrade is refused with a clear error rather than half read."""
    from arena.store import LATEST, schema_version
    from arena.tournament.store import StoreError
    fixture = Path(__file__).resolve().parent / "fixtures" / "store_v0.sqlite"
    path = tmp_path / "old.sqlite"
    shutil.copy(fixture, path)
    db = data.open_read(path)
    assert db is not None and schema_version(db.db) == LATEST
    assert data.ladder_names(db) and data.rating_series(db) and data.version(db)[0] > 0
    with pytest.raises(sqlite3.OperationalError):
        db.db.execute("CREATE TABLE x (a)")  # read-only connection
    db.db.close()
    assert data.open_read(tmp_path / "missing.sqlite") is None

    newer = tmp_path / "newer.sqlite"
    shutil.copy(fixture, newer)
    with sqlite3.connect(newer) as raw:
        raw.execute(f"PRAGMA user_version = {LATEST + 1}")
    with pytest.raises(StoreError, match="cannot be served.*newer than this arena"):
        data.open_read(newer)


# --------------------------------------------------------------------------- charts

def test_rating_chart_draws_one_series_per_bot_and_escapes() -> None:
    series = {b: [Band(10 * k, 0.0, 1500 + k, 1400, 1600) for k in range(3)] for b in ("a@1", "<x>@1")}
    svg = str(rating_chart(series, order=["a@1", "<x>@1"]))
    assert svg.count('<g class="series"') == 2 and "&lt;x&gt;@1" in svg and "<x>" not in svg
    assert "No rating history" in str(rating_chart({}, order=[]))


def test_heat_map_has_a_cell_per_ordered_pair() -> None:
    order = ["a", "b", "c"]
    svg = str(heat_map(order, {"a": {"b": (0.75, 8)}, "b": {"a": (0.25, 8)}}))
    assert svg.count('<rect class="cell') == 6 and svg.count('<rect class="cell empty"') == 4
    assert 'data-games="8"' in svg


# --------------------------------------------------------------------------- uploads

def zip_bytes(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            zf.writestr(info, target)
    return buf.getvalue()


def tar_bytes(files: dict[str, bytes], links: dict[str, str] | None = None, hard: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return buf.getvalue()


MANIFEST = b'name = "upl"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n'
LIMITS = {"max_files": 50, "max_bytes": 1 << 20}


def test_unpack_accepts_a_bot_folder(tmp_path: Path) -> None:
    root = unpack(zip_bytes({"mybot/bot.toml": MANIFEST, "mybot/bot.py": b"print(1)\n"}), tmp_path / "a", **LIMITS)
    assert root == tmp_path / "a" / "mybot" and (root / "bot.py").read_bytes() == b"print(1)\n"
    root = unpack(tar_bytes({"bot.toml": MANIFEST, "lib/x.py": b""}), tmp_path / "b", **LIMITS)
    assert root == tmp_path / "b" and (root / "lib" / "x.py").is_file()


@pytest.mark.parametrize("archive, why", [
    (zip_bytes({"bot.toml": MANIFEST, "../escape.py": b"x"}), "leaves its folder"),
    (zip_bytes({"bot.toml": MANIFEST, "a/../../escape.py": b"x"}), "leaves its folder"),
    (zip_bytes({"/etc/evil": b"x", "bot.toml": MANIFEST}), "absolute"),
    (zip_bytes({"bot.toml": MANIFEST, "a\\..\\b": b"x"}), "unsafe file name"),
    (zip_bytes({"bot.toml": MANIFEST}, links={"secret": "/etc/passwd"}), "symbolic link"),
    (tar_bytes({"bot.toml": MANIFEST}, links={"secret": "/etc/passwd"}), "link"),
    (tar_bytes({"bot.toml": MANIFEST}, links={"hard": "bot.toml"}, hard=True), "link"),
    (tar_bytes({"bot.toml": MANIFEST, "../../x": b"x"}), "leaves its folder"),
    (zip_bytes({f"f{i}.txt": b"" for i in range(60)}), "more than 50 files"),
    (zip_bytes({"bot.toml": MANIFEST, "big.bin": b"\0" * (2 << 20)}), "MB once unpacked"),
    (b"just some text, not an archive", "not a zip or tar.gz"),
    (zip_bytes({"readme.txt": b"hi"}), "no bot.toml"),
])
def test_unpack_refuses(tmp_path: Path, archive: bytes, why: str) -> None:
    with pytest.raises(UploadError, match=re.escape(why)):
        unpack(archive, tmp_path / "dest", **LIMITS)
    assert not (tmp_path / "escape.py").exists() and not (tmp_path.parent / "x").exists()


# --------------------------------------------------------------------------- write paths over HTTP

@pytest.fixture(scope="module")
def writable(tmp_path_factory):
    base = tmp_path_factory.mktemp("serve-w")
    store = base / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-submit", "--allow-play", "--max-upload-mb", "0.25")
    yield server
    server.stop()


def multipart(fields: dict[str, str], file: tuple[str, bytes]) -> tuple[bytes, str]:
    boundary = "----arenatest7MA4YWxkTrZu0gW"
    out = io.BytesIO()
    for k, v in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
    out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="bot"; filename="{file[0]}"\r\n'
              f"Content-Type: application/zip\r\n\r\n".encode() + file[1] + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


CHATTY = b"""import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("type") == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": "chatty", "version": "1.0"}), flush=True)
    else:
        print("reading my notes in", os.path.abspath(__file__), file=sys.stderr, flush=True)
        print("thinking about it", flush=True)
"""


def _finished(server: ServerProc, location: str) -> bytes:
    """The submission page once its check has ended (placed, failed or check failed)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        _, _, page = server.get(location)
        m = re.search(rb'data-status="([^"]+)"', page)
        if m and m.group(1) in (b"placed", b"failed", b"check failed"):
            return page
        time.sleep(0.1)  # a tenth of a second: a whole one cost each wait half a second on average
    raise AssertionError("the submission did not finish: " + server.stderr()[-3000:])


def test_a_faulty_uploads_report_reads_right_on_the_web(tmp_path_factory) -> None:
    """The check report of an upload that writes chatter on stdout: one total that agrees with the
    per-kind counts, the line the bot wrote, no command-line hint, one "checking" line, and no
    path of the server (its store, its uploads folder, the arena's Python) anywhere on the page."""
    base = tmp_path_factory.mktemp("serve-faulty")
    (base / "ladders").mkdir()
    (base / "ladders" / "mini.toml").write_text('rules = "powers"\nseats = 2\ndeals = 1\nbots = ["random", "lowest"]\n'
                                                'check_games = 1\n')
    store = base / "data" / "arena.sqlite"
    store.parent.mkdir()
    server = ServerProc(store, "--allow-submit", "--ladders", str(base / "ladders"))
    try:
        files = {"chatty/bot.toml": b'name = "chatty"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n',
                 "chatty/bot.py": CHATTY}
        body, ctype = multipart({"ladder": "mini", "token": server.token}, ("chatty.zip", zip_bytes(files)))
        status, headers, _ = server.request("POST", "/submit", body, {"Content-Type": ctype})
        assert status == 303
        page = _finished(server, headers["location"]).decode()
        assert 'data-status="check failed"' in page, page[-3000:]
        counts = [int(n) for n in re.findall(r"bad_json ×(\d+)", page)]
        total = re.search(r'id="check-total">(\d+) fault\(s\) in (\d+) of (\d+) games<', page)
        assert counts and total and int(total.group(1)) == sum(counts) == 2, page[-3000:]
        assert 'the bot wrote: <code class="wrote">thinking about it</code>' in page
        assert "--all" not in page and "stopped after a repeated bad_json fault" in page
        assert page.count("checking chatty@1.0") == 1
        assert "reading my notes in [your bot]/bot.py" in page, page[page.index("check-report"):][:3000]
        for path in (base, store.parent / "uploads", Path(sys.executable).parent):
            assert str(path) not in page, path
    finally:
        server.stop()


def test_writes_need_the_token(writable: ServerProc) -> None:
    assert writable.token
    body, ctype = multipart({"ladder": "classic-2p", "token": "wrong"}, ("b.zip", zip_bytes({"bot.toml": MANIFEST})))
    status, _, text = writable.request("POST", "/submit", body, {"Content-Type": ctype})
    assert status == 403 and b"token" in text
    status, _, _ = writable.request("POST", "/play", f"token={writable.token}&opponent=random".encode(),
                                    {"Content-Type": "application/x-www-form-urlencoded",
                                     "Origin": "http://attacker.example"})
    assert status == 403


def test_oversized_body_is_refused_while_read(writable: ServerProc) -> None:
    """No Content-Length (chunked): the cap is counted on the bytes as they arrive."""
    body, ctype = multipart({"ladder": "classic-2p", "token": writable.token},
                            ("big.zip", os.urandom(400 * 1024)))
    host, port = writable.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", "/submit", body=iter([body[i:i + 8192] for i in range(0, len(body), 8192)]),
                 headers={"Content-Type": ctype}, encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 413 and b"larger than 0.25 MB" in r.read()
    conn.close()
    status, _, text = writable.request("POST", "/submit", body, {"Content-Type": ctype})
    assert status == 413 and b"larger than 0.25 MB" in text
    assert not list((Path(writable.proc.args[writable.proc.args.index("--store") + 1]).parent).glob("uploads/*"))


def test_games_search_by_ladder(served: ServerProc) -> None:
    status, _, body = served.get(f"/games?ladder={LADDER}&fault=timeout")
    assert status == 200 and b"3 game(s) match" in body
    status, _, body = served.get(f"/games?ladder={LADDER}")
    assert b"48 game(s) match" in body


def test_progress_of_a_running_tournament(tmp_path: Path) -> None:
    """10 games stored one second apart, 20 planned: 1 game/s, 10 s to go."""
    path = tmp_path / "s.sqlite"
    db = Store(path)
    db.begin_tournament("run", {"format": "round-robin"}, 20)
    now = time.time()
    for i in range(10):
        db.save_game("run", i, ["a@1", "b@1"], fake_record(f"run-{i}", ["a@1", "b@1"], [[0], [1]]))
        db.db.execute("UPDATE games SET finished=? WHERE id=?", (now - 9 + i, f"run-{i}"))
    db.close()
    t = data.tournament(data.ReadStore(path), "run")
    assert t is not None and t.played == 10 and t.status == "running" and not t.stalled
    assert t.rate == pytest.approx(1.0) and t.eta_s == pytest.approx(10.0)


def test_a_bot_filter_matches_every_version_of_that_name_and_no_other(tmp_path: Path) -> None:
    """``--bot NAME`` and the games page's bot menu: NAME or NAME@version, with ``_`` and ``%``
    in a name taken literally (SQL LIKE would read them as wildcards), and no name that only
    begins with NAME (``my_botA``, ``my_bot2``: a range of versions must end at ``NAME@``'s last)."""
    path = tmp_path / "s.sqlite"
    db = Store(path)
    db.begin_tournament("t", {"format": "round-robin", "rules": "classic", "seats": 2}, 5)
    for idx, seats in enumerate([["my_bot@1.0", "lowest@1.0"], ["myXbot@1.0", "lowest@1.0"],
                                 ["my_bot", "random@1.0"], ["my_botA@1.0", "lowest@1.0"], ["my_bot2", "random@1.0"]]):
        db.save_game("t", idx, seats, fake_record(f"t-{idx}", seats, [[0], [1]]))
    assert {g["id"] for g in db.games(bot="my_bot")} == {"t-0", "t-2"}
    assert db.count_games(bot="my_bot") == 2
    assert db.count_games(bot="my%") == 0
    db.close()
    read = data.ReadStore(path)
    games, total = data.search_games(read, bot="my_bot")
    assert {g["id"] for g in games} == {"t-0", "t-2"} and total == 2
    assert data.search_games(read, bot="my%")[1] == 0


def test_slowest_decisions_are_read_once_per_game_and_never_mixed_between_stores(tmp_path):
    """A stored game's slowest answers are kept per process; two stores with the same game id keep
    their own, and a new game joins the list on the next build."""
    def record(gid: str, ms: float) -> dict[str, Any]:
        rec = fake_record(gid, ["a@1", "b@1"], [[0], [1]])
        rec["steps"] = [{"seat": 0, "turn": t, "request": {}, "ms": ms + t, "phase": "play", "act": {"kind": "play"}}
                        for t in range(3)]
        return rec

    db = Store(tmp_path / "one.sqlite")
    db.begin_tournament("t", {"format": "round-robin", "rules": "classic", "seats": 2}, 2)
    db.save_game("t", 0, ["a@1", "b@1"], record("g-0", 10.0))
    db.close()
    shutil.copy(tmp_path / "one.sqlite", tmp_path / "two.sqlite")  # the same game, finished at the same time
    with sqlite3.connect(tmp_path / "two.sqlite") as other:  # ... with another log
        other.execute("UPDATE game_logs SET log=? WHERE game='g-0'", (zlib.compress(json.dumps(record("g-0", 500.0)).encode()),))
    stores = [data.open_read(tmp_path / f"{name}.sqlite") for name in ("one", "two")]
    one, two = stores
    assert [d["ms"] for d in data.slowest_decisions(one, "a@1")] == [12.0, 11.0, 10.0]
    assert [d["ms"] for d in data.slowest_decisions(two, "a@1")] == [502.0, 501.0, 500.0]
    assert [d["ms"] for d in data.slowest_decisions(one, "a@1", keep=2)] == [12.0, 11.0]
    writer = Store(tmp_path / "one.sqlite")
    writer.save_game("t", 1, ["a@1", "b@1"], record("g-1", 100.0))
    writer.close()
    assert [d["ms"] for d in data.slowest_decisions(one, "a@1")] == [102.0, 101.0, 100.0, 12.0, 11.0, 10.0]
    assert data.slowest_decisions(one, "b@1") == []
    for db in stores:
        db.db.close()


def test_slowest_decisions_parse_only_the_logs_that_can_hold_them_and_match_parsing_all(tmp_path, monkeypatch):
    """A bot page's slowest decisions are those of parsing every one of its latest logs (ties: the
    newer game, then the earlier step; a step without a time counts 0; forced steps and the other
    seat's are not its own), while only the logs whose largest time can still enter the list are
    parsed: with one slow game among forty, a list of two parses a few."""
    import random
    rng = random.Random(5)

    def record(gid: str, times: list) -> dict[str, Any]:
        rec = fake_record(gid, ["a@1", "b@1"], [[0], [1]])
        rec["steps"] = [{"seat": t % 2, "turn": t, "request": {}, "phase": "play", "act": {"kind": "play"},
                         **({} if ms is None else {"ms": ms}), **({"forced": True} if t % 7 == 6 else {})}
                        for t, ms in enumerate(times)]
        return rec

    db = Store(tmp_path / "s.sqlite")
    db.begin_tournament("t", {"format": "round-robin", "rules": "classic", "seats": 2}, 40)
    for idx in range(40):
        times = [rng.choice([None, 0, 3, 3.5, 7, rng.randint(0, 50), round(rng.uniform(0, 50), 3)]) for _ in range(12)]
        if idx == 17:
            times = [900.0, 901, 902.5, 3, 3, 3, 5000.0] + times  # a@1 is seat 0; step 6 is forced (its bound only)
        db.save_game("t", idx, ["a@1", "b@1"] if idx % 3 else ["b@1", "a@1"], record(f"g-{idx:02d}", times))
    db.close()
    read = data.open_read(tmp_path / "s.sqlite")

    def parsing_all(label: str, keep: int) -> list:
        rows = data.reads.seats_of(read.db, label, 200)
        found = [d for gid, seat, _, finished in rows for d in data._decisions(read, gid, seat, finished, keep)]
        return sorted(found, key=lambda d: -d["ms"])[:keep]

    parsed: list[str] = []
    log = data._log
    monkeypatch.setattr(data, "_log", lambda db, gid: parsed.append(gid) or log(db, gid))
    data._SLOWEST.clear()
    assert [d["ms"] for d in data.slowest_decisions(read, "a@1", keep=2)] == [902.5, 900.0]
    assert parsed == ["g-17"]  # the one log that holds them: no other log's largest time reaches 900
    for label in ("a@1", "b@1"):
        for keep in (1, 2, 5, 10, 60):
            assert data.slowest_decisions(read, label, keep=keep) == parsing_all(label, keep)
    read.db.close()


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """One server for the two tests of its client limits: one write a minute after a burst of ten
    (the forwarded-for test writes; the endless-headers test only reads) and a read deadline far
    past either test (the endless headers are cut by their size, not by time)."""
    store = tmp_path_factory.mktemp("serve-limited") / "s.sqlite"
    build_store(store)
    server = ServerProc(store, "--writes-per-minute", "1", "--read-timeout", "300")
    yield server
    server.stop()


def test_a_forwarded_for_header_does_not_make_a_new_client(limited: ServerProc) -> None:
    """Limits are per connection address: a client naming other addresses in X-Forwarded-For or
    Forwarded (the server trusts no proxy) is still one client, and its writes run out."""
    statuses = []
    for i in range(14):  # a burst of 10, then 429 Too Many Requests
        status, headers, _ = limited.request("POST", "/login", body=b"", headers={
            "X-Forwarded-For": f"10.0.{i}.1", "Forwarded": f"for=10.1.{i}.1", "X-Real-IP": f"10.2.{i}.1"})
        statuses.append(status)
    assert 429 in statuses, statuses


def test_endless_headers_are_cut_off_and_others_are_served(limited: ServerProc) -> None:
    """A request whose headers never end is disconnected after 64 kB (not kept in memory until
    the read deadline), and the server answers others."""
    import socket
    server = limited
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=60)
    line = b"X-Pad: " + b"a" * 8000 + b"\r\n"
    sent, cut = 0, False
    try:
        s.sendall(b"GET / HTTP/1.1\r\nHost: " + f"{host}:{port}".encode() + b"\r\n")
        while sent < 64 * 2**20:
            s.sendall(line)
            sent += len(line)
    except OSError:
        cut = True
    if not cut:
        try:
            cut = s.recv(1024) == b""
        except (ConnectionResetError, TimeoutError):
            cut = isinstance(sys.exc_info()[1], ConnectionResetError)
    s.close()
    assert cut and sent < 64 * 2**20
    status, _, _ = server.get(f"/ladders/{LADDER}")
    assert status == 200


def test_uploads_beyond_the_bound_are_answered_503_with_retry_after(writable: ServerProc) -> None:
    """Four uploads still arriving hold the four slots: a fifth is told at once to come back (503,
    Retry-After), and once they are gone an upload is taken again (here refused for its token).
    Last in this file: the server may notice the other held uploads end a little later, and a
    test after this one on the same server would meet a 503."""
    import socket
    body, ctype = multipart({"ladder": "classic-2p", "token": "wrong"}, ("b.zip", zip_bytes({"bot.toml": MANIFEST})))
    host, port = writable.url.removeprefix("http://").rsplit(":", 1)
    held = []

    def post() -> tuple[int, dict[str, str]]:
        while True:
            status, headers, _ = writable.request("POST", "/submit", body, {"Content-Type": ctype})
            if status != 429:  # the write limit of the shared test client: wait as told
                return status, headers
            time.sleep(float(headers.get("retry-after", "1")))

    try:
        for i in range(4):  # each sends its headers and a first part of a 200 kB body, then waits; one
            # sender holds one slot, so each comes from its own loopback address
            s = socket.create_connection((host, int(port)), timeout=60, source_address=(f"127.0.0.{2 + i}", 0))
            s.sendall(f"POST /submit HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {ctype}\r\n"
                      f"Content-Length: 200000\r\n\r\n".encode() + body[:100])
            held.append(s)
        deadline = time.monotonic() + 120
        while (got := post())[0] != 503:  # until all four are being received
            assert got[0] == 403, got
            assert time.monotonic() < deadline, "four held uploads never filled the slots"
        assert got[1]["retry-after"] == "5"
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 120
    while (got := post())[0] == 503:  # the slots free as the held uploads end
        assert time.monotonic() < deadline, "the slots were not given back"
        time.sleep(0.1)
    assert got[0] == 403


@pytest.mark.parametrize("flag, value, said", [("--settle", "-1", "--settle at least 0"),
                                               ("--max-queued", "0", "--max-queued and --max-queued-per-person at least 1"),
                                               ("--max-queued-per-person", "0", "--max-queued-per-person at least 1"),
                                               ("--connections-per-address", "0",
                                                "--connections-per-address, --max-queued and"),
                                               # nan passed every comparison: the queue's runner died at its
                                               # first look ("deadline must not be NaN", exit 70)
                                               ("--queue-look", "nan", "take finite numbers"),
                                               ("--webhook-timeout", "inf", "take finite numbers"),
                                               # every delivery raised OverflowError (time_t) and none was made
                                               ("--webhook-timeout", "1e308", "at most 86400 seconds")])
def test_a_bound_out_of_range_is_refused_in_one_line(tmp_path: Path, flag: str, value: str, said: str) -> None:
    from typer.testing import CliRunner

    from arena.cli.main import app
    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.sqlite"), "--port", "0", flag, value])
    assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output


def test_the_queue_bounds_reach_the_server(tmp_path: Path, monkeypatch) -> None:
    """``--max-queued`` and ``--max-queued-per-person`` are the bounds the queue checks (a class
    of 20 filled the fixed 20 in all)."""
    from typer.testing import CliRunner

    import arena.serve.app
    from arena.cli.main import app
    from arena.serve.submit import limits_of
    seen = []

    def build_app(options, *a, **kw):
        seen.append(options)
        raise KeyboardInterrupt  # stop before serving
    monkeypatch.setattr(arena.serve.app, "build_app", build_app)
    CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.sqlite"), "--port", "0", "--allow-submit",
                             "--max-queued", "90", "--max-queued-per-person", "3"])
    assert seen and (limits_of(seen[0]).total, limits_of(seen[0]).per_submitter) == (90, 3)
