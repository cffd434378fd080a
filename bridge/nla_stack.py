"""Push to NLA: a new Action kept on its object as an NLA strip that does not play, instead of
being played.

Retarget Clip and Batch Bake with "Push to NLA" put each new Action on a muted track of its own,
named after the Action and stacked above the tracks already there, holding one strip; the object
goes on playing the Action it played before, exactly as before. Existing tracks, strips and Actions
are not touched: the push only adds. Everything happens in the caller's operator, so one undo step
takes it back.

It is the track that is muted (its checkbox in the NLA editor: one click plays the clip for
review), and the strip is left live. A live track holding only muted strips would not do: Blender
then plays the active Action through the NLA, where its influence and blend mode apply (measured
with 5.0.1: an active Action at influence 0.5 moves an object by 2.0 with no tracks, by 1.0 once a
live track holds a muted strip, by 2.0 with the track muted).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import compat


def push_problem(obj: Any) -> str | None:
    """Why new Actions cannot be pushed onto ``obj``'s NLA, or ``None``: a track cannot be added
    while the NLA is in tweak mode (checked before anything is written)."""
    ad = obj.animation_data
    if ad is not None and ad.use_tweak_mode:
        return f"armature {obj.name!r} is in NLA tweak mode: leave tweak mode (Tab in the NLA editor) to push new clips to the NLA"
    return None


def push_action(obj: Any, action: Any, action_slot: Any = None) -> Any:
    """Add ``action`` to ``obj``'s NLA as the strip of a new muted track named after it, above the
    existing tracks, starting at the action's first frame. Returns the track (its one strip is
    ``track.strips[0]``; both names are the action's, unless Blender made them unique).

    The strip plays ``action`` through ``action_slot`` (default: the slot ``obj`` would play it
    through, :func:`.compat.action_slot_for`). The object's active Action and every existing
    track, strip and Action are left as they are."""
    ad = obj.animation_data or obj.animation_data_create()
    if action_slot is None:
        action_slot = compat.action_slot_for(action, obj)
    top = ad.nla_tracks[-1] if len(ad.nla_tracks) else None
    track = ad.nla_tracks.new(prev=top)  # after the last one: the top of the stack
    track.name = action.name
    first = float(action.frame_range[0])
    strip = track.strips.new(action.name, int(first), action)
    if first != int(first):
        strip.frame_start_ui = first  # keep the keys' own frames (the whole strip moves)
    if compat.SLOTTED_ACTIONS and action_slot is not None and strip.action_slot != action_slot:
        strip.action_slot = action_slot
    track.mute = True  # not the strip alone (module docstring)
    return track


#: Pose-bone channels kept by :func:`what_it_plays` (what an armature shows where no key sets them).
_POSE_CHANNELS = {"location": 3, "rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4, "scale": 3}


@dataclass
class Playing:
    """What an object played and showed before new Actions were written on it."""

    action: Any
    action_slot: Any
    pose: dict[str, Any]


def what_it_plays(obj: Any) -> Playing:
    """``obj``'s active Action and slot and, for an armature, its pose channels (what it shows on
    bones no key sets, and everywhere when it plays no Action)."""
    action, action_slot = compat.current_action(obj)
    pose = {}
    if obj.pose is not None:
        for prop, size in _POSE_CHANNELS.items():
            buf = np.empty(len(obj.pose.bones) * size, dtype=np.float32)
            obj.pose.bones.foreach_get(prop, buf)
            pose[prop] = buf
    return Playing(action, action_slot, pose)


def push_keeping_active(obj: Any, actions: list[Any], before: Playing) -> list[Any]:
    """Push ``actions`` in order (the last on top), then make ``obj`` play and show what it did
    ``before`` they were written (:func:`what_it_plays`). Returns the tracks."""
    tracks = [push_action(obj, a) for a in actions]
    for prop, buf in before.pose.items():
        obj.pose.bones.foreach_set(prop, buf)
    compat.assign_action(obj, before.action, before.action_slot)
    return tracks


def drop_emptied_tracks(obj: Any) -> list[str]:
    """Remove ``obj``'s pushed tracks (muted, one strip) whose strip lost its Action (a clip baked
    again replaced it: its new Action is pushed on a track of its own). Returns their names."""
    ad = obj.animation_data
    if ad is None:
        return []
    gone = [t for t in ad.nla_tracks if t.mute and len(t.strips) == 1 and t.strips[0].action is None]
    names = [t.name for t in gone]
    for track in gone:
        ad.nla_tracks.remove(track)
    return names


@contextmanager
def playing(obj: Any, action: Any, action_slot: Any = None) -> Iterator[None]:
    """``obj`` plays ``action`` for the ``with`` block, then plays what it played before: to
    measure an Action that was pushed to the NLA as Blender plays it when active."""
    before = compat.current_action(obj)
    if action_slot is None:
        action_slot = compat.action_slot_for(action, obj)
    compat.assign_action(obj, action, action_slot)
    try:
        yield
    finally:
        compat.assign_action(obj, *before)
