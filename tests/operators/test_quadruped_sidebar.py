"""The sidebar on quadrupeds and chain-described bodies: Auto-Map fills the Bone Mapping rows with
the quadruped slots (and only the slots a quadruped needs are red when empty), mapping files that
describe bodies as chains load beside the rows and are listed in the panel, and after Retarget
Clip the Quality panel shows the per-chain figures it was given. Panels are drawn headless into a
recorder standing in for Blender's layout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy]


class _Layout:
    """Stands in for a UILayout: records the labels drawn; ``prop`` checks the property exists."""

    def __init__(self, record=None):
        object.__setattr__(self, "record", record if record is not None else [])

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if name == "label":
                self.record.append(kwargs.get("text", ""))
            if name == "prop":
                assert args[1] in args[0].bl_rna.properties, f"{type(args[0]).__name__} has no property {args[1]!r}"
            return _Layout(self.record)

        return call

    def __setattr__(self, name, value):
        pass


def _drawn(bpy, panel) -> list[str]:
    layout = _Layout()
    panel.draw(type("P", (), {"layout": layout})(), bpy.context)
    return layout.record


@pytest.mark.data
def test_the_fox_onto_the_dog_in_the_sidebar_shows_quadruped_rows_and_chain_figures(addon):
    bpy = addon
    from marionette.bridge.file_import import load_file
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_mapping, VIEW3D_PT_marionette_quality

    fox = load_file(shared_file("gltf/khronos_fox_quadruped.glb")).armatures[0]
    dog = load_file(shared_file("fbx/quaternius_dog_quadruped.fbx")).armatures[0]
    s = bpy.context.scene.marionette
    s.source, s.target = fox, dog
    s.plant_feet = False
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    rows = {row.slot: (row.source_bone, row.target_bone) for row in s.mapping}
    assert rows["front_leg_1.L"] == ("b_LeftUpperArm_09", "Bone.017") and rows["pelvis"] == ("b_Hip_01", "Bone")
    assert "hips" not in rows  # no humanoid row waits to be filled
    mapping_lines = _drawn(bpy, VIEW3D_PT_marionette_mapping)
    assert not any("misses" in line for line in mapping_lines), mapping_lines  # the Dog's 3-bone hind legs lack nothing needed
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    r = json.loads(s.last_report)
    assert r["body_plan"] == "quadruped" and r["action"] == dog.animation_data.action.name
    assert set(r["chains"]) == {"spine", "neck", "head", "tail", "front_leg.L", "front_leg.R", "hind_leg.L", "hind_leg.R"}
    for chain, figures in r["chains"].items():
        assert figures[1] < 0.01, chain  # [mean, max, bones, source bones]
    assert r["chains"]["hind_leg.L"][2:] == [3, 4]  # the Dog's 3 bones driven by the Fox's 4
    lines = _drawn(bpy, VIEW3D_PT_marionette_quality)
    assert lines[0] == f"Action: {r['action']}"
    assert lines[1].startswith("Chain direction: mean 0.00°")
    assert "  hind_leg.L (3 bones from 4): mean 0.00°, max 0.00°" in lines
    assert any(line.startswith("Facing: mean") for line in lines)
    assert sum(1 for line in lines if "paw slide while planted" in line) == 4


def test_bodies_described_in_mapping_files_load_into_the_sidebar_and_retarget(addon, tmp_path):
    bpy = addon
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.mapping.bone_mapping import BoneMapping
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_mapping, VIEW3D_PT_marionette_quality
    from tests.helpers.quadruped_rigs import bend_clip, bird, bird_body

    small, large = bird(1.0, 1.0, 3, 3), bird(1.7, 0.6, 2, 4)
    src = create_armature(small.skeleton, "small bird", small.ends)
    tgt = create_armature(large.skeleton, "large bird", large.ends)
    rng = np.random.default_rng(4)
    bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.5, 0.5))) for n in small.skeleton.names}
    write_action(src, bend_clip(small.skeleton, bends, frames=8, travel=0.3), "Flap")
    BoneMapping(body=bird_body(small, 3, 3)).save(tmp_path / "small.json")
    BoneMapping(body=bird_body(large, 2, 4)).save(tmp_path / "large.json")
    s = bpy.context.scene.marionette
    s.source, s.target = src, tgt
    s.plant_feet = False
    assert bpy.ops.marionette.mapping_load(filepath=str(tmp_path / "small.json"), side="SOURCE") == {"FINISHED"}
    assert bpy.ops.marionette.mapping_load(filepath=str(tmp_path / "large.json"), side="TARGET") == {"FINISHED"}
    assert json.loads(s.source_body) == BoneMapping.load(tmp_path / "small.json").body
    lines = _drawn(bpy, VIEW3D_PT_marionette_mapping)
    assert "Source body described as chains:" in lines and "Target body described as chains:" in lines
    body = json.loads(s.target_body)  # each chain's line names its start and end bones
    assert f"wing.L: {body['chains']['wing.L']['start']} → {body['chains']['wing.L']['end']}" in lines
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    r = json.loads(s.last_report)
    assert r["body_plan"] == "chains"
    assert r["chains"]["wing.L"][2:] == [2, 3] and r["chains"]["leg.R"][2:] == [4, 3]
    assert max(top for _, top, _, _ in r["chains"].values()) < 0.01
    drawn = _drawn(bpy, VIEW3D_PT_marionette_quality)
    assert "  wing.L (2 bones from 3): mean 0.00°, max 0.00°" in drawn


@pytest.mark.data
@pytest.mark.slow  # Batch Bake's real worker process
def test_batch_bake_in_the_sidebar_bakes_the_foxs_clips_onto_the_dog_with_chain_figures(addon, tmp_path):
    import shutil

    bpy = addon
    from marionette.bridge.file_import import load_file
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_batch

    dog = load_file(shared_file("fbx/quaternius_dog_quadruped.fbx")).armatures[0]
    s = bpy.context.scene.marionette
    s.target = dog
    s.plant_feet = False
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copy(shared_file("gltf/khronos_fox_quadruped.glb"), pack / "fox.glb")
    report = tmp_path / "ui_report.json"
    assert bpy.ops.marionette.batch_bake(directory=str(pack), jobs=1, report_path=str(report)) == {"FINISHED"}
    r = json.loads(report.read_text())
    clips = {c["clip"]: c for f in r["files"] for c in f["clips"]}
    assert set(clips) == {"Run", "Walk", "Survey"}
    assert all(c["figures"]["summary"]["max_direction_error"] < 0.01 for c in clips.values())
    assert sorted(a.name for a in bpy.data.actions if a.get("marionette_batch_source")) == ["fox|Run", "fox|Survey", "fox|Walk"]
    lines = _drawn(bpy, VIEW3D_PT_marionette_batch)
    assert "Last run: 3 clips, 1 files" in lines
    assert any(line.startswith("Chain direction: mean 0.00°, max 0.00° over 3 clips") for line in lines), lines
