"""A bot cannot fill the host's disk (docs/SANDBOX.md, "Disk"): its only writable place, a private
/tmp, is a tmpfs whose pages count against the bot's own memory cap, in every contained mode; a bot
that tries to write 4 GiB there is stopped as its own fault, and the host's disk does not move."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

from arena.bots.containment import Containment
from arena.bots.launch import containment_for
import pytest

from arena.bots.errors import BotExited, MemoryLimitExceeded
from arena.bots.probes import gvisor_problem_now
from arena.bots.start import start_bot
from arena.limits import Limits

from tests.checks import reachable, recorded_build_copies
from tests.test_sandbox_attacks import MODES

GVISOR_PROBLEM = gvisor_problem_now()
ALL_MODES = [*MODES, pytest.param("gvisor", id="gvisor", marks=pytest.mark.skipif(
    GVISOR_PROBLEM is not None, reason=f"gVisor: {GVISOR_PROBLEM}"))]
CAP_MB = 256
TRY_MB = 4096  # what the bot tries to write, in 32 MiB files (each under RLIMIT_FSIZE)

FILLER = textwrap.dedent("""
    import os
    kind = "?"
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[4] == "/tmp":
            kind = fields[fields.index("-") + 1]
    print("tmp", kind, flush=True)
    chunk = b"\\1" * (1 << 20)
    written = 0
    try:
        while written < {try_mb}:
            with open(f"/tmp/f{{written}}", "wb") as f:
                for _ in range(32):
                    f.write(chunk)
                    f.flush()
                    written += 1
        print("wrote", written, flush=True)
    except OSError as e:
        print("stopped", written, e.errno, flush=True)
""").format(try_mb=TRY_MB)


def free_bytes() -> int:
    """Free bytes of the host file systems a bot's writes could land on (/ and TMPDIR's)."""
    paths = {os.path.realpath("/"), os.path.realpath(tempfile.gettempdir())}
    return sum(st.f_bavail * st.f_frsize for st in map(os.statvfs, paths))


def mode_kw(mode) -> dict:
    return {"containment": Containment.GVISOR if mode == "gvisor" else containment_for(mode)}


@pytest.mark.skipif(os.geteuid() != 0, reason="private uids and cgroups need a root referee")
@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_bot_filling_its_tmp_is_stopped_as_its_own_fault_and_the_disk_does_not_move(tmp_path: Path, mode) -> None:
    """Refused: more than the cap in /tmp; any write to the host's disk. The bot either gets an
    error from the full tmpfs, or (its pages counted as its memory) a memory_limit fault."""
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "fill.py").write_text(FILLER)
    bot = reachable(bot)
    limits = Limits(cpu_seconds=120, memory_mb=CAP_MB, max_processes=16)
    before = free_bytes()

    def main() -> tuple[list[str], BaseException | None]:
        lines: list[str] = []
        proc = start_bot(["python3", "fill.py"], bot, limits=limits, **mode_kw(mode))
        with proc:
            try:
                while True:
                    lines.append(proc.receive_line(300))
            except BotExited as e:
                return lines, e

    lines, ended = main()
    grew = before - free_bytes()
    assert lines and lines[0] == "tmp tmpfs", lines
    if isinstance(ended, MemoryLimitExceeded):
        assert ended.reason == "memory_limit"
    else:
        assert len(lines) == 2 and lines[1].startswith("stopped"), (lines, ended)
        assert int(lines[1].split()[1]) <= CAP_MB, lines
    assert grew < 1 << 30, f"the host's disk lost {grew >> 20} MiB"  # the bot tried 4 GiB


BIG_BUILD = textwrap.dedent("""
    chunk = b"\\1" * (1 << 20)
    for i in range(8):  # 2 GiB in 256 MiB files, each under the build's RLIMIT_FSIZE
        with open(f"out{i}.bin", "wb") as f:
            for _ in range(256):
                f.write(chunk)
    print("built")
""")
MANY_FILES = textwrap.dedent("""
    import os
    os.mkdir("many")
    for i in range(300_000):
        open(f"many/{i}", "w").close()
""")


def bounded_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode, name: str, script: str):
    """A bot ``name`` whose build runs ``script``, under a build bound of 64 MiB in ``mode``: the
    call that builds it, and the list of the build copies the arena made (each one recorded as it
    is made, to check that nothing of it stays)."""
    from arena.bots import launch
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    monkeypatch.setattr(launch, "BUILD_DISK_MB", 64)
    copies = recorded_build_copies(monkeypatch)
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "build.py").write_text(script)
    (bot / "bot.toml").write_text(f'name = "{name}"\ncommand = ["python3", "bot.py"]\nbuild = ["python3", "build.py"]\n')
    bot = reachable(bot)
    return (lambda: Launcher(containment=mode_kw(mode)["containment"]).build_now(load_bot(bot))), copies


@pytest.mark.skipif(os.geteuid() != 0, reason="private uids and cgroups need a root referee")
@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("script", [BIG_BUILD, MANY_FILES], ids=["2 GiB", "300,000 files"])
def test_a_build_that_fills_the_disk_is_stopped_as_the_bots_fault(tmp_path: Path, mode, script, monkeypatch) -> None:
    """Refused: a build's copy holding more than BUILD_DISK_MB or BUILD_ENTRIES; anything of it left
    on the host's disk afterwards. The bot is refused with a message naming what it wrote."""
    from arena.bots import launch
    from arena.bots.launch import BuildError
    monkeypatch.setattr(launch, "BUILD_ENTRIES", 1_000)
    build, copies = bounded_build(tmp_path, monkeypatch, mode, "filler", script)
    before = free_bytes()
    with pytest.raises(BuildError, match="the build wrote more than its folder may hold") as info:
        build()
    assert "filler" in str(info.value)
    seen = int(re.search(r"\((\d+) MiB", str(info.value)).group(1))
    assert seen < 1024, info.value  # stopped while it wrote, not refused once all 2 GiB were there
    assert len(copies) == 1 and not copies[0].parent.exists()  # nothing of it stays on the disk
    assert before - free_bytes() < 1 << 30  # it tried 2 GiB
    print(info.value)
