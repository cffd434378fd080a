"""Batch bake, the parts without Blender: planning a pack, naming, BVH bone tails, the mapping and
binding cache, baked-clip messages, parts on disk and the per-file report."""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import replace

import numpy as np
import pytest

from marionette.core.batch.baking import PackCache, bake_clip, bvh_file_events, bvh_rest_tails
from marionette.core.batch.messages import clip_from_message, drop_arrays, message_bytes
from marionette.core.batch.output_files import (
    existing_volumes,
    part_file_name,
    read_part,
    read_parts,
    stray_volumes,
    volume_path,
    write_part,
)
from marionette.core.batch.plan import (
    PackFile,
    PackPlan,
    action_base_name,
    clip_key,
    final_action_names,
    plan_pack,
    split_point,
)
from marionette.core.batch.report import BatchReport, ClipOutcome
from marionette.core.batch.settings import BakeSettings, mapping_key, method_summary, record_difference
from marionette.core.batch.status import CLIP_ALREADY, CLIP_BAKED, CLIP_FAILED, CLIP_LOST
from marionette.core.errors import FileFormatError, MappingError
from marionette.core.formats.bvh import BvhData, parse_bvh, read_bvh
from marionette.core.mapping.auto_map import auto_map_skeleton
from marionette.core.mapping.method_names import parse_method_table
from marionette.core.retarget.binding_cache import BindingCache
from marionette.core.retarget.geometric import RetargetOptions, RigInput, bind, retarget
from marionette.core.retarget.methods import retarget_with_methods
from marionette.core.rig.samples import sample_humanoid, sample_walk
from tests.helpers.data import shared_file

CMU = "bvh/cmu/12_03_motionbuilder.bvh"
DAZ = "bvh/cmu/02_02_daz.bvh"


def _settings(scene_fps: float = 24.0, keep_frames: bool = False, methods: str | None = None, match_rest: bool = False) -> BakeSettings:
    target = sample_humanoid(arms_down_angle=0.6, proportions=0.9)
    rig = RigInput(target.skeleton, target.slots, target.tails)
    table = parse_method_table(methods) if methods else {}
    return BakeSettings(rig, mapping_key(rig.slots), scene_fps, keep_frames, RetargetOptions(), table, match_rest)


# --- planning ------------------------------------------------------------------------------


def test_plan_lists_clip_files_in_stable_order_with_labels(tmp_path) -> None:
    (tmp_path / "walks").mkdir()
    (tmp_path / "walks" / "b.bvh").write_text("x")
    (tmp_path / "walks" / "a.bvh").write_text("x")
    (tmp_path / "run.FBX").write_text("x")
    (tmp_path / "README.txt").write_text("x")
    (tmp_path / ".hidden.bvh").write_text("x")
    (tmp_path / "out.blend").write_text("x")  # the output, inside the pack folder
    (tmp_path / "out.blend.parts").mkdir()
    (tmp_path / "out.blend.parts" / "p.blend").write_text("x")
    single = tmp_path / "elsewhere.glb"
    single.write_text("x")
    plan = plan_pack(
        [tmp_path, single, tmp_path / "walks" / "a.bvh", tmp_path / "missing.bvh", tmp_path / "README.txt"],
        exclude=[tmp_path / "out.blend", tmp_path / "out.blend.parts"],
    )
    assert [os.path.relpath(f.path, tmp_path) for f in plan.files] == [
        "elsewhere.glb",
        "run.FBX",
        os.path.join("walks", "a.bvh"),
        os.path.join("walks", "b.bvh"),
    ]
    assert [f.label for f in plan.files] == ["elsewhere", "run", "walks/a", "walks/b"]
    assert [f.is_bvh for f in plan.files] == [False, False, True, True]
    assert plan.needs_blender
    refused = {os.path.basename(p): r for p, r in plan.refused}
    assert refused == {"missing.bvh": "no such file or folder", "README.txt": refused["README.txt"]}
    assert "unsupported file type '.txt'" in refused["README.txt"]
    assert [os.path.basename(p) for p, _ in plan.ignored] == ["README.txt"]


