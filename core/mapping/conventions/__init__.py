"""Every naming convention the mapper knows, one module of plain data per rig family.

:data:`CONVENTIONS` lists them in the order ties are broken when a rig's names fit two equally
well. Adding a convention: a module here with one :class:`~core.mapping.naming_convention.NameConvention`
(names per slot, names it leaves out on purpose, the preset it ships), and one line below; the
preset file in ``presets/`` is then written from it (:func:`core.mapping.presets.write_presets`).
"""

from __future__ import annotations

from ..naming_convention import NameConvention
from .character_creator import CHARACTER_CREATOR
from .cmu import BIOVISION, CMU_MOTIONBUILDER
from .daz import DAZ_GENESIS, DAZ_POSER
from .makehuman import MAKEHUMAN, MAKEHUMAN_GAME
from .max_biped import MAX_BIPED
from .mixamo import MIXAMO
from .mmd import MMD
from .quaternius import QUATERNIUS
from .rigify import RIGIFY_GENERATED, RIGIFY_METARIG
from .unity import UNITY_HUMANOID
from .unreal import UNREAL_MANNEQUIN
from .vrm import VRM
from .vroid import VROID

#: Every naming convention the mapper knows, in the order ties are broken.
CONVENTIONS: tuple[NameConvention, ...] = (
    MIXAMO,
    UNITY_HUMANOID,
    VRM,
    VROID,
    UNREAL_MANNEQUIN,
    RIGIFY_METARIG,
    RIGIFY_GENERATED,
    CMU_MOTIONBUILDER,
    BIOVISION,
    DAZ_POSER,
    DAZ_GENESIS,
    MAKEHUMAN,
    MAKEHUMAN_GAME,
    QUATERNIUS,
    MAX_BIPED,
    MMD,
    CHARACTER_CREATOR,
)
