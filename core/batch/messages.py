"""Messages: what crosses between a batch bake's processes, as plain dicts of ``str``, numbers,
lists and numpy arrays (see :mod:`core.batch`). Rigs and baked clips to and from messages, and what
holding a baked clip's arrays costs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..measure.chains import REFERENCE_ARRAYS as REFERENCE_ARRAY_NAMES
from ..retarget.geometric import RigInput
from ..rig.clip import Clip
from ..rig.skeleton import Skeleton

Message = dict[str, Any]

#: The arrays of a baked clip message (saved in its part; dropped while it waits on disk).
BAKED_ARRAYS = ("rotations", "translations", "frames", "root_motion")
#: A chain-by-chain clip's reference (:func:`..measure.chains.chain_reference`) and the frames it
#: stands for, by which the writer judges what Blender plays (:func:`.baking.played_chain_figures`).
REFERENCE_ARRAYS = tuple(f"reference_{k}" for k in (*REFERENCE_ARRAY_NAMES, "picks"))
OPTIONAL_ARRAYS = ("scales", *REFERENCE_ARRAYS)


def rig_message(rig: RigInput) -> Message:
    sk = rig.skeleton
    return {
        "names": list(sk.names),
        "parents": np.asarray(sk.parents),
        "parent_frames": np.asarray(sk.parent_frames),
        "child_frames": None if sk.child_frames is None else np.asarray(sk.child_frames),
        "placement": np.asarray(sk.placement),
        "slots": dict(rig.slots),
        "ends": None if rig.ends is None else np.asarray(rig.ends, dtype=np.float64),
    }


def rig_from_message(m: Mapping[str, Any]) -> RigInput:
    sk = Skeleton(m["names"], m["parents"], m["parent_frames"], m["child_frames"], m["placement"])
    return RigInput(sk, dict(m["slots"]), m["ends"])


def clip_from_message(m: Mapping[str, Any], name: str) -> Clip:
    """The baked keys of a message as a :class:`Clip` on the driven target bones (coverage 1)."""
    frames = np.asarray(m["frames"], dtype=np.float64)
    fps = float(m["fps"])
    return Clip(
        names=tuple(m["names"]),
        times=(frames - frames[0]) / fps,
        fps=fps,
        rotations=m["rotations"],
        translations=m["translations"],
        scales=m.get("scales"),
        name=name,
        first_frame=float(frames[0]),
    )


def whole_clip_from_message(m: Mapping[str, Any], name: str, skeleton: Skeleton) -> Clip:
    """The baked keys of a message on every bone of ``skeleton`` (the target skeleton the workers
    retargeted onto), the bones it does not drive at rest, as the retarget leaves them: what
    keying a control rig reads."""
    driven = clip_from_message(m, name)
    t = driven.frame_count
    n = len(skeleton.names)
    rot = np.zeros((t, n, 4))
    rot[..., 0] = 1.0
    loc = np.zeros((t, n, 3))
    sc = None if driven.scales is None else np.ones((t, n, 3))
    cover = np.zeros(n)
    at = np.array([skeleton.index(b) for b in driven.names], dtype=np.int64)
    rot[:, at] = driven.rotations
    loc[:, at] = driven.translations
    if sc is not None and driven.scales is not None:
        sc[:, at] = driven.scales
    cover[at] = 1.0
    return Clip(tuple(skeleton.names), driven.times, driven.fps, rot, loc, sc, cover, name, driven.first_frame)


def message_bytes(message: Mapping[str, Any]) -> int:
    """Bytes of a baked clip message's arrays (what holding it costs)."""
    return sum(int(np.asarray(message[k]).nbytes) for k in (*BAKED_ARRAYS, *OPTIONAL_ARRAYS) if message.get(k) is not None)


def drop_arrays(message: Message) -> None:
    """Free a baked clip message's arrays (its part on disk still holds them: :func:`read_part`)."""
    for k in (*BAKED_ARRAYS, *OPTIONAL_ARRAYS):
        message.pop(k, None)
