"""The Rotation API: conversions round trip, the algebra agrees with matrix products, and each
method returns exactly (bit for bit) what the function it stands for returns, so callers can
switch to it without a key changing."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.rig import rotation_kernels as K
from marionette.core.rig import rotations as R
from marionette.core.rig.rotation import Rotation

SHAPES = [(), (7,), (7, 5)]


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _quats(rng, shape):
    return R.quat_normalize(rng.normal(size=shape + (4,)))


def _same_rotation(a, b):
    return np.abs(np.abs(np.sum(a * b, axis=-1)) - 1.0)


@pytest.mark.parametrize("shape", SHAPES)
def test_quat_matrix_quat_round_trip_up_to_sign(rng, shape):
    q = _quats(rng, shape)
    back = Rotation.from_matrix(Rotation.from_quat(q).as_matrix()).as_quat()
    assert back.shape == shape + (4,)
    assert np.max(_same_rotation(back, q)) < 1e-12


def test_matrix_round_trip_near_half_turns(rng):
    # Batched matrices take the lean kernel; turns near 180 degrees take its other branches.
    axis = rng.normal(size=(200, 3))
    q = R.quat_from_axis_angle(axis, np.pi - rng.uniform(0, 1e-3, 200))
    back = Rotation.from_matrix(R.matrix_from_quat(q)).as_quat()
    assert np.max(_same_rotation(back, q)) < 1e-12
    assert np.all(back[:, 0] >= 0.0)


@pytest.mark.parametrize("order", R.EULER_ORDERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_euler_round_trip_every_order(rng, order, shape):
    angles = rng.uniform(-np.pi, np.pi, size=shape + (3,))
    angles[..., "XYZ".index(order[1])] *= 0.45  # middle angle inside (-pi/2, pi/2): unique triple
    r = Rotation.from_euler(order, angles)
    assert r.shape == shape
    assert np.max(np.abs(r.as_euler(order) - angles)) < 1e-9


@pytest.mark.parametrize("order", R.EULER_ORDERS)
def test_euler_order_applies_first_letter_first(order):
    angles = np.array([0.3, -0.7, 1.1])
    axes = {"X": [1.0, 0, 0], "Y": [0, 1.0, 0], "Z": [0, 0, 1.0]}
    expected = np.eye(3)
    for ch in order:
        expected = Rotation.from_axis_angle(axes[ch], angles["XYZ".index(ch)]).as_matrix() @ expected
    assert np.max(np.abs(Rotation.from_euler(order, angles).as_matrix() - expected)) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_axis_angle_round_trip(rng, shape):
    axis = rng.normal(size=shape + (3,))
    angle = rng.uniform(0.01, np.pi - 0.01, size=shape)
    got_axis, got_angle = Rotation.from_axis_angle(axis, angle).as_axis_angle()
    assert np.max(np.abs(got_angle - angle)) < 1e-12
    unit = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    assert np.max(np.abs(got_axis - unit)) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_composition_matches_matrix_product(rng, shape):
    a = Rotation.from_quat(_quats(rng, shape))
    b = Rotation.from_quat(_quats(rng, shape))
    assert np.max(np.abs((a * b).as_matrix() - a.as_matrix() @ b.as_matrix())) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_inverse_undoes_and_is_transpose(rng, shape):
    a = Rotation.from_quat(_quats(rng, shape))
    assert np.max(np.abs((a * a.inv()).as_matrix() - np.eye(3))) < 1e-12
    assert np.max(np.abs(a.inv().as_matrix() - np.swapaxes(a.as_matrix(), -1, -2))) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_apply_matches_matrix_times_vector(rng, shape):
    a = Rotation.from_quat(_quats(rng, shape))
    v = rng.normal(size=shape + (3,))
    assert np.max(np.abs(a.apply(v) - (a.as_matrix() @ v[..., None])[..., 0])) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_align_maps_a_onto_b(rng, shape):
    a = rng.normal(size=shape + (3,))
    b = rng.normal(size=shape + (3,))
    got = Rotation.align(a, b).apply(a)
    ub = b / np.linalg.norm(b, axis=-1, keepdims=True)
    assert np.max(np.abs(got / np.linalg.norm(a, axis=-1, keepdims=True) - ub)) < 1e-12
    opposite = Rotation.align([1.0, 2.0, 3.0], [-2.0, -4.0, -6.0]).apply([1.0, 2.0, 3.0])
    assert np.max(np.abs(opposite - [-1.0, -2.0, -3.0])) < 1e-12


def test_magnitude_and_interpolate(rng):
    axis = R.quat_normalize(rng.normal(size=(9, 4)))[:, 1:]
    angle = rng.uniform(0.0, np.pi, size=9)
    r = Rotation.from_axis_angle(axis, angle)
    assert np.max(np.abs(r.magnitude() - angle)) < 1e-12
    half = Rotation.identity((9,)).interpolate(r, 0.5)
    assert np.max(np.abs(half.magnitude() - angle / 2)) < 1e-12


def test_shape_len_and_indexing(rng):
    r = Rotation.from_quat(_quats(rng, (7, 5)))
    q = r.as_quat()
    assert r.shape == (7, 5) and len(r) == 7
    assert r[2].shape == (5,) and np.array_equal(r[2].as_quat(), q[2])
    assert r[:, 3].shape == (7,) and np.array_equal(r[:, 3].as_quat(), q[:, 3])
    assert r[..., 1].shape == (7,) and np.array_equal(r[..., 1].as_quat(), q[..., 1, :])
    assert Rotation.identity().shape == () and Rotation.identity((3, 2)).shape == (3, 2)
    with pytest.raises(TypeError):
        len(Rotation.identity())
    with pytest.raises(TypeError):
        Rotation.identity()[0]


def test_from_quat_normalizes_unless_told_not_to(rng):
    raw = rng.normal(size=(6, 4)) * 3.0
    assert np.max(np.abs(np.linalg.norm(Rotation.from_quat(raw).as_quat(), axis=-1) - 1.0)) < 1e-15
    assert np.array_equal(Rotation.from_quat(raw, normalize=False).as_quat(), raw)
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\)"):
        Rotation.from_quat(np.zeros((2, 3)), normalize=False)


# --- bit-identical to the functions each method stands for ---------------------------------------


def _same_to_the_ulp(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal but for numpy's own last bit in a transcendental function (sin, arctan2...): its
    vectorised loops and the scalar ones they leave the last few elements to may round the same
    value apart, and which elements those are depends on where the array lies in memory."""
    got, want = np.asarray(got), np.asarray(want)
    if np.array_equal(got, want):
        return True
    return got.shape == want.shape and int(np.max(np.abs(got.view(np.int64) - want.view(np.int64)))) <= 2


