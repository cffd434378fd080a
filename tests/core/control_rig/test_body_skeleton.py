"""The body skeleton a control rig's retarget runs on: mapped bones re-hung from their body
parents, loops refused, and only the bones kept (with what they hang from)."""

from __future__ import annotations

import numpy as np

from marionette.core.control_rig.body import body_rig_input, body_skeleton
from marionette.core.retarget.geometric import RigInput
from marionette.core.rig.skeleton import Skeleton


def _rig() -> Skeleton:
    # root -> ctrl -> mch -> neck ; root -> chest ; mch hangs under ctrl (a mechanism chain)
    names = ["root", "chest", "ctrl", "mch", "neck"]
    parents = [None, "root", "root", "ctrl", "mch"]
    rest = np.tile(np.eye(4), (5, 1, 1))
    rest[:, :3, 3] = [[0, 0, 0], [0, 0, 1], [0.3, 0, 0.5], [0.3, 0, 0.9], [0, 0, 1.5]]
    return Skeleton.from_rest_matrices(names, parents, rest)


def test_a_mapped_bone_is_hung_from_its_body_parent_with_its_rest_kept():
    sk = _rig()
    body = body_skeleton(sk, {"neck": "chest"})
    assert body.names[int(body.parents[body.index("neck")])] == "chest"
    assert np.allclose(body.rest_placements()[body.index("neck")], sk.rest_placements()[sk.index("neck")])
    # Turning the chest now carries the neck's head; under the armature's parent it did not.
    rot = np.zeros((1, len(body), 4))
    rot[..., 0] = 1.0
    rot[0, body.index("chest")] = [np.cos(0.5), np.sin(0.5), 0.0, 0.0]
    world = body.forward_kinematics(rot)
    assert not np.allclose(world[0, body.index("neck"), :3, 3], [0, 0, 1.5])


def test_a_parent_that_would_make_a_loop_is_refused_and_kept_bones_bring_their_ancestors():
    sk = _rig()
    body = body_skeleton(sk, {"ctrl": "neck"})  # neck hangs below ctrl: a loop
    assert body.names[int(body.parents[body.index("ctrl")])] == "root"
    kept = body_skeleton(sk, {"neck": "chest"}, keep={"neck"})
    assert set(kept.names) == {"root", "chest", "neck"}
    ends = np.arange(15.0).reshape(5, 3)
    rig = body_rig_input(RigInput(sk, {"head": "neck"}, ends), {"neck": "chest"}, keep={"neck"})
    assert np.array_equal(rig.ends[rig.skeleton.index("neck")], ends[sk.index("neck")])
