"""The Quality panel's figures after Retarget Clip: shown at once, or measured after the click
returns, in a timer (the click itself then costs only the retarget).

:func:`show_quality` puts a measured report into the panel's data (and colours the bones when
asked); :func:`defer` keeps a retarget whose summary is still to measure and starts the timer
(:func:`finish_pending_summaries`), which measures it and shows it; :func:`measured_summary` keeps
the latest few so an undo back to a click's own step shows its figures.
"""

from __future__ import annotations

import json
from typing import Any

import bpy

from ..bridge import played_pose
from ..core.errors import MarionetteError
from ..core.retarget.geometric import Binding

#: Measure the quality summary after Retarget Clip returns, in a timer that fills the Quality
#: panel (the click itself then costs only the retarget). ``None``: when Blender has a window;
#: in the background (command line, Blender as a module) nothing runs timers, so it is measured
#: before the operator returns.
DEFER_SUMMARY: bool | None = None


#: Per scene, the last retarget whose summary is still to measure, and whether to colour bones.
_PENDING: dict[str, tuple[Any, bool]] = {}  # a usecases.retarget.RetargetOutcome, and the colours


#: The summaries measured after their click, by action name (the latest few): an undo back to a
#: click's own step brings back its "measuring" state, and the panel shows these figures then.
_MEASURED: dict[str, str] = {}



def summary_pending(scene: Any) -> bool:
    """Whether a retarget's summary is still to be measured for ``scene`` (the Quality panel then
    says it is measuring)."""
    return getattr(scene, "name", None) in _PENDING


def measured_summary(action_name: str) -> dict[str, Any] | None:
    """The Quality panel's figures measured after the click that made ``action_name``, if any."""
    text = _MEASURED.get(action_name)
    return None if text is None else dict(json.loads(text))


def defer_summary() -> bool:
    """Whether Retarget Clip leaves its summary to the timer (see :data:`DEFER_SUMMARY`)."""
    return not bpy.app.background if DEFER_SUMMARY is None else DEFER_SUMMARY



def defer(scene: Any, outcome: Any, color_bones: bool) -> None:
    """Keep ``outcome`` (a retarget not judged yet) for the timer to measure and show in
    ``scene``'s Quality panel, which says it is measuring until then (warnings too)."""
    scene.marionette.last_report = json.dumps({"action": outcome.action.name, "pending": True})
    _PENDING[scene.name] = (outcome, color_bones)
    if not bpy.app.timers.is_registered(finish_pending_summaries):
        bpy.app.timers.register(finish_pending_summaries, first_interval=0.0)


def show_quality(settings: Any, outcome: Any, color_bones: bool, *, keep: bool = False) -> None:
    """The measured summary into the Quality panel's data (and the bones' colours when asked);
    ``keep`` also keeps it for :func:`measured_summary`."""
    settings.last_report = json.dumps(
        {
            "action": outcome.action.name,
            **outcome.report["summary"],
            "foot_slide": foot_slide(outcome.report),
            "hip_drop": outcome.report.get("planted_hip_drop", {}),
            **played_pose.panel_fields(outcome.report),
        }
    )
    if keep:
        if len(_MEASURED) >= 16:
            _MEASURED.pop(next(iter(_MEASURED)))
        _MEASURED[outcome.action.name] = settings.last_report
    if color_bones:
        color_bones_by_error(settings.target, outcome.binding, outcome.report)


def finish_pending_summaries() -> None:
    """Measure the retargets whose summary is pending and show it (the timer's callback; returns
    ``None`` so it runs once). A retarget undone or deleted meanwhile, or a scene whose panel now
    shows another result, is dropped."""
    pending = list(_PENDING.items())
    _PENDING.clear()
    for scene_name, (outcome, color_bones) in pending:
        scene = bpy.data.scenes.get(scene_name)
        settings = getattr(scene, "marionette", None)
        if settings is None:
            continue
        try:
            if json.loads(settings.last_report or "{}") != {"action": outcome.action.name, "pending": True}:
                continue  # the panel shows another result now
            outcome.report.update(outcome.judge_later())
            outcome.judge_later = None
            show_quality(settings, outcome, color_bones, keep=True)
        except (ReferenceError, MarionetteError):  # the action or the target is gone (undo, deleted)
            settings.last_report = ""  # nothing to show rather than "Measuring…" for ever
    for window in getattr(bpy.context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()



def foot_slide(report: dict[str, Any]) -> dict[str, float]:
    """How far each foot slides while the source's is planted, and the source's own slide (in hip
    heights, summed over the contact frames): ``{"foot.L": ..., "foot.L source": ...}``."""
    skate = report.get("foot_skating", {})
    out = {}
    for side in ("L", "R"):
        foot = f"foot.{side}"
        if skate.get(f"{foot} contact frames"):
            out[foot] = float(skate[f"{foot} slide"])
            out[f"{foot} source"] = float(skate[f"{foot} source slide"])
    return out


def color_bones_by_error(target: Any, binding: Binding, report: dict[str, Any], worst_deg: float = 5.0) -> None:
    """Colour the target's pose bones by their mean direction error: green (exact) to red
    (``worst_deg`` or more). Bones without a measurement keep their colours."""
    errors = report["direction_error_deg"]
    for slot, figures in errors.items():
        bone = binding.target.skeleton.names[binding.target.slots[slot]]
        pb = target.pose.bones.get(bone)
        if pb is None:
            continue
        u = min(1.0, max(0.0, float(figures["mean"]) / worst_deg))
        colour = (u, 1.0 - u, 0.1)
        pb.color.palette = "CUSTOM"
        pb.color.custom.normal = colour
        pb.color.custom.select = tuple(min(1.0, c + 0.3) for c in colour)
        pb.color.custom.active = (1.0, 1.0, 1.0)



def clear() -> None:
    """Stop the timer and forget every pending and measured summary (on unregister)."""
    if bpy.app.timers.is_registered(finish_pending_summaries):
        bpy.app.timers.unregister(finish_pending_summaries)
    _PENDING.clear()
    _MEASURED.clear()
