"""Control definitions stored on the armature *object*: ``object.marionette_controls``.

They live on the object, not on the shared Armature datablock, so two objects that share one
Armature keep separate controls (and, in :mod:`.live_preview`, separate simulation state;
docs/controls.md#definitions-and-instances). Each row is one control of the control stack (docs/controls.md#the-stack); :mod:`.control_rows` turns the rows
into an immutable core :class:`~marionette.core.controls.stack.ControlStack`.

Units: distances are in the armature's units (shown with the scene's length unit), angles are
stored in radians and shown in degrees, times in seconds. Bones are referred to by name; a
*chain* is ``bone_start`` down to ``bone_end`` through parents (``bone_end`` a descendant of
``bone_start``). Kinds with two chains (ground feet: left and right leg; closure: two branches)
use ``second_start`` / ``second_end`` for the other one.

Changing a definition rebuilds the object's stack at the next evaluation; changing ``enabled`` or
``weight`` only updates the running instance (a disabled control forgets its state, docs/controls.md#the-stack).
"""

from __future__ import annotations

import math
from typing import Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..bridge.control_kinds import IK_KINDS, LOOK_AT_BONES
from ..viewport import control_overrides, live_preview

KIND_ITEMS = [
    ("TWO_BONE_IK", "Two-Bone IK", "An arm or a leg reaching a target: analytic, exact when reachable", "CON_KINEMATIC", 0),
    ("FABRIK", "FABRIK Chain", "A chain of any length reaching a target (FABRIK passes)", "CON_SPLINEIK", 1),
    ("CCD", "CCD Chain", "A chain of any length reaching a target (cyclic coordinate descent)", "CON_SPLINEIK", 2),
    ("LOOK_AT", "Look At", "Turn a neck and head (and chest) toward a target, within yaw and pitch limits", "CON_TRACKTO", 3),
    ("GROUND", "Ground Feet", "Keep both feet on the ground under them (ray casts), lowering the pelvis if needed", "MOD_FLUIDSIM", 4),
    ("SPRING", "Spring Chain", "Let a chain (tail, hair, ears) lag and swing behind the animation", "FORCE_HARMONIC", 5),
    ("INHERIT", "Inheritance", "Add a fraction of another bone's rotation and movement (append / grant bone)", "CON_CHILDOF", 6),
    ("FIXED_AXIS", "Fixed Axis", "Keep only the twist of the chain's bones about one of their axes", "CON_LOCKTRACK", 7),
    ("CLOSURE", "Closure", "Two branches from one pivot whose ends must meet (a diamond loop)", "CON_STRETCHTO", 8),
]
KIND_LABEL = {k: label for k, label, *_ in KIND_ITEMS}
KIND_ICON = {k: icon for k, _l, _d, icon, _n in KIND_ITEMS}
#: Kinds with a target object or bone.
TARGET_KINDS = (*IK_KINDS, "LOOK_AT", "CLOSURE")

AXIS_ITEMS = [
    ("AUTO", "Auto", "The rig's forward (facing) or up direction at rest, in the bone's frame"),
    ("POS_X", "+X", "The bone's local +X axis"),
    ("NEG_X", "-X", "The bone's local -X axis"),
    ("POS_Y", "+Y", "The bone's local +Y axis (head to tail)"),
    ("NEG_Y", "-Y", "The bone's local -Y axis"),
    ("POS_Z", "+Z", "The bone's local +Z axis"),
    ("NEG_Z", "-Z", "The bone's local -Z axis"),
]
TWIST_AXIS_ITEMS = [item for item in AXIS_ITEMS if item[0] != "AUTO"]
COLLIDER_KIND_ITEMS = [
    ("SPHERE", "Sphere", "Springs stay outside a ball about the offset (a head)", "MESH_UVSPHERE", 0),
    ("CAPSULE", "Capsule", "Springs stay outside a rounded cylinder from the offset to the tail (a neck, an arm, a leg)", "MESH_CAPSULE", 1),
    ("PLANE", "Plane", "Springs stay in front of a plane through the offset, facing the normal (a floor, a back)", "MESH_PLANE", 2),
    ("INSIDE_SPHERE", "Inside Sphere", "Springs stay inside a ball (a skirt kept within a body volume)", "SPHERE", 3),
    ("INSIDE_CAPSULE", "Inside Capsule", "Springs stay inside a rounded cylinder", "META_CAPSULE", 4),
]
COLLIDER_ICON = {k: icon for k, _l, _d, icon, _n in COLLIDER_KIND_ITEMS}
CLOSURE_SOLVER_ITEMS = [
    ("FABRIK", "FABRIK", "Branches of any length (FABRIK passes)"),
    ("CCD", "CCD", "Branches of any length (cyclic coordinate descent, in each bone's own axes)"),
    ("TWO_BONE", "Two-Bone", "Analytic, exact when reachable: each branch has two bones"),
]


