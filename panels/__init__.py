"""Sidebar panels of the 3D viewport (tabs "Retarget" and "Controls")."""

from __future__ import annotations


def register() -> None:
    from . import controls_panel, retarget_panel

    retarget_panel.register()
    controls_panel.register()


def unregister() -> None:
    from . import controls_panel, retarget_panel

    controls_panel.unregister()
    retarget_panel.unregister()
