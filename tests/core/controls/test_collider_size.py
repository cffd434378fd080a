"""Collider sizes from a bone's vertices (core/controls/collider_size.py): the median distance from
the bone's axis, exact on points laid on a cylinder and a sphere, untouched by a few stray ones;
too few points or none off the axis give no size."""

from __future__ import annotations

import numpy as np

from marionette.core.controls.collider_size import MIN_VERTICES, axis_distances, radius_from_points


def test_points_on_a_cylinder_about_the_bone_give_its_radius_and_strays_do_not_move_it() -> None:
    rng = np.random.default_rng(3)
    head, tail = np.array([0.1, 0.2, 1.0]), np.array([0.1, 0.2, 1.6])
    a = rng.uniform(0.0, 2.0 * np.pi, 200)
    z = rng.uniform(1.0, 1.6, 200)
    ring = np.stack([0.1 + 0.07 * np.cos(a), 0.2 + 0.07 * np.sin(a), z], axis=1)
    assert abs(radius_from_points(ring, head, tail) - 0.07) < 1e-12  # type: ignore[operator]
    # A hand's worth of far vertices in the group (a quarter of them) leaves the median on the arm.
    strays = ring[:50] + [2.0, 0.0, 0.0]
    assert abs(radius_from_points(np.concatenate([ring, strays]), head, tail) - 0.07) < 1e-12  # type: ignore[operator]


def test_beyond_the_ends_the_distance_is_to_the_end_point() -> None:
    d = axis_distances([[0.0, 0.0, 2.0], [0.0, 0.3, -0.4], [0.5, 0.0, 0.5]], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0])
    np.testing.assert_allclose(d, [1.0, 0.5, 0.5], rtol=0, atol=1e-15)


def test_too_few_points_or_none_off_the_axis_give_no_size() -> None:
    head, tail = [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]
    few = np.array([[0.1, 0.0, 0.5]] * (MIN_VERTICES - 1))
    assert radius_from_points(few, head, tail) is None
    on_axis = np.array([[0.0, 0.0, z] for z in np.linspace(0.0, 1.0, 20)])
    assert radius_from_points(on_axis, head, tail) is None
    bad = np.full((20, 3), np.nan)
    assert radius_from_points(bad, head, tail) is None
