"""Orrery's exception types: every error a user can cause is one of these.

The CLI turns them into one line on stderr and a non-zero exit; library users
catch :class:`OrreryError`.
"""

from __future__ import annotations


class OrreryError(Exception):
    """Base class of every error Orrery reports to a user."""


class InputError(OrreryError):
    """A file or option a user gave is wrong: names the file, key and value."""

    def __init__(self, source: str, key: str | None, value: object, expected: str):
        self.source, self.key, self.value, self.expected = source, key, value, expected
        where = f"{source}: key '{key}'" if key else source
        super().__init__(f"{where}: got {value!r}, expected {expected}")


class SimulationError(OrreryError):
    """The simulated program could not be run to completion by Orrery."""


class BuildError(OrreryError):
    """Compiling or linking a program with Orrery's wrappers failed."""
