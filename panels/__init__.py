"""Sidebar panels of the 3D viewport (tabs "Retarget" and "Controls", the MMD panel in the latter)."""

from __future__ import annotations


def register() -> None:
    from . import controls_panel, mmd_panel, retarget_panel

    retarget_panel.register()
    controls_panel.register()
    mmd_panel.register()


def unregister() -> None:
    from . import controls_panel, mmd_panel, retarget_panel

    mmd_panel.unregister()
    controls_panel.unregister()
    retarget_panel.unregister()
