"""Controls in renders: a render shows the viewport pose, shutter steps are the times a render
evaluates, motion blur renders the controls between frames, and a render on another thread shows
the frames the viewport showed."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

from tests.helpers.controls_scenes import _key_path, _pose_matrices

pytestmark = pytest.mark.bpy


# --- rendering -------------------------------------------------------------------------------


def _render_scene(bpy, arm):
    """An IK control on the left hand, a glowing cube the hand carries, a camera that sees it, and
    Cycles at 1 sample, 8x8 pixels; the live preview on."""
    scene = bpy.context.scene
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    target.location = (0.35, -0.45, 1.05)
    bpy.ops.mesh.primitive_cube_add(size=0.2)
    cube = bpy.context.active_object
    cube.parent, cube.parent_type, cube.parent_bone = arm, "BONE", "Hand.L"
    cube.matrix_parent_inverse.identity()
    glow = bpy.data.materials.new("Glow")
    nodes = glow.node_tree.nodes
    nodes.clear()
    emit = nodes.new("ShaderNodeEmission")
    emit.inputs["Strength"].default_value = 20.0
    glow.node_tree.links.new(emit.outputs[0], nodes.new("ShaderNodeOutputMaterial").inputs[0])
    cube.data.materials.append(glow)
    bpy.ops.object.camera_add(location=(0.6, -3.0, 1.3), rotation=(math.radians(90), 0.0, 0.0))
    scene.camera = bpy.context.active_object
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 1
    scene.cycles.device = "CPU"
    scene.render.resolution_x = scene.render.resolution_y = 8
    scene.render.resolution_percentage = 100
    bpy.context.view_layer.objects.active = arm
    arm.marionette_controls.live_preview = True
    return target


@contextlib.contextmanager
def _rendered_poses(bpy, arm):
    """Yields, per rendered frame, ``arm``'s pose bone by bone as the render's own depsgraph
    ended it (read after the frame; persistent data keeps that depsgraph alive until then)."""
    scene = bpy.context.scene
    depsgraphs, poses = [], {}

    def keep(scene_, depsgraph):
        if depsgraph.mode == "RENDER":
            depsgraphs[:] = [depsgraph]

    def read(scene_, *_args):
        poses[scene_.frame_current] = _pose_matrices(arm.evaluated_get(depsgraphs[0]))

    scene.render.use_persistent_data = True
    bpy.app.handlers.frame_change_post.append(keep)
    bpy.app.handlers.render_post.append(read)
    try:
        yield poses
    finally:
        bpy.app.handlers.frame_change_post.remove(keep)
        bpy.app.handlers.render_post.remove(read)
        scene.render.use_persistent_data = False


@pytest.mark.slow
def test_render_shows_the_viewport_pose(sample):
    """A Cycles render (1 sample, 8x8) on the main thread shows the pose the viewport shows: for
    frames the viewport showed (kept) and for frames it did not (computed for the render), bone
    by bone in the render's own depsgraph; and pixel by pixel as a render of the baked keys."""
    from marionette.viewport import live_preview

    bpy, arm = sample
    scene = bpy.context.scene
    _render_scene(bpy, arm)
    for f in (7, 8):
        scene.frame_set(f)
    scene.frame_set(7)
    with _rendered_poses(bpy, arm) as poses:
        live_pixels = _render_pixels(bpy)
        still = live_preview.last_render[arm.name]
        _render_frames(bpy, 8, 10)
        animation = live_preview.last_render[arm.name]
    assert still["kept"] == [7.0], still
    assert animation["kept"] == [8.0] and animation["computed"] == [9.0, 10.0], animation
    assert arm.animation_data.action.name == "Walk"
    viewport = {}
    for f in (7, 8, 9, 10):
        scene.frame_set(f)
        viewport[f] = _pose_matrices(arm)
    diffs = {f: float(np.abs(poses[f] - viewport[f]).max()) for f in viewport}
    # Without the controls the hand (and the cube) is elsewhere: the comparison can see it.
    arm.marionette_controls.live_preview = False
    scene.frame_set(7)
    plain_pixels = _render_pixels(bpy)
    arm.marionette_controls.live_preview = True
    scene.frame_start, scene.frame_end = 1, 48
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    scene.frame_set(7)
    baked_pixels = _render_pixels(bpy)
    print(
        f"\nrender vs viewport pose, max matrix difference per frame {diffs}; pixels live vs baked "
        f"{np.abs(live_pixels - baked_pixels).max():.1e}, live vs no controls {np.abs(live_pixels - plain_pixels).max():.2f}"
    )
    assert max(diffs.values()) <= 1e-6
    assert np.abs(live_pixels - baked_pixels).max() <= 1e-3
    assert np.abs(live_pixels - plain_pixels).max() > 0.05


