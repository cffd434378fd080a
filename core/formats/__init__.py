"""Motion and model files read without Blender: BVH takes, PMX models and the rig they define, and a file's clip put on its own rig's bone frames."""
