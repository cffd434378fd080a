"""The solvers' lean kernels must give the general helpers' results (one convention, two speeds)."""

from __future__ import annotations

import numpy as np

from marionette.core.rig import rotation_kernels as K
from marionette.core.rig import rotations as R


def _same_rotation(a, b):
    return np.abs(np.abs(np.sum(a * b, axis=-1)) - 1.0).max()


def test_kernels_agree_with_the_general_helpers():
    rng = np.random.default_rng(21)
    a = R.quat_normalize(rng.normal(size=(500, 4)))
    b = R.quat_normalize(rng.normal(size=(500, 4)))
    v = rng.normal(size=(500, 3))
    w = rng.normal(size=(500, 3))
    assert np.abs(K.quat_mul(a, b) - R.quat_multiply(a, b)).max() < 1e-12
    assert np.abs(K.quat_conj(a) - R.quat_conjugate(a)).max() == 0.0
    assert np.abs(K.rotation_matrices(a) - R.matrix_from_quat(a)).max() < 1e-12
    assert np.abs(K.rotate(a, v) - R.quat_apply(a, v)).max() < 1e-12
    assert np.abs(K.cross(v, w) - np.cross(v, w)).max() < 1e-12
    assert _same_rotation(K.quat_between_unit(v, w), R.quat_between_vectors(v, w)) < 1e-12
    m = R.matrix_from_quat(a)
    assert _same_rotation(K.quat_from_rotation_matrix(m), R.quat_from_matrix(m)) < 1e-12
    near_half_turn = R.matrix_from_quat(R.quat_from_axis_angle([0.2, -0.7, 0.4], np.pi - 1e-7))
    assert _same_rotation(K.quat_from_rotation_matrix(near_half_turn), R.quat_from_matrix(near_half_turn)) < 1e-12
