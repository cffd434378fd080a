"""The sidebar's Export driven as a user drives it: Retarget Clip (or Batch Bake), then Export.

Each written file is re-imported with Blender's own importer in a fresh session, and the armature
it brings plays the baked Action within 0.05 degrees on every mapped bone (world turn from rest)
and 0.1 % of hip height on every mapped joint. The open session is the same after the export as
before it, compared item by item: objects (their data, rest pose, place, selection, mode), every
Action's keys, what each object plays, the scene's name, frame range and units, the file's path
and unsaved state. Bad input (nothing to export, a folder that cannot be written) is refused with
nothing written; Esc starts no further clip and keeps what is written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import numpy as np
import pytest

from tests.helpers.action_keys import curves_snapshot
from tests.helpers.batch_bake import DAZ, TARGET
from tests.helpers.data import shared_file
from tests.helpers.export_round_trip import bone_worlds, glb_json, rest_worlds, turn_errors_deg, turns_from_rest_deg

pytestmark = [pytest.mark.bpy, pytest.mark.data]

MAX_DEG = 0.05
MAX_JOINT = 0.001  # of hip height


# --- the session, item by item ---------------------------------------------------------------


def _session(bpy) -> dict:
    """What the export must leave as it was, as plain values."""
    scene = bpy.context.scene
    view_layer = bpy.context.view_layer
    out: dict = {
        "scene": (scene.name, scene.frame_start, scene.frame_end, scene.frame_current),
        "units": (scene.unit_settings.scale_length, scene.unit_settings.system, scene.unit_settings.length_unit),
        "file": (bpy.data.filepath, bpy.data.is_dirty),
        "active": view_layer.objects.active.name if view_layer.objects.active else None,
        "ids": {kind: sorted(getattr(bpy.data, kind).keys()) for kind in ("objects", "meshes", "armatures", "actions", "scenes", "collections", "materials", "images")},
    }
    for obj in bpy.data.objects:
        ad = obj.animation_data
        out[f"object {obj.name}"] = (
            obj.type, obj.data.name if obj.data else None, obj.parent.name if obj.parent else None,
            np.array(obj.matrix_world).tobytes(), obj.select_get(), obj.hide_get(), obj.hide_viewport, obj.mode,
            [(m.name, m.type, getattr(m, "object", None) and m.object.name) for m in getattr(obj, "modifiers", [])],
        )
        if ad is not None:
            out[f"plays {obj.name}"] = (
                ad.action.name if ad.action else None, ad.action_slot.identifier if ad.action_slot else None,
                [(t.name, t.mute, [s.action.name if s.action else None for s in t.strips]) for t in ad.nla_tracks],
            )
        if obj.type == "ARMATURE":
            out[f"rest {obj.name}"] = {b.name: np.array(b.matrix_local).tobytes() for b in obj.data.bones}
            out[f"pose {obj.name}"] = {p.name: (np.array(p.matrix_basis).tobytes(), p.rotation_mode) for p in obj.pose.bones}
    for mesh in bpy.data.meshes:
        co = np.empty(3 * len(mesh.vertices))
        mesh.vertices.foreach_get("co", co)
        out[f"mesh {mesh.name}"] = co.tobytes()
    for action in bpy.data.actions:
        out[f"action {action.name}"] = (curves_snapshot(action), tuple(action.frame_range), action.use_fake_user)
    return out


def _assert_same_session(before: dict, after: dict) -> None:
    assert sorted(after) == sorted(before), f"items added or gone: {sorted(set(after) ^ set(before))[:5]}"
    changed = [k for k in before if after[k] != before[k]]
    assert not changed, f"the export changed the session: {changed[:5]}"


def _run_dirs() -> set[str]:
    """The export runs' own folders in the temporary folders (Blender's of this session, and the system's)."""
    import bpy

    folders = {tempfile.gettempdir(), bpy.app.tempdir or tempfile.gettempdir()}
    return {os.path.join(f, n) for f in folders for n in os.listdir(f) if n.startswith("marionette-export-")}


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def character(blender):
    """The A-pose base mesh (a skinned character) as the target, Marionette's sample humanoid
    playing its walk as the source, the pair picked in the sidebar; the add-on registered."""
    bpy = blender
    import marionette
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.bridge.file_import import load_file
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    marionette.register()
    try:
        bpy.context.scene.render.fps = 24
        target = load_file(shared_file(TARGET)).armatures[0]
        sample = sample_humanoid()
        source = create_armature(sample.skeleton, "Sample", tails=sample.tails)
        write_action(source, sample_walk(sample, frames=30, fps=24.0, name="Walk"), "Walk")
        s = bpy.context.scene.marionette
        s.source, s.target = source, target
        yield bpy, source, target
    finally:
        marionette.unregister()


