"""Marionette's core: every piece of retargeting and control maths, in numpy.

This package never imports ``bpy`` or ``mathutils``; the Blender layer (``operators/``,
``panels/``) converts at the edges. Arrays carry frames first and compute in float64.
Rotation conventions are stated once, in :mod:`core.rig.rotations`.
"""
