"""Rigify's generated rigs (the human metarig's ``super_torso``/``limbs``/``super_finger`` rigs,
Blender 4.x and 5.x feature set) keyed on their controls (docs/control_rigs.md#rigify).

The retarget maps the humanoid slots onto the ``ORG-`` bones (one clean tree with the metarig's
rests, which the deform bones follow); the plan then keys, FK (default):

* ``torso`` at the spine's pivot, the FK spine (``spine_fk`` ... ``spine_fk.003``) aimed so each
  ``ORG-spine`` bone's head lands, ``neck`` aimed at the head and ``head``;
* ``shoulder``, ``upper_arm_fk``, ``forearm_fk``, ``hand_fk``, ``thigh_fk``, ``shin_fk``,
  ``foot_fk``, ``toe_fk`` on their ``ORG-`` bones, and every finger segment's control;
* the switches ``IK_FK = 1`` on ``upper_arm_parent``/``thigh_parent``.

IK keys ``hand_ik``/``foot_ik`` and ``upper_arm_ik``/``thigh_ik`` (the chain's base, which aims it)
with ``IK_FK = 0`` instead of the limbs' FK controls. Bones a rig does not have (no fingers, one
arm) are left out; the plan is what the rig has.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .plan import Aim, ControlPlan, Match, Pole, Step

#: The spine: (FK control, the ORG bone whose head it carries, the ORG bone that gives its roll).
_SPINE_AIMS = (
    ("spine_fk.001", "ORG-spine.001", "ORG-spine.001"),
    ("spine_fk", "ORG-spine", "ORG-spine"),
    ("spine_fk.002", "ORG-spine.003", "ORG-spine.002"),
    ("spine_fk.003", "ORG-spine.004", "ORG-spine.003"),
)
_ARM_FK = ("upper_arm", "forearm", "hand")
_LEG_FK = (("thigh", "thigh"), ("shin", "shin"), ("foot", "foot"), ("toe", "toe"))
_FINGERS = ("thumb", "f_index", "f_middle", "f_ring", "f_pinky")


def is_rigify(names: Collection[str], properties: Mapping[str, Collection[str]]) -> bool:
    """Whether bones ``names`` (with the custom properties ``properties`` of each pose bone) are
    a Rigify generated rig: ``ORG-``/``DEF-``/``MCH-`` bones, a ``torso`` control and IK/FK switches."""
    has = set(names)
    switches = any("IK_FK" in properties.get(b, ()) for b in ("upper_arm_parent.L", "thigh_parent.L", "upper_arm_parent.R", "thigh_parent.R"))
    return switches and "torso" in has and "ORG-spine" in has and any(n.startswith("DEF-") for n in has)


def rigify_plan(names: Collection[str], properties: Mapping[str, Collection[str]], mode: str = "fk") -> ControlPlan:
    """The plan that keys a Rigify rig with bones ``names`` in ``mode`` (``"fk"`` or ``"ik"``)."""
    has = set(names)
    steps: list[Step] = []

    def match(control: str, bone: str) -> None:
        if control in has and bone in has:
            steps.append(Match(control, bone))

    if "torso" in has and "ORG-spine.002" in has:
        steps.append(Match("torso", "ORG-spine.002"))
    for control, point, roll in _SPINE_AIMS:
        if {control, point, roll} <= has:
            steps.append(Aim(control, point, roll))
    for k, bone in enumerate(("ORG-spine", "ORG-spine.001", "ORG-spine.002", "ORG-spine.003")):
        match("tweak_spine" + (f".{k:03d}" if k else ""), bone)
    if {"neck", "ORG-spine.006", "ORG-spine.004"} <= has:
        steps.append(Aim("neck", "ORG-spine.006", "ORG-spine.004"))
    match("head", "ORG-spine.006")
    match("tweak_spine.005", "ORG-spine.005")  # the neck's bend: the tweak between neck and head
    switches = []
    checked: list[str] = []
    for side in (".L", ".R"):
        match("shoulder" + side, "ORG-shoulder" + side)
        for limb, parent, parts in (("arm", "upper_arm_parent", _ARM_FK), ("leg", "thigh_parent", tuple(p for p, _ in _LEG_FK))):
            if "IK_FK" in properties.get(parent + side, ()):
                switches.append((parent + side, "IK_FK", 1.0 if mode == "fk" else 0.0))
            if mode == "ik" and "pole_vector" in properties.get(parent + side, ()):
                switches.append((parent + side, "pole_vector", 1.0))
            if mode == "fk":
                for part in parts:
                    match(f"{part}_fk{side}", f"ORG-{part}{side}")
            else:
                end = "hand" if limb == "arm" else "foot"
                base = "upper_arm" if limb == "arm" else "thigh"
                match(f"{end}_ik{side}", f"ORG-{end}{side}")
                match(f"{base}_ik{side}", f"ORG-{base}{side}")
                # The chain does not stretch while the clip plays: Blender's IK with IK Stretch shortens a
                # bent chain (Rigify's 0.1 shortens a running shin by up to 9 %), so its bend would not be
                # the clip's. Set on the chain's base and on the mechanism bone that carries its IK.
                for bone in (f"{base}_ik{side}", f"MCH-{'forearm' if limb == 'arm' else 'shin'}_ik{side}"):
                    if bone in has:
                        switches.append((bone, "ik_stretch", 0.0))
                middle = f"ORG-{'forearm' if limb == 'arm' else 'shin'}{side}"
                pole = f"{base}_ik_target{side}"
                if {pole, middle, f"ORG-{base}{side}", f"ORG-{end}{side}"} <= has:
                    steps.append(Pole(pole, f"ORG-{base}{side}", middle, f"ORG-{end}{side}"))
                if middle in has:
                    checked.append(middle)
                if limb == "leg" and {f"toe_ik{side}", f"ORG-toe{side}"} <= has:
                    steps.append(Match(f"toe_ik{side}", f"ORG-toe{side}", turn_only=True))
        for finger in _FINGERS:
            for segment in ("01", "02", "03"):
                match(f"{finger}.{segment}{side}", f"ORG-{finger}.{segment}{side}")
    label = "Rigify, FK controls" if mode == "fk" else "Rigify, IK controls"
    return ControlPlan(
        label, tuple(steps), tuple(switches), root="root" if "root" in has else None, checked=tuple(checked)
    )


def org_bone(bone: str, names: Collection[str]) -> str | None:
    """The ``ORG-`` bone a Rigify deform bone ``bone`` follows (``DEF-upper_arm.L`` ->
    ``ORG-upper_arm.L``), ``bone`` itself when it is an ``ORG-`` bone; ``None`` for a deform
    segment with no ``ORG-`` bone of its own (``DEF-upper_arm.L.001``) or another bone."""
    if bone.startswith("ORG-") and bone in names:
        return bone
    if bone.startswith("DEF-") and "ORG-" + bone[4:] in names:
        return "ORG-" + bone[4:]
    return None
