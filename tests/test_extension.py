"""The repository root is a valid Blender extension: it validates, builds, installs, enables,
and registers/unregisters cleanly (twice in a row, leaving nothing behind)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.addon_state import addon_state

pytestmark = pytest.mark.bpy

REPO = Path(__file__).resolve().parents[1]
DEV_ONLY = ("tests/", "bench/", "docs/", ".ci/", "pyproject.toml")


def _blender_ext_cli(bpy) -> Path:
    return Path(bpy.utils.resource_path("LOCAL")) / "scripts" / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"


def test_manifest_passes_blenders_strict_validator(blender):
    out = subprocess.run(
        [sys.executable, str(_blender_ext_cli(blender)), "validate", str(REPO)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success" in out.stdout or out.stdout.strip() == "" or "success" in out.stdout.lower()


def test_built_zip_excludes_dev_files_installs_and_enables(blender, tmp_path):
    bpy = blender
    out = subprocess.run(
        [sys.executable, str(_blender_ext_cli(bpy)), "build", "--source-dir", str(REPO), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (zip_path,) = tmp_path.glob("marionette-*.zip")
    names = zipfile.ZipFile(zip_path).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names and "core/rig/skeleton.py" in names
    leaked = [n for n in names if n.startswith(DEV_ONLY)]
    assert leaked == []

    # Installed into a repository of its own in the test's folder: the user's repositories (and
    # their locks, held by any other Blender session) are not touched.
    repos = bpy.context.preferences.extensions.repos
    repo = repos.new(name="marionette_test", module="marionette_test", custom_directory=str(tmp_path / "repo"))
    repo_dir = repo.directory
    module = "bl_ext.marionette_test.marionette"
    try:
        result = bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="marionette_test", enable_on_install=True)
        try:
            assert result == {"FINISHED"}
            assert module in bpy.context.preferences.addons.keys()
            assert module in sys.modules
        finally:
            bpy.ops.extensions.package_uninstall(repo_directory=repo_dir, pkg_id="marionette")
        assert module not in bpy.context.preferences.addons.keys()
        assert not (Path(repo_dir) / "marionette").exists()
    finally:
        repos.remove(repo)


def test_register_unregister_twice_leaves_nothing_behind(blender):
    bpy = blender
    import marionette

    before = addon_state(bpy)
    for _ in range(2):
        marionette.register()
        during = addon_state(bpy)
        marionette.unregister()
        assert addon_state(bpy) == before
    # register() really added something (operators, panels, properties) for the check to mean much.
    assert during != before


def test_the_command_line_is_registered_for_blender_command(blender, tmp_path, capsys):
    """`blender --command marionette ...` calls the handler register() hooks in; it is the same
    parser as `python -m marionette`, so a refusal exits non-zero with one line."""
    import marionette

    marionette.register()
    try:
        assert marionette._cli_handle is not None
        status = marionette._run_cli(["retarget", str(tmp_path / "missing.bvh"), str(tmp_path / "t.glb"), "-o", str(tmp_path / "o.blend")])
        assert status == 1
        assert "no such file" in capsys.readouterr().err
        assert not (tmp_path / "o.blend").exists()
    finally:
        marionette.unregister()
    assert marionette._cli_handle is None
