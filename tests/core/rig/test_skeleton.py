"""The rig model (docs/conventions.md#the-rig-model): attachment frames, FK, world-to-local, lookup, signature."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import RigError
from marionette.core.rig import rotations as R
from marionette.core.rig.skeleton import Joint, Skeleton


def random_transforms(rng, n, scale=1.0):
    return R.transform_from_parts(R.quat_normalize(rng.normal(size=(n, 4))), rng.normal(size=(n, 3)) * scale)


def random_skeleton(rng, n=12, with_child_frames=True):
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    c0 = random_transforms(rng, n)
    c1 = random_transforms(rng, n) if with_child_frames else None
    return Skeleton([f"j{i}" for i in range(n)], parents, c0, c1)


def naive_fk(sk, local):
    """One frame, one joint at a time, straight from the definition M = P C0 T inv(C1)."""
    out = np.zeros_like(local)
    for t in range(local.shape[0]):
        for i in range(len(sk)):
            c1 = np.eye(4) if sk.child_frames is None else sk.child_frames[i]
            m = sk.parent_frames[i] @ local[t, i] @ np.linalg.inv(c1)
            p = sk.parents[i]
            out[t, i] = m if p < 0 else out[t, p] @ m
    return out


def test_fk_matches_the_attachment_frame_definition():
    rng = np.random.default_rng(1)
    sk = random_skeleton(rng)
    rot = R.quat_normalize(rng.normal(size=(5, len(sk), 4)))
    tr = rng.normal(size=(5, len(sk), 3))
    world = sk.forward_kinematics(rot, tr)
    assert np.abs(world - naive_fk(sk, sk.local_transforms(rot, tr))).max() < 1e-12


def test_world_local_world_round_trip_on_random_poses():
    rng = np.random.default_rng(2)
    sk = random_skeleton(rng, 20)
    rot = R.quat_normalize(rng.normal(size=(64, len(sk), 4)))
    tr = rng.normal(size=(64, len(sk), 3))
    world = sk.forward_kinematics(rot, tr)
    local = sk.local_from_world(world)
    back = sk.forward_kinematics_from_locals(local)
    assert np.abs(back - world).max() < 1e-9
    assert np.abs(local - sk.local_transforms(rot, tr)).max() < 1e-9


def test_joint_local_from_world_uses_the_parents_current_placement():
    rng = np.random.default_rng(3)
    sk = random_skeleton(rng, 6)
    rot = R.quat_normalize(rng.normal(size=(4, len(sk), 4)))
    world = sk.forward_kinematics(rot)
    # Move the parent of joint 5 somewhere else; the child's local must put it at the same
    # world placement under the *moved* parent.
    p = int(sk.parents[5])
    moved_parent = world[:, p] @ random_transforms(rng, 1)[0]
    local = sk.joint_local_from_world(5, world[:, 5], moved_parent)
    c1 = sk.child_frames[5]
    rebuilt = moved_parent @ sk.parent_frames[5] @ local @ np.linalg.inv(c1)
    assert np.abs(rebuilt - world[:, 5]).max() < 1e-9


def test_blender_bones_are_attachment_frames_with_identity_child_frame():
    rng = np.random.default_rng(4)
    rest = random_transforms(rng, 4)
    # Given in an order that lists a child before its parent: construction reorders parents first.
    sk = Skeleton.from_rest_matrices(["hand", "arm", "root", "head"], ["arm", "root", None, "root"], rest)
    assert sk.names == ("root", "arm", "hand", "head")
    assert sk.child_frames is None
    rest_by_name = dict(zip(["hand", "arm", "root", "head"], rest, strict=True))
    placements = sk.rest_placements()
    for i, name in enumerate(sk.names):
        assert np.abs(placements[i] - rest_by_name[name]).max() < 1e-12


def test_parents_must_come_first():
    with pytest.raises(RigError, match="before its parent"):
        Skeleton(["a", "b"], [1, -1], np.broadcast_to(np.eye(4), (2, 4, 4)))


def test_ambiguous_bare_names_are_refused_but_parent_qualified_names_resolve():
    eye = np.broadcast_to(np.eye(4), (5, 4, 4))
    sk = Skeleton(["root", "armL", "end", "armR", "end"], [-1, 0, 1, 0, 3], eye)
    with pytest.raises(RigError, match="more than one joint"):
        sk.index("end")
    assert sk.index("armL/end") == 2
    assert sk.index("armR/end") == 4
    assert sk.find("end") is None
    with pytest.raises(RigError, match="no joint called"):
        sk.index("missing")


def test_joints_with_missing_parts_are_dropped_and_disconnected_trees_kept():
    eye = np.eye(4)
    joints = [
        Joint("hand", "arm", eye),
        Joint("arm", "torso", eye),
        Joint("torso", None, eye),
        Joint("ghost_child", "ghost", eye),  # its parent part does not exist
        Joint("prop", None, eye),  # another tree: kept, unparented
        Joint("prop_tip", "prop", eye),
    ]
    sk = Skeleton.from_joints(joints, root="torso")
    assert set(sk.names) == {"torso", "arm", "hand", "prop", "prop_tip"}
    assert sk.parents[sk.index("prop")] == -1
    assert sk.parents[sk.index("prop_tip")] == sk.index("prop")
    assert sk.parents[sk.index("hand")] == sk.index("arm")


def test_signature_tracks_names_structure_and_rest_not_bone_count():
    rng = np.random.default_rng(5)
    sk = random_skeleton(rng, 8)
    same = Skeleton(sk.names, sk.parents, sk.parent_frames + 1e-7, sk.child_frames)
    assert same.signature() == sk.signature()
    renamed = Skeleton([n + "x" for n in sk.names], sk.parents, sk.parent_frames, sk.child_frames)
    moved = sk.parent_frames.copy()
    moved[3, :3, 3] += 0.01
    rest_changed = Skeleton(sk.names, sk.parents, moved, sk.child_frames)
    assert len({sk.signature(), renamed.signature(), rest_changed.signature()}) == 3


def test_placement_is_applied_on_top_of_skeleton_space():
    rng = np.random.default_rng(6)
    sk = random_skeleton(rng, 5)
    placement = R.transform_from_parts(R.quat_from_axis_angle([1, 0, 0], -np.pi / 2), [0, 0, 1], [100, 100, 100])
    placed = sk.with_placement(placement)
    world = placed.world_from_skeleton(placed.rest_placements())
    assert np.abs(world - placement @ sk.rest_placements()).max() < 1e-9
    assert np.abs(placed.skeleton_from_world(world) - sk.rest_placements()).max() < 1e-9


def test_non_finite_rest_is_refused_naming_the_joint():
    c0 = np.broadcast_to(np.eye(4), (3, 4, 4)).copy()
    c0[2, 0, 3] = np.nan
    with pytest.raises(RigError, match="joint 2"):
        Skeleton(["a", "b", "c"], [-1, 0, 1], c0)


def test_ancestors_run_from_the_parent_up_to_the_root_and_agree_with_chain():
    eye = np.broadcast_to(np.eye(4), (6, 4, 4))
    # root -> spine -> neck -> head, root -> hip, and a second root.
    sk = Skeleton(["root", "spine", "neck", "head", "hip", "other"], [-1, 0, 1, 2, 0, -1], eye)
    assert sk.ancestors(3) == [2, 1, 0]
    assert sk.ancestors(4) == [0]
    assert sk.ancestors(0) == [] and sk.ancestors(5) == []
    rng = np.random.default_rng(4)
    rsk = random_skeleton(rng, n=20)
    for j in range(len(rsk)):
        up = rsk.ancestors(j)
        if up:
            assert rsk.chain(up[-1], j) == [*reversed(up), j]
            assert all(int(rsk.parents[a]) == b for a, b in zip([j, *up], up, strict=False))
