"""``arena submit BOT --ladder NAME --server URL``: upload a bot to a club server (arena serve) from a
terminal or a CI job, then follow its check and placement as the web page does.

The API token comes from the ``ARENA_TOKEN`` environment variable or a file only its owner can
read (``--token-file``), never from the command line, where other users of the machine see it.
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import secrets
import stat
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from ..errors import ArenaError

MAX_ZIP_BYTES = 20 * 2**20


class RemoteError(ArenaError):
    """The upload could not be made, or the server refused it (its reason in the message)."""


def read_token(token_file: Path | None) -> str:
    token = os.environ.get("ARENA_TOKEN", "").strip()
    if token:
        return token
    if token_file is None:
        raise RemoteError("no API token: set ARENA_TOKEN, or pass --token-file with a file only you can read "
                          "(make a token on the server's /account page)")
    try:
        mode = token_file.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise RemoteError(f"{token_file} can be read by other users: chmod 600 {token_file}")
        return token_file.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise RemoteError(f"cannot read the token file {token_file}: {e.strerror or e}") from None


def zip_folder(folder: Path) -> bytes:
    """The bot's folder as a zip, read by the arena's one folder reader (so its caps and refusals
    hold here too); a link is refused by name, since a server takes regular files only."""
    from ..bots.folder import FolderError, Kind, pack_folder, read_folder

    try:
        listed = read_folder(folder)
    except FolderError as e:
        raise RemoteError(str(e)) from None
    for entry in listed.entries:
        if entry.kind is Kind.LINK:
            raise RemoteError(f"{entry.path} is a link: a server takes regular files only")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        def add(entry, src) -> None:
            if entry.kind is Kind.FILE and src is not None:
                with z.open(entry.path, "w") as dest:
                    while chunk := src.read(1 << 20):
                        dest.write(chunk)
        try:
            pack_folder(listed, add)
        except FolderError as e:
            raise RemoteError(str(e)) from None
    data = out.getvalue()
    if len(data) > MAX_ZIP_BYTES:
        raise RemoteError(f"the bot's folder zips to {len(data) / 2**20:.1f} MB: too large to upload")
    return data


def _multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = "arena-" + secrets.token_hex(12)
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="bot"; filename="{filename}"\r\n'
                 "Content-Type: application/zip\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _reason(body: bytes) -> str:
    """The server's explanation on a refusal page, as plain text."""
    text = body.decode("utf-8", "replace")
    for pattern in (r'id="submit-error">(.*?)</p>', r'id="message">(.*?)</p>', r'id="error"[^>]*>(.*?)</p>'):
        if m := re.search(pattern, text, re.S):
            return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()
    return text[:200]


def upload(server: str, token: str, ladder: str, folder: Path) -> str:
    """POST the bot; the address of its submission's JSON."""
    body, ctype = _multipart({"ladder": ladder}, f"{folder.name}.zip", zip_folder(folder))
    req = urllib.request.Request(server.rstrip("/") + "/submit", data=body, method="POST",
                                 headers={"Content-Type": ctype, "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:  # the 303 is followed to the submission's page
            return r.geturl().split("?")[0] + "?format=json"
    except urllib.error.HTTPError as e:
        raise RemoteError(f"the server refused the upload ({e.code}): {_reason(e.read())}") from None
    except (urllib.error.URLError, OSError) as e:
        raise RemoteError(f"cannot reach {server}: {getattr(e, 'reason', e)}") from None


# How long ``follow`` keeps asking a server that does not answer: a server restarted mid-queue
# (an upgrade, a crash) keeps the submission in its store and runs it again, so the terminal or CI
# job waits for it rather than failing a submission that will still be placed.
PATIENCE_S = 600.0


def _fetch_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def follow(url: str, say: Any, poll_s: float = 1.0, patience_s: float = PATIENCE_S, fetch: Any = _fetch_json,
           clock: Any = time.monotonic, sleep: Any = time.sleep) -> dict[str, Any]:
    """Poll the submission until it ends, passing each new log line (and the queue place) to ``say``.

    A server that is unreachable or answers 502-504 is asked again, with a growing pause, for up
    to ``patience_s`` since it last answered; any other refusal, or a reply that is not the
    submission's JSON, ends the wait at once."""
    shown, ahead, last_ok, pause, down = 0, None, clock(), poll_s, False
    while True:
        try:
            job = fetch(url)
        except urllib.error.HTTPError as e:
            if e.code not in (502, 503, 504):
                raise RemoteError(f"lost the submission at {url}: the server answered {e.code}") from None
            trouble: Any = f"it answered {e.code}"
        except (urllib.error.URLError, OSError) as e:
            trouble = getattr(e, "reason", e)
        except ValueError:
            raise RemoteError(f"lost the submission at {url}: the server's answer is not a submission") from None
        else:
            if not isinstance(job, dict) or not {"status", "lines", "done"} <= job.keys():
                raise RemoteError(f"lost the submission at {url}: the server's answer is not a submission")
            if down:
                say("the server answers again")
            last_ok, pause, down = clock(), poll_s, False
            if job["status"] == "waiting" and job.get("ahead") != ahead:
                ahead = job.get("ahead")
                say(f"waiting: {ahead} submission(s) ahead in the queue" if ahead else "waiting: next in the queue")
            lines = job["lines"]
            if len(lines) < shown:  # run again after a restart: its lines start over
                shown = 0
            for line in lines[shown:]:
                say(line)
            shown = len(lines)
            if job["done"]:
                return job
            sleep(poll_s)
            continue
        if clock() - last_ok > patience_s:
            raise RemoteError(f"lost the submission at {url}: the server has not answered for "
                              f"{patience_s / 60:.0f} min ({trouble}); it keeps the submission, so look at that page later")
        if not down:
            say(f"the server is not answering ({trouble}); asking again for up to {patience_s / 60:.0f} min "
                "(a restarted server runs the submission again)")
            down = True
        sleep(pause)
        pause = min(pause * 2, 15.0)
