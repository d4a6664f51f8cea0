"""No import cycles: every finspace module's finspace imports, built into a graph with ``ast``, must be acyclic.

Every import counts, wherever it is written (top level, inside a function, under ``TYPE_CHECKING``): a
lazy import hides a cycle from Python at start-up, not from the reader. ``from finspace.a import b`` is an
edge to ``finspace.a.b`` when that is a module, else to ``finspace.a``. A package's ``__init__`` is not
counted as imported by its submodules' importers (Python runs it, but counting it would make every
package that re-exports its modules a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: Cycles outside planner/ and render.py that were there when this test was written; the test names
#: them so that a new one fails. Empty: there are none (see import_cycles()).
KNOWN_OTHER_CYCLES: list[list[str]] = []


def modules(root: Path = SRC, package: str = "finspace") -> dict[str, Path]:
    """Dotted module name -> file, for every .py under root/package (a package is its __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _target(name: str, mods: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The finspace modules ``module`` imports anywhere in its file."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_pkg else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for name in names:
            t = _target(name, mods)
            if t and t != module:
                out.add(t)
    return out


def graph(root: Path = SRC, package: str = "finspace") -> dict[str, set[str]]:
    mods = modules(root, package)
    return {m: imports_of(m, p, mods) for m, p in mods.items()}


def import_cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def _planner_or_render(cycle: list[str]) -> bool:
    return any(m == "finspace.fit.render" or m.startswith("finspace.planner") for m in cycle)


def test_planner_and_render_are_in_no_import_cycle():
    cycles = [c for c in import_cycles(graph()) if _planner_or_render(c)]
    assert cycles == [], cycles


def test_no_import_cycle_anywhere_in_finspace_but_the_known_ones():
    others = [c for c in import_cycles(graph()) if not _planner_or_render(c)]
    assert others == KNOWN_OTHER_CYCLES, others


@pytest.mark.parametrize(
    "files, expected",
    [
        # the two cycles this test was written for, as they were: a lazy import and a TYPE_CHECKING one
        (
            {
                "__init__.py": "def __getattr__(n):\n    from pkg.render import plan_json\n",
                "render.py": "from pkg import Plan\n",
            },
            [["pkg", "pkg.render"]],
        ),
        (
            {
                "plan.py": "from pkg.suggest import suggestions\n",
                "suggest.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.plan import Plan\n",
            },
            [["pkg.plan", "pkg.suggest"]],
        ),
        # relative imports, and a three-module ring
        (
            {"a.py": "from . import b\n", "b.py": "from .c import x\n", "c.py": "import pkg.a\n"},
            [["pkg.a", "pkg.b", "pkg.c"]],
        ),
        # one way: no cycle; a package importing its own submodule is not a cycle either
        (
            {
                "__init__.py": "from pkg.result import Plan\n",
                "result.py": "x = 1\n",
                "plan.py": "from pkg.result import Plan\n",
                "suggest.py": "from pkg.result import Plan\n",
            },
            [],
        ),
    ],
)
def test_the_check_finds_a_cycle(tmp_path, files, expected):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    files = {"__init__.py": "", **files}
    for name, text in files.items():
        (pkg / name).write_text(text)
    assert import_cycles(graph(tmp_path, "pkg")) == expected


# ----------------------------------------------------------------- the house by concern (issue 35)

#: The root's modules and packages, bottom to top: each imports only what stands below it, but for the
#: KNOWN_UPWARD imports. A new package or root module must be placed here (the test names it).
LAYERS = [
    "errors",
    "units",
    "host",
    "planner",
    "models",
    "ledger_line",
    "ledger",
    "structured",
    "tools",
    "engine",
    "xbrl",
    "documents",
    "matrix",
    "grounding",
    "edgar",
    "scoreboard",
    "settings",
    "wall",
    "remote",
    "fit",
    "service",
    "openai_api",
    "ui",
    "mcp_server",
    "web",
    "commands",
    "cli",
    "__main__",
]
#: Imports that run back up: none (settings parses the proxy list itself; the doctor's fit rows are fit.rows).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def top_graph(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of the root's modules and packages: finspace.a.b -> a."""

    def top(m: str) -> str:
        return m.split(".")[1] if m.count(".") else ""

    out: dict[str, set[str]] = {}
    for a, bs in g.items():
        if top(a):
            out.setdefault(top(a), set()).update(top(b) for b in bs if top(b) and top(b) != top(a))
    return out


def upward(g: dict[str, set[str]], layers: list[str]) -> set[tuple[str, str]]:
    rank = {name: i for i, name in enumerate(layers)}
    return {(a, b) for a, bs in g.items() for b in bs if rank[b] > rank[a]}


def test_the_rooms_import_downward():
    g = top_graph(graph())
    assert sorted(set(g) - set(LAYERS)) == [], "place each new module or package in LAYERS"
    assert upward(g, LAYERS) <= KNOWN_UPWARD, sorted(upward(g, LAYERS) - KNOWN_UPWARD)
    # and the graph of concerns has no cycle
    assert import_cycles({a: {b for b in bs if (a, b) not in KNOWN_UPWARD} for a, bs in g.items()}) == []


def test_an_upward_import_is_found():
    g = {"a": {"b"}, "b": set(), "c": {"a"}}
    assert upward(g, ["b", "a", "c"]) == set()
    assert upward(g, ["a", "b", "c"]) == {("a", "b")}


# ----------------------------------------------------------------- the seam (issue 43)

#: The doors: each reaches the rest only through service.py, never another door.
DOORS = ("ui", "openai_api", "mcp_server")
#: Modules below the service that may read its engine: none (a desk that needs the engine is given it).
KNOWN_ENGINE_READERS: set[str] = set()


def engine_reads(tree: ast.AST) -> list[int]:
    """Lines that read ``.engine`` of the service: ``svc.engine``, ``service.engine``, ``self.svc.engine``."""

    def is_service(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Name)
            and node.id in ("svc", "service")
            or isinstance(node, ast.Attribute)
            and node.attr in ("svc", "service")
        )

    return [
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "engine" and is_service(n.value)
    ]


def test_nothing_outside_the_service_reads_its_engine():
    found = {}
    for path in (SRC / "finspace").rglob("*.py"):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        if module in ("finspace.service", *KNOWN_ENGINE_READERS):
            continue
        lines = engine_reads(ast.parse(path.read_text()))
        if lines:
            found[module] = lines
    assert found == {}, f"read the engine's state from svc.serving, make it work through a Service method: {found}"


@pytest.mark.parametrize(
    "source,expected",
    [
        ("svc.engine.health()", [1]),
        ("self.svc.engine.entry", [1]),
        ("x = service.engine", [1]),
        ("svc.serving.health()", []),
        ("self.engine.health()", []),
        ("engine.entry", []),
    ],
)
def test_an_engine_read_is_found(source, expected):
    assert engine_reads(ast.parse(source)) == expected


def test_no_door_imports_another():
    g = top_graph(graph())
    crossing = {(a, b) for a in DOORS for b in g.get(a, set()) if b in DOORS}
    assert crossing == set(), f"a door reaches another (move what they share below the service): {crossing}"


def test_each_package_says_what_it_may_import():
    """Each package's docstring ends with "May import: a, b." naming the rooms it imports: a new import across
    rooms is a choice made where the package says what it stands on (and LAYERS still has the last word)."""
    import re

    g = top_graph(graph())
    wrong = {}
    for init in sorted((SRC / "finspace").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        m = re.search(r"May import: ([^(]*?) \(", doc)
        said = set() if m is None or m.group(1) == "nothing of finspace" else set(m.group(1).split(", "))
        actual = g.get(init.parent.name, set())
        if m is None or actual - said:
            wrong[init.parent.name] = sorted(actual - said) if m else "no 'May import:' line"
    assert wrong == {}, f"imports a package's docstring does not name: {wrong}"
