"""A command stopped from outside: Ctrl-C (SIGINT), `kill` or `timeout` (SIGTERM), a closed
terminal (SIGHUP). Python ends on SIGTERM and SIGHUP without unwinding, so that a run's
`finally` blocks (its SMPI launcher stopped, its copies of the program removed, its outputs
cleared) would never run; inside :func:`raised` both arrive as :class:`Interrupted`, as SIGINT
arrives as KeyboardInterrupt, and the command unwinds and exits as a shell reports a process
that signal killed (128 + its number)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: The signals that end a command; SIGPIPE is not one: a command whose reader went away
#: (`orrery run ... | head`) ends quietly at its next write, as other tools do.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The command received `signum`; a KeyboardInterrupt, so that whatever stops cleanly on
    Ctrl-C stops cleanly on the others too."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def signal_of(e: KeyboardInterrupt) -> int:
    """The signal behind an interrupt: Ctrl-C's SIGINT for a plain KeyboardInterrupt."""
    return e.signum if isinstance(e, Interrupted) else signal.SIGINT


def exit_status(e: KeyboardInterrupt) -> int:
    """The exit status a shell gives a process `e`'s signal killed."""
    return 128 + signal_of(e)


def _raise(signum: int, frame: object) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def raised() -> Iterator[None]:
    """SIGTERM and SIGHUP raised as Interrupted in the main thread while the block runs; the
    handlers before it are put back after. From another thread (signal handlers belong to the
    main thread), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """The stopping signals held back while the block runs (a clean-up that a second Ctrl-C must
    not cut short); one that arrived meanwhile is delivered as the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