def _definition_changed(self: Any, _context: Any) -> None:
    control_overrides.row_changed(self.id_data)
    live_preview.definitions_changed(self.id_data)


def _state_changed(self: Any, _context: Any) -> None:
    control_overrides.row_changed(self.id_data)
    live_preview.state_changed(self.id_data)


def _collider_changed(self: Any, _context: Any) -> None:
    live_preview.definitions_changed(self.id_data)


def _live_toggled(self: Any, _context: Any) -> None:
    live_preview.live_toggled(self.id_data)


def _deg(value: float) -> float:
    return math.radians(value)


#: Every property is editable on a library override (a character linked from a library and
#: overridden, as pipelines keep them) and controls can be added there; without it adding a
#: control to an overridden armature fails and edits are not kept. Removing and reordering
#: controls there goes through :mod:`.control_overrides`, which Blender alone does not keep.
OVERRIDABLE = {"LIBRARY_OVERRIDABLE"}
OVERRIDABLE_ITEMS = {"LIBRARY_OVERRIDABLE", "USE_INSERTION"}


class MarionetteControl(bpy.types.PropertyGroup):
    """One control of an armature object's stack."""

    # Common to every kind (docs/controls.md#the-stack).
    name: StringProperty(override=OVERRIDABLE, name="Name", default="Control", update=_definition_changed)  # type: ignore[valid-type]
    kind: EnumProperty(override=OVERRIDABLE, name="Type", items=KIND_ITEMS, default="TWO_BONE_IK", update=_definition_changed)  # type: ignore[valid-type]
    enabled: BoolProperty(override=OVERRIDABLE, name="Enabled", default=True, description="Run this control", update=_state_changed)  # type: ignore[valid-type]
    weight: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Weight", default=1.0, min=0.0, max=1.0, subtype="FACTOR",
        description="How much of the control's result is blended over its input pose", update=_state_changed,
    )
    priority: IntProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Priority", default=0, soft_min=-10, soft_max=10,
        description="Controls run in ascending priority (list order breaks ties); each reads what the previous produced",
        update=_definition_changed,
    )
    smooth_time: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Smoothing", default=0.0, min=0.0, soft_max=2.0, unit="TIME_ABSOLUTE",
        description="Targets follow with response 1 - exp(-dt / smoothing) (0: no smoothing)", update=_definition_changed,
    )

    # Bones: the first chain, and the second one for kinds that need two.
    bone_start: StringProperty(override=OVERRIDABLE, name="First Bone", description="Top of the chain (e.g. the upper arm)", update=_definition_changed)  # type: ignore[valid-type]
    bone_end: StringProperty(override=OVERRIDABLE, name="Last Bone", description="Bottom of the chain (e.g. the forearm); a descendant of the first bone", update=_definition_changed)  # type: ignore[valid-type]
    end_bone: StringProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="End Bone",
        description="Child of the last bone whose head is the end point (e.g. the hand); empty: the last bone's tail",
        update=_definition_changed,
    )
    second_start: StringProperty(override=OVERRIDABLE, name="Second First Bone", description="Top of the second chain", update=_definition_changed)  # type: ignore[valid-type]
    second_end: StringProperty(override=OVERRIDABLE, name="Second Last Bone", description="Bottom of the second chain", update=_definition_changed)  # type: ignore[valid-type]

    # Targets: an object, or a bone of an armature (this one included: its animated pose).
    target_object: PointerProperty(override=OVERRIDABLE, name="Target", type=bpy.types.Object, description="Object the chain reaches or looks at", update=_definition_changed)  # type: ignore[valid-type]
    target_bone: StringProperty(override=OVERRIDABLE, name="Target Bone", description="Bone of the target armature (empty: the object itself)", update=_definition_changed)  # type: ignore[valid-type]
    pole_object: PointerProperty(override=OVERRIDABLE, name="Pole", type=bpy.types.Object, description="Object the bend (elbow, knee) points toward; empty: keep the animated bend", update=_definition_changed)  # type: ignore[valid-type]
    pole_bone: StringProperty(override=OVERRIDABLE, name="Pole Bone", description="Bone of the pole armature (empty: the object itself)", update=_definition_changed)  # type: ignore[valid-type]
    second_object: PointerProperty(override=OVERRIDABLE, name="Second Target", type=bpy.types.Object, description="Target of the second branch", update=_definition_changed)  # type: ignore[valid-type]
    second_bone: StringProperty(override=OVERRIDABLE, name="Second Target Bone", description="Bone of the second target armature", update=_definition_changed)  # type: ignore[valid-type]

    # IK (docs/controls.md#ik-chains).
    orient_end: BoolProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Match Target Rotation", default=False,
        description="Give the end bone the target's world rotation after reaching it (needs an End Bone)",
        update=_definition_changed,
    )
    tolerance: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Tolerance", default=0.001, min=0.0, soft_max=0.1, precision=4, unit="LENGTH",
        description="FABRIK and CCD stop when the end is this close to the target", update=_definition_changed,
    )
    max_passes: IntProperty(override=OVERRIDABLE, name="Max Passes", default=16, min=1, soft_max=64, description="FABRIK and CCD stop after this many passes", update=_definition_changed)  # type: ignore[valid-type]
    use_bone_limits: BoolProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Use Bone IK Limits", default=False,
        description="Limit each bone's turn by its Inverse Kinematics limits and locks (Bone properties)",
        update=_definition_changed,
    )

    # Joint limits of IK chains and closure branches: a cone on the chain's first bone (a ball
    # joint: shoulder, hip) and a hinge on the bones after it (an elbow, a knee). Each replaces
    # the Bone IK Limits of the bones it covers. Angles are measured from the rest pose, in the
    # bone's own axes (Y runs from head to tail).
    use_cone_limit: BoolProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Cone Limit", default=False,
        description="Keep the chain's first bone within a cone about its rest direction, with limited twist (a shoulder, a hip)",
        update=_definition_changed,
    )
    cone_angle: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Cone Angle", default=_deg(90.0), min=0.0, max=math.pi, unit="ROTATION",
        description="Largest swing of the first bone away from its rest direction", update=_definition_changed,
    )
    cone_twist: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Cone Twist", default=_deg(90.0), min=0.0, max=math.pi, unit="ROTATION",
        description="Largest twist of the first bone about its own Y axis, either way", update=_definition_changed,
    )
    use_hinge_limit: BoolProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Hinge Limit", default=False,
        description="Let each bone after the first turn only about one of its axes, within a range (an elbow, a knee)",
        update=_definition_changed,
    )
    hinge_axis: EnumProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Hinge Axis", items=TWIST_AXIS_ITEMS, default="POS_X",
        description="The bones' local axis they turn about (Blender bones usually bend about X)", update=_definition_changed,
    )
    hinge_min: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Hinge Min", default=_deg(-150.0), min=-math.pi, max=math.pi, unit="ROTATION",
        description="Smallest turn about the hinge axis, from the rest pose", update=_definition_changed,
    )
    hinge_max: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Hinge Max", default=_deg(150.0), min=-math.pi, max=math.pi, unit="ROTATION",
        description="Largest turn about the hinge axis, from the rest pose", update=_definition_changed,
    )

    # Look-at (docs/controls.md#look-at).
    facing_axis: EnumProperty(override=OVERRIDABLE, name="Facing", items=AXIS_ITEMS, default="AUTO", description="The last bone's axis that should point at the target", update=_definition_changed)  # type: ignore[valid-type]
    up_axis: EnumProperty(override=OVERRIDABLE, name="Up", items=AXIS_ITEMS, default="AUTO", description="The last bone's axis that points up", update=_definition_changed)  # type: ignore[valid-type]
    space_bone: StringProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Limits Space",
        description="Bone the limits are measured in (e.g. the hips); empty: the parent of the first bone",
        update=_definition_changed,
    )
    yaw_min: FloatProperty(override=OVERRIDABLE, name="Yaw Min", default=_deg(-80.0), min=-math.pi, max=0.0, unit="ROTATION", update=_definition_changed)  # type: ignore[valid-type]
    yaw_max: FloatProperty(override=OVERRIDABLE, name="Yaw Max", default=_deg(80.0), min=0.0, max=math.pi, unit="ROTATION", update=_definition_changed)  # type: ignore[valid-type]
    pitch_min: FloatProperty(override=OVERRIDABLE, name="Pitch Min", default=_deg(-50.0), min=-math.pi / 2, max=0.0, unit="ROTATION", update=_definition_changed)  # type: ignore[valid-type]
    pitch_max: FloatProperty(override=OVERRIDABLE, name="Pitch Max", default=_deg(60.0), min=0.0, max=math.pi / 2, unit="ROTATION", update=_definition_changed)  # type: ignore[valid-type]
    look_weights: FloatVectorProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Turn Weights", size=LOOK_AT_BONES, default=tuple(float(k + 1) for k in range(LOOK_AT_BONES)), min=0.0, soft_max=10.0,
        description=(
            "How much of the turn each bone of the chain takes, first bone first: each takes its weight over their sum"
            " (the last bone's must be above 0; the defaults give the head the largest share)"
        ),
        update=_definition_changed,
    )
    look_ease_behind: BoolProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Ease Behind", default=True,
        description=(
            "Beyond the yaw limits, bring the head back toward the middle of its range as the target goes behind"
            " (a target circling the head is followed without a snap); off: hold it at the limit"
        ),
        update=_definition_changed,
    )

    # Ground feet (docs/controls.md#ground-feet): the first chain is the left leg, the second the right one
    # (thigh down to foot, three bones each).
    pelvis_bone: StringProperty(override=OVERRIDABLE, name="Pelvis", description="Bone lowered when a leg cannot reach (empty: no pelvis adjustment)", update=_definition_changed)  # type: ignore[valid-type]
    probe_height: FloatProperty(override=OVERRIDABLE, name="Probe Height", default=0.5, min=0.001, soft_max=2.0, unit="LENGTH", description="Rays start this far above each sole and reach twice as far down", update=_definition_changed)  # type: ignore[valid-type]
    max_offset: FloatProperty(override=OVERRIDABLE, name="Max Lift", default=0.5, min=0.0, soft_max=2.0, unit="LENGTH", description="Largest vertical correction of a foot", update=_definition_changed)  # type: ignore[valid-type]
    max_tilt: FloatProperty(override=OVERRIDABLE, name="Max Tilt", default=_deg(35.0), min=0.0, max=_deg(35.0), unit="ROTATION", description="Largest turn of a foot toward the ground's slope", update=_definition_changed)  # type: ignore[valid-type]
    pelvis_smooth_time: FloatProperty(override=OVERRIDABLE, name="Pelvis Smoothing", default=0.15, min=0.0, soft_max=2.0, unit="TIME_ABSOLUTE", update=_definition_changed)  # type: ignore[valid-type]
    floor_height: FloatProperty(override=OVERRIDABLE, name="Floor", default=0.0, soft_min=-10.0, soft_max=10.0, unit="LENGTH", description="Height (armature space) of the floor the animation was made on", update=_definition_changed)  # type: ignore[valid-type]
    ground_collection: PointerProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Ground", type=bpy.types.Collection,
        description="Probe only these objects (faster); empty: every object of the scene except the character's own meshes",
        update=_definition_changed,
    )

    # Springs (docs/controls.md#springs).
    stiffness: FloatProperty(override=OVERRIDABLE, name="Stiffness", default=60.0, min=0.0, max=57600.0, soft_max=1000.0, description="Pull toward the animated pose, per second squared", update=_definition_changed)  # type: ignore[valid-type]
    damping: FloatProperty(override=OVERRIDABLE, name="Damping", default=4.0, min=0.0, soft_max=50.0, description="Velocity decay rate, per second", update=_definition_changed)  # type: ignore[valid-type]
    gravity: FloatVectorProperty(override=OVERRIDABLE, name="Gravity", default=(0.0, 0.0, -9.81), size=3, subtype="ACCELERATION", unit="ACCELERATION", description="World acceleration on the chain", update=_definition_changed)  # type: ignore[valid-type]
    # Spring colliders, wind and center space (docs/controls.md#colliders).
    collider_groups: StringProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Collider Groups",
        description="Groups of the armature's colliders this chain does not pass through, separated by commas (empty: none)",
        update=_definition_changed,
    )
    point_radius: FloatProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Hit Radius", default=0.0, min=0.0, soft_max=0.2, unit="LENGTH",
        description="How far each segment's end point keeps from the colliders (the hair's thickness)", update=_definition_changed,
    )
    wind_direction: FloatVectorProperty(override=OVERRIDABLE, name="Wind Direction", default=(1.0, 0.0, 0.0), size=3, subtype="DIRECTION", description="World direction the wind blows toward", update=_definition_changed)  # type: ignore[valid-type]
    wind_strength: FloatProperty(override=OVERRIDABLE, name="Wind", default=0.0, min=0.0, soft_max=20.0, unit="ACCELERATION", description="Acceleration of the steady wind (0: no wind)", update=_definition_changed)  # type: ignore[valid-type]
    wind_gust: FloatProperty(override=OVERRIDABLE, name="Gusts", default=0.0, min=0.0, soft_max=2.0, description="Size of the gusts relative to the steady wind (0: steady)", update=_definition_changed)  # type: ignore[valid-type]
    wind_frequency: FloatProperty(override=OVERRIDABLE, name="Gust Frequency", default=0.5, min=0.0, soft_max=5.0, description="About how many gusts per second", update=_definition_changed)  # type: ignore[valid-type]
    wind_seed: IntProperty(override=OVERRIDABLE, name="Gust Seed", default=0, min=0, description="Another seed, other gusts (the same seed gives the same gusts every time)", update=_definition_changed)  # type: ignore[valid-type]
    center_bone: StringProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Center",
        description="Simulate the chain in this bone's moving frame (e.g. the hips or the root), so the character's travel does not whip it; empty: the world",
        update=_definition_changed,
    )

    # Inheritance and fixed axes (docs/controls.md#inheritance-and-fixed-axes): the chain's bones are the targets.
    source_bone: StringProperty(override=OVERRIDABLE, name="Source Bone", description="Bone whose current rotation and movement are added", update=_definition_changed)  # type: ignore[valid-type]
    rotation_fraction: FloatProperty(override=OVERRIDABLE, name="Rotation", default=1.0, soft_min=-1.0, soft_max=1.0, description="Fraction of the source's rotation added (negative turns the other way)", update=_definition_changed)  # type: ignore[valid-type]
    translation_fraction: FloatProperty(override=OVERRIDABLE, name="Movement", default=0.0, soft_min=-1.0, soft_max=1.0, description="Fraction of the source's movement added", update=_definition_changed)  # type: ignore[valid-type]
    twist_axis: EnumProperty(override=OVERRIDABLE, name="Axis", items=TWIST_AXIS_ITEMS, default="POS_Y", description="The bones' local axis whose twist is kept", update=_definition_changed)  # type: ignore[valid-type]

    # Closure (docs/controls.md#closure).
    max_iterations: IntProperty(override=OVERRIDABLE, name="Max Iterations", default=16, min=1, soft_max=64, description="Closure: solves of both branches at most", update=_definition_changed)  # type: ignore[valid-type]
    closure_solver: EnumProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Solver", items=CLOSURE_SOLVER_ITEMS, default="FABRIK",
        description="How each branch reaches the meeting point", update=_definition_changed,
    )

    # On a library override: the library's row this one is (empty: added on the override).
    library_row: StringProperty(override=OVERRIDABLE, options={"HIDDEN"})  # type: ignore[valid-type]


