"""Named exceptions of the evidential core.

Every error a user can cause raises one of these with a message that says what to fix.
They subclass :class:`ValueError` so that generic ``except ValueError`` handlers keep working.
"""

from __future__ import annotations


class EvidentialError(ValueError):
    """Base class of the errors raised by :mod:`evidential`."""


class InvalidEvidenceError(EvidentialError):
    """Evidence that is NaN, infinite or negative (at an unmasked position)."""


class ShapeError(EvidentialError):
    """A tensor or mask whose shape does not match the ``[..., k, M]`` contract."""


class UnknownNameError(EvidentialError, KeyError):
    """A fusion rule, routing policy or other registry name that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(EvidentialError):
    """A configuration value outside its documented domain."""
