"""Sub-commands of the command line; each is a few lines around one job."""

from __future__ import annotations


