"""The sidebar's Export: the new Action (the last Retarget Clip's), or every Action of the last Batch
Bake, written with the target character for a game engine or the web, one file per clip named
after the clip (:func:`.export_pack.file_stem`), in the format and for the engine the sidebar
chooses (:mod:`..core.export.presets`).

The open session is never changed by it. An FBX export puts the character's data on the file's
axes and units in the session it runs in, and every export selects, renames the scene and sets
its frame range (:func:`..bridge.export_files.export_character`); so the session is saved as a
copy (unsaved edits included) into a folder of the run's own, and a worker process writes the
clips from that copy (:class:`..batch_runner.export_run.ExportRun`). :func:`start_scene_export`
refuses bad input before anything is written; :func:`export_here` runs to the end within the call
(Blender in the background); :func:`finish_scene_export` ends the run and says what it did.
"""

# The bpy stubs type context members as optional; that says nothing about this module's code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

import bpy

from ..batch_runner.driving import CtrlC
from ..batch_runner.export_run import ExportRun
from ..bridge.compat import action_fcurves
from ..core.batch.output_files import REPORT_RECORD
from ..core.batch.status import CLIP_GOOD
from ..core.errors import MarionetteError
from ..core.export.outcomes import FAILED, ClipExport, ExportOutcome, same_stem_clashes
from ..core.export.presets import DEFAULT_ENGINE, PRESETS
from ..core.paths import folder_write_problem
from .export_pack import EXTENSION_OF_FORMAT, file_stem

#: The sidebar's choices (``scene.marionette.export``) as the presets name them.
FORMAT_OF_CHOICE = {"FBX": "fbx", "GLB": "glb", "GLTF": "gltf"}
ENGINE_NAMES = {"unity": "Unity", "unreal": "Unreal", "godot": "Godot", "web": "Web"}
FORMAT_NAMES = {"fbx": "FBX", "glb": "glTF binary (.glb)", "gltf": "glTF separate (.gltf)"}

NEW_ACTION = "ACTION"
LAST_BATCH = "BATCH"


def engines_for(fmt: str) -> list[str]:
    """The engines a format is written for, its default first."""
    engines = [e for f, e in PRESETS if f == fmt]
    return sorted(engines, key=lambda e: e != DEFAULT_ENGINE[fmt])


def _new_action(scene: Any) -> tuple[Any, list[str]]:
    s = scene.marionette
    name = json.loads(s.last_report or "{}").get("action")
    if not name:
        raise MarionetteError("No new Action to export: run Retarget Clip first (or export every Action of the last Batch Bake)")
    if s.target is None:
        raise MarionetteError("Pick the target armature in the Retarget panel")
    return s.target, [str(name)]


def _last_batch(scene: Any) -> tuple[Any, list[str]]:
    raw = scene.get(REPORT_RECORD)
    if not isinstance(raw, str):
        raise MarionetteError("No Batch Bake in this file yet: run Batch Bake first (or export the new Action)")
    report = json.loads(raw)
    names = [str(c["action"]) for f in report.get("files", []) for c in f.get("clips", []) if c.get("status") in CLIP_GOOD and c.get("action")]
    if not names:
        raise MarionetteError("The last Batch Bake baked no clip: nothing to export")
    armature = (report.get("target") or {}).get("armature")
    target = bpy.data.objects.get(armature) if armature else scene.marionette.target
    if target is None:
        raise MarionetteError(f"The last Batch Bake's target {armature!r} is no longer in the file")
    return target, list(dict.fromkeys(names))


def clips_to_export(scene: Any, what: str) -> tuple[Any, list[str]]:
    """The armature and the names of the Actions ``what`` (:data:`NEW_ACTION` or :data:`LAST_BATCH`)
    exports; refuses, saying what to do, when there is nothing to export."""
    target, names = _new_action(scene) if what == NEW_ACTION else _last_batch(scene)
    if target.type != "ARMATURE":
        raise MarionetteError(f"{target.name!r} is not an armature")
    if not any(n in bpy.data.actions for n in names):
        gone = ", ".join(repr(n) for n in names[:3])
        raise MarionetteError(f"No Action to export: {gone} {'is' if len(names) == 1 else 'are'} no longer in the file")
    action = bpy.data.actions.get(names[0])
    keyed: set[str] = _keyed_bones(action) if action is not None else set()
    if action is not None and keyed and not keyed & set(target.data.bones.keys()):
        raise MarionetteError(f"{action.name!r} keys none of {target.name!r}'s bones: it was made for another armature; "
                              "pick its target in the Retarget panel")
    return target, names


