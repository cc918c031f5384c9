"""An upload unpacked and its folder read in a process of its own, so the serving loop never waits on it.

Unpacking inflates, checks and writes every entry (:func:`.upload.unpack`, with its limits), and
the bot's folder is then read once and hashed by the reader every path uses
(:meth:`~arena.bots.manifest.BotSpec.files_hash`, its rules and caps). Done in a thread of the
server, that Python work held the GIL, and the serving loop woke up 120-320 ms late while uploads
arrived (bench/bench_loop_stalls.py). Here it runs in ``python -m arena.serve.unpacker DEST
MAX_FILES MAX_BYTES`` with the archive on its stdin; it answers one line of JSON on its stdout:
the bot's root, name and label; or why the upload is refused (the uploader's fault, said as
:func:`.upload.unpack` and the manifest's reader say it); or the system's error (a full disk). A
worker that dies (killed, out of memory), answers nothing readable or overruns ``UNPACK_S`` is
the arena's failure, not the uploader's: :class:`UnpackerLost`. The caller removes ``DEST``
whatever happened, as it did when the thread raised.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ArenaError
from .upload import UploadError

log = logging.getLogger("arena.serve")

UNPACK_S = 60.0  # an upload's unpacking and reading: well under a second; beyond this the worker is stuck
# -P: nothing is imported from the working folder; the arena is found by PYTHONPATH (:func:`_env`)
WORKER = [sys.executable, "-P", "-m", "arena.serve.unpacker"]


class UnpackerLost(ArenaError):
    """The unpacking process ended without an answer: the arena failed, not the upload."""


@dataclass(frozen=True)
class Unpacked:
    root: Path
    name: str
    label: str
    human: bool


async def unpack_apart(data: bytes, dest: Path, *, max_files: int, max_bytes: int) -> Unpacked:
    """``data`` unpacked under ``dest`` (which must not exist) and read, in a worker process.
    Raises :class:`UploadError` for what the uploader must change, :class:`OSError` for the
    system's refusal, :class:`UnpackerLost` when the worker gave no answer."""
    import trio
    with trio.move_on_after(UNPACK_S) as waited:  # cancelled, run_process kills the worker and reaps it
        done = await trio.run_process([*WORKER, str(dest), str(max_files), str(max_bytes)], stdin=data,
                                      capture_stdout=True, capture_stderr=True, check=False, env=_env(),
                                      cwd=str(dest.parent))
    if waited.cancelled_caught:
        raise UnpackerLost(f"unpacking took longer than {UNPACK_S:g} seconds")
    answer = _answer(done.stdout)
    if done.returncode != 0 or answer is None:
        log.warning("the upload's unpacker ended with status %s: %s", done.returncode,
                    done.stderr.decode(errors="replace")[-2000:])
        if done.returncode < 0:
            raise UnpackerLost(f"the unpacking process was stopped (signal {-done.returncode})")
        raise UnpackerLost(f"the unpacking process failed (exit status {done.returncode})")
    if "refused" in answer:
        raise UploadError(str(answer["refused"]))
    if "errno" in answer:
        raise OSError(int(answer["errno"]), str(answer["strerror"]))
    root = Path(answer["root"])
    if root != dest and dest not in root.parents:  # the worker's own answer, checked all the same
        raise UnpackerLost("the unpacking process named a folder outside the upload's")
    return Unpacked(root, str(answer["name"]), str(answer["label"]), bool(answer["human"]))


def _answer(stdout: bytes) -> dict | None:
    try:
        answer = json.loads(stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return answer if isinstance(answer, dict) and answer.keys() & {"root", "refused", "errno"} else None


def _env() -> dict[str, str]:
    """This process's environment, with this arena's folder first on the path: the worker runs
    the same code as the server (a checkout beside an installed arena included)."""
    here = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))


def work(dest: Path, max_files: int, max_bytes: int, data: bytes) -> dict:
    """The worker's answer for one upload (see the module's docstring)."""
    from ..bots.manifest import ManifestError, load_bot
    from .upload import unpack
    try:
        root = unpack(data, dest, max_files=max_files, max_bytes=max_bytes)
        spec = load_bot(root)
        spec.files_hash()  # the folder read once, by the reader every path uses (its rules and caps)
    except (UploadError, ManifestError) as e:
        return {"refused": str(e)}
    except OSError as e:
        return {"errno": e.errno or 0, "strerror": e.strerror or str(e)}
    return {"root": str(root), "name": spec.name, "label": spec.label, "human": spec.human}


def main(argv: list[str]) -> int:
    dest, max_files, max_bytes = Path(argv[0]), int(argv[1]), int(argv[2])
    answer = work(dest, max_files, max_bytes, sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
