"""The sidebar on quadrupeds and chain-described bodies: Auto-Map fills the Bone Mapping rows with
the quadruped slots (and only the slots a quadruped needs are red when empty), bodies described as
chains are edited in the panel's chain rows (added, removed, loaded from and saved to mapping
files) and retargeted through them, and after Retarget Clip the Quality panel shows the per-chain
figures it was given. Panels are drawn headless into a
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
    # Each loaded body is in the chain rows: one row per chain, both sides' bones, the plants flag.
    rows = {row.name: row for row in s.chains}
    assert set(rows) == {"spine", "neck", "head", "tail", "wing.L", "wing.R", "leg.L", "leg.R"}
    assert (rows["wing.L"].source_start, rows["wing.L"].source_end) == ("wing.L.0", "wing.L.2")
    assert (rows["wing.L"].target_start, rows["wing.L"].target_end) == ("wing.L.0", "wing.L.1")
    assert rows["leg.R"].target_end == "leg.R.3" and rows["leg.R"].plants and not rows["wing.L"].plants
    assert (s.source_root, s.target_root, s.source_head, s.target_head) == ("pelvis", "pelvis", "head", "head")
    lines = _drawn(bpy, VIEW3D_PT_marionette_mapping)
    assert "Body as chains (8)" in lines
    assert not any("pick its" in line or "Root:" in line for line in lines), lines  # nothing missing
    # Saved back, each side's file describes the body the loaded file did.
    assert bpy.ops.marionette.mapping_save(filepath=str(tmp_path / "saved.json"), side="TARGET") == {"FINISHED"}
    assert BoneMapping.load(tmp_path / "saved.json").body == BoneMapping.load(tmp_path / "large.json").body
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    r = json.loads(s.last_report)
    assert r["body_plan"] == "chains"
    assert r["chains"]["wing.L"][2:] == [2, 3] and r["chains"]["leg.R"][2:] == [4, 3]
    assert max(top for _, top, _, _ in r["chains"].values()) < 0.01
    drawn = _drawn(bpy, VIEW3D_PT_marionette_quality)
    assert "  wing.L (2 bones from 3): mean 0.00°, max 0.00°" in drawn


def _spider_pair(bpy, clip_file=None):
    """A made-up spider (legs of 3 bones) playing a clip, and a larger one (legs 1.8 times
    longer, of 4 bones), as armatures of the open file; returns both rigs and objects.
    ``clip_file``: where the source spider and its clip are saved first, alone."""
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.bridge.session import save_blend
    from tests.helpers.quadruped_rigs import bend_clip, spider

    small, large = spider(1.0, 3), spider(1.8, 4)
    src = create_armature(small.skeleton, "small spider", small.ends)
    rng = np.random.default_rng(8)
    bends = {n: (tuple(rng.normal(size=3)), float(rng.uniform(-0.4, 0.4))) for n in small.skeleton.names}
    write_action(src, bend_clip(small.skeleton, bends, frames=6, travel=0.5), "Scuttle")
    if clip_file is not None:
        save_blend(clip_file)
    tgt = create_armature(large.skeleton, "large spider", large.ends)
    s = bpy.context.scene.marionette
    s.source, s.target = src, tgt
    s.plant_feet = False
    return small, large, src, tgt


def _describe_spiders_in_rows(bpy) -> None:
    """Both spiders described in the sidebar's chain rows, as a user fills them: Add Chain, then
    each row's name, bones on both sides and Plants; each side's root and head chain."""
    s = bpy.context.scene.marionette
    chains = [("head", "head0", "head0", "head0", "head0", False)]
    chains += [(f"leg{k}.{side}", f"leg{k}.{side}.0", f"leg{k}.{side}.2", f"leg{k}.{side}.0", f"leg{k}.{side}.3", True)
               for k in range(4) for side in ("L", "R")]
    for name, s_start, s_end, t_start, t_end, plants in chains:
        assert bpy.ops.marionette.chain_add() == {"FINISHED"}
        row = s.chains[s.chain_index]
        row.name, row.source_start, row.source_end, row.target_start, row.target_end, row.plants = name, s_start, s_end, t_start, t_end, plants
    s.source_root = s.target_root = "body"
    s.source_head = s.target_head = "head"


def _played_chain_angles(bpy, small, large, src, tgt, action, frames) -> dict[str, float]:
    """Per chain, the largest angle (degrees) between a target bone's segment as Blender plays it
    and the source chain's chord, as Blender plays the source, over the same stretch of arc:
    measured here from both bodies' chain points (bones read from the spiders' own description)
    on each armature's evaluated pose."""
    from marionette.bridge import compat
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.core.mapping.body_description import checked_body
    from marionette.core.retarget.body_chains import plan_of_description, read_body
    from tests.helpers.quadruped_rigs import spider_body

    s_body = read_body(small.skeleton, plan_of_description(checked_body(spider_body(3)), small.skeleton), small.ends)
    t_body = read_body(large.skeleton, plan_of_description(checked_body(spider_body(4)), large.skeleton), large.ends)
    compat.assign_action(tgt, action, compat.action_slot_for(action, tgt))
    s_pose = evaluated_pose_matrices(src, frames, small.skeleton)
    t_pose = evaluated_pose_matrices(tgt, frames, large.skeleton)
    worst = {}
    for chain in t_body.points:
        sp = s_body.points[chain].positions(s_pose[..., :3, :3], s_pose[..., :3, 3])
        tp = t_body.points[chain].positions(t_pose[..., :3, :3], t_pose[..., :3, 3])
        s_frac, t_frac = s_body.points[chain].fractions, t_body.points[chain].fractions
        along = s_frac if len(s_frac) == len(t_frac) else t_frac
        angles = []
        for k in range(len(t_frac) - 1):
            a = np.stack([[np.interp(along[k], s_frac, p[:, d]) for d in range(3)] for p in sp])
            b = np.stack([[np.interp(along[k + 1], s_frac, p[:, d]) for d in range(3)] for p in sp])
            want, got = b - a, tp[:, k + 1] - tp[:, k]
            cos = np.einsum("ti,ti->t", want, got) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
            angles.append(np.degrees(np.arccos(np.clip(cos, -1, 1))).max())
        worst[chain] = float(max(angles))
    return worst


