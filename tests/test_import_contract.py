"""The import contract of the package, read from the source with ``ast`` (nothing is imported).

Every import statement of every module counts, function-level and ``TYPE_CHECKING`` ones included,
relative ones resolved; an edge goes to the most specific module named (``from ..bridge import
armature_io`` is an edge to ``bridge.armature_io``; a package's ``__init__`` is a module of its own,
reached only when it is named). The rules:

- ``core/`` imports nothing of the package outside ``core/``;
- the Blender layer, in its order ``bridge <- viewport <- properties <- batch_runner <- usecases``,
  imports nothing above itself: a module may import its own layer, the layers below it and
  ``core``; ``operators`` sit above the Blender layer, ``panels`` above ``operators`` but never import
  them (a panel names an operator by its ``bl_idname`` string). (The batch
  runner is Batch Bake's process pool: it reads and writes through the bridge and the use case
  ``bake_pack`` drives it, so it sits below the use cases);
- ``cli`` imports ``core`` and the Blender layer, never ``operators`` or ``panels``; nothing but
  the package root imports ``cli``;
- no import cycle between modules;
- no module over 800 lines.

What breaks a rule today is listed below by name. The lists can only shrink: a violation not listed
fails, and so does a listed one that no longer exists (delete its line).
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.data import REPO

PACKAGE = "marionette"
NOT_PACKAGE = {"tests", "bench", "presets"}
MAX_LINES = 800

# Layers of the package, lowest first. A module may import its own layer and those before it in
# ALLOWED; the package root (``__init__``, ``__main__``) is above everything.
LAYER_ORDER = ["core", "bridge", "viewport", "properties", "batch_runner", "usecases", "operators", "panels"]
ALLOWED: dict[str, set[str]] = {layer: set(LAYER_ORDER[: i + 1]) for i, layer in enumerate(LAYER_ORDER)}
# Panels draw; they name operators by their bl_idname strings and never import them.
ALLOWED["panels"] = ALLOWED["panels"] - {"operators"}
ALLOWED["cli"] = {"core", "bridge", "viewport", "properties", "batch_runner", "usecases", "cli"}

# Edges that break the layer rules today: (importer, imported), both relative to the package.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()

# Import cycles today, each the set of modules in one strongly connected component.
KNOWN_CYCLES: set[frozenset[str]] = set()

# Modules over MAX_LINES today (paths relative to the repository root), the tests' own included.
KNOWN_OVERSIZED: set[str] = set()


def python_files() -> Iterator[Path]:
    """Every ``.py`` file of the repository, hidden folders, build output and test data left out."""
    for folder, dirs, files in os.walk(REPO):
        here = Path(folder)
        dirs[:] = sorted(
            d for d in dirs
            if not d.startswith(".") and d not in {"__pycache__", "build", "dist"} and (here / d) != REPO / "tests" / "data"
        )
        yield from (here / f for f in sorted(files) if f.endswith(".py"))


def package_files() -> Iterator[Path]:
    for path in python_files():
        if path.relative_to(REPO).parts[0] not in NOT_PACKAGE:
            yield path


def module_name(path: Path) -> str:
    """``cli/main.py`` -> ``cli.main``; ``cli/__init__.py`` -> ``cli``; the root ``__init__.py`` -> ``""``."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_names(tree: ast.AST, name: str, package: bool, modules: set[str]) -> set[str]:
    """The package's modules this module imports anywhere in it, relative to the package."""
    here = name.split(".") if name else []
    if not package:
        here = here[:-1]
    found: set[str] = set()

    def add(dotted: str) -> None:
        # the most specific existing module along the dotted path
        parts = dotted.split(".") if dotted else []
        while parts and ".".join(parts) not in modules:
            parts.pop()
        found.add(".".join(parts))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    add(alias.name[len(PACKAGE) + 1 :])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else list(here)
                assert node.level - 1 <= len(here), f"{name}: relative import above the package"
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                target = node.module[len(PACKAGE) + 1 :]
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                add(sub if sub in modules else target)
    found.discard(name)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in package_files()}
    modules = set(files)
    return {
        name: imported_names(ast.parse(path.read_text(encoding="utf-8"), str(path)), name, is_package(path), modules)
        for name, path in files.items()
    }


def layer(module: str) -> str:
    return module.split(".")[0] if module and module != "__main__" else "root"


