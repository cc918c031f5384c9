"""#35, an outside round on what the last stop changed: state kept between runs and processes.

What got through on 16c5d2a, each now closed:
- any local user failed every game of every other user's ``--cluster local`` run (root's too) with
  one empty folder: the workers unpacked bots into the machine's bot cache, whose default name
  (``palace-arena-cache-<uid>`` in the temporary directory) is the first user's to make, and a
  folder of hers there was refused on every game ("2 of 2 game(s) could not be played", exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WORKERS_CACHE = r"""
import json
from arena.bots import bundles
from arena.tournament import cluster

def main():
    client, local = cluster._connect("local:1")
    try:
        def cache():
            try:
                return str(bundles.cache_root())
            except bundles.BundleError as e:
                return f"refused: {e}"
        print(json.dumps(list(client.run(cache).values())), flush=True)
    finally:
        client.close()
        local.close()

if __name__ == "__main__":
    main()
"""


def test_a_local_users_folder_named_as_the_bot_cache_fails_no_local_cluster(tmp_path: Path) -> None:
    """A local cluster's workers unpack each bot they seat into the bot cache. Its default is a
    folder named by the referee's uid in the temporary directory, which any local user may make
    first: made by another user, it was refused on every game, so a local cluster played none (the
    same as Dask's ``dask-scratch-space`` before the run's private scratch). The workers now keep
    their cache in that scratch, and the other user's folder is left as it was."""
    pytest.importorskip("distributed", reason="clusters need the dask extra")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    squat = tmp / f"palace-arena-cache-{os.geteuid()}"  # another local user's, made before the run
    if os.geteuid() == 0:
        squat.mkdir(mode=0o700)
        os.chown(squat, 65534, 65534)
    else:  # (no other user to be here: a file of that name stands in for her folder)
        squat.write_text("mine\n")
    env = {k: v for k, v in os.environ.items() if k != "PALACE_ARENA_CACHE"}
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    done = subprocess.run([sys.executable, "-c", WORKERS_CACHE], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    caches = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(caches) == 1 and not caches[0].startswith("refused"), caches
    assert Path(caches[0]).parent.name.startswith("palace-arena-cluster-"), caches  # the run's own scratch
    assert squat.exists() and not list(squat.iterdir() if squat.is_dir() else [])  # hers, untouched
    assert not list(tmp.glob("palace-arena-cluster-*")), list(tmp.iterdir())  # the scratch went with the run
