"""Core retarget inputs built from the sample rigs (:mod:`marionette.core.rig.samples`)."""

from __future__ import annotations

from collections.abc import Mapping

from marionette.core.retarget.geometric import RigInput
from marionette.core.rig.samples import SampleRig


def rig_input(rig: SampleRig, slots: Mapping[str, str] | None = None) -> RigInput:
    """The rig as the retarget reads it: its skeleton, its humanoid slots (``slots`` in their
    place when given) and its bone tails."""
    return RigInput(rig.skeleton, dict(rig.slots if slots is None else slots), rig.tails)
