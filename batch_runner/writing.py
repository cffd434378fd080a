"""The runner's writing side: baked clips wait for their file's turn, then are written into the
open file in pack order (:func:`.bridge.action_write.write_action`; on a control rig, keyed on
its controls and checked by :func:`.bridge.control_target.write_controls`), and the output file being
filled is named, recorded and saved as a volume when it passes its budget. A mixin of
:class:`.runner.BatchBake`, which holds the state it uses."""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import bpy

from ..bridge import compat
from ..bridge.action_write import write_action
from ..bridge.played_pose import switch_to_pose_position
from ..core.batch.messages import Message, clip_from_message, drop_arrays, message_bytes, whole_clip_from_message
from ..core.batch.output_files import (
    CLIP_PROPERTY,
    FILES_RECORD,
    SETTINGS_PROPERTY,
    SOURCE_PROPERTY,
    TARGET_RECORD,
    part_file_name,
    read_part,
    volume_path,
)
from ..core.batch.plan import PackPlan, action_base_name, clip_key, final_action_names
from ..core.batch.report import BatchReport, ClipOutcome, FileOutcome
from ..core.batch.settings import BakeSettings
from ..core.batch.status import CLIP_BAKED, CLIP_FAILED, CLIP_LOST
from ..core.errors import MarionetteError
from .outputs import batch_actions, file_records, id_name_limit

#: Blender's memory per key of a baked Action, measured with bpy 5.0.1: 200 CMU clips of 114
#: frames x 122 curves took 194 MB (73 bytes a key, the F-curves' own overhead included).
ACTION_BYTES_PER_KEY = 73.0
#: Baked clips waiting for their turn to be written are held as messages up to this many bytes;
#: past it, their arrays are dropped and read back from their parts when their turn comes.
WAITING_BYTES = 256 * 2**20


@dataclass
class WrittenClip:
    """A clip written in this run into the output file being filled: its key, wanted name and
    pack order (for naming and for which clip the target plays)."""

    key: str
    base: str
    action: Any
    order: tuple[int, int]


@dataclass
class TargetState:
    """What the target looked like before the run (restored at the end)."""

    action: Any = None
    action_slot: Any = None
    fake_user: bool = False
    taken: set[str] = field(default_factory=set)
    pose: dict[str, Any] = field(default_factory=dict)


# Pose-bone channels and their rest values (axis-angle is Blender's (angle, x, y, z)).
_POSE_CHANNELS = {
    "location": (0.0, 0.0, 0.0),
    "rotation_quaternion": (1.0, 0.0, 0.0, 0.0),
    "rotation_euler": (0.0, 0.0, 0.0),
    "rotation_axis_angle": (0.0, 0.0, 1.0, 0.0),
    "scale": (1.0, 1.0, 1.0),
}


def get_pose(obj: Any) -> dict[str, Any]:
    import numpy as np

    pbs = obj.pose.bones
    out = {}
    for prop, rest in _POSE_CHANNELS.items():
        buf = np.empty(len(pbs) * len(rest), dtype=np.float32)
        pbs.foreach_get(prop, buf)
        out[prop] = buf
    return out


def set_pose(obj: Any, values: dict[str, Any] | None = None) -> None:
    """Set every pose channel of ``obj`` to ``values`` (default: the rest pose)."""
    import numpy as np

    pbs = obj.pose.bones
    for prop, rest in _POSE_CHANNELS.items():
        buf = values[prop] if values is not None else np.tile(np.asarray(rest, dtype=np.float32), len(pbs))
        pbs.foreach_set(prop, buf)


