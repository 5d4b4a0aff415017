"""No two modules of the project import each other, directly or through others.

Every `import` and `from ... import` counts, those under `if TYPE_CHECKING:` and those
inside functions too: a cycle hidden in either is still two modules that cannot be read,
tested or replaced apart. `KNOWN` lists the cycles not yet taken apart, each with what
holds it; a new cycle fails, and so does a known one that is gone (take it off the list).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("charter", "grammar", "policy", "engine", "api")

KNOWN: dict[frozenset[str], str] = {}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project's modules that module `name` imports anywhere in its text."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + [base] * bool(base))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def test_no_module_imports_itself_through_others() -> None:
    found = set(cycles(graph()))
    new = [sorted(c) for c in found - KNOWN.keys()]
    gone = [sorted(c) for c in KNOWN.keys() - found]
    assert not new, f"import cycles: {new}: move what both need into a module of its own"
    assert not gone, f"cycles taken apart: {gone}: take them off KNOWN"


def test_the_finder_sees_a_cycle_through_a_third_module_and_a_type_only_import() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    tree = graph()
    # pages imports api.service.core only under TYPE_CHECKING: still an edge.
    assert "api.service.core" in tree["api.service.pages"]