def layer_violations(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    bad = set()
    for importer, targets in graph.items():
        allowed = ALLOWED.get(layer(importer))
        if allowed is None:  # the package root registers and wires everything
            continue
        bad |= {(importer, t) for t in targets if layer(t) not in allowed}
    return bad


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


def oversized() -> dict[str, int]:
    sizes = {}
    for path in python_files():
        rel = path.relative_to(REPO)
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            sizes[rel.as_posix()] = lines
    return sizes


def compare(kind: str, now: set, known: set, show=repr) -> list[str]:
    new = [f"new {kind}: {show(v)}" for v in sorted(now - known, key=show)]
    gone = [f"{kind} listed but gone (delete it from the list): {show(v)}" for v in sorted(known - now, key=show)]
    return new + gone


def _edge(edge: tuple[str, str]) -> str:
    return f"{edge[0] or '(root)'} imports {edge[1] or '(root)'}"


def _cycle(component: frozenset[str]) -> str:
    return " <-> ".join(sorted(component))


# --- the graph reader itself, on code written here --------------------------------------------


def test_the_reader_resolves_relative_function_level_and_absolute_imports() -> None:
    modules = {"", "core", "core.rig", "core.rig.rotations", "bridge", "bridge.compat", "operators", "operators.ops"}
    source = (
        "from ..core.rig import rotations as R\n"
        "from . import compat\n"
        "import numpy\n"
        "def later():\n"
        "    from ..operators.ops import OP_ID\n"
        "    import marionette.core.rig\n"
        "    from .. import operators\n"
    )
    got = imported_names(ast.parse(source), "bridge.io", False, modules)
    assert got == {"core.rig.rotations", "bridge.compat", "operators.ops", "core.rig", "operators"}
    # in a package's __init__, "." is the package itself
    assert imported_names(ast.parse("from . import compat\n"), "bridge", True, modules) == {"bridge.compat"}


def test_the_rules_catch_a_layer_breach_and_a_cycle() -> None:
    graph = {
        "core.a": {"core.b", "bridge.x"},
        "core.b": {"core.a"},
        "bridge.x": {"core.a", "operators.o"},
        "usecases.u": {"bridge.x", "viewport.v"},
        "viewport.v": {"usecases.u"},
        "operators.o": {"usecases.u"},
        "cli.c": {"usecases.u", "batch_runner.w", "operators.o"},
        "batch_runner.w": set(),
    }
    assert layer_violations(graph) == {
        ("core.a", "bridge.x"),
        ("bridge.x", "operators.o"),
        ("viewport.v", "usecases.u"),
        ("cli.c", "operators.o"),
    }
    assert cycles(graph) == {frozenset({"core.a", "core.b", "bridge.x", "operators.o", "usecases.u", "viewport.v"})}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_a_known_violation_that_is_gone_fails_as_a_new_one_does() -> None:
    assert compare("breach", {("a", "b")}, {("a", "b")}) == []
    assert compare("breach", {("a", "b"), ("c", "d")}, {("a", "b")}) == ["new breach: ('c', 'd')"]
    assert compare("breach", set(), {("a", "b")}) == ["breach listed but gone (delete it from the list): ('a', 'b')"]


def test_the_graph_covers_every_module_of_the_package() -> None:
    graph = import_graph()
    on_disk = [p for p in python_files() if p.relative_to(REPO).parts[0] not in NOT_PACKAGE]
    assert len(graph) == len(on_disk) and {"", "__main__", "core.rig.rotations", "cli.main", "usecases"} <= set(graph)
    assert not any(name.startswith(("tests", "bench")) for name in graph)
    # the package root imports operators and panels inside register(): a function-level edge
    assert {"operators", "panels"} <= graph[""]


# --- the contract on the package ----------------------------------------------------------------


def test_core_and_the_blender_layer_import_nothing_above_them() -> None:
    problems = compare("layer breach", layer_violations(import_graph()), KNOWN_VIOLATIONS, _edge)
    assert not problems, "\n".join(problems)


def test_no_import_cycle_between_modules() -> None:
    problems = compare("import cycle", cycles(import_graph()), KNOWN_CYCLES, _cycle)
    assert not problems, "\n".join(problems)


def test_no_module_over_800_lines() -> None:
    sizes = oversized()
    problems = compare("module over 800 lines", set(sizes), KNOWN_OVERSIZED, lambda p: f"{p} ({sizes.get(p, '?')} lines)")
    assert not problems, "\n".join(problems)
