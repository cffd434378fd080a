"""Batch bake of an animation pack onto one character: the parts that need no Blender.

Modules: :mod:`.plan` (the pack's files, names, splitting a file), :mod:`.messages` (what crosses
between processes), :mod:`.settings` (what every clip shares), :mod:`.baking` (one clip baked
without Blender), :mod:`.output_files` (parts and volumes on disk), :mod:`.report` and
:mod:`.status` (the outcome and its words), :mod:`.pack_limits` (what a pack may hold, how many
workers it can use).

Domain words, as used here and in :mod:`batch_runner`:

* A *pack* is what the user points at: folders (searched recursively) and files. Planning it
  (:func:`.plan.plan_pack`) lists the *pack files* that can hold clips (BVH, FBX, glTF/GLB, .blend), in
  a stable order (sorted paths), and what was left out and why.
* A pack file holds one or more *clips* (a BVH holds one; an FBX may hold eleven). A clip is
  identified by its *clip key* ``"<absolute path>::<clip id>"``, where the clip id is the BVH's
  file stem or the Action's full name as the importer made it in a fresh scene. The key is what
  ``--resume`` compares; it is stored on every baked Action.
* A *label* names a pack file in Action names: its path relative to the folder it was found in,
  without extension, ``/``-separated (a file given by itself: its stem). A baked Action is called
  ``label`` for a single-clip BVH and ``label|clip`` otherwise (the clip's last ``|`` part: the FBX
  importer's ``Armature|Armature|Walk`` is the clip ``Walk``).
* The *pack cache* (:class:`.baking.PackCache`) keeps the automatic mapping of each source skeleton layout
  (layout signature plus rounded bone ends) and the retarget bindings
  (:class:`core.retarget.binding_cache.BindingCache`: keyed by both mappings, both layout signatures, both
  rests and the options): a pack of 200 clips from one capture shoot maps and binds once.
* *Messages* are what crosses between processes: plain dicts of ``str``, numbers, lists and numpy
  arrays, never instances of this package's classes (a worker loads the package under a name of
  its own, so a pickled class would not resolve in the main process). A *baked clip* message
  carries the target-local keys of the bones the retarget drives; the Blender layer writes them
  with :func:`bridge.action_write.write_action`, exactly as a single retarget does.
* A *part* is one baked clip message saved as ``.npz`` in the output's parts folder the moment it
  is computed; a run that dies leaves its parts, and ``--resume`` writes them into the output
  without computing them again.
* The *settings record* (:meth:`.settings.BakeSettings.record`) is what a clip's keys depend on besides the
  clip: method table, Match Rest, timing rule, scene rate, retarget options and the target
  mapping. Every baked Action and every part carries it, so ``--resume`` re-bakes a clip baked
  under other settings instead of keeping it (:func:`.settings.record_difference` says what changed).
* An output too large to hold in memory at once is written as *volumes*
  (:func:`.output_files.volume_path`): ``OUT.blend``, ``OUT.002.blend``, ... each the target plus a share of
  the clips in pack order.
* A file with many long clips may be *split*: a second worker imports it too and bakes the last
  of its clips (:func:`.plan.split_point`), when that ends the file sooner despite the second import.

Timing follows :func:`usecases.retarget.retarget_action`: a clip keeps its own timing on the scene's
frame rate (resampled) unless ``keep_frames`` keeps its frame numbers. So does the choice of
method: with a method table (per slot; see :mod:`core.retarget.methods`) or ``match_rest`` a clip
is retargeted through :func:`core.retarget.methods.retarget_with_methods`, exactly as a single
retarget; without either, through the geometric-frame binding alone. In both cases a clip already
on the target's layout is bound natively (its keys unchanged), as a single retarget binds it.
"""
