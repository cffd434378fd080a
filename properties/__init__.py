"""Property groups the workflows keep their settings in: the Retarget workflow's
``scene.marionette`` (:mod:`.retarget_settings`), registered here; the Controls workflow's
per-object rows (:mod:`.control_settings`), registered with that workflow."""

from __future__ import annotations


def register() -> None:
    from . import retarget_settings

    retarget_settings.register()


def unregister() -> None:
    from . import retarget_settings

    retarget_settings.unregister()
