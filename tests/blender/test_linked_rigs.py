"""Characters linked from a library file, as pipelines keep them: a linked armature cannot keep
an action (it would be lost on save), so Retarget Clip refuses it and says what to do; a library
override of it takes the new action and keeps it through save and reload; a linked source is
read and left alone."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.bpy


def _keys(action):
    from marionette.bridge import compat

    return {
        (slot.identifier, fc.data_path, fc.array_index): tuple(tuple(kp.co) for kp in fc.keyframe_points)
        for slot in action.slots
        for fc in compat.action_fcurves(action, slot)
    }


@pytest.fixture
def linked(blender, tmp_path):
    """A library file holding a character (in a collection) and a clip on its own armature; a
    session that links the character and makes the clip's source locally."""
    bpy = blender
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    hero_rig = sample_humanoid(arms_down_angle=0.6, proportions=1.1)
    hero = create_armature(hero_rig.skeleton, "Hero", tails=hero_rig.tails)
    col = bpy.data.collections.new("HeroCol")
    bpy.context.scene.collection.children.link(col)
    bpy.context.scene.collection.objects.unlink(hero)
    col.objects.link(hero)
    sample = sample_humanoid()
    lib_source = create_armature(sample.skeleton, "LibSource", tails=sample.tails)
    write_action(lib_source, sample_walk(sample, frames=24, name="LibWalk"), "LibWalk")
    library = tmp_path / "characters.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(library))

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.scene.render.fps = 24
    source = create_armature(sample.skeleton, "Source", tails=sample.tails)
    action = write_action(source, sample_walk(sample, frames=24, name="Walk"), "Walk")
    with bpy.data.libraries.load(str(library), link=True) as (_src, dst):
        dst.collections = ["HeroCol"]
    return bpy, library, dst.collections[0], source, action


def test_a_linked_target_is_refused_with_what_to_do_and_nothing_changes(linked):
    bpy, library, col, source, action = linked
    from marionette.core.errors import RigError
    from marionette.usecases.retarget import retarget_action

    hero = bpy.data.objects["Hero"]
    assert hero.library is not None
    n_actions = len(bpy.data.actions)
    with pytest.raises(RigError, match="linked from .*library override"):
        retarget_action(source, action, hero, scene_fps=24.0)
    assert len(bpy.data.actions) == n_actions
    assert hero.animation_data is None


def test_retarget_clip_poll_says_why_a_linked_target_cannot_take_it(linked):
    bpy, library, col, source, action = linked
    import marionette

    marionette.register()
    try:
        s = bpy.context.scene.marionette
        s.source, s.target = source, bpy.data.objects["Hero"]
        assert not bpy.ops.marionette.retarget_clip.poll()
        with pytest.raises(RuntimeError, match="library override"):
            bpy.ops.marionette.retarget_clip()
    finally:
        marionette.unregister()


def test_an_overridden_character_keeps_its_new_action_through_save_and_reload(linked, tmp_path):
    bpy, library, col, source, action = linked
    from marionette.bridge.clip_read import clip_from_action
    from marionette.usecases.retarget import retarget_action

    col.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer)
    hero = next(o for o in bpy.data.objects if o.name == "Hero" and o.override_library is not None)
    outcome = retarget_action(source, action, hero, scene_fps=24.0, name="WalkOnHero")
    expected = clip_from_action(hero, outcome.action)
    path = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    hero = next(o for o in bpy.data.objects if o.name == "Hero" and o.override_library is not None)
    assert hero.animation_data is not None and hero.animation_data.action is not None
    assert hero.animation_data.action.name == "WalkOnHero"
    played = clip_from_action(hero, hero.animation_data.action)
    assert np.abs(played.rotations - expected.rotations).max() < 1e-6


