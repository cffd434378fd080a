"""core/ must never import Blender (docs/conventions.md): its maths runs in any Python with numpy."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"
BLENDER_MODULES = {"bpy", "mathutils", "bmesh", "bpy_extras", "gpu", "aud", "bl_math", "idprop"}


def test_no_core_file_imports_blender_modules():
    offenders = []
    files = sorted(CORE.rglob("*.py"))
    assert files, "core/ has no Python files"
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                if m.split(".")[0] in BLENDER_MODULES:
                    offenders.append(f"{path.relative_to(CORE.parent)}:{node.lineno} imports {m}")
    assert offenders == []


def test_core_imports_in_a_python_without_blender():
    # A fresh interpreter where importing bpy or mathutils fails: every core module must import.
    code = (
        "import sys, importlib, pkgutil\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(BLENDER_MODULES)!r}: raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import marionette.core as core\n"
        "names = [m.name for m in pkgutil.walk_packages(core.__path__, 'marionette.core.')]\n"
        "for n in names: importlib.import_module(n)\n"
        "print(len(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) >= 3
