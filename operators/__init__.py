"""The Blender layer: operators, the bulk bridge between Blender data and core arrays, and the
one compatibility module for Blender-version differences (:mod:`.compat`)."""

from __future__ import annotations


def register() -> None:
    pass


def unregister() -> None:
    pass