def test_a_linked_source_is_read_and_left_alone(linked, tmp_path):
    bpy, library, col, source, action = linked
    from marionette.bridge.action_write import create_armature
    from marionette.core.rig.samples import sample_humanoid
    from marionette.usecases.retarget import retarget_action

    with bpy.data.libraries.load(str(library), link=True) as (_src, dst):
        dst.objects = ["LibSource"]
        dst.actions = ["LibWalk"]
    lib_source, lib_walk = dst.objects[0], dst.actions[0]
    bpy.context.scene.collection.objects.link(lib_source)
    before = _keys(lib_walk)
    rig = sample_humanoid(proportions=0.9)
    target = create_armature(rig.skeleton, "LocalTarget", tails=rig.tails)
    outcome = retarget_action(lib_source, lib_walk, target, scene_fps=24.0)
    assert outcome.action.library is None and target.animation_data.action == outcome.action
    assert _keys(lib_walk) == before and before and lib_walk.library is not None


def _override_of(bpy, name):
    return next(o for o in bpy.data.objects if o.name == name and o.override_library is not None and o.library is None)


def _rows(obj):
    return [
        (r.name, r.kind, r.bone_start, r.bone_end, r.end_bone, r.target_object.name if r.target_object else None)
        for r in obj.marionette_controls.controls
    ]


@pytest.fixture
def controlled(blender, tmp_path):
    """A library file whose character has three controls (both arms' IK, a look-at; their target
    empties in the character's collection), and a session that links it and overrides it."""
    bpy = blender
    import marionette
    from marionette.bridge.action_write import create_armature
    from marionette.core.rig.samples import sample_humanoid

    marionette.register()
    try:
        rig = sample_humanoid()
        hero = create_armature(rig.skeleton, "Hero", tails=rig.tails)
        col = bpy.data.collections.new("HeroCol")
        bpy.context.scene.collection.children.link(col)
        bpy.context.scene.collection.objects.unlink(hero)
        col.objects.link(hero)
        bpy.context.view_layer.objects.active = hero
        for kind in ("TWO_BONE_IK", "TWO_BONE_IK", "LOOK_AT"):
            assert bpy.ops.marionette.control_add(kind=kind) == {"FINISHED"}
        for row in hero.marionette_controls.controls:
            bpy.context.scene.collection.objects.unlink(row.target_object)
            col.objects.link(row.target_object)
        library = tmp_path / "characters.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(library))

        bpy.ops.wm.read_factory_settings(use_empty=True)
        with bpy.data.libraries.load(str(library), link=True) as (_src, dst):
            dst.collections = ["HeroCol"]
        dst.collections[0].override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=True)
        hero = _override_of(bpy, "Hero")
        bpy.context.view_layer.objects.active = hero
        yield bpy, library, hero
    finally:
        marionette.unregister()


def test_a_linked_character_refuses_a_changed_list_until_overridden(controlled):
    bpy, library, hero = controlled
    with bpy.data.libraries.load(str(library), link=True) as (_src, dst):
        dst.objects = ["Hero"]
    linked = dst.objects[0]
    assert linked.library is not None and linked.override_library is None
    bpy.context.scene.collection.objects.link(linked)
    bpy.context.view_layer.objects.active = linked
    assert not bpy.ops.marionette.control_add.poll()
    with pytest.raises(RuntimeError, match="library override"):
        bpy.ops.marionette.control_add(kind="LOOK_AT")
    bpy.context.view_layer.objects.active = hero
    assert bpy.ops.marionette.control_add.poll()
    hero.override_library.is_system_override = True
    with pytest.raises(RuntimeError, match="not editable"):
        bpy.ops.marionette.control_add(kind="LOOK_AT")


