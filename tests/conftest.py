"""Shared fixtures.

Two tiers: pure-core tests run anywhere; tests marked ``bpy`` run on real Blender imported as a
Python module (``pip install bpy==5.0.1``). The ``bpy`` tier is required in CI, so a missing
``bpy`` is an error there, not a skip. Third-party files come from ``../shared/data`` beside the
repository; a test that needs one skips, naming the file, when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("MARIONETTE_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared_file(relative: str) -> Path:
    """Path of a third-party file in ``../shared/data``; skips the test when it is absent."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"third-party test file {relative} is not available (looked in {SHARED_DATA})")
    return path


@pytest.fixture
def blender():
    """A fresh, empty Blender session with the importers and Rigify enabled."""
    try:
        import bpy
    except ImportError as exc:  # pragma: no cover - CI installs bpy
        if os.environ.get("CI"):
            raise
        pytest.skip(f"bpy (Blender as a Python module) is not installed: {exc}")
    import addon_utils

    bpy.ops.wm.read_factory_settings(use_empty=True)
    for module in ("io_anim_bvh", "io_scene_fbx", "io_scene_gltf2", "rigify"):
        addon_utils.enable(module, default_set=True)
    yield bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
