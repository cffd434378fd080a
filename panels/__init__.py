"""Sidebar panels of the 3D viewport (tab "Retarget")."""

from __future__ import annotations


def register() -> None:
    from . import retarget_panel

    retarget_panel.register()


def unregister() -> None:
    from . import retarget_panel

    retarget_panel.unregister()
