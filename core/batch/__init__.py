"""Batch bake planning without Blender: the pack plan, the messages workers send, the report, and what a pack may hold."""