@pytest.mark.slow
@pytest.mark.parametrize(
    ("engine", "steps", "position"),
    [("CYCLES", 1, "CENTER"), ("CYCLES", 2, "CENTER"), ("CYCLES", 2, "END"), ("BLENDER_EEVEE", 2, "START")],
)
def test_shutter_steps_are_the_times_a_render_evaluates(addon, engine, steps, position):
    """Prepare Render keeps the times a motion-blurred render asks for: the subframes Blender's
    render evaluates (recorded from its frame changes) are the ones render_times predicts."""
    from marionette.viewport import live_preview

    bpy = addon
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_cube_add(size=0.2)
    cube = bpy.context.active_object
    cube.keyframe_insert("location", frame=1)
    cube.location.x = 1.0
    cube.keyframe_insert("location", frame=10)
    bpy.ops.object.camera_add(location=(0.0, -3.0, 0.0), rotation=(math.radians(90), 0.0, 0.0))
    scene.camera = bpy.context.active_object
    scene.render.engine = engine
    scene.cycles.samples = 1
    scene.eevee.taa_render_samples = 1
    scene.render.resolution_x = scene.render.resolution_y = 8
    scene.render.use_motion_blur = True
    scene.render.motion_blur_shutter = 0.5
    scene.render.motion_blur_position = position
    cube.cycles.motion_steps = steps
    scene.eevee.motion_blur_steps = steps
    scene.frame_set(5)
    asked = set()

    def record(scene_, depsgraph):
        if depsgraph.mode == "RENDER":
            asked.add(round(scene_.frame_current_final, 4))

    bpy.app.handlers.frame_change_post.append(record)
    try:
        bpy.ops.render.render()
    finally:
        bpy.app.handlers.frame_change_post.remove(record)
    assert sorted(asked) == live_preview.render_times(scene, 5)


def test_motion_blur_renders_the_controls_between_frames(sample, monkeypatch):
    """With motion blur a render evaluates subframes. On the main thread each is computed; on a
    render thread each is taken as kept by Prepare Render (the same image), or, not kept, blended
    from the two kept frames around it (an approximation: the IK's answer between two frames is
    not their blend). The hand follows a moving target, so the subframes show."""
    from marionette.viewport import live_preview

    bpy, arm = sample
    scene = bpy.context.scene
    target = _render_scene(bpy, arm)
    _key_path(bpy, target, np.array([6.0, 8.0]), np.array([[0.6, -0.45, 0.8], [0.0, -0.45, 1.3]]))
    scene.render.motion_blur_shutter = 1.0
    for f in (6, 7, 8):
        scene.frame_set(f)
    scene.frame_set(7)
    sharp = _render_pixels(bpy)
    scene.render.use_motion_blur = True
    assert live_preview.render_times(scene, 7) == [6.5, 7.0, 7.5]
    assert live_preview.frames_not_kept(arm, scene, 6, 8) == [6, 7, 8]
    with _on_render_thread(monkeypatch):
        blended = _render_pixels(bpy)
    on_thread = live_preview.last_render[arm.name]
    computed = _render_pixels(bpy)
    on_main = live_preview.last_render[arm.name]
    # Forget what the main thread kept; Prepare Render keeps the frame and its shutter steps.
    assert bpy.ops.marionette.controls_reset() == {"FINISHED"}
    scene.frame_start, scene.frame_end = 7, 7
    assert bpy.ops.marionette.prepare_render() == {"FINISHED"}
    with _on_render_thread(monkeypatch):
        prepared = _render_pixels(bpy)
    on_thread_prepared = live_preview.last_render[arm.name]
    figures = {
        "blurred vs sharp": float(np.abs(computed - sharp).max()),
        "prepared vs computed": float(np.abs(prepared - computed).max()),
        "blended vs computed": float(np.abs(blended - computed).max()),
    }
    print(f"\nmotion blur: {on_main} / {on_thread} / {on_thread_prepared}; pixels {figures}")
    assert on_main["computed"] == [6.5, 7.5] and not on_main["missed"]
    assert on_thread["blended"] == [6.5, 7.5] and not on_thread["missed"]
    assert sorted(on_thread_prepared["kept"]) == [6.5, 7.0, 7.0, 7.5] and not on_thread_prepared["missed"]
    assert figures["blurred vs sharp"] > 0.05
    assert figures["prepared vs computed"] <= 1e-3


def _tmp_dir():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="marionette_render_"))