def test_a_spider_described_in_the_sidebars_chain_rows_retargets_onto_a_larger_spider(addon, tmp_path):
    """No file: both spiders' bodies are described in the chain rows; Retarget Clip takes them,
    and every target leg bone (4 a leg) plays along its source leg's chord (3 bones a leg)."""
    bpy = addon
    from marionette.core.mapping.bone_mapping import BoneMapping
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_mapping
    from tests.helpers.quadruped_rigs import spider_body

    small, large, src, tgt = _spider_pair(bpy)
    s = bpy.context.scene.marionette
    # Without a description the two spiders are no bodies Marionette reads: refused, nothing written.
    actions = set(bpy.data.actions)
    with pytest.raises(RuntimeError):
        bpy.ops.marionette.retarget_clip()
    assert set(bpy.data.actions) == actions
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}  # no humanoid, no quadruped: humanoid rows left to fill
    assert any(line.startswith("Target misses hips") for line in _drawn(bpy, VIEW3D_PT_marionette_mapping))
    _describe_spiders_in_rows(bpy)
    assert len(s.chains) == 9
    lines = _drawn(bpy, VIEW3D_PT_marionette_mapping)
    assert "Body as chains (9)" in lines
    assert not any("misses" in line for line in lines), lines  # both sides go through their chains now
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    r = json.loads(s.last_report)
    assert r["body_plan"] == "chains" and set(r["chains"]) == {"head", *(f"leg{k}.{side}" for k in range(4) for side in "LR")}
    assert r["chains"]["leg2.R"][2:] == [4, 3]  # [mean, max, bones, source bones]
    action = tgt.animation_data.action
    assert action.name == r["action"]
    played = _played_chain_angles(bpy, small, large, src, tgt, action, np.arange(1, 7, dtype=float))
    assert set(played) == set(r["chains"])
    for chain, worst in played.items():
        assert worst < 0.01, (chain, worst)
    # The rows save as the mapping file's description of each body (the file route's format).
    assert bpy.ops.marionette.mapping_save(filepath=str(tmp_path / "small.json"), side="SOURCE") == {"FINISHED"}
    assert BoneMapping.load(tmp_path / "small.json").body == BoneMapping(body=spider_body(3)).body
    # Removing a leg's row leaves that leg at rest on the next retarget (only named chains are carried).
    s.chain_index = [row.name for row in s.chains].index("leg3.L")
    assert bpy.ops.marionette.chain_remove() == {"FINISHED"}
    assert "leg3.L" not in [row.name for row in s.chains]
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    assert "leg3.L" not in json.loads(s.last_report)["chains"]


