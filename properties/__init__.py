"""Property groups the workflows keep their settings in: the Retarget workflow's
``scene.marionette`` (:mod:`.retarget_settings`) with its Export choices (:mod:`.export_settings`),
registered here; the Controls workflow's per-object rows (:mod:`.control_settings`), registered
with that workflow."""

from __future__ import annotations


def register() -> None:
    from . import export_settings, retarget_settings

    export_settings.register()  # before the settings that hold it
    retarget_settings.register()


def unregister() -> None:
    from . import export_settings, retarget_settings

    retarget_settings.unregister()
    export_settings.unregister()
