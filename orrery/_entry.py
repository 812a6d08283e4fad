"""The `orrery` command's entry point. The compiler wrappers (`orrery nvcc`, `orrery mpicxx`, ...),
which a build runs once per file and a configure script dozens of times, start without the rest of
the command line's modules (the machine descriptions' pydantic models, the run, the reports): a
quarter of the start-up time of a command that loads them (bench/README.md)."""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    argv = sys.argv[1:]
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `orrery machine show X | head` ends quietly
    from .run import build

    if argv and argv[0] in build.WRAPPERS:  # the compiler's own options, verbatim
        return build.wrapper_main(argv[0], argv[1:])
    # pydantic looks for plugins of other packages (importlib.metadata over every installed
    # distribution) as it builds the first model: 15 ms of each command, none of which uses one
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from .cli import main as command

    return command(argv)
