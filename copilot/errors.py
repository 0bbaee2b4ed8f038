"""Errors every layer may raise; the bottom layer, it imports nothing from the project."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or a fault the user can act on: the command line prints it as one line and exits 2."""
