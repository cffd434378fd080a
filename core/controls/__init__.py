"""Procedural controls applied on top of an animated pose, in priority order: IK, look-at, ground, springs, inheritance, fixed axes, closures and joint limits."""
