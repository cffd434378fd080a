"""Control rigs as retarget targets (docs/control_rigs.md): a target whose deform bones follow
other bones (Copy Transforms, Child Of, Armature constraints, drivers) is keyed on the controls
an animator edits, so that what Blender plays is the retarget.

* :mod:`.graph`: the rig as the solve sees it (bones, parents, rests, the constraints that place
  them) and :class:`~.graph.PoseModel`, which evaluates the constraints it knows over all frames
  at once.
* :mod:`.plan`: which controls are keyed from which bones (:class:`~.plan.ControlPlan`), and the
  solve from the retarget's bone placements to the controls' local transforms.
* :mod:`.found`: the plan found by following each mapped bone's constraints to its control.
* :mod:`.rigify`: the plan for Rigify's generated rigs (FK or IK), naming the controls.
"""
