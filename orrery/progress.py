"""Progress bars and log messages of Orrery's long commands (calibrate, fit, validate).

A bar (tqdm) on stderr only when stderr is a terminal: a log file or a pipe gets none. Messages
go through :mod:`logging`, each module's own logger under ``orrery`` (``orrery.calibration.validate``
...); ``configure(verbose)`` is what the CLI sets up: warnings only, or with ``-v`` what each
step does, as ``orrery: ...`` lines on stderr (written above a bar that is showing). Library
users configure the ``orrery`` logger as they like. Standard output is never touched: the
commands' results go there.

Not here: what the commands print as their results (stdout), errors (orrery.errors).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
LOGGER = "orrery"


def on_terminal() -> bool:
    """Whether stderr is a terminal (a person watching), read at each call."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"orrery: {record.levelname.lower()}: {message}"
        return f"orrery: {message}"


class _Handler(logging.Handler):
    """Writes to the stderr of the moment (tests and callers replace sys.stderr), above any bar."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:
            self.handleError(record)


def configure(verbose: bool = False) -> None:
    """The CLI's logging: ``orrery: ...`` lines on stderr, info with ``verbose``, else warnings only."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _Handler)]:
        logger.removeHandler(handler)
    handler = _Handler()
    handler.setFormatter(_Format())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.propagate = False


def bar(iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str, unit: str) -> Any:
    """A tqdm bar over ``iterable`` (or one to ``update()`` by hand) on stderr; a silent
    stand-in with the same methods when stderr is not a terminal. Without a total (``iterable``
    has no length, none given): how many so far and the time."""
    from tqdm import tqdm

    if total is None and not hasattr(iterable, "__len__"):
        form = f"{{desc}}: {{n_fmt}} {unit}s [{{elapsed}}{{postfix}}]"
    else:
        form = None  # tqdm's own: a bar, n/total, elapsed and remaining time, the time per unit
    sized = _sized()
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not on_terminal(),
        leave=False,
        bar_format=form,
        dynamic_ncols=sized,
        ncols=None if sized else 80,
        nrows=None if sized else 24,
    )


def _sized() -> bool:
    """Whether the terminal on stderr says its size. A bare pseudo-terminal (`script` in CI)
    says 0 x 0, which tqdm would take to mean no room for any bar: it gets 80 x 24."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return False
    return bool(size.columns and size.lines)


@contextlib.contextmanager
def counting(*, total: int | None = None, desc: str, unit: str) -> Iterator[Any]:
    """A bar to ``update()`` by hand, closed when the block ends (however it ends)."""
    b = bar(total=total, desc=desc, unit=unit)
    try:
        yield b
    finally:
        b.close()
