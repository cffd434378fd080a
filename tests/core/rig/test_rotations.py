"""Rotation conventions: each property is measured on seeded random data."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.rig import rotations as R


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _same_rotation(a, b):
    return np.abs(np.abs(np.sum(a * b, axis=-1)) - 1.0)


def test_matrix_quaternion_round_trip(rng):
    q = R.quat_normalize(rng.normal(size=(2000, 4)))
    assert _same_rotation(R.quat_from_matrix(R.matrix_from_quat(q)), q).max() < 1e-12


def test_quaternion_near_half_turn_is_accurate():
    # Shepperd's branch choice keeps precision where the trace method loses it.
    axis = np.array([0.3, -0.5, 0.8])
    q = R.quat_from_axis_angle(axis, np.pi - 1e-9)
    assert _same_rotation(R.quat_from_matrix(R.matrix_from_quat(q)), q) < 1e-12


def test_multiply_matches_matrix_product_order(rng):
    a = R.quat_normalize(rng.normal(size=(100, 4)))
    b = R.quat_normalize(rng.normal(size=(100, 4)))
    lhs = R.matrix_from_quat(R.quat_multiply(a, b))
    rhs = R.matrix_from_quat(a) @ R.matrix_from_quat(b)
    assert np.abs(lhs - rhs).max() < 1e-12


def test_apply_is_active_rotation_of_column_vectors():
    q = R.quat_from_axis_angle([0.0, 0.0, 1.0], np.pi / 2)
    assert np.allclose(R.quat_apply(q, [1.0, 0.0, 0.0]), [0.0, 1.0, 0.0], atol=1e-15)


@pytest.mark.parametrize("order", R.EULER_ORDERS)
def test_euler_round_trip_all_orders(rng, order):
    q = R.quat_normalize(rng.normal(size=(500, 4)))
    e = R.euler_from_quat(q, order)
    assert _same_rotation(R.quat_from_euler(e, order), q).max() < 1e-12


@pytest.mark.parametrize("order", R.EULER_ORDERS)
def test_euler_order_applies_first_letter_first(order):
    angles = np.array([0.3, -0.7, 1.1])
    expected = np.eye(3)
    for ch in order:
        i = "XYZ".index(ch)
        axis = np.zeros(3)
        axis[i] = 1.0
        expected = R.matrix_from_quat(R.quat_from_axis_angle(axis, angles[i])) @ expected
    assert np.abs(R.matrix_from_quat(R.quat_from_euler(angles, order)) - expected).max() < 1e-12


@pytest.mark.parametrize("order", R.EULER_ORDERS)
def test_euler_gimbal_lock_still_round_trips(order):
    middle = "XYZ".index(order[1])
    e = np.array([0.3, 0.2, -0.4])
    e[middle] = np.pi / 2
    q = R.quat_from_euler(e, order)
    assert _same_rotation(R.quat_from_euler(R.euler_from_quat(q, order), order), q) < 1e-9


def test_between_vectors_is_minimal_and_exact(rng):
    a = rng.normal(size=(500, 3))
    b = rng.normal(size=(500, 3))
    q = R.quat_between_vectors(a, b)
    rotated = R.quat_apply(q, a)
    ub = b / np.linalg.norm(b, axis=-1, keepdims=True)
    assert np.abs(rotated / np.linalg.norm(rotated, axis=-1, keepdims=True) - ub).max() < 1e-12
    # Minimal: the angle equals the angle between the vectors (no extra twist).
    cos = np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert np.abs(R.quat_angle(q) - np.arccos(np.clip(cos, -1, 1))).max() < 1e-9


def test_between_opposite_vectors_is_a_half_turn():
    q = R.quat_between_vectors([0.0, 1.0, 0.0], [0.0, -1.0, 0.0])
    assert np.allclose(R.quat_apply(q, [0.0, 1.0, 0.0]), [0.0, -1.0, 0.0], atol=1e-12)
    assert abs(R.quat_angle(q) - np.pi) < 1e-12


def test_swing_twist_recomposes_and_twist_is_about_axis(rng):
    q = R.quat_normalize(rng.normal(size=(300, 4)))
    axis = R.quat_normalize(rng.normal(size=(300, 4)))[:, 1:]
    swing, twist = R.swing_twist(q, axis)
    assert _same_rotation(R.quat_multiply(swing, twist), q).max() < 1e-12
    unit = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    # The twist keeps the axis fixed; the swing moves the axis without turning about it.
    assert np.abs(R.quat_apply(twist, unit) - unit).max() < 1e-12
    swing_axis = swing[:, 1:]
    assert np.abs(np.sum(swing_axis * unit, -1)).max() < 1e-12


def test_continuity_removes_sign_flips(rng):
    t = np.linspace(0, 6, 400)
    q = R.quat_from_axis_angle([0.0, 0.0, 1.0], t)
    flipped = q * np.where(rng.random(400) < 0.5, -1.0, 1.0)[:, None]
    fixed = R.make_quat_continuous(flipped)
    assert np.all(np.sum(fixed[1:] * fixed[:-1], -1) > 0)
    assert _same_rotation(fixed, q).max() < 1e-15


def test_euler_continuity_has_no_two_pi_jumps():
    angle = np.linspace(0.0, 4 * np.pi, 200)
    q = R.quat_from_axis_angle([0.0, 0.0, 1.0], angle)
    e = R.make_euler_continuous(R.euler_from_quat(q, "XYZ"), "XYZ")
    assert np.abs(np.diff(e, axis=0)).max() < 0.1
    assert _same_rotation(R.quat_from_euler(e, "XYZ"), q).max() < 1e-12


def test_slerp_endpoints_and_constant_speed():
    a = R.quat_from_axis_angle([1.0, 0.0, 0.0], 0.0)
    b = R.quat_from_axis_angle([1.0, 0.0, 0.0], 1.2)
    t = np.linspace(0, 1, 7)
    s = R.quat_slerp(a, b, t)
    assert np.allclose(R.quat_angle(s), 1.2 * t, atol=1e-12)


def test_transform_parts_round_trip(rng):
    q = R.quat_normalize(rng.normal(size=(50, 4)))
    t = rng.normal(size=(50, 3))
    s = rng.uniform(0.5, 2.0, size=(50, 3))
    q2, t2, s2 = R.parts_from_transform(R.transform_from_parts(q, t, s))
    assert _same_rotation(q2, q).max() < 1e-12
    assert np.abs(t2 - t).max() < 1e-12 and np.abs(s2 - s).max() < 1e-12


def test_shape_errors_name_the_expected_shape():
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\)"):
        R.quat_multiply(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match=r"\(\.\.\., 3, 3\)"):
        R.quat_from_matrix(np.zeros((2, 2)))


def test_matrix_between_vectors_matches_quaternion_path(rng):
    a = rng.normal(size=(400, 3))
    b = rng.normal(size=(400, 3))
    b[:5] = -a[:5] * 2.0  # exactly opposite
    b[5] = a[5]  # identical
    m = R.matrix_between_vectors(a, b)
    q = R.matrix_from_quat(R.quat_between_vectors(a, b))
    assert np.abs(m[5:] - q[5:]).max() < 1e-9
    # Opposite directions: any half-turn works; it must be a proper rotation taking a onto b.
    out = np.einsum("nij,nj->ni", m, a)
    ub = b / np.linalg.norm(b, axis=-1, keepdims=True)
    assert np.abs(out / np.linalg.norm(out, axis=-1, keepdims=True) - ub).max() < 1e-9
    assert np.abs(np.linalg.det(m) - 1).max() < 1e-9


def test_blender_axis_angle_round_trip_keeps_the_quaternion_sign(rng):
    q = R.quat_normalize(rng.normal(size=(500, 4)))
    aa = R.blender_axis_angle_from_quat(q)
    assert aa[:, 0].min() >= 0.0 and aa[:, 0].max() < 2.0 * np.pi
    assert np.abs(np.linalg.norm(aa[:, 1:], axis=-1) - 1.0).max() < 1e-12
    assert np.abs(R.quat_from_blender_axis_angle(aa) - q).max() < 1e-12
    # Blender's own reading: angle first, axis of any length, a zero axis is no rotation.
    scaled = np.concatenate([aa[:, :1], 3.5 * aa[:, 1:]], axis=1)
    assert np.abs(R.quat_from_blender_axis_angle(scaled) - q).max() < 1e-12
    assert np.array_equal(R.quat_from_blender_axis_angle([1.3, 0.0, 0.0, 0.0]), [1.0, 0.0, 0.0, 0.0])


def test_blender_axis_angle_null_rotations_take_the_fallback_or_carry_the_last_axis():
    turn = R.quat_from_axis_angle([0.0, 0.0, 1.0], 0.5)
    q = np.array([[1.0, 0.0, 0.0, 0.0], turn, [1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0]])
    given = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.6, 0.8], [0.6, 0.8, 0.0]])
    own = R.blender_axis_angle_from_quat(q, given)
    assert np.allclose(own[:, 1:], [given[0], [0.0, 0.0, 1.0], given[2], given[3]], atol=1e-15)
    carried = R.blender_axis_angle_from_quat(q, carry=True)
    assert np.allclose(carried[:, 1:], [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], atol=1e-15)
    assert np.allclose(carried[:, 0], [0.0, 0.5, 0.0, 2.0 * np.pi], atol=1e-12)


def test_invert_affine_inverts_scaled_turned_moved_matrices_like_a_general_inverse():
    from marionette.core.rig.rotations import invert_affine

    rng = np.random.default_rng(7)
    m = np.zeros((200, 4, 4))
    m[:, :3, :3] = rng.normal(size=(200, 3, 3))  # any invertible linear part: turn, scale, shear
    m[:, :3, 3] = rng.normal(size=(200, 3))
    m[:, 3, 3] = 1.0
    inv = invert_affine(m)
    assert np.abs(inv @ m - np.eye(4)).max() < 1e-9
    assert np.abs(invert_affine(m[0]) @ m[0] - np.eye(4)).max() < 1e-12
