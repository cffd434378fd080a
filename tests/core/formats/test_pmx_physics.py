"""PMX rigid bodies and joints in Blender's space (core/formats/pmx_physics.py), and the
write-back of simulated bodies to bone poses. Expected values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marionette.core.formats.pmx import BodyMode, BodyShape, PmxJoint, PmxRigidBody
from marionette.core.formats.pmx_physics import (
    blender_euler_yxz,
    blender_placement,
    body_bone_offsets,
    body_spec,
    collides,
    joint_spec,
    non_colliding_pairs,
    write_back,
)
from marionette.core.rig.rotations import matrix_from_quat, quat_from_euler, quat_from_matrix
from marionette.core.rig.skeleton import Skeleton


def _body(shape: BodyShape = BodyShape.BOX, size=(1.0, 2.0, 3.0), position=(1.0, 2.0, 3.0), rotation=(0.0, 0.0, 0.0), group=0, mask=0xFFFF, mode=BodyMode.DYNAMIC) -> PmxRigidBody:
    return PmxRigidBody("b", "b", 0, group, mask, shape, np.array(size), np.array(position), np.array(rotation), 1.5, 0.3, 0.4, 0.1, 0.6, mode)


def test_yaw_quarter_turn_turns_about_blender_z_the_other_way() -> None:
    # Ry(90) in MMD: S Ry(90) S is a turn of -90 degrees about Blender's Z, so +X goes to -Y.
    m = blender_placement((0.0, 0.0, 0.0), (0.0, math.pi / 2, 0.0))
    np.testing.assert_allclose(m[:3, :3] @ [1.0, 0.0, 0.0], [0.0, -1.0, 0.0], atol=1e-12)


def test_angles_apply_z_then_x_then_y() -> None:
    # (90, 90, 0) degrees: Ry(90) Rx(90) takes MMD's +Z to -Y (Rx: +Z -> -Y; Ry keeps -Y).
    # MMD's +Z is Blender's +Y and MMD's -Y is Blender's -Z. Rx(90) Ry(90) would give +X instead.
    m = blender_placement((0.0, 0.0, 0.0), (math.pi / 2, math.pi / 2, 0.0))
    np.testing.assert_allclose(m[:3, :3] @ [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], atol=1e-12)


def test_placement_matches_mmd_tools_yxz_euler() -> None:
    # mmd_tools sets -(rx, rz, ry) in Blender's YXZ mode; the same rotation for any angles.
    rng = np.random.default_rng(3)
    for angles in rng.uniform(-math.pi, math.pi, (20, 3)):
        m = blender_placement((0.0, 0.0, 0.0), angles)
        expected = matrix_from_quat(quat_from_euler(blender_euler_yxz(angles), "YXZ"))
        np.testing.assert_allclose(m[:3, :3], expected, atol=1e-12)


def test_body_position_size_and_values() -> None:
    spec = body_spec(_body(), scale=0.1)
    np.testing.assert_allclose(spec.matrix[:3, 3], [0.1, 0.3, 0.2])
    np.testing.assert_allclose(spec.dimensions, [0.1, 0.3, 0.2])  # box half extents, Y/Z swapped
    assert spec.shape == "BOX" and spec.mass == 1.5 and spec.linear_damping == pytest.approx(0.3)
    assert spec.angular_damping == pytest.approx(0.4) and spec.restitution == pytest.approx(0.1) and spec.friction == pytest.approx(0.6)
    cap = body_spec(_body(BodyShape.CAPSULE, size=(0.5, 4.0, 0.0)), scale=0.1)
    np.testing.assert_allclose(cap.dimensions, [0.05, 0.4])
    sph = body_spec(_body(BodyShape.SPHERE, size=(2.0, 0.0, 0.0)), scale=0.1)
    np.testing.assert_allclose(sph.dimensions, [0.2])


def test_capsule_axis_is_blender_local_z() -> None:
    # An MMD capsule lies along its local Y: unturned, that is MMD's +Y (up), Blender's +Z.
    spec = body_spec(_body(BodyShape.CAPSULE, size=(0.5, 4.0, 0.0)))
    np.testing.assert_allclose(spec.matrix[:3, 2], [0.0, 0.0, 1.0], atol=1e-12)


def test_joint_limits_swap_axes_and_reverse_rotation_ranges() -> None:
    v = np.array
    joint = PmxJoint(
        "j", "j", 0, 0, 1, v([0.0, 10.0, 0.0]), v([0.0, 0.0, 0.0]),
        v([-1.0, -2.0, -3.0]), v([1.0, 2.0, 3.0]), v([-0.1, -0.2, -0.3]), v([0.4, 0.5, 0.6]), v([1.0, 2.0, 3.0]), v([4.0, 5.0, 6.0]),
    )
    spec = joint_spec(joint, scale=0.08)
    np.testing.assert_allclose(spec.matrix[:3, 3], [0.0, 0.0, 0.8])
    np.testing.assert_allclose(spec.translation_min, [-0.08, -0.24, -0.16])
    np.testing.assert_allclose(spec.translation_max, [0.08, 0.24, 0.16])
    np.testing.assert_allclose(spec.rotation_min, [-0.4, -0.6, -0.5])
    np.testing.assert_allclose(spec.rotation_max, [0.1, 0.3, 0.2])
    np.testing.assert_allclose(spec.spring_translation, [1.0, 3.0, 2.0])
    np.testing.assert_allclose(spec.spring_rotation, [4.0, 6.0, 5.0])


def test_collision_needs_both_masks() -> None:
    a = body_spec(_body(group=0, mask=0xFFFF))
    b = body_spec(_body(group=1, mask=0xFFFE))  # b leaves out group 0
    c = body_spec(_body(group=2, mask=0xFFFF))
    assert not collides(a, b) and collides(a, c) and not collides(b, b.__class__(**{**b.__dict__, "group": 0}))
    far = body_spec(_body(group=1, mask=0xFFFE, position=(100.0, 0.0, 0.0)))
    assert non_colliding_pairs([a, b, c, far]) == [(0, 1)]


def test_write_back_places_bone_on_its_body_and_rebuilds_children() -> None:
    # A chain root -> hair -> tip along +Z; the body carrying "hair" turns 90 degrees about X.
    rest = np.broadcast_to(np.eye(4), (3, 4, 4)).copy()
    rest[:, 2, 3] = [0.0, 1.0, 2.0]
    sk = Skeleton.from_rest_matrices(["root", "hair", "tip"], [None, 0, 1], rest)
    body_rest = np.eye(4)
    body_rest[:3, 3] = [0.0, 0.0, 1.5]
    offset = body_bone_offsets(rest[1][None], body_rest[None])
    turn = np.eye(4)
    turn[:3, :3] = matrix_from_quat(quat_from_euler([math.pi / 2, 0.0, 0.0]))
    pivot = np.eye(4)
    pivot[:3, 3] = [0.0, 0.0, 1.0]
    moved = pivot @ turn @ np.linalg.inv(pivot) @ body_rest  # turned about the hair bone's head
    rot = np.zeros((1, 3, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((1, 3, 3))
    q, t = write_back(sk, rot, tr, [1], moved[None, None], offset)
    world = sk.forward_kinematics(q, t)
    np.testing.assert_allclose(world[0, 1], moved @ offset[0], atol=1e-12)
    np.testing.assert_allclose(world[0, 2, :3, 3], [0.0, -1.0, 1.0], atol=1e-12)  # the tip follows
    np.testing.assert_allclose(world[0, 0], rest[0], atol=1e-12)  # the root is untouched
    np.testing.assert_allclose(np.abs(q[0, 1]), np.abs(quat_from_matrix(turn[:3, :3])), atol=1e-12)
    # Bone position kept: only the rotation comes from a body that drifted away.
    drifted = moved.copy()
    drifted[:3, 3] += [0.3, 0.0, 0.0]
    q2, t2 = write_back(sk, rot, tr, [1], drifted[None, None], offset, position_kept=[True])
    w2 = sk.forward_kinematics(q2, t2)
    np.testing.assert_allclose(w2[0, 1, :3, 3], [0.0, 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(w2[0, 1, :3, :3], turn[:3, :3], atol=1e-12)