def _retarget(bpy, target):
    """Retarget Clip as the user clicks it; the new Action and the mapped target bones (hips first)."""
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    s = bpy.context.scene.marionette
    new = bpy.data.actions[json.loads(s.last_report)["action"]]
    assert target.animation_data.action == new
    rows = {r.slot: r.target_bone for r in s.mapping if r.target_bone and r.source_bone}
    names = [rows["hips"]] + sorted(b for slot, b in rows.items() if slot != "hips")
    return new, names


def _user_state(bpy, source, target) -> None:
    """What a user's session holds besides the retarget: another frame range and frame, a unit
    shown in centimetres, the target in Pose Mode with the source selected too."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.frame_current = 5, 70, 12
    scene.unit_settings.length_unit = "CENTIMETERS"
    source.select_set(True)
    target.select_set(True)
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="POSE")


def _batch_bake(bpy, tmp_path, labels) -> list[str]:
    """Batch Bake of copies of a CMU clip named ``labels``; the Actions it made, in pack order."""
    pack = tmp_path / "pack"
    pack.mkdir()
    for label in labels:
        shutil.copy(shared_file(DAZ), pack / f"{label}.bvh")
    assert bpy.ops.marionette.batch_bake(directory=str(pack), jobs=1, report_path=str(tmp_path / "bake.json")) == {"FINISHED"}
    report = json.loads(bpy.context.scene["marionette_batch_report"])
    return [c["action"] for f in report["files"] for c in f["clips"]]


def _export(bpy, folder, fmt, engine, what="ACTION", replace=False):
    e = bpy.context.scene.marionette.export
    e.file_format, e.engine, e.folder, e.what, e.replace_files = fmt, engine, str(folder), what, replace
    return bpy.ops.marionette.export_clips()


# --- the new Action ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, engine, ext", [("FBX", "UNITY", ".fbx"), ("GLB", "GODOT", ".glb"), ("FBX", "UNREAL", ".fbx")])
def test_the_new_action_round_trips_and_the_session_is_unchanged(character, tmp_path, fmt, engine, ext):
    bpy, source, target = character
    from marionette.bridge.file_import import load_file
    from marionette.usecases.export_pack import file_stem

    new, names = _retarget(bpy, target)
    first, last = (int(round(f)) for f in new.frame_range)
    frames = np.arange(first, last + 1)
    world, rest = bone_worlds(target, names, frames), rest_worlds(target, names)
    all_rest = rest_worlds(target, [b.name for b in target.data.bones])
    hip_height = float(rest[0, 2, 3] - all_rest[:, 2, 3].min())
    _user_state(bpy, source, target)
    before, runs = _session(bpy), _run_dirs()

    out = tmp_path / "out"
    assert _export(bpy, out, fmt, engine) == {"FINISHED"}

    _assert_same_session(before, _session(bpy))
    assert _run_dirs() == runs, "the run's copy of the session was left behind"
    path = out / (file_stem(new.name) + ext)
    assert sorted(p.name for p in out.iterdir()) == [path.name]

    bpy.ops.wm.read_factory_settings(use_empty=True)
    loaded = load_file(path)
    back = next(a for a in loaded.armatures if a.data.bones.get(names[0]) is not None)
    action = back.animation_data.action if back.animation_data else None
    assert action is not None, f"{path.name}: the re-imported armature plays no action"
    shift = int(round(action.frame_range[0])) - first
    metres = bpy.context.scene.unit_settings.scale_length
    again, rest_back = bone_worlds(back, names, frames + shift), rest_worlds(back, names)
    again[..., :3, 3] *= metres
    angle = turn_errors_deg(world, rest, again, rest_back)
    joints = np.linalg.norm(world[..., :3, 3] - again[..., :3, 3], axis=-1) / hip_height
    print(f"{fmt}/{engine}: {angle.max():.5f} deg, joints {100 * joints.max():.6f} % of hip height, {len(frames)} frames, {len(names)} mapped bones")
    assert turns_from_rest_deg(world, rest).max() > 20, "the compared clip barely moves"
    assert angle.max() < MAX_DEG, f"mapped bones {angle.max():.4f} deg off after the round trip"
    assert joints.max() < MAX_JOINT, f"a mapped joint {100 * joints.max():.4f} % of hip height off"


def test_unsaved_edits_are_exported(character, tmp_path):
    """The file is saved, then the target is moved and a key of the new Action changed without
    saving: the file written holds both, and the saved file is still the one on disk."""
    bpy, source, target = character
    new, names = _retarget(bpy, target)
    saved = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(saved))
    on_disk = saved.read_bytes()
    target.location.x = 3.0
    bpy.context.view_layer.update()
    before = _session(bpy)
    assert before["file"] == (str(saved), True)
    assert _export(bpy, "//out", "GLB", "GODOT") == {"FINISHED"}
    _assert_same_session(before, _session(bpy))
    assert saved.read_bytes() == on_disk
    doc = glb_json(next((tmp_path / "out").glob("*.glb")))
    places = [n.get("translation", [0, 0, 0]) for n in doc["nodes"] if n.get("name") == target.name]
    assert places and abs(places[0][0] - 3.0) < 1e-6, f"the armature's place in the file: {places}"


# --- the last Batch Bake ----------------------------------------------------------------------


def test_every_action_of_the_last_batch_bake_is_one_file_each(character, tmp_path):
    bpy, source, target = character
    from marionette.usecases.export_pack import file_stem

    actions = _batch_bake(bpy, tmp_path, ["walk", "walk fast", "run.left"])
    assert len(actions) == 3
    before = _session(bpy)
    out = tmp_path / "out"
    assert _export(bpy, out, "GLB", "WEB", what="BATCH") == {"FINISHED"}
    _assert_same_session(before, _session(bpy))
    assert sorted(p.name for p in out.iterdir()) == sorted(file_stem(a) + ".glb" for a in actions)
    for a in actions:
        doc = glb_json(out / (file_stem(a) + ".glb"))
        assert [x["name"] for x in doc["animations"]] == [a]
        assert {n["name"] for n in doc["nodes"]} >= {target.name}


def test_an_existing_file_is_kept_unless_replace_is_on(character, tmp_path):
    bpy, source, target = character
    from marionette.usecases.export_pack import file_stem

    actions = _batch_bake(bpy, tmp_path, ["walk", "jog"])
    out = tmp_path / "out"
    out.mkdir()
    kept = out / (file_stem(actions[0]) + ".glb")
    kept.write_bytes(b"the user's own file")
    assert _export(bpy, out, "GLB", "GODOT", what="BATCH") == {"FINISHED"}
    assert kept.read_bytes() == b"the user's own file"
    assert sorted(p.name for p in out.iterdir()) == sorted(file_stem(a) + ".glb" for a in actions)
    assert _export(bpy, out, "GLB", "GODOT", what="BATCH", replace=True) == {"FINISHED"}
    assert [x["name"] for x in glb_json(kept)["animations"]] == [actions[0]]
    # A .gltf brings a .bin beside it: one of the user's of that name is kept too.
    sep = tmp_path / "sep"
    sep.mkdir()
    (sep / (file_stem(actions[1]) + ".bin")).write_bytes(b"the user's own data")
    assert _export(bpy, sep, "GLTF", "WEB", what="BATCH") == {"FINISHED"}
    assert (sep / (file_stem(actions[1]) + ".bin")).read_bytes() == b"the user's own data"
    assert sorted(p.name for p in sep.iterdir()) == sorted([file_stem(actions[0]) + ".gltf", file_stem(actions[0]) + ".bin", file_stem(actions[1]) + ".bin"])


def test_a_clip_that_fails_is_listed_and_the_others_go_on(character, tmp_path):
    """A folder stands where one clip's file goes (Replace Existing Files on): the exporter's file
    cannot take its place; that clip is reported, nothing of it written, the folder untouched."""
    bpy, source, target = character
    from marionette.core.export.outcomes import EXPORTED, FAILED
    from marionette.usecases.export_pack import file_stem
    from marionette.usecases.export_scene import export_here, finish_scene_export, start_scene_export

    actions = _batch_bake(bpy, tmp_path, ["walk", "jog", "run"])
    out = tmp_path / "out"
    blocked = out / (file_stem(actions[1]) + ".glb")
    blocked.mkdir(parents=True)
    (blocked / "keep.txt").write_text("the user's")
    e = bpy.context.scene.marionette.export
    e.file_format, e.engine, e.folder, e.what, e.replace_files = "GLB", "GODOT", str(out), "BATCH", True
    run = start_scene_export(bpy.context.scene, e)
    export_here(run)
    outcome = finish_scene_export(run)
    assert [c.status for c in outcome.clips] == [EXPORTED, FAILED, EXPORTED]
    assert f"exporting clip {actions[1]!r} failed" in outcome.clips[1].reason and "nothing written" in outcome.clips[1].reason
    assert outcome.lines()[0].startswith("exported 2 of 3 clips") and outcome.lines()[1].startswith(f"{actions[1]}: ")
    assert sorted(p.name for p in out.iterdir()) == sorted(file_stem(a) + ".glb" for a in actions)
    assert [p.name for p in blocked.iterdir()] == ["keep.txt"]


def test_a_worker_lost_costs_its_clip_and_a_new_one_takes_the_rest(character, tmp_path):
    bpy, source, target = character
    from marionette.core.export.outcomes import EXPORTED, FAILED
    from marionette.usecases.export_pack import file_stem
    from marionette.usecases.export_scene import export_here, finish_scene_export, start_scene_export

    actions = _batch_bake(bpy, tmp_path, ["walk", "jog", "run"])
    out = tmp_path / "out"
    e = bpy.context.scene.marionette.export
    e.file_format, e.engine, e.folder, e.what = "FBX", "UNITY", str(out), "BATCH"
    run = start_scene_export(bpy.context.scene, e)
    run._worker.proc.kill()  # as the exporter crashing Blender would
    export_here(run)
    outcome = finish_scene_export(run)
    statuses = [c.status for c in outcome.clips]
    assert [c.clip for c in outcome.clips] == actions and sorted(statuses) == [EXPORTED, EXPORTED, FAILED]
    lost = next(c for c in outcome.clips if c.status == FAILED)
    assert "was killed by signal SIGKILL" in lost.reason
    written = [c.clip for c in outcome.clips if c.status == EXPORTED]
    assert sorted(p.name for p in out.iterdir()) == sorted(file_stem(a) + ".fbx" for a in written)  # nothing hidden left


# --- bad input --------------------------------------------------------------------------------


def test_a_folder_that_cannot_be_written_is_refused_with_nothing_written(character, tmp_path):
    bpy, source, target = character
    from marionette.core.errors import MarionetteError
    from marionette.usecases.export_scene import start_scene_export

    _retarget(bpy, target)
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    before, runs = _session(bpy), _run_dirs()
    listing = sorted(str(p) for p in tmp_path.rglob("*"))
    for folder, said in ((blocker / "out", "is not a folder"), (blocker, "is not a folder"), ("/proc/marionette-out", "cannot be written")):
        with pytest.raises(RuntimeError, match=said):  # the operator's error report
            _export(bpy, folder, "FBX", "UNITY")
        with pytest.raises(MarionetteError, match=said):
            start_scene_export(bpy.context.scene, bpy.context.scene.marionette.export)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == listing
    assert not os.path.exists("/proc/marionette-out")
    _assert_same_session(before, _session(bpy))
    assert _run_dirs() == runs


def test_nothing_to_export_is_refused(character, tmp_path):
    bpy, source, target = character
    from marionette.core.errors import MarionetteError
    from marionette.usecases.export_scene import start_scene_export

    e = bpy.context.scene.marionette.export
    e.folder = str(tmp_path / "out")
    for what, said in (("ACTION", "run Retarget Clip first"), ("BATCH", "run Batch Bake first")):
        e.what = what
        with pytest.raises(MarionetteError, match=said):
            start_scene_export(bpy.context.scene, e)
        with pytest.raises(RuntimeError, match=said):
            bpy.ops.marionette.export_clips()
    new, _ = _retarget(bpy, target)
    s = bpy.context.scene.marionette
    s.target, e.what = source, "ACTION"
    with pytest.raises(MarionetteError, match="made for another armature"):
        start_scene_export(bpy.context.scene, e)
    s.target = target
    bpy.data.actions.remove(new)
    with pytest.raises(MarionetteError, match="no longer in the file"):
        start_scene_export(bpy.context.scene, e)
    assert not (tmp_path / "out").exists()


def test_an_engine_that_does_not_read_the_format_is_refused(character, tmp_path):
    bpy, source, target = character
    from marionette.core.errors import MarionetteError
    from marionette.usecases.export_scene import start_scene_export

    _retarget(bpy, target)
    e = bpy.context.scene.marionette.export
    e.folder = str(tmp_path / "out")
    e.file_format = "GLB"
    assert e.engine == "GODOT"  # the format's default engine
    e.engine = "UNREAL"
    with pytest.raises(MarionetteError, match="Unreal does not read glTF binary"):
        start_scene_export(bpy.context.scene, e)
    assert not (tmp_path / "out").exists()


# --- Esc --------------------------------------------------------------------------------------


def test_esc_starts_no_further_clip_and_keeps_what_is_written(character, tmp_path):
    """The operator's event handling (ModalDriver, as for Batch Bake) driven with the events Blender
    sends: timer ticks take the worker's answers, other events pass through, Esc stops. The clip
    being written when Esc comes finishes; the others are not started, and the outcome says so."""
    bpy, source, target = character
    from marionette.batch_runner.driving import ModalDriver
    from marionette.core.export.outcomes import EXPORTED, NOT_STARTED
    from marionette.usecases.export_pack import file_stem
    from marionette.usecases.export_scene import finish_scene_export, start_scene_export

    actions = _batch_bake(bpy, tmp_path, ["a1", "a2", "a3", "a4"])
    before, runs = _session(bpy), _run_dirs()
    e = bpy.context.scene.marionette.export
    out = tmp_path / "out"
    e.file_format, e.folder, e.what = "FBX", str(out), "BATCH"
    run = start_scene_export(bpy.context.scene, e)
    assert _run_dirs() - runs == {os.path.dirname(run.blend)} and os.path.isfile(run.blend)  # the copy the worker opens
    driver = ModalDriver(run)
    assert driver.event("MOUSEMOVE", "NOTHING") == "PASS_THROUGH"
    assert driver.event("ESC", "RELEASE") != "FINISHED"
    answers = []
    deadline = time.monotonic() + 120
    while run.done < 1 and time.monotonic() < deadline:
        answers.append(driver.event("TIMER", "NOTHING"))
        time.sleep(0.02)
    assert set(answers) == {"RUNNING_MODAL"} and run.done == 1
    assert run.progress_text().startswith("1/4 clips, writing ")
    assert driver.event("ESC", "PRESS") == "FINISHED"
    outcome = finish_scene_export(run)
    statuses = [c.status for c in outcome.clips]
    assert statuses == [EXPORTED, EXPORTED, NOT_STARTED, NOT_STARTED]  # the second was being written
    assert outcome.stopped == "cancelled by the user (Esc)" and not outcome.ok
    assert outcome.lines()[0].startswith("exported 2 of 4 clips") and outcome.lines()[0].endswith("stopped: cancelled by the user (Esc)")
    assert outcome.lines()[1] == f"not started (2): {actions[2]}, {actions[3]}"
    assert sorted(p.name for p in out.iterdir()) == sorted(file_stem(a) + ".fbx" for a in actions[:2])  # nothing hidden left either
    _assert_same_session(before, _session(bpy))
    assert _run_dirs() == runs


# --- the sub-panel ----------------------------------------------------------------------------


class _Layout:
    """Stands in for a UILayout: records the labels and the engine buttons drawn; ``prop`` and
    ``prop_enum`` check that the property (and the value) exist."""

    def __init__(self, record=None):
        object.__setattr__(self, "record", record if record is not None else {"labels": [], "engines": []})

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if name == "label":
                self.record["labels"].append(kwargs.get("text", ""))
            if name in ("prop", "prop_enum"):
                data, prop = args[0], args[1]
                assert prop in data.bl_rna.properties, f"{type(data).__name__} has no property {prop!r}"
                if name == "prop_enum":
                    assert args[2] in data.bl_rna.properties[prop].enum_items.keys()
                    self.record["engines"].append(args[2])
            return _Layout(self.record)

        return call

    def __setattr__(self, name, value):
        pass


def test_the_sub_panel_shows_the_formats_engines_and_what_is_exported(character, tmp_path):
    bpy, source, target = character
    from marionette.panels.retarget_panel import VIEW3D_PT_marionette_export

    def drawn():
        layout = _Layout()
        VIEW3D_PT_marionette_export.draw(type("P", (), {"layout": layout})(), bpy.context)
        return layout.record

    e = bpy.context.scene.marionette.export
    assert VIEW3D_PT_marionette_export.bl_parent_id == "VIEW3D_PT_marionette_retarget"
    assert drawn()["labels"][0].startswith("No new Action to export")
    new, _ = _retarget(bpy, target)
    assert drawn()["labels"] == [f"{new.name} on {target.name}"]
    assert drawn()["engines"] == ["UNITY", "UNREAL"]
    e.file_format = "GLTF"
    assert drawn()["engines"] == ["WEB", "GODOT"] and e.engine == "WEB"
    e.what = "BATCH"
    assert drawn()["labels"][0].startswith("No Batch Bake in this file yet")