# --- naming --------------------------------------------------------------------------------


def test_final_names_do_not_depend_on_baking_order() -> None:
    wanted = {"/a/x.bvh::x": "x", "/b/x.bvh::x": "x", "/c/x.bvh::x": "x", "/d/run.fbx::A|Run": "run|Run"}
    taken = {"run|Run", "Other"}
    results = {
        json.dumps(final_action_names(dict(perm), taken), sort_keys=True)
        for perm in itertools.permutations(wanted.items())
    }
    assert len(results) == 1
    names = json.loads(results.pop())
    assert names["/a/x.bvh::x"] == "x"  # the smallest key keeps the base
    assert names["/b/x.bvh::x"].startswith("x~") and names["/c/x.bvh::x"].startswith("x~")
    assert names["/d/run.fbx::A|Run"].startswith("run|Run~")  # a name already in the file stays
    assert len(set(names.values())) == 4


def test_final_names_fit_the_id_limit_without_splitting_characters() -> None:
    base = "é" * 70  # 140 bytes
    names = final_action_names({"k1": base, "k2": base}, set(), limit=63)
    for n in names.values():
        assert len(n.encode("utf-8")) <= 63
        n.encode("utf-8").decode("utf-8")
    assert len(set(names.values())) == 2


def test_action_base_names() -> None:
    bvh = PackFile("/p/walks/a.bvh", "walks/a")
    fbx = PackFile("/p/men.fbx", "men")
    assert action_base_name(bvh, "a") == "walks/a"
    assert action_base_name(fbx, "HumanArmature|HumanArmature|Man_Walk") == "men|Man_Walk"


# --- BVH tails -----------------------------------------------------------------------------

