"""Every option an engine preset hands Blender's exporters is one the exporter of bpy 5.0.1 has, with
a value it accepts (an enum item it lists, a value of the property's type)."""

from __future__ import annotations

import pytest

from marionette.core.export.presets import PRESETS

pytestmark = pytest.mark.bpy


@pytest.mark.parametrize("key", sorted(PRESETS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_preset_options_exist_in_blenders_exporter(blender, key):
    preset = PRESETS[key]
    op = blender.ops.export_scene.fbx if preset.family == "fbx" else blender.ops.export_scene.gltf
    props = {p.identifier: p for p in op.get_rna_type().properties}
    for name, value in preset.options.items():
        assert name in props, f"{op.idname()} has no option {name!r}"
        p = props[name]
        if p.type == "ENUM" and name != "export_format":  # export_format's items are listed only when drawn
            items = {i.identifier for i in p.enum_items}
            given = value if isinstance(value, set) else {value}
            assert given <= items, f"{name}={value!r} not in {sorted(items)}"
        elif p.type == "BOOLEAN":
            assert isinstance(value, bool), name
        elif p.type in {"FLOAT", "INT"}:
            assert isinstance(value, int | float) and p.hard_min <= value <= p.hard_max, name
