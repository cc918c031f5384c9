"""docs/ARCHITECTURE.md's claims that code can check, checked: the layer table names every module
of each package and no class that is gone, and the referee reads a bot's fault as ``BotFault``
(its ``reason``), never by its class. tests/test_layers.py holds the layers' order itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from arena import faults

ROOT = Path(__file__).resolve().parent.parent
ARENA = ROOT / "arena"
NOT_CODE = {"PettingZoo"}  # a word of the table that names a library, not a class of ours


def table_rows() -> dict[str, str]:
    """part -> the text of its row in the doc's first block (the row's first line and the indented
    lines under it)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows: dict[str, str] = {}
    current: list[str] = []
    for line in text.split("```", 2)[1].splitlines()[1:]:
        if not line.strip():
            continue
        if not line.startswith(" "):
            head = re.split(r"\s{2,}", line)[0]
            current = [p.strip() for p in head.split(",")]
            line = line[len(head):]
        for part in current:
            rows[part] = rows.get(part, "") + " " + line
    return rows


def modules_of(part: str) -> set[str]:
    """A package's public modules (a compiled helper's stub counts as its module)."""
    folder = ARENA / part
    if not folder.is_dir():
        return set()
    return {p.stem for p in (*folder.glob("*.py"), *folder.glob("*.pyi")) if not p.stem.startswith("_")}


def defined_names(part: str) -> set[str]:
    """Every class, function and top-level name a part defines."""
    files = [ARENA / f"{part}.py"] if (ARENA / f"{part}.py").exists() else sorted((ARENA / part).glob("*.py"))
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_the_table_names_every_module_of_each_package() -> None:
    rows = table_rows()
    missing = {part: sorted(m for m in modules_of(part) if not re.search(rf"\b{re.escape(m)}\b", text))
               for part, text in rows.items()}
    assert not {p: m for p, m in missing.items() if m}, missing


def test_the_classes_the_table_names_exist_in_their_part() -> None:
    gone = {}
    for part, text in table_rows().items():
        named = set(re.findall(r"\b[A-Z][a-z]+[A-Z]\w*\b", text)) - NOT_CODE
        if named and (ARENA / part).is_dir():
            gone[part] = sorted(named - defined_names(part))
    assert not {p: g for p, g in gone.items() if g}, gone


def _names(node: ast.expr | None) -> list[str]:
    """The class names an ``except`` clause or an ``isinstance`` test names."""
    if node is None:
        return []
    if isinstance(node, ast.Tuple):
        return [n for e in node.elts for n in _names(e)]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return [node.id] if isinstance(node, ast.Name) else []


def test_the_referee_reads_a_fault_as_botfault_never_its_class() -> None:
    """Raising a fault of a kind is the referee's job; telling faults apart by class is not (the
    ``reason`` says which)."""
    kinds = {name for name, obj in vars(faults).items()
             if isinstance(obj, type) and issubclass(obj, faults.BotFault) and obj is not faults.BotFault}
    assert {"Timeout", "Crash", "StartFailed"} <= kinds  # the check sees the classes it is about
    read = []
    for path in sorted((ARENA / "referee").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ExceptHandler):
                named = _names(node.type)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                named = _names(node.args[1]) if len(node.args) == 2 else []
            else:
                continue
            read += [f"{path.name}:{node.lineno} {n}" for n in named if n in kinds]
    assert not read, read