def _keyed_bones(action: Any) -> set[str]:
    """The bones any slot of ``action`` keys."""
    out: set[str] = set()
    for slot in action.slots:
        for fc in action_fcurves(action, slot):
            if fc.data_path.startswith('pose.bones["'):
                out.add(fc.data_path[len('pose.bones["') :].split('"]', 1)[0])
    return out


def writable_folder(folder: str) -> str:
    """The absolute folder the clips go to; refuses an empty choice, a path relative to an unsaved
    file, and a place that cannot be written (probed by writing a file there, removed at once)."""
    if not folder.strip():
        raise MarionetteError("Choose a folder to export to")
    if folder.startswith("//") and not bpy.data.filepath:
        raise MarionetteError(f"{folder}: a folder relative to the .blend file, which is not saved yet; save it or choose another folder")
    path = os.path.abspath(bpy.path.abspath(folder))
    problem = folder_write_problem(path)
    if problem is not None:
        raise MarionetteError(f"{path}: cannot be written, {problem}")
    return path


def _written_with(path: str, fmt: str) -> list[str]:
    """The files an export to ``path`` writes that a user may have already: the file, and a
    .gltf's .bin beside it."""
    return [path, os.path.splitext(path)[0] + ".bin"] if fmt == "gltf" else [path]


def planned_clips(names: list[str], folder: str, fmt: str, replace: bool) -> list[ClipExport]:
    """One entry per clip, its file ``folder/<clip>.<ext>``; those that cannot be written are
    failed already: an Action gone from the file, a file name another clip has, an existing file
    (kept unless ``replace``; for .gltf its .bin too)."""
    ext = EXTENSION_OF_FORMAT[fmt]
    stems = [file_stem(n) for n in names]
    clashes = same_stem_clashes(stems)
    out = []
    for k, (name, stem) in enumerate(zip(names, stems, strict=True)):
        clip = ClipExport(name, os.path.join(folder, stem + ext))
        if name not in bpy.data.actions:
            clip.status, clip.reason = FAILED, "the Action is no longer in the file"
        elif k in clashes:
            clip.status, clip.reason = FAILED, f"{stem + ext} is the file of clip {names[clashes[k]]!r} already"
        elif not replace and (there := [p for p in _written_with(clip.path, fmt) if os.path.lexists(p)]):
            clip.status, clip.reason = FAILED, f"{there[0]} exists; kept (turn on Replace Existing Files)"
        out.append(clip)
    return out


def start_scene_export(scene: Any, choice: Any) -> ExportRun:
    """Check the sidebar's Export choices (``choice``: ``scene.marionette.export``), save a copy of
    the session and start writing the clips; refuses (:class:`MarionetteError`, nothing written)
    a wrong format and engine pair, nothing to export and a folder that cannot be written. A run
    whose worker could not start is returned stopped: its outcome says why."""
    fmt = FORMAT_OF_CHOICE[choice.file_format]
    engine = choice.engine.lower()
    if (fmt, engine) not in PRESETS:
        readers = " or ".join(ENGINE_NAMES[e] for e in engines_for(fmt))
        raise MarionetteError(f"{ENGINE_NAMES[engine]} does not read {FORMAT_NAMES[fmt]} files: choose {readers}")
    target, names = clips_to_export(scene, choice.what)
    folder = writable_folder(choice.folder)
    clips = planned_clips(names, folder, fmt, choice.replace_files)
    description = f"{FORMAT_NAMES[fmt]} for {ENGINE_NAMES[engine]}"
    if all(c.status == FAILED for c in clips):  # nothing to write: no copy, no process
        return ExportRun("", target.name, clips, fmt, engine, "", folder=folder, description=description)
    # In Blender's own temporary folder of this session where there is one: Blender removes it on exit.
    work = tempfile.mkdtemp(prefix="marionette-export-", dir=bpy.app.tempdir or None)
    copy = os.path.join(work, "session.blend")
    try:
        # A copy: the open file keeps its path and its unsaved state; what it holds now is exported.
        bpy.ops.wm.save_as_mainfile(filepath=copy, copy=True, compress=False, check_existing=False)
    except RuntimeError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise MarionetteError(f"the session could not be saved for the export ({str(exc).strip().splitlines()[-1]})") from exc
    run = ExportRun(copy, target.name, clips, fmt, engine, work, folder=folder, description=description)
    run.start()
    return run


def export_here(run: ExportRun) -> None:
    """Run to the end within this call (Blender in the background, or no window to go modal in);
    Ctrl-C starts no further clip."""
    with CtrlC(run):
        while run.step(0.2):
            if run.interrupt_requested:
                run.cancel("interrupted by the user (Ctrl-C)")


def finish_scene_export(run: ExportRun) -> ExportOutcome:
    """End the run (the clip being written finishes, the worker stops, the copy is removed)."""
    return run.finish()
