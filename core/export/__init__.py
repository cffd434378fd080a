"""What an exported file must be for the engine that reads it (pure data, no Blender)."""
