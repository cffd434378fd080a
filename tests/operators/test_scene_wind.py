"""The scene's wind (docs/controls.md#wind-and-the-center-space): a spring without a wind of its
own blows with the scene's exactly as with the same wind set on the chain, live and baked; a
chain's own wind wins over the scene's."""

from __future__ import annotations

import numpy as np

from tests.helpers.controls_scenes import _play
from tests.operators.test_controls_springs_ground import tail  # noqa: F401  (the fixture)

WIND = {"direction": (0.0, 1.0, 0.0), "strength": 6.0, "gust": 0.5, "frequency": 1.5, "seed": 3}


def _set_row_wind(row, strength: float) -> None:
    row.wind_direction, row.wind_gust, row.wind_frequency, row.wind_seed = WIND["direction"], WIND["gust"], WIND["frequency"], WIND["seed"]
    row.wind_strength = strength


def _set_scene_wind(scene, strength: float, direction=WIND["direction"]) -> None:
    wind = scene.marionette_wind
    wind.direction, wind.gust, wind.frequency, wind.seed = direction, WIND["gust"], WIND["frequency"], WIND["seed"]
    wind.strength = strength


def _live(bpy, arm, frames):
    bpy.context.scene.frame_set(1)
    arm.marionette_controls.live_preview = False
    arm.marionette_controls.live_preview = True
    out = _play(bpy, arm, frames)
    arm.marionette_controls.live_preview = False
    return out


def test_a_spring_without_wind_blows_with_the_scenes(tail):  # noqa: F811
    bpy, arm = tail
    scene, row = bpy.context.scene, arm.marionette_controls.controls[-1]
    frames = np.arange(1, 49)
    calm = _live(bpy, arm, frames)
    _set_row_wind(row, WIND["strength"])
    own = _live(bpy, arm, frames)
    _set_row_wind(row, 0.0)
    _set_scene_wind(scene, WIND["strength"])
    scenes = _live(bpy, arm, frames)
    np.testing.assert_array_equal(scenes, own)
    assert np.abs(scenes - calm).max() > 0.05  # the wind moves the tail

    # A chain's own wind wins: the scene's blowing the other way changes nothing.
    _set_row_wind(row, WIND["strength"])
    _set_scene_wind(scene, 20.0, direction=(0.0, -1.0, 0.0))
    np.testing.assert_array_equal(_live(bpy, arm, frames), own)

    # Baked: the scene's wind is what Bake Controls writes too.
    _set_row_wind(row, 0.0)
    _set_scene_wind(scene, WIND["strength"])
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, frames)
    np.testing.assert_allclose(baked, scenes, atol=1e-5)
