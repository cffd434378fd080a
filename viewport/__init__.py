"""What runs in the viewport while the user works: the live preview of controls and the bookkeeping of controls on library overrides."""
