"""What several test modules share, in one place: where the third-party files are
(:mod:`.data`), the add-on's registration state (:mod:`.addon_state`), core inputs built from the
sample rigs (:mod:`.rig_inputs`), and the rigs, clips and files the tests write themselves
(:mod:`.sample_pair`, :mod:`.tiny_bvh`, :mod:`.control_rigs`, :mod:`.pmx_files`,
:mod:`.rig_variants`, :mod:`.wild_rigs`); what the modules of one test family share: the synthetic
mapping body and namings (:mod:`.mapping_body`), the bridge's small rigs and measures
(:mod:`.bridge_rigs`), Batch Bake's command line and outputs (:mod:`.batch_bake`) and the scenes of
the controls tests (:mod:`.controls_scenes`).

Imported as ``tests.helpers.<module>`` (the repository root is on ``sys.path`` through pytest's
``pythonpath`` option, and for the benchmarks run as ``python -m bench.<name>`` from the root).
Fixtures live in ``tests/conftest.py`` (and a folder's own ``conftest.py`` for that folder).
"""
