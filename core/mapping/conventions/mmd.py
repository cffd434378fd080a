"""MikuMikuDance's standard bone names (PMX / PMD models, Japanese)."""

from __future__ import annotations

from ..naming_convention import FingerNames, NameConvention

MMD = NameConvention(
    key="mmd",
    title="MikuMikuDance (PMX/PMD Japanese names)",
    slots={
        # センター (centre) carries the whole body; 下半身 (lower body) only the legs.
        "hips": ("センター",),
        "spine": ("上半身",),
        "chest": ("上半身2",),
        "upper_chest": ("上半身3",),
        "neck": ("首",),
        "head": ("頭",),
        "eye": ("{jp}目",),
        "shoulder": ("{jp}肩",),
        "upper_arm": ("{jp}腕",),
        "forearm": ("{jp}ひじ",),
        "hand": ("{jp}手首",),
        "upper_arm_twist": ("{jp}腕捩",),
        "forearm_twist": ("{jp}手捩",),
        "thigh": ("{jp}足",),
        "shin": ("{jp}ひざ",),
        "foot": ("{jp}足首",),
        "toes": ("{jp}つま先",),
        # The thumb counts from ０ (a semi-standard bone); where it is absent the chain ranking
        # moves 親指１ up to the first segment. These take the place of the pattern's thumb.
        "thumb_1": ("{jp}親指０",),
        "thumb_2": ("{jp}親指１",),
        "thumb_3": ("{jp}親指２",),
    },
    fingers=FingerNames(
        "{jp}{f}{n}",
        {"thumb": "親指", "index": "人指", "middle": "中指", "ring": "薬指", "little": "小指"},
        ("１", "２", "３"),
    ),
    unmapped=(
        "全ての親",
        "グルーブ",
        "腰",
        "下半身",
        "両目",
        "腰キャンセル{jp}",
        "{jp}足D",
        "{jp}ひざD",
        "{jp}足首D",
        "{jp}足先EX",
        "{jp}肩P",
        "{jp}肩C",
        "{jp}ダミー",
    ),
    presets=(("mmd", ""),),
)
