"""Engine presets: the format an output's extension names, the default engine per format, and an
engine that does not read a format refused naming the one it reads. The units and axes each preset
claims are the engines' own (Unity and glTF: metres, Y up; Unreal: centimetres, Z up); the files'
agreement with them is measured in ``tests/usecases/test_export_round_trip.py``."""

from __future__ import annotations

import pytest

from marionette.core.errors import MarionetteError
from marionette.core.export.presets import PRESETS, export_format, preset_for


@pytest.mark.parametrize(
    "path, fmt",
    [("a/b.fbx", "fbx"), ("B.GLB", "glb"), ("c.gltf", "gltf"), ("d.blend", None), ("e", None), ("f.fbx.blend", None)],
)
def test_format_by_extension(path, fmt):
    assert export_format(path) == fmt


@pytest.mark.parametrize("fmt, engine", [("fbx", "unity"), ("glb", "godot"), ("gltf", "web")])
def test_default_engine_per_format(fmt, engine):
    assert preset_for(fmt, None).engine == engine


@pytest.mark.parametrize(
    "fmt, engine, message",
    [
        ("fbx", "godot", "--engine godot: writes .glb or .gltf files, not .fbx"),
        ("glb", "unreal", "--engine unreal: writes .fbx files, not .glb"),
        ("fbx", "cryengine", "--engine cryengine: not an engine"),
    ],
)
def test_engine_that_does_not_read_the_format_refused(fmt, engine, message):
    with pytest.raises(MarionetteError, match=message.replace(".", r"\.")):
        preset_for(fmt, engine)


@pytest.mark.parametrize(
    "fmt, engine, metres, up",
    [("fbx", "unity", 1.0, "Y"), ("fbx", "unreal", 0.01, "Z"), ("glb", "godot", 1.0, "Y"), ("gltf", "web", 1.0, "Y")],
)
def test_units_and_up_axis_are_the_engines(fmt, engine, metres, up):
    p = preset_for(fmt, engine)
    assert (p.metres_per_unit, p.up) == (metres, up)


def test_no_leaf_bones_and_only_the_new_action_in_every_preset():
    for (fmt, _), p in PRESETS.items():
        o = p.options
        if fmt == "fbx":
            assert o["add_leaf_bones"] is False and o["bake_anim_use_all_actions"] is False and o["bake_anim_use_nla_strips"] is False
            assert o["use_selection"] is True and o["bake_space_transform"] is False
        else:
            assert o["export_leaf_bone"] is False and o["export_animation_mode"] == "ACTIVE_ACTIONS" and o["use_selection"] is True
            assert o["export_yup"] is True