class OutputWriting:
    """Writing baked clips into the open file and saving it in volumes (see the module docstring)."""

    target: Any
    settings: BakeSettings
    plan: PackPlan
    report: BatchReport
    output: str | None
    parts_dir: str | None
    on_file: Callable[[FileOutcome, int, int], None] | None
    _waiting: dict[int, list[Message]]
    _waiting_bytes: int
    _waiting_limit: float
    _open_tasks: dict[int, int]
    _cursor: int
    _clips: dict[str, WrittenClip]
    _outcomes: dict[str, ClipOutcome]
    _stale: dict[str, str]
    _chain_body: Any  # the target read as chains, once a chain-by-chain clip needs it
    _records: dict[str, list[str]]
    _record_text: str
    _state: TargetState
    _pose_note: str | None
    _held_max: int
    _volume: int
    _volume_clips: int
    _volume_keys: int
    _volumes_total: int
    _outputs: list[str]
    _max_clips: int | None
    _max_bytes: float | None

    if TYPE_CHECKING:  # provided by the rest of :class:`.runner.BatchBake`

        def _log(self, **event: Any) -> None:
            ...

        @property
        def total_files(self) -> int:
            ...

    def _wait(self, i: int, msg: Message) -> None:
        """Keep a baked clip until its file's turn to be written; past the budget for waiting
        clips, keep only its part on disk."""
        self._waiting.setdefault(i, []).append(msg)
        self._waiting_bytes += message_bytes(msg)
        if self._waiting_bytes > self._waiting_limit and self.parts_dir:
            for j in sorted(self._waiting, reverse=True):  # the latest turns first
                for m in self._waiting[j]:
                    if "rotations" in m:
                        self._waiting_bytes -= message_bytes(m)
                        drop_arrays(m)
                        self.report.count("clips_reloaded")
                if self._waiting_bytes <= self._waiting_limit / 2:
                    break

    def _job_ended(self, i: int) -> None:
        self._open_tasks[i] = self._open_tasks.get(i, 1) - 1
        if self._open_tasks[i] <= 0:
            self.report.files[i].finished = True
            self._flush()

    def _flush(self) -> None:
        """Write the files whose tasks have all ended, in pack order, up to the first unfinished."""
        files = self.report.files
        while self._cursor < len(files) and files[self._cursor].finished:
            i = self._cursor
            f = files[i]
            ids = f.clip_ids or []
            rank = {c: k for k, c in enumerate(ids)}
            for msg in sorted(self._waiting.pop(i, []), key=lambda m: rank.get(m["clip"], len(ids))):
                if "rotations" not in msg:
                    assert self.parts_dir is not None
                    back = read_part(os.path.join(self.parts_dir, part_file_name(clip_key(f.path, msg["clip"]))))
                    if back is None:
                        f.clips.append(ClipOutcome(msg["clip"], CLIP_LOST, reason="its part could not be read back"))
                        continue
                    msg = {**back, **{k: v for k, v in msg.items() if k not in back}}
                else:
                    self._waiting_bytes -= message_bytes(msg)
                self._write_clip(i, msg, CLIP_BAKED)
            f.clips.sort(key=lambda c: rank.get(c.clip, len(ids)))
            if f.clip_ids is not None:
                self._records[f.path] = list(f.clip_ids)
            self._cursor += 1
            self._file_finished(i)

    def _write_clip(self, i: int, msg: Message, status: str) -> None:
        f = self.report.files[i]
        pf = self.plan.files[i]
        clip_id = str(msg["clip"])
        key = clip_key(pf.path, clip_id)
        base = action_base_name(pf, clip_id)
        t0 = time.perf_counter()
        # write_action leaves out curves that would not change the pose it finds (a location of
        # zero where the pose has zero). Whatever pose the open file happens to show (an importer's
        # float noise, an Action evaluated after the output was reopened), every clip is written
        # against the rest pose, so a clip's keys depend on the clip alone.
        set_pose(self.target)
        # A target shown in Rest Position would play none of the clips (a reopened volume too).
        switched = switch_to_pose_position(self.target)
        if switched:
            self._pose_note = switched
        control = self.settings.control
        try:
            if control is not None:
                action = self._write_controls(control, msg, base)
            else:
                action = write_action(self.target, clip_from_message(msg, base), base, frames=msg["frames"], fps=msg["fps"])
            if self.settings.options.root_motion == "OBJECT":
                from ..bridge.action_write import write_object_travel

                write_object_travel(self.target, action, msg["root_motion"], msg["frames"])
        except MarionetteError as exc:
            # A control rig's refusal says what missed and that nothing was written.
            f.clips.append(ClipOutcome(clip_id, CLIP_FAILED, reason=str(exc) if control is not None else f"writing the Action failed: {exc}"))
            return
        figures, warnings = msg.get("figures"), list(msg.get("warnings", []))
        if "reference" in msg:  # a chain-by-chain clip: its figures judge what Blender plays
            t_measure = time.perf_counter()
            played, hidden = self._played_chain_figures(action, msg)
            figures, warnings = {**(figures or {}), **played}, warnings + hidden
            self.report.add_time("measure", time.perf_counter() - t_measure)
        action.use_fake_user = True  # an Action no object plays is kept only with a fake user
        action[SOURCE_PROPERTY] = pf.path
        action[CLIP_PROPERTY] = clip_id
        action[SETTINGS_PROPERTY] = str(msg.get("settings") or self._record_text)
        self.report.add_time("write", time.perf_counter() - t0)
        ids = msg.get("file_clips") or [clip_id]
        self._clips[key] = WrittenClip(key, base, action, (i, ids.index(clip_id) if clip_id in ids else len(ids)))
        outcome = ClipOutcome(
            clip_id,
            status,
            action=action.name,
            frames=int(len(msg["frames"])),
            source_frames=int(msg["source_frames"]),
            source_fps=float(msg["source_fps"]),
            method=str(msg.get("method", "geometric")),
            warnings=warnings,
            rebaked=self._stale.get(key),
            figures=figures,
        )
        f.clips.append(outcome)
        self._outcomes[key] = outcome
        if outcome.rebaked:
            self.report.count("clips_rebaked")
        self._held_max = max(self._held_max, len(bpy.data.actions))
        self._volume_clips += 1
        bags = (compat.channelbag(action, action_slot) for action_slot in action.slots)
        self._volume_keys += len(msg["frames"]) * sum(len(bag.fcurves) for bag in bags if bag is not None)
        full = (self._max_clips is not None and self._volume_clips >= self._max_clips) or (
            self._max_bytes is not None and self._volume_keys * ACTION_BYTES_PER_KEY >= self._max_bytes
        )
        if full and self.output is not None:
            self._close_volume(final=False)

    def _played_chain_figures(self, action: Any, msg: Message) -> tuple[dict[str, Any], list[str]]:
        """A chain-by-chain clip's per-chain figures, measured on the pose Blender plays with
        ``action`` (just written, so played) at the message's reference frames, as a single
        retarget measures them (:func:`.core.batch.baking.played_chain_figures`); and what hides
        or overrides its keys (constraints, drivers...)."""
        import numpy as np

        from ..bridge.played_pose import played_placements, what_overrides
        from ..core.batch.baking import played_chain_figures, target_body

        skeleton = self.settings.target.skeleton
        frames = np.asarray(msg["frames"], dtype=np.float64)[np.asarray(msg["reference_picks"], dtype=np.int64)]
        played, notes = played_placements(self.target, action, frames, skeleton, fps=float(msg["fps"]))
        body = getattr(self, "_chain_body", None)
        if body is None:  # read once: the target does not change during a run
            body = self._chain_body = target_body(self.settings)
        figures = played_chain_figures(body, msg, played)
        return figures, what_overrides(self.target, action, list(msg["names"])) + notes

    def _write_controls(self, control: Any, msg: Message, base: str) -> Any:
        """A baked clip keyed on the control rig's controls (:func:`.bridge.control_target.write_controls`),
        checked on what Blender plays; the bones the workers did not drive stay at rest."""
        from ..bridge.control_target import write_controls

        skeleton = self.settings.target.skeleton
        clip = whole_clip_from_message(msg, base, skeleton)
        on_root = self.settings.options.root_motion == "ROOT_BONE"
        return write_controls(self.target, control, skeleton, clip, msg["root_motion"], base, msg["frames"], float(msg["fps"]), False, on_root)

    def _file_finished(self, i: int) -> None:
        f = self.report.files[i]
        self._log(event="file", file=f.path, status=f.status)
        if self.on_file is not None:
            self.on_file(f, self._cursor, self.total_files)


    def _close_volume(self, final: bool) -> None:
        """Name the Actions of the output file being filled, make the target play the first of
        them (or its own Action), record what the file holds and, with an output, save it; unless
        ``final``, free those Actions and go on with the next volume."""
        t0 = time.perf_counter()
        path = volume_path(self.output, self._volume) if self.output else None
        clips = dict(self._clips)
        names = final_action_names({k: c.base for k, c in clips.items()}, self._state.taken, id_name_limit())
        # Two passes so that a name freed by one rename is never taken by Blender's ".001" rule.
        for k, c in clips.items():
            c.action.name = f"marionette_batch_tmp_{part_file_name(k)}"
        for k, c in clips.items():
            c.action.name = names[k]
            self._outcomes[k].action = c.action.name
            if path is not None:
                self._outcomes[k].output = os.path.basename(path)
        st = self._state
        if st.pose:
            set_pose(self.target, st.pose)
        if st.action is not None:
            compat.assign_action(self.target, st.action, st.action_slot)
            st.action.use_fake_user = st.fake_user
        elif clips:
            first = min(clips.values(), key=lambda c: c.order)
            compat.assign_action(self.target, first.action, compat.action_slot_for(first.action, self.target))
        scene: Any = bpy.context.scene
        scene[TARGET_RECORD] = self.target.name
        record = {**file_records(), **self._records}
        scene[FILES_RECORD] = json.dumps(record)
        if path is not None and (self._volume == 0 or self._volume_clips > 0):
            from ..bridge.session import save_blend

            save_blend(path)
            self._outputs.append(path)
            self._volumes_total = self._volume + 1
        if not final:
            if st.action is None:
                compat.assign_action(self.target, None, None)
            # Every clip the file holds goes: this run's and, in a continued output, earlier ones.
            bpy.data.batch_remove([a for a, *_ in batch_actions()])
            self._state.taken = {a.name for a in bpy.data.actions}
            set_pose(self.target)
            if self.parts_dir:
                for k in clips:  # in the saved file now
                    try:
                        os.remove(os.path.join(self.parts_dir, part_file_name(k)))
                    except OSError:
                        pass
            self._log(event="volume", path=path, clips=len(clips))
            self._clips = {}
            self._volume += 1
            self._volume_clips = 0
            self._volume_keys = 0
        self.report.add_time("save", time.perf_counter() - t0)