def test_an_overridden_character_keeps_added_removed_and_reordered_controls(controlled, tmp_path):
    """On the override: add a control, remove one the library gave, move another, edit settings;
    after save and reload the list is exactly as left, the live preview runs it, and a setting
    the library file changes later comes through where the override did not change it."""
    bpy, library, hero = controlled
    s = hero.marionette_controls
    assert [r[0] for r in _rows(hero)] == ["Arm IK.L", "Arm IK.R", "Look At"]
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK") == {"FINISHED"}  # a leg: both arms have one
    s.active_index = 1
    assert bpy.ops.marionette.control_remove() == {"FINISHED"}  # Arm IK.R, from the library
    s.active_index = 1
    assert bpy.ops.marionette.control_move(direction="UP") == {"FINISHED"}  # Look At first
    added = s.controls["Leg IK.L"]
    added.weight = 0.75
    added.use_hinge_limit = True
    s.controls["Look At"].weight = 0.5
    expected = [
        ("Look At", "LOOK_AT", "Neck", "Head", "", "Hero Look At target"),
        ("Arm IK.L", "TWO_BONE_IK", "UpperArm.L", "Forearm.L", "Hand.L", "Hero Arm IK.L target"),
        ("Leg IK.L", "TWO_BONE_IK", "Thigh.L", "Shin.L", "Foot.L", "Hero Leg IK.L target"),
    ]
    assert _rows(hero) == expected
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))

    bpy.ops.wm.open_mainfile(filepath=str(shot))
    hero = _override_of(bpy, "Hero")
    s = hero.marionette_controls
    assert _rows(hero) == expected
    assert [r.weight for r in s.controls] == pytest.approx([0.5, 1.0, 0.75])
    assert [r.use_hinge_limit for r in s.controls] == [False, False, True]
    # Targets are the override's own objects (the library's empties overridden, the new one local).
    assert all(r.target_object.library is None for r in s.controls)
    assert s.controls["Arm IK.L"].target_object.override_library is not None

    # The live preview runs the rebuilt list: each IK end reaches its target, moved within reach.
    scene = bpy.context.scene
    world = np.array(hero.matrix_world)

    def head(bone):
        return world[:3, :3] @ np.array(hero.pose.bones[bone].head) + world[:3, 3]

    ends = {}
    for name in ("Arm IK.L", "Leg IK.L"):
        row = s.controls[name]
        top, mid, end = head(row.bone_start), head(row.bone_end), head(row.end_bone)
        reach = np.linalg.norm(mid - top) + np.linalg.norm(end - mid)
        way = np.array([0.3, -0.6, -0.74])
        row.target_object.location = top + 0.75 * reach * way / np.linalg.norm(way)
        ends[name] = row.end_bone
    # The sample's leg is straight at rest: a pole gives its bend a plane.
    pole = bpy.data.objects.new("Knee pole", None)
    scene.collection.objects.link(pole)
    pole.location = head("Shin.L") + np.array([0.0, -1.0, 0.0])
    s.controls["Leg IK.L"].pole_object = pole
    s.controls["Leg IK.L"].use_hinge_limit = False
    s.controls["Leg IK.L"].weight = 1.0
    s.live_preview = True
    scene.frame_set(1)
    for name, bone in ends.items():
        target = np.array(s.controls[name].target_object.matrix_world.translation)
        assert np.linalg.norm(head(bone) - target) < 1e-4, name
    s.live_preview = False
    s.controls["Leg IK.L"].use_hinge_limit = True
    s.controls["Leg IK.L"].pole_object = None
    s.controls["Leg IK.L"].weight = 0.75
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))

    # The library file changes a setting of a control the override left alone, and one the
    # override changed: the first comes through, the override's own value stays.
    bpy.ops.wm.open_mainfile(filepath=str(library))
    lib_hero = bpy.data.objects["Hero"]
    lib_hero.marionette_controls.controls["Arm IK.L"].priority = 3
    lib_hero.marionette_controls.controls["Look At"].weight = 0.9
    lib_hero.marionette_controls.controls["Look At"].yaw_max = 1.0
    bpy.ops.wm.save_mainfile()

    bpy.ops.wm.open_mainfile(filepath=str(shot))
    hero = _override_of(bpy, "Hero")
    s = hero.marionette_controls
    assert _rows(hero) == expected
    assert [r.priority for r in s.controls] == [0, 3, 0]
    assert [r.weight for r in s.controls] == pytest.approx([0.5, 1.0, 0.75])
    assert s.controls["Look At"].yaw_max == pytest.approx(1.0)
    assert [r.use_hinge_limit for r in s.controls] == [False, False, True]


def test_the_load_handler_goes_with_unregister(blender):
    bpy = blender
    from marionette.operators import controls_register
    from marionette.viewport import control_overrides

    assert control_overrides._on_load not in bpy.app.handlers.load_post
    controls_register.register()
    try:
        assert control_overrides._on_load in bpy.app.handlers.load_post
    finally:
        controls_register.unregister()
    assert control_overrides._on_load not in bpy.app.handlers.load_post
