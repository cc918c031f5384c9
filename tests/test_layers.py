"""The arena's layers, read from its imports: no module imports itself back, however late, and
each part of ``arena/`` imports only the parts below it.

Every import counts: at the top of a module or inside a function, absolute or relative,
``importlib.import_module`` with a literal name, and a package's names loaded on first use
(PEP 562), which its ``_WHERE`` map lists. A part is a folder of ``arena/`` or a module at its
top (``config.py``, ``faults.py``, ...; ``arena`` is ``arena/__init__.py``, the version).
docs/ARCHITECTURE.md shows the same order, and a test below holds the two together.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARENA = ROOT / "arena"

# Bottom first. A part imports only parts of lower lines; parts on one line do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("arena", "errors"),
    ("engine",),
    ("faults", "groups", "limits", "ratings", "safetext", "store", "strategies"),
    ("config",),
    ("bots",),
    ("referee",),
    ("ai",),
    ("botkit", "envs"),
    ("tournament",),
    ("ladder", "replay"),
    ("serve",),
    ("cli",),
)
RANK = {part: i for i, parts in enumerate(LAYERS) for part in parts}


def modules(root: Path = ARENA) -> dict[str, Path]:
    """Every module of the package by its dotted name; a compiled helper by its stub (``.pyi``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi") or "__pycache__" in path.parts:
            continue
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if path.suffix == ".py" or name not in found:
            found[name] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module that importing ``name`` runs: itself, else the package that holds the name."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _relative(package: str, level: int, name: str | None) -> str:
    base = package.split(".")[:len(package.split(".")) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _lazy_map(tree: ast.Module) -> list[str] | None:
    """The modules a package's ``_WHERE`` map names (keys or values, whichever are module names)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in node.targets):
            where = ast.literal_eval(node.value)
            return [k for k in where] if all(isinstance(v, list) for v in where.values()) else list(where.values())
    return None


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(module imported, line) for every import in the module, wherever it is written."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    wanted: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _relative(package, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                wanted.append((whole if whole in known else base, node.lineno))
        elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "import_module"
                                             or getattr(node.func, "id", None) == "import_module"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                targets = [arg.value]
            else:
                targets = _lazy_map(tree)
                assert targets is not None, (f"{path}:{node.lineno}: import_module of a computed name; list "
                                             "what it may import in a module-level _WHERE map")
                targets = [t if t.startswith(".") else f".{t}" for t in targets]
            for target in targets:
                dots = len(target) - len(target.lstrip("."))
                full = _relative(package, dots, target.lstrip(".")) if dots else target
                wanted.append((full, node.lineno))
    out = []
    for target, line in wanted:
        if target == "arena" or target.startswith("arena."):
            found = _resolve(target, known)
            assert found is not None, f"{path}:{line}: {target} is no module of the arena"
            if found != name:
                out.append((found, line))
    return out


def graph(root: Path = ARENA) -> dict[str, dict[str, tuple[Path, int]]]:
    """module -> {module it imports: (file, line of the first such import)}."""
    known = modules(root)
    edges: dict[str, dict[str, tuple[Path, int]]] = defaultdict(dict)
    for name, path in known.items():
        for target, line in imports(name, path, known):
            edges[name].setdefault(target, (path, line))
    return edges


@functools.cache
def arena_graph() -> dict[str, dict[str, tuple[Path, int]]]:
    """The arena's own graph, read once for the tests that look at it (about a second each time)."""
    return graph()


def part(module: str) -> str:
    """``arena.ladder.config`` -> ``ladder``; ``arena.config`` -> ``config``; ``arena`` -> ``arena``."""
    names = module.split(".")
    return names[1] if len(names) > 1 else names[0]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph (its nodes, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def _where(edges, a: str, b: str) -> str:
    path, line = edges[a][b]
    return f"{path.relative_to(ROOT)}:{line}"


def _show(cycle: list[str], edges) -> str:
    return "; ".join(f"{a} -> {b} ({_where(edges, a, b)})" for a, b in zip(cycle, cycle[1:]))


def test_no_module_imports_itself_back() -> None:
    edges = arena_graph()
    cycle = find_cycle({a: set(bs) for a, bs in edges.items()})
    assert cycle is None, f"import circle: {_show(cycle, edges)}"


def test_no_part_imports_itself_back() -> None:
    edges = arena_graph()
    parts: dict[str, set[str]] = defaultdict(set)
    first: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    for a, bs in edges.items():
        for b in bs:
            if part(a) != part(b):
                parts[part(a)].add(part(b))
                first[part(a)].setdefault(part(b), (a, b))
    cycle = find_cycle(parts)
    assert cycle is None, "circle between parts: " + "; ".join(
        f"{x} -> {y} ({first[x][y][0]} imports {first[x][y][1]}, {_where(edges, *first[x][y])})"
        for x, y in zip(cycle, cycle[1:]))


def test_every_part_has_its_layer() -> None:
    found = {part(m) for m in modules()}
    placed = [p for parts in LAYERS for p in parts]
    assert len(placed) == len(set(placed)), "a part is in two layers"
    assert found == set(placed), f"not in LAYERS: {sorted(found - set(placed))}; gone: {sorted(set(placed) - found)}"


def test_each_part_imports_only_the_layers_below_it() -> None:
    edges = arena_graph()
    wrong = [f"{a} ({part(a)}, layer {RANK[part(a)]}) imports {b} ({part(b)}, layer {RANK[part(b)]}) "
             f"at {_where(edges, a, b)}"
             for a, bs in sorted(edges.items()) for b in sorted(bs)
             if part(a) != part(b) and RANK[part(a)] <= RANK[part(b)]]
    assert not wrong, "imports that do not go down:\n" + "\n".join(wrong)


def test_the_architecture_doc_shows_the_same_layers() -> None:
    """The first block of docs/ARCHITECTURE.md lists the layers top first, one per line: the
    parts, comma-separated, then at least two spaces and what they hold."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("```", 2)[1]
    lines = [line for line in block.splitlines()[1:] if line.strip() and not line.startswith(" ")]
    shown = [tuple(sorted(p.strip() for p in re.split(r"\s{2,}", line)[0].split(","))) for line in lines]
    assert shown == [tuple(sorted(parts)) for parts in reversed(LAYERS)]


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A late, relative, absolute, ``import_module`` and ``_WHERE`` import are each seen."""
    pkg = tmp_path / "arena"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("import importlib\n_WHERE = {'x': 'a', 'y': '..high.b'}\n"
                                             "def __getattr__(n):\n    return importlib.import_module(f'.{_WHERE[n]}', __name__)\n")
    (pkg / "low" / "a.py").write_text("def f():\n    from ..high import c\n")
    (pkg / "low" / "d.py").write_text("import importlib\nimportlib.import_module('arena.high.b')\n")
    (pkg / "low" / "e.py").write_text("import arena.high.c\n")
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "high" / "b.py").write_text("from arena.low import a\n")
    (pkg / "high" / "c.py").write_text("")
    edges = {a: set(bs) for a, bs in graph(pkg).items()}
    assert edges["arena.low"] == {"arena.low.a", "arena.high.b"}
    assert edges["arena.low.a"] == {"arena.high.c"}
    assert edges["arena.low.d"] == {"arena.high.b"}
    assert edges["arena.low.e"] == {"arena.high.c"}
    assert edges["arena.high.b"] == {"arena.low.a"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def _runs_sql(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("execute", "executemany", "executescript") for n in ast.walk(tree))


def test_sql_lives_in_the_store() -> None:
    """Every query is a named function of ``arena.store``, so one module owns each table's SQL."""
    found = {name for name, path in modules().items()
             if not name.startswith("arena.store") and path.suffix == ".py" and _runs_sql(path)}
    assert found == set(), "SQL outside arena/store: give it a named function in arena/store"


def test_what_bots_import_needs_only_the_standard_library() -> None:
    """The bundled Python bots run under the system's python3 with the arena package beside them
    and no installed packages: the engine, the AI and the bot kit must import with none (orjson,
    a referee's dependency, once reached the engine's views and every search bot failed its
    handshake). A fresh interpreter without site-packages imports them from the source tree."""
    import subprocess
    import sys
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import arena.engine, arena.engine.views, arena.ai.agents, arena.botkit; "
            "bad = sorted(m for m in ('orjson', 'trio', 'pydantic', 'typer', 'rich', 'jsonschema') if m in sys.modules); "
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