@pytest.mark.parametrize(
    ("change", "message", "shown"),
    [
        (lambda s: setattr(s.chains[3], "target_end", ""), "pick both its target start and end bone", "leg1.L: pick its target end bone"),
        (lambda s: setattr(s, "source_root", ""), "the source's chains need its root", "Source Root: pick the bone the source's body hangs from"),
        (lambda s: setattr(s.chains[2], "name", s.chains[1].name), "two chain rows are called", None),
        (lambda s: [setattr(row, "plants", False) for row in s.chains], "stands on the ground",
         "the source's chains: tick Plants on those that stand on the ground"),
        (lambda s: setattr(s.chains[1], "target_end", "head0"), "does not hang below", None),
    ],
    ids=["a start without an end", "no root", "a name twice", "nothing plants", "an end not below its start"],
)
def test_chain_rows_that_describe_no_body_are_refused_naming_the_row_and_nothing_is_written(addon, change, message, shown):
    bpy = addon
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_mapping

    _spider_pair(bpy)
    _describe_spiders_in_rows(bpy)
    s = bpy.context.scene.marionette
    assert not any("pick" in line or "tick" in line for line in _drawn(bpy, VIEW3D_PT_marionette_mapping))
    change(s)
    if shown is not None:  # what the panel can tell before the click, it shows in red
        assert shown in _drawn(bpy, VIEW3D_PT_marionette_mapping)
    actions = set(bpy.data.actions)
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.marionette.retarget_clip()
    assert set(bpy.data.actions) == actions


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


def test_colour_bones_colours_a_described_bodys_bones_by_their_error_on_the_pose_blender_plays(addon):
    """Colour Bones by Error on two spiders described in the chain rows: every driven bone green
    on an exact retarget, a leg no row names left alone; a constraint holding a target thigh at
    rest turns that leg's bones red (what Blender plays, not the keys)."""
    bpy = addon
    small, large, src, tgt = _spider_pair(bpy)
    s = bpy.context.scene.marionette
    _describe_spiders_in_rows(bpy)
    s.chain_index = [row.name for row in s.chains].index("leg3.L")
    assert bpy.ops.marionette.chain_remove() == {"FINISHED"}
    s.color_bones = True
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    coloured = {pb.name: tuple(pb.color.custom.normal) for pb in tgt.pose.bones if pb.color.palette == "CUSTOM"}
    legs = {f"leg{k}.{side}.{b}" for k in range(3) for side in "LR" for b in range(4)} | {f"leg3.R.{b}" for b in range(4)}
    assert set(coloured) == {"body", "head0", *legs}
    assert all(r < 0.01 and g > 0.99 for r, g, _ in coloured.values()), coloured
    assert all(tgt.pose.bones[f"leg3.L.{b}"].color.palette != "CUSTOM" for b in range(4))  # not carried, left alone
    held = tgt.pose.bones["leg0.R.0"].constraints.new("LIMIT_ROTATION")
    held.use_limit_x = held.use_limit_y = held.use_limit_z = True  # the thigh plays its rest whatever its keys
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    red = {pb.name: pb.color.custom.normal[0] for pb in tgt.pose.bones if pb.color.palette == "CUSTOM"}
    assert red["leg0.R.0"] > 0.2, red
    assert max(v for name, v in red.items() if not name.startswith("leg0.R.")) < 0.01


@pytest.mark.slow  # Batch Bake's real worker process
def test_batch_bake_takes_the_chain_rows_and_judges_the_pose_blender_plays(addon, tmp_path):
    """Batch Bake from the sidebar onto a spider its chain rows describe, the source rows
    describing every clip's spider: legs of 3 bones onto 4, each along its source chain; a
    constraint holding one target thigh at rest shows in that leg's figures alone."""
    bpy = addon
    pack = tmp_path / "pack"
    pack.mkdir()
    small, large, src, tgt = _spider_pair(bpy, pack / "scuttle.blend")
    _describe_spiders_in_rows(bpy)
    held = tgt.pose.bones["leg0.R.0"].constraints.new("LIMIT_ROTATION")
    held.use_limit_x = held.use_limit_y = held.use_limit_z = True
    s = bpy.context.scene.marionette
    report = tmp_path / "ui_report.json"
    assert bpy.ops.marionette.batch_bake(directory=str(pack), jobs=1, report_path=str(report)) == {"FINISHED"}
    r = json.loads(report.read_text())
    clips = [c for f in r["files"] for c in f["clips"]]
    assert [c["clip"] for c in clips] == ["Scuttle"], r["files"]
    chains = clips[0]["figures"]["chains"]
    assert set(chains) == {"head", *(f"leg{k}.{side}" for k in range(4) for side in "LR")}
    assert (chains["leg1.L"]["bones"], chains["leg1.L"]["source_bones"]) == (4, 3)
    assert chains["leg0.R"]["mean_direction_error"] > 5.0
    assert max(c["max_direction_error"] for name, c in chains.items() if name != "leg0.R") < 0.01
    assert s.target == tgt
