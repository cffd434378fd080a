"""The humanoid bone mapping as data (docs/mapping.md): JSON and file round trips, queries, edits and
validation; the shipped presets are written from the same name rules auto mapping uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marionette.core.errors import MappingError
from marionette.core.mapping.auto_map import auto_map
from marionette.core.mapping.bone_mapping import FORMAT_VERSION, BoneMapping, MappedBone
from marionette.core.mapping.conventions import CONVENTIONS
from marionette.core.mapping.name_hints import detect_convention, name_key
from marionette.core.mapping.presets import preset_mapping, preset_names, write_presets
from tests.helpers.mapping_body import CMU_MOTIONBUILDER, MIXAMO, RIGIFY, UNREAL, arrays, body, slots_of

REPO = Path(__file__).resolve().parents[3]


# --- the mapping as data ----------------------------------------------------------------------


def test_mapping_round_trips_through_json_and_files(tmp_path):
    m = auto_map(*arrays(body(), MIXAMO))
    again = BoneMapping.from_json(m.to_json())
    assert again == m
    data = json.loads(m.to_json())
    assert data["version"] == FORMAT_VERSION and data["format"] == "marionette.bone_mapping"
    path = tmp_path / "rig.json"
    m.save(path)
    assert BoneMapping.load(path) == m
    assert not list(tmp_path.glob("*.partial"))


def test_mapping_queries_and_edits():
    m = auto_map(*arrays(body(), MIXAMO))
    assert m.bone_for("hand.L") == "mixamorig:LeftHand"
    assert m.slot_for("mixamorig:LeftHand") == "hand.L"
    assert m.slot_for("nothing") is None
    assert m.missing() == []
    assert m.missing(["eye.L", "hips"]) == ["eye.L"]
    with pytest.raises(MappingError, match="unknown humanoid slot"):
        m.bone_for("tail")
    edited = m.with_bone("hand.L", "mixamorig:LeftHandIndex1")
    assert edited.bone_for("hand.L") == "mixamorig:LeftHandIndex1"
    assert edited.bone_for("index_1.L") is None  # a bone fills one slot only
    assert edited.slots["hand.L"] == MappedBone("mixamorig:LeftHandIndex1", 1.0, "set by hand")
    assert edited != m and m.bone_for("hand.L") == "mixamorig:LeftHand"
    assert edited.missing() == []


def test_mapping_data_is_validated():
    with pytest.raises(MappingError, match="both"):
        BoneMapping({"hips": MappedBone("a", 1, ""), "spine": MappedBone("a", 1, "")})
    with pytest.raises(MappingError, match="unknown humanoid slot"):
        BoneMapping({"tail": MappedBone("a", 1, "")})
    with pytest.raises(MappingError, match=r"\[0, 1\]"):
        MappedBone("a", 1.5, "")
    with pytest.raises(MappingError, match="newer"):
        BoneMapping.from_dict({"format": "marionette.bone_mapping", "version": FORMAT_VERSION + 1, "slots": {}})
    with pytest.raises(MappingError, match="not a Marionette"):
        BoneMapping.from_dict({"format": "something else"})
    with pytest.raises(MappingError, match="not valid JSON"):
        BoneMapping.from_json("{")
    # A hand-written preset may give bare bone names.
    m = BoneMapping.from_json('{"slots": {"hips": "pelvis", "head": "head"}}')
    assert m.bone_for("hips") == "pelvis" and m.slots["hips"].confidence == 1.0


# --- name rules and presets are one set of data ------------------------------------------------


def test_presets_are_written_from_the_name_rules(tmp_path):
    written = write_presets(tmp_path)
    assert {p.stem for p in written} == set(preset_names())
    shipped = REPO / "presets"
    for p in written:
        # The presets in the repository are exactly what the name tables produce.
        assert (shipped / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8"), p.name


@pytest.mark.parametrize("preset", ["mixamo", "rigify_metarig", "unreal_mannequin", "cmu_motionbuilder"])
def test_a_preset_matches_what_auto_mapping_finds_on_that_naming(preset):
    naming = {
        "mixamo": MIXAMO,
        "rigify_metarig": RIGIFY,
        "unreal_mannequin": UNREAL,
        "cmu_motionbuilder": CMU_MOTIONBUILDER,
    }[preset]
    bones = body(fingers="thumb_1.L" in naming)
    m = auto_map(*arrays(bones, naming))
    p = preset_mapping(preset)
    assert p.convention == m.convention
    for slot, bone in slots_of(m).items():
        assert p.bone_for(slot) == bone, slot


def test_every_convention_is_detected_from_its_own_preset():
    for conv in CONVENTIONS:
        for preset, _ in conv.presets:
            names = list(preset_mapping(preset).bones().values())
            found, count = detect_convention(names)
            assert found is conv, (preset, found)
            assert count == len(names)


def test_name_keys_fold_spelling_variants():
    assert name_key("upper_arm.L") == name_key("Upper Arm L") == name_key("upperarm_l")
    assert name_key("mixamorig:LeftArm") == name_key("mixamorig1:LeftArm") == name_key("LeftArm")
    assert name_key("左親指１") == name_key("左親指1")
    assert name_key("Bip001 L UpperArm") == name_key("Bip01 L UpperArm")


def test_methods_per_slot_travel_with_the_mapping_json(tmp_path):
    from marionette.core.mapping.bone_mapping import BoneMapping, MappedBone

    m = BoneMapping(
        {"hips": MappedBone("Hips", 1.0, "test"), "index_1.L": MappedBone("Index1.L", 0.9, "test")},
        methods={"hips": "rest-space", "index_1.L": "LOCAL_CURL", "thumb_1.L": "geometric"},
    )
    assert m.methods == {"hips": "REST_SPACE", "index_1.L": "LOCAL_CURL"}  # the default needs no entry
    path = tmp_path / "m.json"
    m.save(path)
    back = BoneMapping.load(path)
    assert back == m and back.methods == m.methods
    assert m.with_bone("hips", "Pelvis").methods == m.methods
    assert "methods" not in BoneMapping({"hips": MappedBone("Hips", 1.0, "t")}).to_dict()  # old files unchanged
    with pytest.raises(MappingError, match="unknown retarget method"):
        BoneMapping({}, methods={"hips": "magic"})


def test_a_mapping_file_reads_method_names_as_the_command_line_does():
    from marionette.core.mapping.bone_mapping import BoneMapping
    from marionette.core.mapping.method_names import parse_method_table

    # One spelling rule: what ``--methods`` accepts, a mapping file's ``methods`` accepts too.
    for spelling in ("rest", "Rest Space", "restspace", "REST-SPACE"):
        assert BoneMapping({}, methods={"hips": spelling}).methods == parse_method_table(f"hips={spelling}") == {"hips": "REST_SPACE"}
    with pytest.raises(MappingError, match="local curl is for finger slots"):
        BoneMapping({}, methods={"hips": "local-curl"})
