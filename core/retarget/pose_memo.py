"""The source poses of clips that cannot change, kept between retargets.

A clip whose arrays are all read-only, together with every array they view, cannot change: the
clip Retarget Clip reads again from Blender while its keys stay the same is such a clip (the same
arrays, see ``bridge.clip_read``). Its source pose (:func:`.geometric._source_pose`) is kept with
everything it is made of, so a click again with another target, option or mapping does not pose
the source anew. Entries are matched by identity of the arrays (held here, so never reused) and
by value of the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..rig.rotations import FloatArray

#: The last two poses, with what they are made of.
_POSES: list[tuple[tuple[Any, ...], tuple[FloatArray, FloatArray]]] = []


def frozen(*arrays: FloatArray | None) -> bool:
    """Whether none of ``arrays`` can ever change: each, and every array it views, read-only."""
    for a in arrays:
        x: object = a
        while isinstance(x, np.ndarray):
            if x.flags.writeable:
                return False
            x = x.base
    return True


def kept_pose(key: tuple[Any, ...]) -> tuple[FloatArray, FloatArray] | None:
    """The pose kept for ``key`` (arrays and other objects matched by identity, the rest by
    value), or ``None``."""
    for held, pose in _POSES:
        if len(held) == len(key) and all(
            a is b if not isinstance(a, (str, bytes, tuple, int, float, type(None))) else a == b for a, b in zip(held, key, strict=True)
        ):
            return pose
    return None


def keep_pose(key: tuple[Any, ...], pose: tuple[FloatArray, FloatArray]) -> tuple[FloatArray, FloatArray]:
    """Keep ``pose`` for ``key`` (made read-only: it is shared from now on) and return it."""
    for a in pose:
        a.flags.writeable = False
    _POSES[:] = [*_POSES[-1:], (key, pose)]
    return pose


def forget_poses() -> None:
    """Drop every kept pose (the add-on unregistered, or memory wanted back)."""
    _POSES.clear()
