"""A VMD motion as a clip source: played on its model's rig (a PMX file) or on the built-in
standard MMD skeleton (:mod:`..core.formats.mmd_standard`) in core, then brought into the scene as
an armature playing that motion, so the retarget reads it like any other source.

The motion is played as MMD plays it (:func:`..core.formats.vmd_pose.play`: keys converted to
the rig's joints, the leg IK driving the legs with MMD's on/off switches, inheritance and fixed
axes), and the pose it gives is keyed: the armature made here carries no controls. Its Action
counts MMD's 30 frames per second (``marionette_fps``, VMD frame ``f`` on frame ``f + 1``), so a
scene at another rate resamples it as it does a 120 fps BVH take.
"""

# The bpy stubs type Object.data as a union of every data type; that says nothing about this code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import os
from pathlib import Path

import bpy

from ..core.errors import FileFormatError, MarionetteError
from ..core.formats.mmd_standard import standard_model
from ..core.formats.pmx import read_pmx
from ..core.formats.pmx_rig import DEFAULT_SCALE, PmxRig, build_rig
from ..core.formats.vmd import FPS, read_vmd
from ..core.formats.vmd_pose import VmdPlay, play
from .action_write import create_armature, write_action
from .file_import import FPS_PROPERTY, LoadedFile

VMD_EXTENSION = ".vmd"
#: Object property naming the model the motion was played on.
MODEL_PROPERTY = "vmd_model"


def is_vmd(path: str | os.PathLike[str]) -> bool:
    return os.path.splitext(os.fspath(path))[1].lower() == VMD_EXTENSION


def vmd_rig(model: str | os.PathLike[str] | None = None, scale: float = DEFAULT_SCALE) -> tuple[PmxRig, str]:
    """The rig a motion plays on: the PMX ``model``'s, or the built-in standard skeleton; and its label."""
    if model is None:
        return build_rig(standard_model(), scale=scale), "standard MMD skeleton"
    if not os.path.isfile(model):
        raise FileFormatError(f"{os.path.basename(model)}: no such model file ({model})")
    return build_rig(read_pmx(model), scale=scale), os.path.basename(model)


def play_file(path: str | os.PathLike[str], model: str | os.PathLike[str] | None = None, scale: float = DEFAULT_SCALE) -> tuple[PmxRig, VmdPlay, str]:
    """Read ``path`` and play it on ``model`` (or the standard skeleton), in core; nothing in
    Blender changes. Refuses (:class:`FileFormatError`) a file or model that cannot be read or a
    motion that names none of the model's bones."""
    name = os.path.basename(os.fspath(path))
    try:
        motion = read_vmd(path)
        rig, label = vmd_rig(model, scale)
        played = play(rig, motion, name=Path(name).stem)
    except FileFormatError:
        raise
    except MarionetteError as exc:
        raise FileFormatError(f"{name}: {exc}") from exc
    return rig, played, label


def load_vmd(path: str | os.PathLike[str], model: str | os.PathLike[str] | None = None, scale: float = DEFAULT_SCALE) -> LoadedFile:
    """The motion at ``path`` played on ``model`` (or the standard skeleton), as a new armature in
    the scene's collection with one Action at 30 fps. Refuses before anything is created."""
    path = os.path.abspath(os.fspath(path))
    rig, played, label = play_file(path, model, scale)
    scene = bpy.context.scene
    obj = create_armature(rig.skeleton, Path(path).stem, tails=rig.tails, collection=scene.collection)
    try:
        obj[MODEL_PROPERTY] = label
        action = write_action(obj, played.clip, played.clip.name, fps=FPS)
        action[FPS_PROPERTY] = FPS
    except Exception:
        arm = obj.data
        bpy.data.objects.remove(obj)
        bpy.data.armatures.remove(arm)
        raise
    return LoadedFile(path=path, armatures=[obj], actions=[action], objects=[obj], fps=FPS)
