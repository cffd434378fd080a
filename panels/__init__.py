"""Sidebar panels of the 3D viewport (tab "Marionette")."""

from __future__ import annotations


def register() -> None:
    pass


def unregister() -> None:
    pass