class MarionetteCollider(bpy.types.PropertyGroup):
    """A collider attached to a bone, which the spring chains choosing its group do not pass
    through (docs/controls.md#colliders). Offsets are in the bone's own axes (Y from head to tail)."""

    name: StringProperty(override=OVERRIDABLE, name="Name", default="Collider", update=_collider_changed)  # type: ignore[valid-type]
    group: StringProperty(override=OVERRIDABLE, name="Group", default="Body", description="Spring chains choose colliders by group", update=_collider_changed)  # type: ignore[valid-type]
    kind: EnumProperty(override=OVERRIDABLE, name="Shape", items=COLLIDER_KIND_ITEMS, default="SPHERE", update=_collider_changed)  # type: ignore[valid-type]
    bone: StringProperty(override=OVERRIDABLE, name="Bone", description="The bone the collider follows", update=_collider_changed)  # type: ignore[valid-type]
    offset: FloatVectorProperty(override=OVERRIDABLE, name="Offset", size=3, subtype="TRANSLATION", unit="LENGTH", description="Centre (capsule: first end; plane: a point on it) in the bone's axes, from its head", update=_collider_changed)  # type: ignore[valid-type]
    tail: FloatVectorProperty(override=OVERRIDABLE, name="Tail", size=3, default=(0.0, 1.0, 0.0), subtype="XYZ", description="Capsule: its second end, in the bone's axes; plane: its normal", update=_collider_changed)  # type: ignore[valid-type]
    radius: FloatProperty(override=OVERRIDABLE, name="Radius", default=0.1, min=0.0, soft_max=1.0, unit="LENGTH", description="Radius of the sphere or capsule (a plane's is its thickness)", update=_collider_changed)  # type: ignore[valid-type]


