"""Bone inheritance and fixed axes as the control stack runs them (docs/controls.md#inheritance-and-fixed-axes). The maths is in
:mod:`core.controls.inheritance`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..inheritance import FixedAxes, Inheritance, inherit, twist_about
from .base import Candidate, ControlKind, ControlState, Evaluation, check_common, full_report


@dataclass(frozen=True)
class InheritControl(ControlKind):
    """Bone inheritance, "append"/"grant" (docs/controls.md#inheritance-and-fixed-axes): runs after every control that writes one
    of its sources."""

    name: str
    inheritance: Inheritance
    priority: int = 0
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, 0.0)

    @property
    def written(self) -> tuple[int, ...]:
        return self.inheritance.rotated

    @property
    def moved(self) -> tuple[int, ...]:
        return self.inheritance.moved

    @property
    def sources(self) -> tuple[int, ...]:
        return self.inheritance.sources

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        pose = ev.pose
        rot, tr = inherit(self.inheritance, pose.rotations, pose.translations)
        return [Candidate(rot, tr if self.moved else None, full_report(self.name, pose.frames))]


@dataclass(frozen=True)
class FixedAxisControl(ControlKind):
    """Fixed axes (docs/controls.md#inheritance-and-fixed-axes): each joint keeps only the twist about its axis."""

    name: str
    axes: FixedAxes
    priority: int = 0
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_common(self.name, self.priority, self.weight, 0.0)

    @property
    def written(self) -> tuple[int, ...]:
        return self.axes.joints

    def run(self, group: Sequence[ControlKind], states: Sequence[ControlState], ev: Evaluation) -> list[Candidate]:
        pose = ev.pose
        joints = list(self.axes.joints)
        rot = twist_about(pose.rotations[:, joints], self.axes.axes)
        return [Candidate(rot, None, full_report(self.name, pose.frames))]
