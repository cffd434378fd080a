"""Characters linked from a library file, as pipelines keep them: a linked armature cannot keep
an action (it would be lost on save), so Retarget Clip refuses it and says what to do; a library
override of it takes the new action and keeps it through save and reload; a linked source is
read and left alone."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.bpy


def _keys(action):
    from marionette.operators import compat

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
    from marionette.core.samples import sample_humanoid, sample_walk
    from marionette.operators.armature_io import create_armature, write_action

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
    from marionette.operators.jobs import retarget_action

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
    from marionette.operators.armature_io import clip_from_action
    from marionette.operators.jobs import retarget_action

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
    from marionette.core.samples import sample_humanoid
    from marionette.operators.armature_io import create_armature
    from marionette.operators.jobs import retarget_action

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


def test_an_overridden_character_keeps_edits_to_its_controls_and_refuses_a_changed_list(blender, tmp_path):
    """Controls made in the library file come with the character; on its library override their
    settings can be edited and survive save and reload. Adding, removing or reordering controls
    there would not survive, so those are refused, saying why."""
    bpy = blender
    import marionette
    from marionette.core.samples import sample_humanoid
    from marionette.operators.armature_io import create_armature

    marionette.register()
    try:
        rig = sample_humanoid()
        hero = create_armature(rig.skeleton, "Hero", tails=rig.tails)
        col = bpy.data.collections.new("HeroCol")
        bpy.context.scene.collection.children.link(col)
        bpy.context.scene.collection.objects.unlink(hero)
        col.objects.link(hero)
        bpy.context.view_layer.objects.active = hero
        assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK") == {"FINISHED"}
        library = tmp_path / "characters.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(library))

        bpy.ops.wm.read_factory_settings(use_empty=True)
        with bpy.data.libraries.load(str(library), link=True) as (_src, dst):
            dst.collections = ["HeroCol"]
        dst.collections[0].override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=True)
        hero = next(o for o in bpy.data.objects if o.name == "Hero" and o.override_library is not None)
        controls = hero.marionette_controls.controls
        assert len(controls) == 1
        controls[0].weight = 0.25
        bpy.context.view_layer.objects.active = hero
        for op in (bpy.ops.marionette.control_add, bpy.ops.marionette.control_remove):
            assert not op.poll()
        with pytest.raises(RuntimeError, match="library override"):
            bpy.ops.marionette.control_add(kind="LOOK_AT")
        shot = tmp_path / "shot.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(shot))

        bpy.ops.wm.open_mainfile(filepath=str(shot))
        hero = next(o for o in bpy.data.objects if o.name == "Hero" and o.override_library is not None)
        assert len(hero.marionette_controls.controls) == 1
        assert hero.marionette_controls.controls[0].weight == pytest.approx(0.25)
    finally:
        marionette.unregister()
