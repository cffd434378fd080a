"""Which bone of a rig fills which humanoid slot: the humanoid profile, mapping by name and by shape, and the presets' file format."""