@pytest.mark.parametrize("shape", SHAPES)
def test_methods_are_bit_identical_to_their_functions(rng, shape):
    raw = rng.normal(size=shape + (4,))
    q = R.quat_normalize(raw)
    a, b = Rotation.from_quat(raw), Rotation.from_quat(rng.normal(size=shape + (4,)))
    p = b.as_quat()
    v = rng.normal(size=shape + (3,))
    w = rng.normal(size=shape + (3,))
    axis = rng.normal(size=shape + (3,))
    angle = rng.uniform(-4.0, 4.0, size=shape)
    same = np.array_equal
    assert same(a.as_quat(), q)
    assert same(a.as_matrix(), R.matrix_from_quat(q))
    assert same((a * b).as_quat(), R.quat_multiply(q, p))
    assert same(a.inv().as_quat(), R.quat_conjugate(q))
    assert same(a.apply(v), R.quat_apply(q, v))
    # Through sin, cos, arccos, arctan2: the same function, to numpy's own last bit.
    assert _same_to_the_ulp(a.magnitude(), R.quat_angle(q))
    assert _same_to_the_ulp(a.interpolate(b, 0.3).as_quat(), R.quat_slerp(q, p, 0.3))
    for got, want in zip(a.as_axis_angle(), R.axis_angle_from_quat(q), strict=True):
        assert _same_to_the_ulp(got, want)
    assert _same_to_the_ulp(Rotation.from_axis_angle(axis, angle).as_quat(), R.quat_from_axis_angle(axis, angle))
    assert same(Rotation.align(v, w).as_quat(), R.quat_between_vectors(v, w))
    for order in R.EULER_ORDERS:
        e = rng.uniform(-np.pi, np.pi, size=shape + (3,))
        assert _same_to_the_ulp(Rotation.from_euler(order, e).as_quat(), R.quat_from_euler(e, order))
        assert _same_to_the_ulp(a.as_euler(order), R.euler_from_quat(q, order))
    assert same(Rotation.identity(shape).as_quat(), R.quat_identity(shape))


@pytest.mark.parametrize("shape", SHAPES)
def test_from_matrix_is_bit_identical_to_both_paths(rng, shape):
    # Batches take quats_of_matrices; it must give quat_from_matrix's bits, large turns included.
    q = _quats(rng, shape)
    m = R.matrix_from_quat(q)
    got = Rotation.from_matrix(m).as_quat()
    assert np.array_equal(got, R.quat_from_matrix(m))
    if shape:
        assert np.array_equal(got, K.quats_of_matrices(m))
    t = np.zeros(shape + (4, 4))
    t[..., :3, :3] = m
    t[..., 3, 3] = 1.0
    assert np.array_equal(Rotation.from_matrix(t).as_quat(), R.quat_from_matrix(m))
