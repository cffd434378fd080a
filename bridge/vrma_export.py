"""Write a clip on the normalised VRM humanoid as a ``.vrma`` file through Blender's glTF exporter.

A temporary armature is made in the normalised T-pose (:func:`core.formats.vrma.normalised_rig`:
every bone's Y axis up, so the exporter writes each humanoid node with no rest rotation), the clip
is keyed on it as a new Action, Blender's glTF exporter writes it (that armature and that Action
only, the clip's time starting at zero), and the ``VRMC_vrm_animation`` extension is added to the
glb's JSON. The armature, its Action and its data are removed afterwards and the selection and
active object restored: nothing is left in the scene. A failed export leaves no file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ..core.errors import MarionetteError
from ..core.formats.vrma import add_extension
from ..core.retarget.geometric import RigInput
from ..core.rig.clip import Clip
from .action_write import create_armature, write_action


def write_vrma(rig: RigInput, clip: Clip, output: str | os.PathLike[str], name: str, fps: float, bones: Iterable[str]) -> Path:
    """Write ``clip`` (on ``rig``, the normalised humanoid) to ``output`` as VRM Animation,
    ``fps`` frames a second, the animation called ``name``; ``bones`` are the VRM humanoid bones
    the extension lists (bones of ``rig``). Returns the file written."""
    out = Path(output)
    scene = bpy.context.scene
    view_layer = bpy.context.view_layer
    selected = [o for o in view_layer.objects if o.select_get()]
    active = view_layer.objects.active
    try:
        fd, tmp = tempfile.mkstemp(suffix=".glb", prefix=".vrma-", dir=out.parent)
    except OSError as exc:
        raise MarionetteError(f"{out}: cannot write there ({exc.strerror})") from exc
    os.close(fd)
    obj = create_armature(rig.skeleton, "VRMA_humanoid", tails=_tails(rig))
    arm, action = obj.data, None
    old_fps = (scene.render.fps, scene.render.fps_base)
    try:
        action = write_action(obj, clip, name, frames=clip.frame_numbers(fps), fps=fps, exact=True)
        scene.render.fps, scene.render.fps_base = _fps_pair(fps)
        for o in selected:
            o.select_set(False)
        obj.select_set(True)
        view_layer.objects.active = obj
        bpy.ops.export_scene.gltf(
            filepath=tmp,
            export_format="GLB",
            use_selection=True,
            export_animations=True,
            export_animation_mode="ACTIVE_ACTIONS",
            export_force_sampling=True,
            export_optimize_animation_size=False,
            export_anim_slide_to_zero=True,
            export_frame_range=False,
            export_def_bones=False,
            export_leaf_bone=False,
            export_skins=False,
            export_yup=True,
        )
        data = add_extension(Path(tmp).read_bytes(), bones)
        Path(tmp).write_bytes(data)
        os.chmod(tmp, 0o666 & ~_umask())  # as a file opened for writing gets (mkstemp's is private)
        os.replace(tmp, out)
    except MarionetteError:
        raise
    except Exception as exc:
        raise MarionetteError(f"{out.name}: Blender's glTF exporter failed ({exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
        scene.render.fps, scene.render.fps_base = old_fps
        bpy.data.objects.remove(obj, do_unlink=True)
        bpy.data.armatures.remove(arm)
        if action is not None and action.name in bpy.data.actions:
            bpy.data.actions.remove(action)
        for o in selected:
            if o.name in view_layer.objects:
                o.select_set(True)
        view_layer.objects.active = active if active is None or active.name in view_layer.objects else None
    return out


def _tails(rig: RigInput) -> Any:
    return None if rig.ends is None else np.asarray(rig.ends, dtype=np.float64)


def _fps_pair(fps: float) -> tuple[int, float]:
    """A scene rate (``fps``, ``fps_base``) that plays ``fps`` frames a second."""
    whole = round(fps)
    if abs(whole - fps) < 1e-9:
        return int(whole), 1.0
    return int(np.ceil(fps)), float(np.ceil(fps) / fps)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
