"""An Action's keys as plain bytes per F-curve, to compare an Action before and after something
that must leave it as it was."""

from __future__ import annotations

import numpy as np


def curves_snapshot(action) -> dict:
    """``{(slot, data path, index): the keys' (frame, value) pairs as bytes}`` over every slot."""
    from marionette.bridge import compat

    out = {}
    for slot in action.slots:
        for fc in compat.action_fcurves(action, slot):
            buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", buf)
            out[(slot.identifier, fc.data_path, fc.array_index)] = buf.tobytes()
    return out
