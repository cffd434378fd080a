"""Clips as users get them, as sources, through the command line.

A CMU walk (its reference T-pose frame left out, 240 frames at 120 fps: 2 s) is retargeted onto a
wild Mixamo layout (``tests/wild_rigs.py``) at 30 fps; that character is written out the way other
tools write it, with Blender's own exporters: an FBX with game settings (Y-up, leaf bones, baked
animation, a skinned mesh; also of a VRoid layout, whose hips hang under a ``Root`` bone), a glTF binary (Y-up; joints whose bone lengths mean nothing once read
back) and a BVH at 60 fps; and one BVH written here with ZYX and XYZ rotation orders and
translation channels on every joint. Each file goes through ``python -m marionette retarget``
onto a character of ``tests/data``; the result, reopened and played by Blender, must match the
original walk retargeted directly onto the same character: every bone group's rotation since the
first frame within 2 degrees mean, limb directions within 1 degree, the same duration on whole
frames, and the hips' path within 5 % of hip height.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import wild_rigs as wr
from conftest import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

GROUPS = {
    "trunk": ("hips", "spine", "chest", "upper_chest", "neck"),
    "head": ("head",),
    "arms": ("shoulder", "upper_arm", "forearm"),
    "hands": ("hand",),
    "legs": ("thigh", "shin"),
    "feet": ("foot", "toes"),
}
LIMBS = ("upper_arm", "forearm", "thigh", "shin")
FILE_FRAMES = 240  # 2 s of the 120 fps walk


def _walk(path):
    """The CMU walk without its first frame (a reference T-pose, a jump no exporter can time)."""
    lines = shared_file("bvh/cmu/12_03_motionbuilder.bvh").read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("Frames:"))
    lines[i] = f"Frames: {FILE_FRAMES}"
    path.write_text("\n".join(lines[: i + 2] + lines[i + 3 : i + 3 + FILE_FRAMES]) + "\n")
    return path


def _skin(bpy, arm):
    """A mesh bound to every bone (one triangle per bone), so the FBX carries a bind pose."""
    verts, faces = [], []
    for b in arm.data.bones:
        h, t = np.array(b.head_local), np.array(b.tail_local)
        verts += [tuple(h), tuple(t), tuple(h + 0.01)]
        faces.append((len(verts) - 3, len(verts) - 2, len(verts) - 1))
    me = bpy.data.meshes.new("body")
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new("body", me)
    bpy.context.scene.collection.objects.link(ob)
    for k, b in enumerate(arm.data.bones):
        ob.vertex_groups.new(name=b.name).add([3 * k, 3 * k + 1, 3 * k + 2], 1.0, "REPLACE")
    ob.parent = arm
    ob.modifiers.new("Armature", "ARMATURE").object = arm
    return ob


def _write_bvh(bpy, arm, path, frames):
    """A BVH as a mocap tool writes one: Y-up, every joint with position and rotation channels,
    the root and the left side in ZYX order, the rest in XYZ."""
    from mathutils import Matrix

    y_up = Matrix(((1, 0, 0), (0, 0, 1), (0, -1, 0)))  # Blender Z-up -> BVH Y-up
    bones = list(arm.data.bones)
    order = {b.name: ("XYZ", "Zrotation Yrotation Xrotation") if b.parent is None or "Left" in b.name
             else ("ZYX", "Xrotation Yrotation Zrotation") for b in bones}
    mw = arm.matrix_world.to_3x3()
    lines = ["HIERARCHY"]

    def offset(b):
        head = mw @ b.head_local
        return head - (mw @ b.parent.head_local if b.parent else head * 0)

    def joint(b, depth):
        pad = "  " * depth
        o = y_up @ offset(b)
        lines.append(f"{pad}{'ROOT' if b.parent is None else 'JOINT'} {b.name}")
        lines.append(f"{pad}{{")
        lines.append(f"{pad}  OFFSET {o.x:.6f} {o.y:.6f} {o.z:.6f}")
        lines.append(f"{pad}  CHANNELS 6 Xposition Yposition Zposition {order[b.name][1]}")
        for c in b.children:
            joint(c, depth + 1)
        if not b.children:
            lines.extend([f"{pad}  End Site", f"{pad}  {{", f"{pad}    OFFSET 0 0.01 0", f"{pad}  }}"])
        lines.append(f"{pad}}}")

    for b in bones:
        if b.parent is None:
            joint(b, 0)
    rows = []
    rest = {b.name: mw @ b.matrix_local.to_3x3() for b in bones}
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        turn = {}  # world rotation of each joint since rest (BVH joints rest unrotated)
        for pb in arm.pose.bones:
            turn[pb.name] = (mw @ pb.matrix.to_3x3()).normalized() @ rest[pb.name].normalized().inverted()
        row = []
        for b in _depth_first(bones):
            parent = turn[b.parent.name] if b.parent else Matrix.Identity(3)
            local = y_up @ (parent.inverted() @ turn[b.name]) @ y_up.inverted()
            # Blender's reader takes position channels as the joint's place in its parent's
            # space (the OFFSET at rest); the root's is where it is in the world.
            pos = y_up @ (arm.matrix_world @ arm.pose.bones[b.name].head if b.parent is None else offset(b))
            e = local.to_euler(order[b.name][0])
            deg = {"X": np.degrees(e.x), "Y": np.degrees(e.y), "Z": np.degrees(e.z)}
            names = [c[0] for c in order[b.name][1].split()]
            row += [pos.x, pos.y, pos.z] + [deg[n] for n in names]
        rows.append(" ".join(f"{v:.6f}" for v in row))
    lines += ["MOTION", f"Frames: {len(rows)}", f"Frame Time: {1.0 / bpy.context.scene.render.fps:.8f}", *rows]
    path.write_text("\n".join(lines) + "\n")


def _depth_first(bones):
    out = []

    def walk(b):
        out.append(b)
        for c in b.children:
            walk(c)

    for b in bones:
        if b.parent is None:
            walk(b)
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The walk, and the files Blender's exporters (and a mocap tool) write of it on a Mixamo rig."""
    import bpy

    from marionette.bridge.file_import import load_file
    from marionette.usecases.retarget import retarget_action

    d = tmp_path_factory.mktemp("wild_clips")
    walk = _walk(d / "walk.bvh")

    def animated(fps, rig=None):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.render.fps = fps
        f = load_file(walk)
        arm = wr.build(bpy, rig or wr.mixamo())
        retarget_action(f.armatures[0], f.actions[0], arm, scene_fps=float(fps), name="Walk", judge=False)
        for o in f.objects:
            bpy.data.objects.remove(o, do_unlink=True)
        for a in f.actions:  # the exporters would write the walk's own action as a second clip
            bpy.data.actions.remove(a)
        start, end = arm.animation_data.action.frame_range
        scene.frame_start, scene.frame_end = int(start), int(end)
        bpy.ops.object.select_all(action="DESELECT")
        arm.select_set(True)
        bpy.context.view_layer.objects.active = arm
        return arm

    files = {"direct": walk}
    arm = animated(30)
    _skin(bpy, arm).select_set(True)
    files["fbx"] = d / "mixamo.fbx"
    bpy.ops.export_scene.fbx(filepath=str(files["fbx"]), use_selection=True, object_types={"ARMATURE", "MESH"},
                             axis_forward="-Z", axis_up="Y", apply_scale_options="FBX_SCALE_ALL", add_leaf_bones=True,
                             bake_anim=True, bake_anim_use_all_actions=False, bake_anim_use_nla_strips=False)
    files["glb"] = d / "mixamo.glb"
    bpy.ops.export_scene.gltf(filepath=str(files["glb"]), use_selection=True, export_format="GLB", export_yup=True)
    arm.animation_data.action.copy().name = "Run"  # a second clip the glTF exporter writes too
    files["glb_two"] = d / "mixamo_two_clips.glb"
    bpy.ops.export_scene.gltf(filepath=str(files["glb_two"]), use_selection=True, export_format="GLB", export_yup=True)
    files["bvh_hand"] = d / "mixamo_zyx_xyz.bvh"
    _write_bvh(bpy, arm, files["bvh_hand"], range(bpy.context.scene.frame_start, bpy.context.scene.frame_end + 1))
    arm = animated(30, wr.vroid())  # a Root bone above the hips, which travel
    _skin(bpy, arm).select_set(True)
    files["fbx_vroid"] = d / "vroid.fbx"
    bpy.ops.export_scene.fbx(filepath=str(files["fbx_vroid"]), use_selection=True, object_types={"ARMATURE", "MESH"},
                             axis_forward="-Z", axis_up="Y", add_leaf_bones=True, bake_anim=True,
                             bake_anim_use_all_actions=False, bake_anim_use_nla_strips=False)
    animated(60)
    files["bvh_60"] = d / "mixamo_60.bvh"
    bpy.ops.export_anim.bvh(filepath=str(files["bvh_60"]), frame_start=bpy.context.scene.frame_start,
                            frame_end=bpy.context.scene.frame_end, rotate_mode="XYZ")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    import addon_utils

    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_basic_human_metarig_add()  # the demo's target, saved as a user would
    files["metarig"] = d / "metarig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(files["metarig"]))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return d, files