def _render_pixels(bpy):
    path = _tmp_dir() / "still.exr"
    scene = bpy.context.scene
    scene.render.image_settings.file_format = "OPEN_EXR"
    bpy.ops.render.render()
    bpy.data.images["Render Result"].save_render(str(path))
    img = bpy.data.images.load(str(path))
    px = np.array(img.pixels[:])
    bpy.data.images.remove(img)
    return px



@contextlib.contextmanager
def _on_render_thread(monkeypatch):
    """Renders inside run as they run from the interface (F12, Ctrl+F12): the handlers are told
    they are off the main thread."""
    from marionette.viewport import live_preview

    monkeypatch.setattr(live_preview, "_main_thread", lambda: False)
    try:
        yield
    finally:
        monkeypatch.undo()


def _render_frames(bpy, start, end):
    """Pixels of each frame of an animation render of ``start``..``end``."""
    scene = bpy.context.scene
    folder = _tmp_dir()
    scene.frame_start, scene.frame_end = start, end
    scene.render.image_settings.file_format = "OPEN_EXR"
    scene.render.filepath = str(folder / "frame_")
    bpy.ops.render.render(animation=True)
    out = {}
    for f in range(start, end + 1):
        img = bpy.data.images.load(str(folder / f"frame_{f:04d}.exr"))
        out[f] = np.array(img.pixels[:])
        bpy.data.images.remove(img)
    return out


def _rendered_on_main_thread(bpy, frames):
    """Pixels of stills of ``frames`` rendered on the main thread (where the controls run for the
    render itself: the reference a render from the interface must match)."""
    scene = bpy.context.scene
    keep = scene.frame_current
    out = {}
    for f in frames:
        scene.frame_set(f)
        out[f] = _render_pixels(bpy)
    scene.frame_set(keep)
    return out


@pytest.mark.slow
def test_render_on_another_thread_shows_the_frames_the_viewport_showed(sample, monkeypatch):
    """F12 / Ctrl+F12 render on a render thread, where no control runs: the frames the main
    thread showed are written as it computed them (the same pixels as a render that runs the
    controls itself); a frame never shown, or shown before its target moved, renders without
    the controls and is reported; Prepare Render fills a whole range."""
    from marionette.viewport import live_preview

    bpy, arm = sample
    scene = bpy.context.scene
    target = _render_scene(bpy, arm)
    for f in (7, 8, 9):
        scene.frame_set(f)
    scene.frame_set(7)
    with _on_render_thread(monkeypatch):
        shown = {7: _render_pixels(bpy)}
        still = live_preview.last_render[arm.name]
        shown.update(_render_frames(bpy, 8, 10))
        animation = live_preview.last_render[arm.name]
    assert still["kept"] == [7.0] and not still["missed"]
    assert animation["kept"] == [8.0, 9.0] and animation["missed"] == [10.0]
    reference = _rendered_on_main_thread(bpy, (7, 8, 9, 10))
    diffs = {f: float(np.abs(shown[f] - reference[f]).max()) for f in reference}
    print(f"\npixels rendered off the main thread vs on it, per frame: {diffs}")
    assert max(diffs[f] for f in (7, 8, 9)) <= 1e-3
    # Frame 10 was never shown: rendered without the controls, the carried cube is elsewhere.
    assert diffs[10] > 0.05

    # The target moved since frames 7-10 were shown: only the frames shown after the move (the
    # current one, 7, shown again at once, and 8) are kept.
    assert scene.frame_current == 7
    target.location.z += 0.1
    bpy.context.view_layer.update()
    scene.frame_set(8)
    with _on_render_thread(monkeypatch):
        _render_frames(bpy, 8, 9)
    log = live_preview.last_render[arm.name]
    assert log["kept"] == [8.0] and log["missed"] == [9.0], log

    # Prepare Render shows the range once: every frame is then kept and rendered as shown.
    scene.frame_start, scene.frame_end = 1, 12
    assert live_preview.frames_not_kept(arm, scene, 1, 12) == [1, 2, 3, 4, 5, 6, 9, 10, 11, 12]
    assert bpy.ops.marionette.prepare_render() == {"FINISHED"}
    assert live_preview.frames_not_kept(arm, scene, 1, 12) == [] and scene.frame_current == 8
    with _on_render_thread(monkeypatch):
        shown = _render_frames(bpy, 3, 4)
        scene.frame_set(11)
        shown[11] = _render_pixels(bpy)
    log = live_preview.last_render[arm.name]
    assert log["kept"] == [11.0] and not log["missed"], log
    reference = _rendered_on_main_thread(bpy, (3, 4, 11))
    assert max(float(np.abs(shown[f] - reference[f]).max()) for f in reference) <= 1e-3
