"""What the package imports is what pyproject.toml declares, for the part that imports it.

A module that arrives only because another package happens to pull it (click through an old
typer, referencing through jsonschema) breaks the day that package stops pulling it. These
tests read every import in ``arena/`` (top level and inside functions) and check each
third-party one against the base dependencies or the extra of the part that imports it; and
they check that the base command line starts with every extra's packages missing.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "arena"

# Which extra a part of the package belongs to; everything else is the base install.
PARTS = {
    "arena/serve/": "serve",
    "arena/cli/serve.py": "serve",  # imports the server only when `arena serve` runs
    "arena/envs/": "rl",
    "arena/tournament/cluster.py": "dask",
    "arena/tournament/localcomm.py": "dask",  # a local cluster's comm, imported by nothing else
}
# Modules of an extra that the base command line must start without.
EXTRA_MODULES = ["starlette", "hypercorn", "uvicorn", "httptools", "uvloop", "anyio", "jinja2", "markupsafe", "multipart",
                 "pettingzoo", "gymnasium", "dask", "distributed", "torch"]


def part_of(path: Path) -> str | None:
    rel = path.relative_to(ROOT).as_posix()
    return next((extra for prefix, extra in PARTS.items() if rel.startswith(prefix)), None)


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in a file, wherever it stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("arena", "__future__")}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(base distributions, extra -> its distributions with the extras it names expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = canonicalize_name(project["name"])
    base = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    raw = {extra: [Requirement(r) for r in reqs] for extra, reqs in project["optional-dependencies"].items()}

    def expand(extra: str, seen: frozenset[str] = frozenset()) -> set[str]:
        out: set[str] = set()
        for req in raw[extra]:
            if canonicalize_name(req.name) == name:
                for inner in req.extras - seen:
                    out |= expand(inner, seen | {extra})
            else:
                out.add(canonicalize_name(req.name))
        return out

    return base, {extra: expand(extra) for extra in raw}


def test_every_third_party_import_is_declared_for_its_part() -> None:
    base, extras = declared()
    dists = packages_distributions()
    missing = []
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50
    for path in files:
        extra = part_of(path)
        allowed = base | (extras[extra] if extra else set())
        for module in sorted(third_party_imports(path)):
            owners = {canonicalize_name(d) for d in dists.get(module, [])}
            if not owners:
                missing.append(f"{path.relative_to(ROOT)}: {module} (installed by no distribution here)")
            elif not owners & allowed:
                where = f"the [{extra}] extra" if extra else "the base dependencies"
                missing.append(f"{path.relative_to(ROOT)}: {module} (from {', '.join(sorted(owners))}) "
                               f"is not declared in {where}")
    assert not missing, "\n".join(missing)


def test_the_check_reads_imports_inside_functions() -> None:
    """The reader itself: an import inside a function counts like one at the top."""
    source = "import os\n\ndef f():\n    import click\n    from typer._click import core\n"
    path = ROOT / "tests" / "_probe_imports.py"
    try:
        path.write_text(source)
        assert third_party_imports(path) == {"click", "typer"}
    finally:
        path.unlink(missing_ok=True)


def test_base_command_line_starts_without_any_extra() -> None:
    """`arena --help` and `arena rules` work with every extra's modules unimportable."""
    blocker = (
        "import sys, importlib.abc\n"
        f"BLOCKED = {EXTRA_MODULES!r}\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ImportError(f'{name} is blocked: not in the base install')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from arena.cli.main import app\n"
        "sys.argv = ['arena'] + sys.argv[1:]\n"
        "app()\n"
    )
    for args in (["--help"], ["rules", "classic"], ["bots"]):
        done = subprocess.run([sys.executable, "-c", blocker, *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert "blocked" not in done.stderr


def test_standings_tables_and_the_web_arena_load_no_scipy() -> None:
    """scipy costs every process that imports it about 0.4 s of CPU, and the suite starts hundreds of
    ``arena`` processes that print standings: the arena's own fits (a prior, so no existence check)
    and the table's likelihoods of superiority need numpy alone. Only an SPRT's root finding and the
    plain maximum likelihood (``prior=0``) import it, where they run."""
    code = ("import sys\n"
            "import arena.cli.main, arena.tournament.run, arena.tournament.live, arena.ladder.history, arena.serve.app\n"
            "from arena.ratings import Outcome, fit_elo, neighbour_los\n"
            "table = fit_elo([Outcome(('a', 'b')), Outcome(('b', 'c')), Outcome((('a', 'c'),))])\n"
            "assert len(neighbour_los(table)) == 2\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
