"""Shared fixtures (``blender``, ``addon``); shared helpers are in ``tests/helpers``.

The tests mirror the source tree: the tests of ``core/retarget/rest_space.py`` are in
``tests/core/retarget/``, those of the bridge in ``tests/bridge/``, and so on. Tests driven as a user
drives the add-on sit under the layer they exercise: ``tests/operators/`` (sidebar and operators),
``tests/cli/`` (the command line, in its own process), ``tests/batch_runner/`` (Batch Bake's
processes), ``tests/usecases/`` (the use-case entry functions on real rigs and clips). The package
as a whole (extension, packaging, import contract) is tested at the top.

Two tiers: pure-core tests run anywhere; tests marked ``bpy`` run on real Blender imported as a
Python module (``pip install bpy==5.0.1``). The ``bpy`` tier is required in CI, so a missing
``bpy`` is an error there, not a skip. Third-party rigs and clips live in ``tests/data``
(see :mod:`tests.helpers.data`): a missing file fails the test that needs it, never skips it.

Every test that registers the add-on unregisters it whatever happens (``try``/``finally``, or a
yield fixture such as ``addon``); the ``blender`` fixture checks that nothing of the add-on is left
registered after each test, removes what is, and fails that test, so one leak cannot break the
tests after it.
"""

from __future__ import annotations

import os

import pytest

from tests.helpers.addon_state import addon_state, unregister_leftovers


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
        unregister_leftovers(bpy)
        types, props = (sorted(a - b) for a, b in zip(left, before, strict=True))
        now_types, now_props = addon_state(bpy)
        stuck = sorted(now_types - before[0]) + sorted(f"{o}.{p}" for o, p in now_props - before[1])
        pytest.fail(
            f"the test left the add-on registered ({len(types)} types such as {types[:2]}, properties {props}); "
            + (f"could not remove {stuck}" if stuck else "removed now"),
            pytrace=False,
        )


@pytest.fixture
def addon(blender):
    """The add-on registered in the fresh session (operators, controls, PMX import, panels), the
    scene at 24 fps; unregistered afterwards, whatever happens."""
    import marionette

    marionette.register()
    try:
        blender.context.scene.render.fps = 24
        yield blender
    finally:
        marionette.unregister()
