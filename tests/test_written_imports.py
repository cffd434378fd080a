"""Imports of the package written as text, in tests and benchmarks: also those inside scripts
handed to a subprocess or to Blender (``r\"\"\"...\"\"\"`` strings), which no import of the test
module itself would reach. Each must name a module, and names, that exist."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.helpers.data import REPO

pytestmark = pytest.mark.bpy  # the Blender layer's modules import bpy

FROM = re.compile(r"^\s*from (marionette[\w.]*) import ([\w, ]+?)\s*(?:#.*)?$", re.M)
PLAIN = re.compile(r"^\s*import (marionette[\w.]*)(?: as \w+)?\s*$", re.M)


def written_imports() -> list[tuple[str, str, tuple[str, ...]]]:
    found = []
    for folder in ("tests", "bench"):
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = str(path.relative_to(REPO))
            found += [(where, m.group(1), tuple(n.strip().split(" as ")[0] for n in m.group(2).split(",") if n.strip())) for m in FROM.finditer(text)]
            found += [(where, m.group(1), ()) for m in PLAIN.finditer(text)]
    return found


def test_every_written_import_of_the_package_resolves() -> None:
    imports = written_imports()
    assert len(imports) > 100
    broken = []
    for where, module, names in imports:
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            broken.append(f"{where}: {module} ({exc})")
            continue
        for name in names:
            if not hasattr(mod, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    broken.append(f"{where}: {module} has no {name}")
    assert broken == []
