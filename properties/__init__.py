"""Blender property groups: the Retarget workflow's scene settings and the controls stored on each armature object."""