_SMALL = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Zero
  {
    OFFSET 0 0 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT Leg
    {
      OFFSET 1 -4 0
      CHANNELS 3 Zrotation Xrotation Yrotation
      End Site
      {
        OFFSET 0 -3 1
      }
    }
  }
  JOINT Spine
  {
    OFFSET 0 5 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT Alone
    {
      OFFSET 0 2 0
      CHANNELS 3 Zrotation Xrotation Yrotation
    }
  }
}
MOTION
Frames: 0
Frame Time: 0.0333333
"""


def test_bvh_tails_follow_blenders_importer_rules() -> None:
    bvh = parse_bvh(_SMALL)
    tails = bvh_rest_tails(bvh)
    heads = bvh.rest_positions()
    names = list(bvh.names)
    # Several children: the mean of their heads.
    np.testing.assert_allclose(tails[names.index("Hips")], (heads[names.index("Zero")] + heads[names.index("Spine")]) / 2)
    # A zero-length joint whose only child starts at its head keeps the child's head ...
    np.testing.assert_allclose(tails[names.index("Zero")], heads[names.index("Leg")])
    # ... an End Site is the tail ...
    np.testing.assert_allclose(tails[names.index("Leg")], heads[names.index("Leg")] + [0, -3, 1])
    # ... a joint with neither would have zero length: moved up 0.1 along the file's Y.
    np.testing.assert_allclose(tails[names.index("Alone")], heads[names.index("Alone")] + [0, 0.1, 0])


def test_a_file_without_frames_gives_a_failed_clip_not_a_crash() -> None:
    bvh = parse_bvh(_SMALL, "empty.bvh")
    assert bvh.frame_count == 0
    with pytest.raises(FileFormatError, match="no frames"):
        bvh.clip()


# --- cache, messages -----------------------------------------------------------------------


def test_one_layout_maps_and_binds_once() -> None:
    path = str(shared_file(CMU))
    cache = PackCache(_settings())
    for _ in range(5):
        msgs = list(bvh_file_events(path, cache))
        assert [m["op"] for m in msgs] == ["clips", "clip"]
    s = cache.stats
    assert (s.mapping_misses, s.mapping_hits) == (1, 4)
    assert (s.binding_misses, s.binding_hits) == (1, 4)
    assert msgs[1]["cached_binding"] is True  # the fifth clip of the layout
    other = str(shared_file(DAZ))
    list(bvh_file_events(other, cache))
    assert cache.stats.mapping_misses == 2 and cache.stats.binding_misses == 2


def test_a_refused_rig_is_remembered_and_refused_again(tmp_path) -> None:
    # Two legs and no arms: not a humanoid.
    text = _SMALL.replace("Frames: 0", "Frames: 1") + "0 " * 18 + "\n"
    path = tmp_path / "legs.bvh"
    path.write_text(text)
    cache = PackCache(_settings())
    for _ in range(3):
        events = bvh_file_events(str(path), cache)
        assert next(events)["op"] == "clips"
        with pytest.raises(MappingError):
            next(events)
    assert cache.stats.mapping_misses == 1 and cache.stats.mapping_hits == 2


def test_baked_clip_equals_a_direct_retarget_on_scene_time() -> None:
    path = str(shared_file(CMU))
    settings = _settings(scene_fps=24.0)
    (clips, msg) = list(bvh_file_events(path, PackCache(settings)))
    assert clips["clips"] == ["12_03_motionbuilder"] and msg["clip"] == "12_03_motionbuilder"
    # The same retarget, by hand.
    bvh = read_bvh(path)
    tails = bvh_rest_tails(bvh)
    mapping = auto_map_skeleton(bvh.skeleton(), tails)
    src = RigInput(bvh.skeleton(), mapping.bones(), tails)
    binding = bind(src, settings.target, settings.options)
    clip = bvh.clip().resample(24.0)
    want = retarget(binding, clip).clip
    driven = [want.names.index(n) for n in msg["names"]]
    assert set(msg["names"]) == {want.names[i] for i in np.flatnonzero(want.coverage > 0)}
    assert np.array_equal(msg["rotations"], want.rotations[:, driven])
    assert np.array_equal(msg["translations"], want.translations[:, driven])
    # 566 frames at 120 fps last 4.7 s: 114 frames at 24 fps, numbered from 1.
    assert msg["source_frames"] == 566 and msg["source_fps"] == 120.0
    assert msg["fps"] == 24.0 and len(msg["frames"]) == 114
    np.testing.assert_allclose(msg["frames"], np.arange(1, 115), rtol=0, atol=1e-9)
    back = clip_from_message(msg, "x")
    np.testing.assert_allclose(back.frame_numbers(24.0), msg["frames"])


def test_keep_frames_keeps_the_files_frame_numbers_and_skip_skips() -> None:
    path = str(shared_file(CMU))
    cache = PackCache(_settings(keep_frames=True))
    msg = list(bvh_file_events(path, cache))[1]
    assert msg["fps"] == 120.0
    np.testing.assert_allclose(msg["frames"], np.arange(1, 567), rtol=0, atol=1e-9)
    assert [m["op"] for m in bvh_file_events(path, cache, skip=["12_03_motionbuilder"])] == ["clips"]


def test_a_truncated_file_fails_naming_the_line(tmp_path) -> None:
    raw = shared_file(CMU).read_bytes()
    bad = tmp_path / "cut.bvh"
    bad.write_bytes(raw[: len(raw) // 3])
    with pytest.raises(FileFormatError, match=r"cut.bvh, line \d+: truncated"):
        list(bvh_file_events(str(bad), PackCache(_settings())))


def test_settings_cross_processes_as_plain_data() -> None:
    import pickle

    s = _settings()
    opts = RetargetOptions(root_motion="IN_PLACE", source_forward=(0.0, -1.0, 0.0), plant_feet=True)
    s = BakeSettings(s.target, s.target_mapping, 30.0, True, opts)
    m = s.to_message()
    # Nothing from this package inside: a worker loads it under another name.
    text = pickle.dumps(m)
    assert b"marionette" not in text
    back = BakeSettings.from_message(pickle.loads(text))
    assert back.target.skeleton.signature() == s.target.skeleton.signature()
    assert back.target.slots == s.target.slots and back.options == s.options and back.options.plant_feet
    # A clip baked with the feet planted is baked again when they are not asked for.
    unplanted = BakeSettings(s.target, s.target_mapping, 30.0, True, RetargetOptions(root_motion="IN_PLACE", source_forward=(0.0, -1.0, 0.0)))
    assert "plant feet True -> False" in (record_difference(s.record_text(), unplanted.record()) or "")
    assert (back.scene_fps, back.keep_frames) == (30.0, True)
    assert back.methods == {} and back.match_rest is False
    # The method table and match_rest travel too.
    m = _settings(methods="geometric,fingers=local-curl", match_rest=True).to_message()
    text = pickle.dumps(m)
    assert b"marionette" not in text
    back = BakeSettings.from_message(pickle.loads(text))
    assert back.methods == parse_method_table("geometric,fingers=local-curl") and back.match_rest is True


# --- retarget methods ----------------------------------------------------------------------


def _bvh_source(path: str) -> tuple[RigInput, BvhData]:
    bvh = read_bvh(path)
    tails = bvh_rest_tails(bvh)
    return RigInput(bvh.skeleton(), auto_map_skeleton(bvh.skeleton(), tails).bones(), tails), bvh


@pytest.mark.parametrize(("spec", "match_rest", "name"), [("rest-space", False, "rest-space"), ("geometric,fingers=local-curl", False, "geometric+local-curl"), ("rest-space", True, "rest-space"), ("geometric", True, "geometric")])
def test_a_method_table_bakes_what_a_single_retarget_with_methods_gives(spec: str, match_rest: bool, name: str) -> None:
    path = str(shared_file(CMU))
    settings = _settings(methods=spec, match_rest=match_rest)
    assert settings.uses_methods and settings.method_name() == name
    cache = PackCache(settings)
    msg = list(bvh_file_events(path, cache))[1]
    assert (msg["method"], msg["native"]) == (name, False)
    src, bvh = _bvh_source(path)
    run = retarget_with_methods(BindingCache(), src, settings.target, bvh.clip().resample(24.0), parse_method_table(spec), settings.options, match_rest=match_rest)
    want = run.result.clip
    driven = [want.names.index(n) for n in msg["names"]]
    assert set(msg["names"]) == {want.names[i] for i in np.flatnonzero(want.coverage > 0)}
    assert np.array_equal(msg["rotations"], want.rotations[:, driven])
    assert np.array_equal(msg["translations"], want.translations[:, driven])
    assert np.array_equal(msg["root_motion"], run.result.root_motion)
    assert msg["warnings"] == list(run.warnings)
    # A second clip of the layout binds nothing new.
    again = list(bvh_file_events(path, cache))[1]
    assert again["cached_binding"] is True and np.array_equal(again["rotations"], msg["rotations"])
    geometric = list(bvh_file_events(path, PackCache(_settings())))[1]
    assert geometric["method"] == "geometric" and "native" in geometric
    if name == "rest-space":  # the method changes the keys
        assert float(np.abs(geometric["rotations"] - msg["rotations"]).max()) > 1e-3
    elif name == "geometric":  # match_rest alone: the geometric keys
        assert np.array_equal(geometric["rotations"], msg["rotations"])


def test_no_table_keeps_the_geometric_path_and_its_binding_cache() -> None:
    path = str(shared_file(CMU))
    settings = _settings()
    assert not settings.uses_methods and settings.methods == {}
    cache = PackCache(settings)
    for _ in range(3):
        msg = list(bvh_file_events(path, cache))[1]
    assert (cache.stats.binding_misses, cache.stats.binding_hits) == (1, 2)
    assert msg["method"] == "geometric" and msg["native"] is False and msg["timings"]["bind"] > 0.0
    # With rest-space every clip of the layout shares both bindings (geometric and rest-space).
    cache = PackCache(_settings(methods="rest-space"))
    for _ in range(3):
        msg = list(bvh_file_events(path, cache))[1]
    assert cache.stats.binding_misses == 2 and cache.stats.binding_hits == 4


@pytest.mark.parametrize("methods", ["rest-space", None], ids=["with a table", "without a table"])
def test_a_clip_on_the_targets_layout_is_bound_natively(methods: str | None) -> None:
    """As a single retarget binds it (retarget_with_methods), with or without a method table."""
    settings = _settings(methods=methods)
    target = settings.target
    walk = sample_walk(sample_humanoid(arms_down_angle=0.6, proportions=0.9), frames=24, fps=24.0)
    # The clip stretches its spine, which only a native binding copies: the geometric one, every
    # bone mapped, would reproduce the rest of this clip exactly.
    stretched = walk.translations.copy()
    stretched[:, walk.names.index("Spine"), 2] += 0.02
    walk = replace(walk, translations=stretched)
    cache = PackCache(settings)
    source, layout = cache.source(target.skeleton, target.ends)
    msg = bake_clip(cache, source, layout, walk)
    assert (msg["method"], msg["native"]) == ("native", True)
    cols = [walk.names.index(n) for n in msg["names"]]
    assert np.array_equal(msg["rotations"], walk.rotations[:, cols])  # keys unchanged
    assert np.array_equal(msg["translations"], walk.translations[:, cols])
    single = retarget_with_methods(BindingCache(), source, target, walk, parse_method_table(methods) if methods else None)
    assert single.native
    assert np.array_equal(single.result.clip.rotations[:, [target.skeleton.index(n) for n in msg["names"]]], msg["rotations"])
    # The geometric binding would have moved the keys: native binding is a real difference here.
    geometric = retarget(bind(source, target), walk).clip
    cols_t = [target.skeleton.index(n) for n in msg["names"]]
    assert float(np.abs(geometric.translations[:, cols_t] - msg["translations"]).max()) > 1e-3
    # A clip on another layout still goes through the geometric frames.
    other = sample_humanoid(arms_down_angle=0.2, proportions=1.1)
    src2, layout2 = cache.source(other.skeleton, other.tails)
    moved = bake_clip(cache, src2, layout2, sample_walk(other, frames=24, fps=24.0))
    assert moved["native"] is False and moved["method"] == method_summary(settings.methods)


def test_a_bad_method_table_is_refused_by_the_settings() -> None:
    with pytest.raises(MappingError, match="unknown retarget method"):
        _settings().__class__(_settings().target, "x", 24.0, methods={"hips": "sideways"})
    with pytest.raises(MappingError, match="local curl is for finger slots"):
        BakeSettings(_settings().target, "x", 24.0, methods={"hips": "local-curl"})
    with pytest.raises(MappingError, match="unknown humanoid slot"):
        BakeSettings(_settings().target, "x", 24.0, methods={"tail": "rest-space"})
    # Names are normalised as a single retarget's table is.
    assert BakeSettings(_settings().target, "x", 24.0, methods={"hips": "rest-space"}).methods == {"hips": "REST_SPACE"}
    assert method_summary({}) == "geometric"


# --- parts ---------------------------------------------------------------------------------


def test_parts_round_trip_and_a_cut_part_is_ignored(tmp_path) -> None:
    path = str(shared_file(CMU))
    msg = list(bvh_file_events(path, PackCache(_settings())))[1]
    msg.update(path=path, file=3, file_clips=["12_03_motionbuilder"])
    written = write_part(str(tmp_path), msg)
    assert os.path.basename(written) == part_file_name(clip_key(path, "12_03_motionbuilder"))
    # A part cut short (the process died while writing it) is skipped.
    (tmp_path / "dead.npz").write_bytes(open(written, "rb").read()[:1000])
    (back,) = read_parts(str(tmp_path))
    for k in ("rotations", "translations", "frames", "root_motion"):
        assert np.array_equal(back[k], msg[k])
    assert back["names"] == msg["names"] and back["clip"] == msg["clip"] and back["file_clips"] == ["12_03_motionbuilder"]
    assert back["method"] == "geometric" and "scales" not in back
    # A native clip's scale keys are kept in its part.
    msg.update(clip="scaled", scales=np.full(msg["translations"].shape, 1.5))
    write_part(str(tmp_path), msg)
    scaled = next(m for m in read_parts(str(tmp_path)) if m["clip"] == "scaled")
    assert np.array_equal(scaled["scales"], msg["scales"])
    assert clip_from_message(scaled, "s").scales is not None


# --- report --------------------------------------------------------------------------------


def test_report_statuses_and_ok() -> None:
    plan = PackPlan(
        tuple(PackFile(f"/p/{n}", n) for n in ("good.bvh", "bad.bvh", "half.fbx", "lost.fbx", "stopped.bvh", "todo.bvh")),
        refused=(("/p/x.txt", "unsupported"),),
    )
    r = BatchReport(plan)
    good, bad, half, lost, stopped, todo, refused = r.files
    good.clips.append(ClipOutcome("good", CLIP_BAKED, action="good", frames=10))
    good.finished = True
    bad.reason, bad.finished = "truncated", True
    half.clips += [ClipOutcome("a", CLIP_BAKED), ClipOutcome("b", CLIP_FAILED, reason="no keys")]
    half.finished = True
    lost.clips += [ClipOutcome("a", CLIP_BAKED), ClipOutcome("b", CLIP_LOST, reason="in progress")]
    lost.lost, lost.finished = True, True
    stopped.cancelled, stopped.finished = True, True
    assert [f.status for f in r.files] == ["baked", "failed", "partial", "lost", "cancelled", "pending", "failed"]
    assert not r.ok
    d = json.loads(json.dumps(r.to_dict()))
    assert d["files_by_status"] == {"baked": 1, "failed": 2, "partial": 1, "lost": 1, "cancelled": 1, "pending": 1}
    assert d["clips_by_status"] == {"baked": 3, "failed": 1, "lost": 1}
    assert "clip 'b': no keys" in d["files"][2]["reason"]
    lines = r.summary_lines()
    assert lines[0].startswith("3 clips baked from 1 of 7 files")
    only = BatchReport(PackPlan((PackFile("/p/good.bvh", "good"),)))
    only.files[0].clips.append(ClipOutcome("good", CLIP_ALREADY))
    only.files[0].finished = True
    assert only.ok
    only.interrupted = "Ctrl-C"
    assert not only.ok


# --- settings records (what --resume compares) ----------------------------------------------


def test_the_settings_record_names_what_changed() -> None:
    plain = _settings()
    same = _settings()
    assert record_difference(plain.record_text(), same.record()) is None
    # Each setting a clip's keys depend on shows in the record, and in words when it differs.
    why = record_difference(plain.record_text(), _settings(methods="rest-space").record())
    assert why == "baked with other settings: method geometric -> rest-space"
    why = record_difference(plain.record_text(), _settings(keep_frames=True, scene_fps=30.0).record())
    assert why == "baked with other settings: keep frames False -> True, scene fps 24.0 -> 30.0"
    other = BakeSettings(plain.target, plain.target_mapping, 24.0, options=RetargetOptions(root_motion="IN_PLACE"))
    assert "root motion HIPS -> IN_PLACE" in record_difference(plain.record_text(), other.record())
    assert "match rest False -> True" in record_difference(plain.record_text(), _settings(match_rest=True).record())
    # A clip from before records existed, or with a damaged one, is baked again.
    assert record_difference(None, plain.record()) == "baked without a record of its settings"
    assert record_difference("{not json", plain.record()) == "baked with an unreadable record of its settings"
    # The record survives the trip to a worker and back.
    back = BakeSettings.from_message(json.loads(json.dumps(BakeSettings.to_message(_settings(methods="rest-space")), default=lambda a: a.tolist())))
    assert back.record_text() == _settings(methods="rest-space").record_text()


def test_baked_clips_and_their_parts_carry_the_settings_record(tmp_path) -> None:
    path = str(shared_file(DAZ))
    settings = _settings(methods="rest-space")
    msg = list(bvh_file_events(path, PackCache(settings)))[1]
    msg.update(path=path, file=0, settings=settings.record_text())
    back = read_part(write_part(str(tmp_path), msg))
    assert back is not None and record_difference(back["settings"], settings.record()) is None
    assert record_difference(back["settings"], _settings().record()) is not None


# --- holding baked clips --------------------------------------------------------------------


def test_a_waiting_clip_can_drop_its_arrays_and_read_them_back_from_its_part(tmp_path) -> None:
    path = str(shared_file(CMU))
    msg = list(bvh_file_events(path, PackCache(_settings())))[1]
    msg.update(path=path, file=0)
    held = message_bytes(msg)
    # What a waiting clip costs: its key arrays, rotations (T, B, 4) and translations (T, B, 3).
    t, b = msg["rotations"].shape[:2]
    assert held >= 8 * t * b * 7
    part = write_part(str(tmp_path), msg)
    kept = dict(msg)
    drop_arrays(msg)
    assert message_bytes(msg) == 0 and msg["clip"] == kept["clip"]
    back = read_part(part)
    assert back is not None and np.array_equal(back["rotations"], kept["rotations"]) and back["names"] == kept["names"]
    assert read_part(str(tmp_path / "missing.npz")) is None


# --- output volumes -------------------------------------------------------------------------


def test_volume_names_and_what_counts_as_a_volume(tmp_path) -> None:
    out = str(tmp_path / "pack.blend")
    assert [os.path.basename(volume_path(out, k)) for k in range(4)] == ["pack.blend", "pack.002.blend", "pack.003.blend", "pack.004.blend"]
    assert existing_volumes(out) == []
    for name in ("pack.blend", "pack.002.blend", "pack.004.blend", "pack.1000.blend", "pack.abc.blend", "other.002.blend", "pack.002.blend1"):
        (tmp_path / name).write_text("x")
    # Volumes count from the output itself and stop at the first one missing.
    assert [os.path.basename(p) for p in existing_volumes(out)] == ["pack.blend", "pack.002.blend"]
    # Numbered files past what a run wrote are an earlier run's volumes; nothing else is.
    assert [os.path.basename(p) for p in stray_volumes(out, 2)] == ["pack.004.blend"]
    assert [os.path.basename(p) for p in stray_volumes(out, 1)] == ["pack.002.blend", "pack.004.blend"]


# --- splitting a file's clips between two workers -------------------------------------------


def test_a_file_is_split_only_when_that_ends_it_sooner() -> None:
    # Eight clips of 0.4 s: a second worker that needs 1 s to start takes the last three
    # (5 x 0.4 = 2.0 s against 1 + 3 x 0.4 = 2.2 s; 4/4 would be 1.6 against 2.6).
    k = split_point([0.4] * 8, second_start=1.0)
    assert k == 5
    costs = np.array([0.4] * 8)
    assert max(costs[:k].sum(), 1.0 + costs[k:].sum()) < costs.sum() - 0.5
    # Every other split ends later.
    finishes = [max(costs[:j].sum(), 1.0 + costs[j:].sum()) for j in range(1, 8)]
    assert min(finishes) == max(costs[:k].sum(), 1.0 + costs[k:].sum())
    # Short clips (the shared Quaternius FBX: 11 clips of 10-25 ms, imported in 0.3 s) stay together.
    assert split_point([0.012] * 11, second_start=0.3) is None
    # A saving below the minimum is not worth a second import; one clip cannot be split.
    assert split_point([0.6, 0.6], second_start=0.0, min_saving=0.7) is None
    assert split_point([0.6, 0.6], second_start=0.0) == 1
    assert split_point([5.0], second_start=0.0) is None
    # Uneven clips: the long ones first stay with the first worker.
    assert split_point([3.0, 0.5, 0.5, 0.5, 0.5], second_start=0.2) == 1
