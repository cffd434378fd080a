"""The command line: ``python -m marionette`` and ``blender --command marionette``."""