def _scene_wind_changed(_self: Any, _context: Any) -> None:
    # Every armature with a spring of no wind of its own blows with the scene's.
    for obj in bpy.data.objects:
        rows = getattr(getattr(obj, "marionette_controls", None), "controls", ())
        if any(r.kind == "SPRING" and r.wind_strength <= 0.0 for r in rows):
            live_preview.definitions_changed(obj)


class MarionetteSceneWind(bpy.types.PropertyGroup):
    """The scene's wind: every spring chain without a wind of its own (Wind 0) blows with it
    (docs/controls.md#wind-and-the-center-space)."""

    direction: FloatVectorProperty(name="Wind Direction", default=(1.0, 0.0, 0.0), size=3, subtype="DIRECTION", description="World direction the scene's wind blows toward", update=_scene_wind_changed)  # type: ignore[valid-type]
    strength: FloatProperty(name="Scene Wind", default=0.0, min=0.0, soft_max=20.0, unit="ACCELERATION", description="Acceleration of the scene's steady wind on springs without a wind of their own (0: none)", update=_scene_wind_changed)  # type: ignore[valid-type]
    gust: FloatProperty(name="Gusts", default=0.0, min=0.0, soft_max=2.0, description="Size of the gusts relative to the steady wind (0: steady)", update=_scene_wind_changed)  # type: ignore[valid-type]
    frequency: FloatProperty(name="Gust Frequency", default=0.5, min=0.0, soft_max=5.0, description="About how many gusts per second", update=_scene_wind_changed)  # type: ignore[valid-type]
    seed: IntProperty(name="Gust Seed", default=0, min=0, description="Another seed, other gusts (the same seed gives the same gusts every time)", update=_scene_wind_changed)  # type: ignore[valid-type]


