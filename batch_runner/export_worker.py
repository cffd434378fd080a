"""The sidebar's Export, the worker side: one clip written for a game engine or the web in a worker
process (:func:`export_one`, answering an ``export`` task of :func:`.batch_worker.serve`).

The worker opens a copy of the user's session saved for the run, never the session itself: an FBX
export puts the character's data on the file's axes and units in the session it runs in
(:func:`..bridge.export_files.export_character`), and every export selects, renames the scene and
sets its frame range. So the copy is opened afresh before every FBX clip; glTF clips, which only
choose what plays, are written one after the other in one opening.
"""

from __future__ import annotations

import traceback
from typing import Any

from ..core.batch.messages import Message
from ..core.errors import MarionetteError

#: The copy opened in this process, and whether it is still as saved (no FBX written from it).
_opened: dict[str, Any] = {"path": None, "as_saved": False}


def export_one(task: Message) -> Message:
    """Write the clip ``task["clip"]`` (an Action of the copy ``task["blend"]``) on the armature
    ``task["armature"]`` to ``task["path"]`` in ``task["format"]`` for ``task["engine"]``. Answers
    ``exported`` with the files written, or ``export_failed`` with the reason (nothing written)."""
    clip = str(task["clip"])
    try:
        import bpy

        from ..bridge.compat import enable_importers
        from ..bridge.export_files import export_character
        from ..core.export.presets import preset_for

        preset = preset_for(str(task["format"]), str(task["engine"]))
        blend = str(task["blend"])
        if _opened["path"] != blend or not _opened["as_saved"]:
            enable_importers(("io_scene_fbx", "io_scene_gltf2"))  # Blender's exporters live in these add-ons
            _opened["path"] = None
            bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
            _opened["path"] = blend
        _opened["as_saved"] = preset.family != "fbx"
        target = bpy.data.objects.get(str(task["armature"]))
        if target is None or target.type != "ARMATURE":
            raise MarionetteError(f"no armature {task['armature']!r} to export")
        action = bpy.data.actions.get(clip)
        if action is None:
            raise MarionetteError(f"no Action {clip!r} in the file")
        files = export_character(target, action, str(task["path"]), preset)
    except MarionetteError as exc:
        return {"op": "export_failed", "clip": clip, "reason": str(exc)}
    except Exception as exc:  # a bug or an exporter crash must cost this clip only
        traceback.print_exc()
        _opened["as_saved"] = False
        return {"op": "export_failed", "clip": clip, "reason": f"internal error: {type(exc).__name__}: {exc}"}
    return {"op": "exported", "clip": clip, "files": [str(f) for f in files]}
