"""Control kinds as the control stack runs them: one module per kind or family, each a frozen
definition deriving from :class:`~.base.ControlKind` with its own run over a pose."""
