"""A bot folder is a stranger's: every path that reads one (the hash, ``arena check``, ``arena
tournament``, the copies bots run and build from, ladder snapshots, cluster bundles, uploads) goes
through one reader (arena/bots/folder.py), written here as attacks:

* a link never leads out of the folder, nor to a folder (``a -> .`` loops), nor through another
  link: refused, naming the file; a link inside stays a link;
* a FIFO, socket or device is refused, named, and never opened (nothing blocks on it);
* a sparse file counts by its length: a 3 GiB one is refused before a byte of it is read;
* caps on entries, bytes and depth; a file name that is not UTF-8 is refused;
* a bot.toml nested 5,000 deep is a clear error, never an arena bug (exit 70), and an upload of
  one leaves no folder behind;
* a bot is read once per run, and every copy is checked against that reading: files changed in
  between are refused (the bot's fault), never run unverified.

docs/SANDBOX.md ("What a bot folder may hold") states the same rules.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import socket
import stat
import zipfile
from pathlib import Path

from arena.bots.containment import Containment
from arena.bots.launch import containment_for
import pytest
from typer.testing import CliRunner

from arena.bots.errors import BotCommandError
from arena.bots.folder import Caps, FolderError, Kind, copy_folder, read_folder
from arena.bots.manifest import ManifestError, load_bot
from arena.cli.main import app

REPO = Path(__file__).resolve().parent.parent
ROOT = os.geteuid() == 0


def bot(tmp_path: Path, name: str = "mine", build: str = "") -> Path:
    d = tmp_path / name
    shutil.copytree(REPO / "bots" / "random", d)
    toml = (d / "bot.toml").read_text().replace('name = "random"', f'name = "{name}"')
    if build:
        toml += f"build = {build}\n"
    (d / "bot.toml").write_text(toml)
    return d


def hostile(kind: str, d: Path) -> str:
    """Plant ``kind`` in the folder ``d``; the name the refusal must give."""
    if kind == "absolute link":
        (d / "loot").symlink_to("/etc/passwd")
        return "loot"
    if kind == "link up and out":
        (d / "sub").mkdir()
        (d / "sub" / "loot").symlink_to("../../secret.key")
        return "sub/loot"
    if kind == "link to the folder":
        (d / "a").symlink_to(".")
        return "a"
    if kind == "two links to the folder":
        (d / "a").symlink_to(".")
        (d / "b").symlink_to("a")
        return "a"
    if kind == "links in a circle":
        (d / "a").symlink_to("b")
        (d / "b").symlink_to("a")
        return "a"
    if kind == "link to a subfolder":
        (d / "sub").mkdir()
        (d / "x").symlink_to("sub")
        return "x"
    if kind == "link through a link":
        (d / "up").symlink_to("..")  # itself refused, but the other must not pass through it
        (d / "z").symlink_to("up/secret.key")
        return "up"
    if kind == "FIFO":
        os.mkfifo(d / "pipe")
        return "pipe"
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(d / "sock"))
        s.close()
        return "sock"
    if kind == "device":
        os.mknod(d / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return "null"
    if kind == "hard link":
        os.link(d.parent / "secret.key", d / "key")  # refused by the kernel where protected_hardlinks
        return "key"                                  # would stop a stranger; the reader refuses it too
    if kind == "sparse 3 GiB file":
        with open(d / "huge", "wb") as fh:
            fh.truncate(3 << 30)
        return "huge"
    raise AssertionError(kind)


KINDS = ["absolute link", "link up and out", "link to the folder", "two links to the folder", "links in a circle",
         "link to a subfolder", "link through a link", "FIFO", "socket",
         pytest.param("device", marks=pytest.mark.skipif(not ROOT, reason="mknod needs root")),
         "hard link", "sparse 3 GiB file"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_folder_is_refused_naming_the_file(tmp_path, kind, monkeypatch):
    (tmp_path / "secret.key").write_bytes(b"K" * 32)
    d = bot(tmp_path)
    name = hostile(kind, d)
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(FolderError) as e:
        read_folder(d)
    assert f"{d / name}:" in str(e.value)
    assert sum(reads) < 1 << 20  # nothing big was read: the sparse file by its length, no FIFO waited on


def test_links_inside_the_folder_stay_links(tmp_path):
    d = bot(tmp_path)
    (d / "lib").mkdir()
    (d / "lib" / "util.py").write_text("X = 1\n")
    (d / "util.py").symlink_to("lib/util.py")
    (d / "lib" / "again.py").symlink_to("../util.py")  # a link to a link to a file
    (d / "later").symlink_to("target/release/bot")  # a build's output: nothing yet
    folder = read_folder(d)
    kinds = {e.path: e.kind for e in folder.entries}
    assert kinds["util.py"] is kinds["lib/again.py"] is kinds["later"] is Kind.LINK
    copy = tmp_path / "copy"
    copy_folder(folder, copy)
    assert os.readlink(copy / "util.py") == "lib/util.py" and os.readlink(copy / "later") == "target/release/bot"
    assert read_folder(copy).digest == folder.digest


def test_the_files_hash_is_framed_and_the_old_one_still_verifies(tmp_path):
    """Every new hash is ``v3:`` over one frame per entry (kind, path length, path, size, sha256 of
    its bytes; an executable file and a folder are kinds of their own); the hashes older stores
    hold, ``v2:`` (files only, one kind) and unframed (each path, NUL, bytes, in path order), are
    still computed the same way, so those stored hashes keep verifying. Build outputs and .git
    are in none."""
    d = tmp_path / "b"
    (d / "a").mkdir(parents=True)
    (d / "a" / "x.py").write_bytes(b"one")
    (d / "a.txt").write_bytes(b"two")
    (d / "bot.toml").write_bytes(b"three")
    (d / "x.pyc").write_bytes(b"skipped")
    (d / ".git").mkdir()
    (d / ".git" / "HEAD").write_bytes(b"skipped")

    def frame(path: bytes, data: bytes, kind: bytes = b"F") -> bytes:
        return kind + len(path).to_bytes(8, "big") + path + len(data).to_bytes(8, "big") + hashlib.sha256(data).digest()
    (d / "a" / "x.py").chmod(0o755)
    folder = read_folder(d)
    assert folder.digest_v1 == hashlib.sha256(b"a/x.py\0one" + b"a.txt\0two" + b"bot.toml\0three").hexdigest()
    v2 = hashlib.sha256(frame(b"a/x.py", b"one") + frame(b"a.txt", b"two") + frame(b"bot.toml", b"three"))
    assert folder.digest_v2 == "v2:" + v2.hexdigest()
    v3 = hashlib.sha256(frame(b"a", b"", b"D") + frame(b"a/x.py", b"one", b"X") + frame(b"a.txt", b"two")
                        + frame(b"bot.toml", b"three"))
    assert folder.digest == "v3:" + v3.hexdigest()


def test_caps_on_entries_bytes_and_depth(tmp_path):
    d = tmp_path / "b"
    deep = d.joinpath(*["x"] * 6)
    deep.mkdir(parents=True)
    (deep / "f").write_bytes(b"12345")
    with pytest.raises(FolderError, match="nested deeper than 4"):
        read_folder(d, Caps(depth=4))
    with pytest.raises(FolderError, match="more than 3 entries"):
        read_folder(d, Caps(files=3))
    with pytest.raises(FolderError, match=r"/f: the bot's files exceed 0 MiB"):
        read_folder(d, Caps(bytes=4))
    assert read_folder(d, Caps(depth=7, files=7, bytes=8192)).digest  # 5 bytes long, one 4 KiB block


def test_a_file_name_that_is_not_utf8_is_refused(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    (Path(os.fsencode(d) .decode()) / os.fsdecode(b"bad\xff")).write_bytes(b"x")
    with pytest.raises(FolderError, match="not UTF-8"):
        read_folder(d)


def test_a_copy_is_checked_against_what_the_run_read(tmp_path):
    """Read once per run: a copy made later (the readable copy a contained bot runs from, its
    build's copy) must hash as the bot did when the run read it; a changed folder is the bot's
    fault (it forfeits), not a copy run unverified."""
    from arena.bots.launch import bot_copy
    d = bot(tmp_path)
    spec = load_bot(d)
    digest = spec.files_hash()
    (d / "bot.py").write_text((d / "bot.py").read_text() + "\n# changed\n")
    assert spec.files_hash() == digest  # the run's reading, not a second one
    with pytest.raises(BotCommandError, match="changed since the run read them"):
        bot_copy(spec, "palace-arena-test-")
    fresh = load_bot(d)
    assert read_folder(bot_copy(fresh, "palace-arena-test-")).digest == fresh.files_hash() != digest


# --------------------------------------------------------------------------- the command line


def one_error_line(res) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and "Traceback" not in res.output, res.output
    return res.output


@pytest.mark.parametrize("command", ["tournament", "check", "submit"])
@pytest.mark.parametrize("kind", ["two links to the folder", "FIFO", "absolute link"])
def test_arena_tournament_check_and_submit_refuse_a_hostile_folder_in_one_line(open_tmp, kind, command):
    """Two links ``a -> .`` stopped ``arena tournament`` from starting; a FIFO in a folder with a
    build made every game of its bot an ArenaFailure. Each is now one ``error:`` line naming the
    file, before any game."""
    tmp_path = open_tmp
    d = bot(tmp_path, build='["true"]' if kind == "FIFO" else "")
    name = hostile(kind, d)
    toml = tmp_path / "t.toml"
    toml.write_text(f'name = "t"\nbots = ["random", "{d}"]\ndeals = 1\nseed = 1\n')
    ladder = tmp_path / "lad.toml"
    ladder.write_text('rules = "classic"\nseats = 2\ndeals = 1\nbots = ["random", "lowest"]\n')
    args = {"check": ["check", str(d)],
            "tournament": ["tournament", str(toml), "--store", str(tmp_path / "s.sqlite"), "--plain"],
            "submit": ["submit", str(d), "--ladder", str(ladder), "--store", str(tmp_path / "l.sqlite"), "--plain"]}[command]
    res = CliRunner().invoke(app, args)
    out = one_error_line(res)
    assert f"{name}:" in out


NESTED = b'name = "deep"\nversion = "1"\ncommand = ["python3", "bot.py"]\nx = ' + b"[" * 5000 + b"]" * 5000 + b"\n"


def test_arena_check_on_a_manifest_nested_5000_deep_is_one_error_line(tmp_path):
    d = bot(tmp_path)
    (d / "bot.toml").write_bytes(NESTED)
    res = CliRunner().invoke(app, ["check", str(d)])
    assert "nested too deep" in one_error_line(res)


def test_a_manifest_that_is_a_fifo_or_a_link_out_is_refused_without_blocking(tmp_path):
    d = bot(tmp_path)
    (d / "bot.toml").unlink()
    os.mkfifo(d / "bot.toml")
    with pytest.raises(ManifestError):
        load_bot(d / "bot.toml")
    (d / "bot.toml").unlink()
    (tmp_path / "elsewhere.toml").write_text('name = "x"\nversion = "1"\ncommand = ["true"]\n')
    (d / "bot.toml").symlink_to(tmp_path / "elsewhere.toml")
    with pytest.raises(ManifestError, match="leads out of the bot's folder"):
        load_bot(d)
    (d / "bot.toml").unlink()
    (d / "conf").symlink_to(tmp_path)  # a link inside that leads through a folder link
    (d / "bot.toml").symlink_to("conf/elsewhere.toml")
    with pytest.raises(ManifestError, match="cannot read the manifest"):
        load_bot(d)
    (d / "bot.toml").unlink()
    (d / "real.toml").write_text('name = "inside"\nversion = "1"\ncommand = ["true"]\n')
    (d / "bot.toml").symlink_to("real.toml")  # a link to a file inside is read
    assert load_bot(d).name == "inside"


def test_an_upload_nested_5000_deep_is_refused_and_leaves_no_folder(tmp_path):
    """On the web: the same manifest was a 500 with its unpacked folder left behind."""
    from tests.test_serve import ServerProc, multipart
    (tmp_path / "ladders").mkdir()
    (tmp_path / "ladders" / "mini.toml").write_text('rules = "powers"\nseats = 2\ndeals = 1\n'
                                                   'bots = ["random", "lowest"]\ncheck_games = 1\n')
    store = tmp_path / "data" / "arena.sqlite"
    store.parent.mkdir()
    server = ServerProc(store, "--allow-submit", "--ladders", str(tmp_path / "ladders"))
    try:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("bot.toml", NESTED)
            zf.writestr("bot.py", b"print()\n")
        body, ctype = multipart({"ladder": "mini", "token": server.token}, ("deep.zip", buf.getvalue()))
        status, _, page = server.request("POST", "/submit", body, {"Content-Type": ctype})
        assert status == 400, page[-2000:]
        assert b"nested too deep" in page and str(tmp_path).encode() not in page
        left = sorted(p.name for p in (store.parent / "uploads").iterdir())
        assert left == [".arena-bot-copies"], left
        assert "Traceback" not in server.stderr()
    finally:
        server.stop()


# --------------------------------------------------------------------------- mount what was checked

from tests.test_sandbox_attacks import MODES, open_dir  # noqa: E402


def _read_marker(directory: Path, sandbox: bool | str) -> tuple[int | None, list[str]]:
    from arena.bots.start import start_bot
    mode = {"containment": Containment.GVISOR if sandbox == "gvisor" else containment_for(sandbox)}
    with start_bot(["python3", "-c", "import os; print(open('marker').read().strip(), sorted(os.listdir('/proc/self/fd')))"],
                            directory, **mode) as proc:
        return proc.run_to_end(60)


def _gvisor_problem() -> str | None:
    from arena.bots.probes import gvisor_problem_now
    return gvisor_problem_now()


GVISOR = pytest.param("gvisor", id="gvisor", marks=pytest.mark.skipif(
    _gvisor_problem() is not None, reason=f"gVisor: {_gvisor_problem()}"))


@pytest.mark.skipif(not ROOT, reason="private bot uids and the namespace root need a root referee")
@pytest.mark.parametrize("sandbox", [*MODES, GVISOR])
@pytest.mark.parametrize("swap", ["exchanged for a link", "untouched"])
def test_a_folder_swapped_for_a_link_after_its_check_is_never_what_is_mounted(sandbox, swap, monkeypatch):
    """The referee checked the bot's folder, then a root child bound it by path: an author who swapped
    the folder for a link in between (renameat2 RENAME_EXCHANGE in a loop) got a folder below a 0700
    root directory mounted as its own. Swapped here exactly between the check and the mount, the bot
    reads its own folder, or does not start; never the other."""
    from arena.bots import spawn
    base = open_dir("arena-swap-")
    try:
        mine = base / "mine"
        mine.mkdir(mode=0o755)
        (mine / "marker").write_text("mine\n")
        (mine / "marker").chmod(0o644)
        vault = base / "vault"
        vault.mkdir(mode=0o700)  # the bot's uid cannot pass here
        deals = vault / "deals"
        deals.mkdir(mode=0o755)
        (deals / "marker").write_text("SECRET\n")
        (deals / "marker").chmod(0o644)
        swapped = []
        where = mine.resolve()

        def exchange(cwd: Path) -> None:
            if swap != "untouched" and cwd == where:
                link = base / "link"
                link.symlink_to(deals)
                os.rename(link, base / "link-tmp")
                os.rename(mine, base / "mine-away")  # as renameat2(RENAME_EXCHANGE) would leave it
                os.rename(base / "link-tmp", mine)
                swapped.append(cwd)
        monkeypatch.setattr(spawn, "between_check_and_mount", exchange)
        try:
            status, out = _read_marker(mine, sandbox)
        except BotCommandError as e:  # refused, by the arena or by bwrap's own check: fine
            assert swap != "untouched", e
            return
        text = "\n".join(out)
        assert "SECRET" not in text, text
        assert status == 0 and text.startswith("mine"), text
        assert swapped == ([] if swap == "untouched" else [where])
        assert "['0', '1', '2', '3']" in text, text  # no descriptor of the host's folder is left to the bot
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_bot_travels_to_a_worker_process_as_its_ref_and_hash_checked_on_arrival(tmp_path):
    """Local worker processes load each bot again from its ref: what they load must hash as the run
    read it, or the worker refuses it (a bot edited mid-run never plays unverified files): every
    start of it fails, naming the change (tests/test_stranger_attacks3.py plays the game)."""
    from arena.engine import PRESETS
    from arena.tournament.executors import BotSetup
    d = bot(tmp_path)
    setup = BotSetup.of([str(d), "random"], rules=PRESETS["classic"])
    wire = setup.wire()
    assert BotSetup.from_wire(wire).specs["mine@1.0"].files_hash() == setup.specs["mine@1.0"].files_hash()
    (d / "bot.py").write_text((d / "bot.py").read_text() + "\n# edited mid-run\n")
    assert "mine@1.0's files changed since the run read them" in BotSetup.from_wire(wire).specs["mine@1.0"].refused


def test_a_venv_outside_the_bot_is_refused_without_saying_whether_it_exists(tmp_path):
    """bot.toml's venv is relative to the bot. An absolute or ``..`` path made the arena look on its
    own disk and say whether that place had a ``bin/python``: over an upload, a question a
    stranger could ask of the server's files."""
    outside = tmp_path / "elsewhere"
    (outside / "bin").mkdir(parents=True)
    (outside / "bin" / "python").write_text("")
    d = bot(tmp_path)
    toml = (d / "bot.toml").read_text()
    for venv in (str(outside), "../elsewhere", str(tmp_path / "missing"), "../missing"):
        (d / "bot.toml").write_text(toml + f"venv = {venv!r}\n")
        with pytest.raises(ManifestError, match="venv must be a folder inside the bot's directory") as e:
            load_bot(d)
        assert "bin/python" not in str(e.value)
    (d / "env" / "bin").mkdir(parents=True)
    (d / "env" / "bin" / "python").write_text("")
    (d / "bot.toml").write_text(toml + "venv = 'env'\n")
    assert load_bot(d).python == str(d.resolve() / "env" / "bin" / "python")


UNSTARTABLE = {
    "NUL in the command": 'command = ["python3", "bot.py\\u0000x"]',
    "an argument over 128 KiB": f'command = ["python3", "bot.py", "{"x" * 200_000}"]',
    "a command over 64 KiB": f'command = ["python3", "bot.py"{", " + chr(34) + "x" * 1000 + chr(34) * 1}{(", " + chr(34) + "x" * 1000 + chr(34)) * 70}]',
    "NUL in the build": 'command = ["python3", "bot.py"]\nbuild = ["true\\u0000"]',
    "an env over 64 KiB": f'command = ["python3", "bot.py"]\n[env]\nBIG = "{"x" * 70_000}"',
    "NUL in the workdir": 'command = ["python3", "bot.py"]\nworkdir = "a\\u0000b"',
    "NUL in the interpreter": 'command = ["python3", "bot.py"]\ninterpreter = "py\\u0000"',
}


@pytest.mark.parametrize("case", sorted(UNSTARTABLE))
def test_a_command_no_exec_can_take_is_the_bots_error_not_the_arenas(tmp_path, case):
    """A NUL byte or an argument past the kernel's limits (E2BIG) in bot.toml made every game of the
    bot an ArenaFailure: the tournament could never finish. It is a manifest error now, before any
    game, in one line."""
    d = bot(tmp_path)
    (d / "bot.toml").write_text(f'name = "mine"\nversion = "1"\n{UNSTARTABLE[case]}\n')
    with pytest.raises(ManifestError) as e:
        load_bot(d)
    assert len(str(e.value)) < 1000  # the refusal does not echo the megabytes it refuses
    if case == "NUL in the command":
        res = CliRunner().invoke(app, ["tournament", "--bot", str(d), "--bot", "random", "--deals", "1",
                                       "--store", str(tmp_path / "s" / "a.sqlite"), "--plain"])
        assert "NUL" in one_error_line(res)


@pytest.mark.parametrize("workdir", [".git", "src/__pycache__", "node_modules/x", "linked"])
def test_a_workdir_in_what_the_reader_leaves_out_is_refused_saying_so(tmp_path, workdir):
    """A workdir in ``.git`` (or another folder the reader leaves out) is absent from every copy a
    seat runs from: it was refused before any game, but as a folder other users could not read,
    naming a temporary copy. It is refused when the manifest is read, saying why, in one line."""
    d = bot(tmp_path)
    (d / ".git").mkdir()
    (d / "src" / "__pycache__").mkdir(parents=True)
    (d / "node_modules" / "x").mkdir(parents=True)
    (d / "linked").symlink_to(".git")  # a link is judged by where it leads
    (d / "bot.toml").write_text((d / "bot.toml").read_text() + f"workdir = {workdir!r}\n")
    with pytest.raises(ManifestError, match="which the arena leaves out of the bot") as e:
        load_bot(d)
    assert f"workdir {workdir!r}" in str(e.value)
    res = CliRunner().invoke(app, ["check", str(d)])
    out = one_error_line(res)
    assert "leaves out of the bot" in out and "readable by other users" not in out and "/tmp/palace-arena" not in out
