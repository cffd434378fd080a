"""A non-editable ``pip install .`` carries everything the command line reads at run time: the
shipped mapping presets and the manifest (the version). Built without warnings about the
project's own configuration."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_plain_install_carries_the_presets_and_builds_without_configuration_warnings(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # Built from a copy, so the build leaves nothing in the repository (no build/ folder).
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "tests", "bench"))
    ours = {p.relative_to(source).as_posix() for p in source.rglob("*.py")}
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--verbose", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    log = build.stdout + build.stderr
    for warning in ("`project.license` as a TOML table is deprecated", "is absent from the `packages` configuration"):
        assert warning not in log
    installed = site / "marionette"
    # Every module of the add-on is in the installed copy (a package missing from pyproject's list
    # would be left out silently and fail only when a user reaches it).
    theirs = {p.relative_to(installed).as_posix() for p in installed.rglob("*.py")}
    assert ours - theirs == set(), sorted(ours - theirs)
    presets = sorted(p.stem for p in (installed / "presets").glob("*.json"))
    assert {"mixamo", "rigify_metarig", "cmu_motionbuilder"} <= set(presets), presets
    # The installed copy (not the repository's) loads a preset and reports its version.
    probe = (
        "import json, marionette, marionette.cli.main as cli\n"
        "from pathlib import Path\n"
        "from marionette.core.mapping.bone_mapping import BoneMapping\n"
        "from marionette.cli.commands import _mapping_file\n"
        "m = BoneMapping.load(_mapping_file('mixamo'))\n"
        "import importlib, pkgutil\n"
        "names = [i.name for i in pkgutil.walk_packages(marionette.__path__, 'marionette.') if not i.name.endswith('__main__')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(json.dumps([marionette.__file__, cli.version(), m.slots['hips'].bone]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    where, version, hips = json.loads(out.stdout)
    assert Path(where).is_relative_to(installed)
    assert version and hips == "mixamorig:Hips"