class MarionetteControls(bpy.types.PropertyGroup):
    """The controls of one armature object, its colliders and its live preview switch."""

    controls: CollectionProperty(type=MarionetteControl, override=OVERRIDABLE_ITEMS)  # type: ignore[valid-type]
    active_index: IntProperty(override=OVERRIDABLE, name="Active Control", default=0)  # type: ignore[valid-type]
    colliders: CollectionProperty(type=MarionetteCollider, override=OVERRIDABLE_ITEMS)  # type: ignore[valid-type]
    active_collider: IntProperty(override=OVERRIDABLE, name="Active Collider", default=0)  # type: ignore[valid-type]
    show_colliders: BoolProperty(override=OVERRIDABLE, name="Show Colliders", default=True, description="Draw the colliders in the 3D viewport on the pose shown")  # type: ignore[valid-type]
    live_preview: BoolProperty(override=OVERRIDABLE,   # type: ignore[valid-type]
        name="Live Preview", default=False,
        description="Show the animation with the controls applied as the timeline plays or is scrubbed",
        update=_live_toggled,
    )
    # On a library override: every row, as JSON (see :mod:`.control_overrides`), since Blender
    # does not keep library rows removed or moved there.
    override_rows: StringProperty(override=OVERRIDABLE, options={"HIDDEN"})  # type: ignore[valid-type]


classes = (MarionetteControl, MarionetteCollider, MarionetteControls, MarionetteSceneWind)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register()
    bpy.types.Object.marionette_controls = PointerProperty(type=MarionetteControls, override={"LIBRARY_OVERRIDABLE"})
    bpy.types.Scene.marionette_wind = PointerProperty(type=MarionetteSceneWind)


def unregister() -> None:
    del bpy.types.Scene.marionette_wind
    del bpy.types.Object.marionette_controls
    _unregister()
