"""The report model of a batch bake: each clip's and file's outcome, built as messages arrive;
:meth:`BatchReport.to_dict` is the JSON report, :meth:`BatchReport.summary_lines` what a person
reads."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .plan import PackPlan, file_label
from .status import CLIP_GOOD, FILE_BAKED, FILE_CANCELLED, FILE_FAILED, FILE_LOST, FILE_PARTIAL, FILE_PENDING

REPORT_FORMAT = "marionette.batch_report"
REPORT_VERSION = 1


@dataclass
class ClipOutcome:
    clip: str
    status: str
    action: str | None = None
    reason: str | None = None
    frames: int | None = None
    source_frames: int | None = None
    source_fps: float | None = None
    #: How the clip was retargeted: ``native`` (already on the target's layout: keys unchanged)
    #: or the run's method (:func:`.settings.method_summary`: ``geometric``, ``rest-space``...).
    method: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: The output file (volume) holding the clip's Action, by file name.
    output: str | None = None
    #: Why a clip found in the output was baked again (:func:`.settings.record_difference`).
    rebaked: str | None = None
    #: A quadruped's or chain-described body's per-chain figures, measured on the pose Blender
    #: plays once the clip is written (:func:`.baking.played_chain_figures`); ``None`` for humanoids.
    figures: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != []}


@dataclass
class FileOutcome:
    path: str
    label: str
    clips: list[ClipOutcome] = field(default_factory=list)
    #: Clip ids the file holds, once read (``None`` before).
    clip_ids: list[str] | None = None
    #: A reason that concerns the whole file (unreadable, not a humanoid, worker lost...).
    reason: str | None = None
    lost: bool = False
    cancelled: bool = False
    finished: bool = False
    seconds: float = 0.0
    #: Clips per worker when the file was split between two (empty: one worker baked it).
    split: list[int] = field(default_factory=list)

    def clip(self, clip_id: str) -> ClipOutcome | None:
        for c in self.clips:
            if c.clip == clip_id:
                return c
        return None

    @property
    def status(self) -> str:
        good = [c for c in self.clips if c.status in CLIP_GOOD]
        bad = [c for c in self.clips if c.status not in CLIP_GOOD]
        if self.lost:
            return FILE_LOST
        if self.cancelled:
            return FILE_CANCELLED
        if not self.finished:
            return FILE_PENDING
        if self.reason is not None and not good:
            return FILE_FAILED
        if not self.clips:
            return FILE_FAILED
        if bad or self.reason is not None:
            return FILE_PARTIAL if good else FILE_FAILED
        return FILE_BAKED

    def summary_reason(self) -> str | None:
        if self.reason is not None:
            return self.reason
        if self.finished and not self.clips:
            return "the file has no animation to bake"
        bad = [c for c in self.clips if c.status not in CLIP_GOOD]
        if bad:
            return "; ".join(f"clip {c.clip!r}: {c.reason or c.status}" for c in bad)
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "label": self.label, "status": self.status}
        reason = self.summary_reason()
        if reason:
            d["reason"] = reason
        d["clips"] = [c.to_dict() for c in self.clips]
        d["seconds"] = round(self.seconds, 4)
        if self.split:
            d["split"] = list(self.split)
        return d


class BatchReport:
    """Per-file outcome of a batch bake, built as messages arrive; :meth:`to_dict` is the JSON."""

    def __init__(self, plan: PackPlan) -> None:
        self.files: list[FileOutcome] = [FileOutcome(f.path, f.label) for f in plan.files]
        for path, reason in plan.refused:
            self.files.append(FileOutcome(path, file_label(os.path.basename(path)), reason=reason, finished=True))
        self.ignored = list(plan.ignored)
        self.timings: dict[str, float] = {}
        self.counters: dict[str, int] = {}
        self.interrupted: str | None = None
        self.info: dict[str, Any] = {}

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + float(seconds)

    def count(self, what: str, n: int = 1) -> None:
        self.counters[what] = self.counters.get(what, 0) + n

    def by_status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            out[f.status] = out.get(f.status, 0) + 1
        return out

    def clip_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            for c in f.clips:
                out[c.status] = out.get(c.status, 0) + 1
        return out

    @property
    def ok(self) -> bool:
        """Every file baked (now, earlier, or recovered from an interrupted run)."""
        return self.interrupted is None and all(f.status == FILE_BAKED for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "ok": self.ok,
            "interrupted": self.interrupted,
            **self.info,
            "files_by_status": self.by_status(),
            "clips_by_status": self.clip_counts(),
            "files": [f.to_dict() for f in self.files],
            "ignored": [{"path": p, "reason": r} for p, r in self.ignored],
            "timings": {k: round(v, 4) for k, v in sorted(self.timings.items())},
            "counters": dict(sorted(self.counters.items())),
        }

    def summary_lines(self) -> list[str]:
        """One line per file that did not bake, after a totals line (what a person reads)."""
        clips = self.clip_counts()
        good = sum(clips.get(s, 0) for s in CLIP_GOOD)
        files = self.by_status()
        head = f"{good} clips baked from {files.get(FILE_BAKED, 0)} of {len(self.files)} files"
        extra = [f"{n} {s}" for s, n in sorted(files.items()) if s != FILE_BAKED]
        lines = [head + (f" ({', '.join(extra)})" if extra else "")]
        if self.interrupted:
            lines.append(f"interrupted: {self.interrupted}")
        control = self.info.get("control_rig")
        if control:
            lines.append(control_rig_line(control))
        lines.extend(f"note: {note}" for note in self.info.get("notes", []))
        measured = [(f.label, c) for f in self.files for c in f.clips if c.figures and "summary" in c.figures and c.status in CLIP_GOOD]
        if measured:
            means = [float(c.figures["summary"]["mean_direction_error"]) for _, c in measured if c.figures]
            worst_label, worst = max(measured, key=lambda lc: float((lc[1].figures or {})["summary"]["max_direction_error"]))
            top = float((worst.figures or {})["summary"]["max_direction_error"])
            lines.append(
                f"chains: direction error {sum(means) / len(means):.2f}° mean over {len(means)} clip{'s' if len(means) != 1 else ''}, "
                f"{top:.2f}° at most ({worst_label}, {worst.clip})"
            )
        for f in self.files:
            if f.status != FILE_BAKED:
                name, reason = os.path.basename(f.path), f.summary_reason() or ""
                # Readers' messages often start with the file already.
                said = reason.startswith((name, f.path))
                lines.append(f"  {f.status:9s} {reason if said else f'{name}: {reason}'}")
        return lines


def control_rig_line(control: Mapping[str, Any]) -> str:
    """What the printed summary says of a control-rig target (the report's ``control_rig``)."""
    switches = ", ".join(f"{w['property']}={w['value']:g} on {w['bone']}" for w in control.get("switches", [])[:4])
    more = len(control.get("switches", [])) - 4
    said = f"; switches {switches}" + (f" and {more} more" if more > 0 else "") if switches else ""
    return (
        f"target is a control rig ({control.get('kind')}): every clip keyed on its controls, plan {control.get('plan')!r} "
        f"({len(control.get('controls', []))} controls{said})"
    )
