"""VRM Animation: a clip played by any humanoid written as a ``.vrma`` file that plays on every VRM avatar.

The clip is retarget onto the normalised VRM humanoid (:mod:`..core.formats.vrma`: a T-pose with
no rest rotation, one bone per VRM humanoid bone the source maps) by the retarget's own geometric
frames, every bone's direction carried as it is (no foot planting: the avatar's proportions are
not known here) and the travel on the hips scaled by hip height; then written through Blender's
glTF exporter (:mod:`..bridge.vrma_export`). The source and its Actions are never modified and
nothing is left in the scene.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bridge.clip_read import clip_from_action
from ..bridge.clip_source import FileClip, is_long_bvh_take, read_bvh_clip
from ..bridge.file_import import load_file, scene_fps
from ..bridge.session import fresh_session
from ..bridge.vrma_export import write_vrma
from ..core.formats.vrma import HEIGHT, HUMAN_BONES, normalised_rig
from ..core.mapping.bone_mapping import BoneMapping
from ..core.retarget.binding_cache import BindingCache
from ..core.retarget.geometric import RetargetOptions, RigInput
from ..core.retarget.methods import retarget_with_methods
from ..core.rig.clip import Clip
from .rigs import pick_action, pick_armature, rig_input

#: Bindings of the rigs written as VRM Animation in this session (one per source rig and slots).
BINDINGS = BindingCache()


@dataclass
class VrmaOutcome:
    path: Path
    #: The normalised humanoid the clip was carried onto, and the clip on it (what the file holds).
    rig: RigInput
    clip: Clip
    bones: tuple[str, ...]
    report: dict[str, Any]


def export_vrma(
    source: Any,
    action: Any,
    output: str | Path,
    *,
    fps: float,
    source_mapping: BoneMapping | None = None,
    name: str | None = None,
    fingers: bool = True,
) -> VrmaOutcome:
    """Write ``action`` played by ``source`` (an armature, or a :class:`FileClip` with ``action``
    ``None``) to ``output`` as VRM Animation at ``fps`` frames a second, its timing kept."""
    if isinstance(source, FileClip):
        src_in, src_map = source.rig, source.mapping
        clip = source.clip(fps)
    else:
        src_in, src_map = rig_input(source, source_mapping)
        clip = clip_from_action(source, action).resample(fps)
    rig = normalised_rig(s for s in src_in.slots if fingers or not _is_finger(s))
    options = RetargetOptions(root_motion="HIPS", plant_feet=False, fingers=fingers)
    run = retarget_with_methods(BINDINGS, src_in, rig, clip, None, options, allow_native=False)
    title = name or clip.name
    bones = tuple(b.name for b in HUMAN_BONES if b.name in rig.slots.values())
    path = write_vrma(rig, run.result.clip, output, title, fps, bones)
    report: dict[str, Any] = {
        "file": str(path.resolve()),
        "clip": {"name": title, "frames": clip.frame_count, "fps": fps, "duration_s": clip.frame_count / fps},
        "humanoid_bones": list(bones),
        "left_out": sorted(s for s in src_in.slots if s not in rig.slots),
        "rest": {"height_m": HEIGHT, "hips_height_m": float(rig.skeleton.rest_placements()[0, 2, 3])},
        "mapping": src_map.to_dict(),
        "warnings": list(run.warnings),
    }
    return VrmaOutcome(path, rig, run.result.clip, bones, report)


def _is_finger(slot: str) -> bool:
    return slot.split("_")[0] in {"thumb", "index", "middle", "ring", "little"}


def export_vrma_file(
    source_path: str, output: str, *, clip: str | None = None, mapping: str | None = None, fingers: bool = True,
    fps: float | None = None,
) -> VrmaOutcome:
    """The command line's ``export-vrma``: the clip file into a fresh scene, its clip (``clip``
    names one of several) written to ``output`` at ``fps`` frames a second (default: the scene's,
    24), its timing kept. Nothing is written on failure."""
    fresh_session()
    source_map = BoneMapping.load(mapping) if mapping else None
    if is_long_bvh_take(source_path):
        source, action = read_bvh_clip(source_path, clip), None
        name = source.name
    else:
        loaded = load_file(source_path)
        source = pick_armature(loaded.armatures, None, Path(loaded.path).name, "to export")
        action = pick_action(loaded, source, clip)
        name = action.name.split("|")[-1]
    outcome = export_vrma(source, action, output, fps=fps or scene_fps(), source_mapping=source_map, name=name, fingers=fingers)
    outcome.report["source"] = str(Path(source_path).resolve())
    return outcome