def _cli(source, target, out):
    done = subprocess.run([sys.executable, "-m", "marionette", "retarget", str(source), str(target), "-o", str(out),
                           "--report", str(out.with_suffix(".json")), "--no-plant-feet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _played(bpy, out):
    """Reopen OUT.blend; Blender's evaluated world matrices of the target at each key frame."""
    from marionette.bridge.evaluated_pose import evaluated_world_matrices

    bpy.ops.wm.open_mainfile(filepath=str(out))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE" and o.animation_data and o.animation_data.action)
    slots = json.loads(out.with_suffix(".json").read_text())["mapping"]["target"]["slots"]
    start, end = arm.animation_data.action.frame_range
    frames = np.arange(start, end + 0.5)
    names = [b.name for b in arm.pose.bones]
    return {"m": np.array(evaluated_world_matrices(arm, frames)), "frames": frames,
            "slots": {s: names.index(v["bone"]) for s, v in slots.items() if v.get("bone")}}


def _rot(m):
    r = m[..., :3, :3]
    return r / np.linalg.norm(r, axis=-2, keepdims=True)


def _angle(r):
    return np.degrees(np.arccos(np.clip((np.trace(r, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))


def _compare(direct, via):
    out = {"groups": {}}
    for group, parts in GROUPS.items():
        offs = []
        for slot, i in direct["slots"].items():
            if slot.split(".")[0] in parts:
                rd, rv = _rot(direct["m"][:, i]), _rot(via["m"][:, i])
                sd = rd @ np.swapaxes(rd[:1], -1, -2)
                sv = rv @ np.swapaxes(rv[:1], -1, -2)
                offs.append(_angle(sd @ np.swapaxes(sv, -1, -2)))
        if offs:
            out["groups"][group] = float(np.mean(offs))
    dirs = []
    for slot, i in direct["slots"].items():
        if slot.split(".")[0] in LIMBS:
            yd, yv = _rot(direct["m"][:, i])[..., 1], _rot(via["m"][:, i])[..., 1]
            dirs.append(np.degrees(np.arccos(np.clip((yd * yv).sum(-1), -1, 1))))
    out["limbs"] = float(np.mean(dirs))
    i = direct["slots"]["hips"]
    pd, pv = direct["m"][:, i, :3, 3], via["m"][:, i, :3, 3]
    height = pd[0, 2] - direct["m"][0, :, 2, 3].min()  # hips above the lowest joint
    out["hips_path"] = float(np.linalg.norm((pd - pd[0]) - (pv - pv[0]), axis=-1).max() / height * 100)
    out["travel"] = float(np.linalg.norm(pv[-1] - pv[0]) / np.linalg.norm(pd[-1] - pd[0]))
    return out


TARGETS = {
    "quaternius": ("fbx/quaternius_male_casual.fbx", ("fbx", "fbx_vroid", "glb", "bvh_60", "bvh_hand")),
    "male base mesh": ("gltf/male_base_mesh_apose.glb", ("fbx", "bvh_hand")),
    "rigify metarig": (None, ("glb",)),
}


@pytest.mark.parametrize("target_name", list(TARGETS))
def test_exported_clips_play_as_the_original_walk(blender, sources, target_name, capsys):
    d, files = sources
    rel, kinds = TARGETS[target_name]
    target = shared_file(rel) if rel else files["metarig"]
    summaries = {k: _cli(files[k], target, d / f"{target_name}_{k}.blend") for k in ("direct", *kinds)}
    direct = _played(blender, d / f"{target_name}_direct.blend")
    rows, bad = [], []
    for kind in kinds:
        via = _played(blender, d / f"{target_name}_{kind}.blend")
        assert via["frames"].shape == direct["frames"].shape, f"{kind}: duration {via['frames'].shape} frames"
        assert np.allclose(via["frames"], np.round(via["frames"])), f"{kind}: keys between frames {via['frames'][:3]}"
        c = _compare(direct, via)
        rows.append(f"{kind:9s} " + " ".join(f"{g} {v:.2f}" for g, v in c["groups"].items())
                    + f" | limbs {c['limbs']:.2f} deg | hips path {c['hips_path']:.1f} % (travel x{c['travel']:.3f})")
        worst = max(c["groups"].values())
        if worst > 2.0 or c["limbs"] > 1.0 or c["hips_path"] > 5.0:
            bad.append(rows[-1])
        summary = summaries[kind]
        assert "warning" not in summary.lower(), f"{kind}: a clean file warned:\n{summary}"
    with capsys.disabled():
        print(f"\nonto {target_name}, off from the walk retargeted directly (deg, mean):\n  " + "\n  ".join(rows))
    assert not bad, "\n".join(bad)


def test_a_file_with_two_clips_says_which_it_took(sources):
    d, files = sources
    out = _cli(files["glb_two"], shared_file("fbx/quaternius_male_casual.fbx"), d / "two.blend")
    taken = json.loads((d / "two.json").read_text())["clip"]["name"]
    other = ({"Walk", "Run"} - {taken}).pop()
    assert f"holds 2 clips: took {taken!r}; the others ({other!r}) with --clip NAME" in out, out
