"""Orrery's exception types: every error a user can cause is one of these.

The CLI turns them into one line on stderr (several problems of one input: a
summary line, then one line each) and a non-zero exit; library users catch
:class:`OrreryError`.
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


class InputErrors(InputError):
    """Every problem found in one input at once: a summary line, then one line per problem,
    each an InputError naming its file (or flag), key and value. Its source, key, value and
    expected are the first problem's."""

    def __init__(self, source: str, errors: list[InputError]):
        first = errors[0]
        self.source, self.key, self.value, self.expected = first.source, first.key, first.value, first.expected
        self.errors = errors
        OrreryError.__init__(self, f"{source}: {len(errors)} errors\n" + "\n".join(f"  {e}" for e in errors))
