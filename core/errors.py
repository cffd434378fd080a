"""Errors that carry a message meant for the user.

Everything Marionette refuses (a non-humanoid rig, NaN keys, an ambiguous bone name, a file without
an armature) raises a subclass of :class:`MarionetteError`; the Blender layer turns it into a report
and changes nothing, the command line into one line on stderr and a non-zero exit status.
"""

from __future__ import annotations


class MarionetteError(Exception):
    """A refusal with a message a user can act on."""


class RigError(MarionetteError):
    """The skeleton cannot be used (no bones, ambiguous names, zero-length chain, not humanoid...)."""


class ClipError(MarionetteError):
    """The animation cannot be used (no keys, non-finite values, mismatched bones...)."""


class MappingError(MarionetteError):
    """The bone mapping is incomplete or contradicts itself."""


class FileFormatError(MarionetteError):
    """A file could not be read; the message names the file and what is wrong."""
