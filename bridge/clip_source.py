"""A source clip read without Blender: a BVH take for the ``retarget`` command.

Blender's BVH importer keys every channel of every frame into an Action (a 28-minute take at
120 fps is 200,000 keys per curve) only for the retarget to read them back. A BVH source is read
with numpy instead (:mod:`core.formats.bvh`, as ``bake-pack`` reads a pack), its rig auto-mapped as a
Blender import of it would be (the same bone ends, see ``core.batch.baking.bvh_rest_tails``), and its
clip converted at the scene's rate a piece at a time (:meth:`core.formats.bvh.BvhData.clip_at_rate`), so
a long take costs about what ``bake-pack`` spends on it.

Only takes of :data:`LONG_TAKE_FRAMES` frames or more go this way: a shorter clip is imported as
before. Retargeted onto its own skeleton (the take imported by Blender), a long take is put on the
bones the importer made (:func:`core.formats.reframe.onto_own_frames`) and bound natively: its keys are
the importer's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.batch.baking import bvh_rest_tails
from ..core.errors import FileFormatError, MappingError
from ..core.formats.bvh import CHUNK_FRAMES, BvhData, read_bvh
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.humanoid_check import check_humanoid_skeleton
from ..core.retarget.geometric import RigInput
from ..core.rig.clip import Clip

#: A BVH source with at least this many frames (about 80 s at 120 fps) is read without Blender.
LONG_TAKE_FRAMES = 10_000


def is_long_bvh_take(path: str) -> bool:
    """Whether ``path`` is a BVH file whose header declares :data:`LONG_TAKE_FRAMES` frames or
    more (read from the header alone; anything unreadable is left to the importer to refuse)."""
    if os.path.splitext(path)[1].lower() != ".bvh" or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            for _ in range(100_000):  # the hierarchy, then the MOTION header
                line = f.readline(4096)
                if not line:
                    return False
                words = line.split()
                if words[:1] == [b"Frames:"] and len(words) == 2 and words[1].isdigit():
                    return int(words[1]) >= LONG_TAKE_FRAMES
    except OSError:
        return False
    return False


@dataclass(frozen=True)
class FileClip:
    """A clip file's rig (auto-mapped) and motion, for :func:`..usecases.retarget.retarget_action` in place of
    an armature and its Action."""

    name: str
    rig: RigInput
    mapping: BoneMapping
    data: BvhData
    #: File frames converted at once (the result is the same whatever the size).
    chunk_frames: int = CHUNK_FRAMES

    def clip(self, fps: float | None) -> Clip:
        """The clip at ``fps`` (``None``: the file's own rate), resampled as an Action's clip is."""
        return self.data.clip_at_rate(fps, self.name, self.chunk_frames)


def read_bvh_clip(path: str, clip: str | None = None, chunk_frames: int = CHUNK_FRAMES) -> FileClip:
    """The BVH file at ``path`` as a :class:`FileClip`; refuses what the Blender import would:
    an unreadable file, no frames, a rig that is not a humanoid, a clip name the file has not."""
    label = os.path.basename(path)
    data = read_bvh(path)  # names the file and line of any problem
    if data.frame_count == 0:
        raise FileFormatError(f"{label}: the BVH file has no frames of motion")
    name = os.path.splitext(label)[0]
    if clip is not None and clip != name:
        raise MappingError(f"{label}: no clip called {clip!r} (clips: {name!r})")
    skeleton = data.skeleton()
    tails = bvh_rest_tails(data)
    try:
        mapping = check_humanoid_skeleton(skeleton, tails, None)
    except MappingError as exc:
        raise MappingError(f"armature {name!r}: {exc}") from exc
    return FileClip(name, RigInput(skeleton, mapping.bones(), tails), mapping, data, chunk_frames)
