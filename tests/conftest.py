"""Shared fixtures.

Two tiers: pure-core tests run anywhere; tests marked ``bpy`` run on real Blender imported as a
Python module (``pip install bpy==5.0.1``). The ``bpy`` tier is required in CI, so a missing
``bpy`` is an error there, not a skip. Third-party rigs and clips live in ``tests/data`` (their
origins and licences in ``tests/data/README.md``); ``MARIONETTE_SHARED_DATA`` points the tests at
another copy of that folder. A missing file fails the test that needs it: it is never skipped.

Every test that registers the add-on unregisters it whatever happens (``try``/``finally``, or a
yield fixture); the ``blender`` fixture checks that nothing of the add-on is left registered after
each test, removes what is, and fails that test, so one leak cannot break the tests after it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("MARIONETTE_SHARED_DATA") or REPO / "tests" / "data")


def shared_file(relative: str) -> Path:
    """Path of a third-party file in ``tests/data`` (``relative`` as ``"bvh/cmu/02_02_daz.bvh"``);
    fails the test, naming the file, when it is absent."""
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.fail(f"third-party test file {relative} is missing (looked in {SHARED_DATA}; see tests/data/README.md)", pytrace=False)
    return path


def addon_state(bpy) -> tuple[set[str], set[tuple[str, str]]]:
    """What registering the add-on adds: its RNA types and its properties on common ID types."""
    types = {name for name in dir(bpy.types) if "MARIONETTE" in name.upper()}
    props = {
        (owner.__name__, p.identifier)
        for owner in (bpy.types.Scene, bpy.types.Object, bpy.types.Armature, bpy.types.WindowManager)
        for p in owner.bl_rna.properties
        if "marionette" in p.identifier
    }
    return types, props


def _unregister_leftovers(bpy) -> None:
    """Remove what a test left registered: the add-on's own unregister functions first (they also
    take its handlers and command away), then any property or type still there, one by one."""
    import importlib

    for module in ("marionette", "marionette.operators.controls_register", "marionette.operators.pmx_import"):
        try:
            importlib.import_module(module).unregister()
        except Exception:  # best effort: part of it was not registered
            pass
    for owner in (bpy.types.Scene, bpy.types.Object, bpy.types.Armature, bpy.types.WindowManager):
        for identifier in [p.identifier for p in owner.bl_rna.properties if "marionette" in p.identifier]:
            try:
                delattr(owner, identifier)
            except Exception:
                pass
    pending = [getattr(bpy.types, n) for n in dir(bpy.types) if "MARIONETTE" in n.upper()]
    while pending:  # a property group goes once nothing registered refers to it
        left = []
        for cls in pending:
            try:
                bpy.utils.unregister_class(cls)
            except Exception:
                left.append(cls)
        if len(left) == len(pending):
            break
        pending = left


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
    before = addon_state(bpy)
    yield bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
    left = addon_state(bpy)
    if left != before:
        _unregister_leftovers(bpy)
        types, props = (sorted(a - b) for a, b in zip(left, before, strict=True))
        now_types, now_props = addon_state(bpy)
        stuck = sorted(now_types - before[0]) + sorted(f"{o}.{p}" for o, p in now_props - before[1])
        pytest.fail(
            f"the test left the add-on registered ({len(types)} types such as {types[:2]}, properties {props}); "
            + (f"could not remove {stuck}" if stuck else "removed now"),
            pytrace=False,
        )
