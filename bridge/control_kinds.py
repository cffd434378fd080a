"""What the control rows' settings mean to the bridge: which kinds are IK, the core solver of
each closure choice, the look-at chain's bone count, the bones' local axes. The row properties
(:mod:`..properties.control_settings`) and the rows' reader (:mod:`.control_rows`) share them."""

from __future__ import annotations

#: Kinds that reach a target through an IK solver.
IK_KINDS = ("TWO_BONE_IK", "FABRIK", "CCD")
#: Core solver name per closure solver choice.
CLOSURE_SOLVERS = {"FABRIK": "fabrik", "CCD": "ccd", "TWO_BONE": "two_bone"}
#: Bones of a look-at chain that have a turn weight of their own.
LOOK_AT_BONES = 8
AXIS_VECTORS = {
    "POS_X": (1.0, 0.0, 0.0),
    "NEG_X": (-1.0, 0.0, 0.0),
    "POS_Y": (0.0, 1.0, 0.0),
    "NEG_Y": (0.0, -1.0, 0.0),
    "POS_Z": (0.0, 0.0, 1.0),
    "NEG_Z": (0.0, 0.0, -1.0),
}
