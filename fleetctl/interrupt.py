"""Ctrl-C: one line on stderr, exit status 130 and nothing half-written, wherever the signal lands.

Python's default turns SIGINT into a KeyboardInterrupt raised at whatever bytecode runs then, which
a command of this size cannot keep its promise under: raised inside an import it leaves a module
half-initialised in ``sys.modules`` (the plan then fails with ``module 'pulumi_aws.ec2' has no
attribute ...``, exit 1, reading like a broken install); raised inside the Pulumi SDK's event loop
or a finaliser it is printed as ``Exception ignored ... KeyboardInterrupt`` and the command goes on
(exit 0); elsewhere it unwinds as a 60-line traceback. So fleetctl, run as a program
(:func:`install`, first thing in ``fleetctl.cli.main``), does not unwind: everything a command does
before it writes is in memory, so the handler removes what is being written (each writer registers
its temporary files with :func:`cleanup`), prints one line and ends the process (``os._exit``).

A write that must be whole holds the signal (:func:`held`): Ctrl-C during it takes effect when it
ends, and :func:`checkpoint` just before the point of no return (a rename) gives up the write if
Ctrl-C came. Once a command's effect is done (:func:`finish`: the edit renamed into place, the plan
written, the output printed), Ctrl-C is ignored: the command ends as it says it did, not as
"interrupted" with its file written.

In-process callers (the tests) never install the handler; then none of this changes anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import NoReturn

INTERRUPTED_STATUS = 130
"""128 + SIGINT, what a shell reports for a command Ctrl-C stopped."""
MESSAGE = "fleetctl: interrupted"
_ERASE_LINE = "\r\x1b[K"  # the progress line (fleetctl/progress.py), if one is shown

_installed = False
_holding = 0
_pending = False
_finished = False
_cleanups: dict[int, Callable[[], object]] = {}
_next_key = 0


def install() -> None:
    """Handle SIGINT as this module says, from now on, in this process."""
    global _installed
    _installed = True
    signal.signal(signal.SIGINT, _on_interrupt)


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _pending
    if _finished:
        return
    if _holding:
        _pending = True
        return
    exit_now()


def exit_now() -> NoReturn:
    """Remove what is being written, print the one line and end the process with status 130."""
    for action in reversed(list(_cleanups.values())):
        with contextlib.suppress(Exception):
            action()
    with contextlib.suppress(OSError):
        erase = _ERASE_LINE if os.isatty(2) else ""
        os.write(2, f"{erase}{MESSAGE}\n".encode())
    os._exit(INTERRUPTED_STATUS)


@contextlib.contextmanager
def cleanup(action: Callable[[], object]) -> Iterator[None]:
    """Run ``action`` (remove a temporary file, stop a child process) if Ctrl-C ends the process
    while the block runs."""
    global _next_key
    _next_key += 1
    key = _next_key
    _cleanups[key] = action
    try:
        yield
    finally:
        _cleanups.pop(key, None)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Ctrl-C during the block takes effect when the block ends (not at all after :func:`finish`)."""
    global _holding
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
        if _installed and not _holding and _pending and not _finished:
            exit_now()


def checkpoint() -> None:
    """Inside :func:`held`, just before a write's point of no return: end the process now if
    Ctrl-C came, so an interrupted write leaves everything as it was."""
    if _installed and _pending and not _finished:
        exit_now()


def finish() -> None:
    """The command's effect is done: a Ctrl-C from now on is ignored, so the command ends as it
    reports (an edit "written", exit 0) rather than "interrupted" with its file written."""
    global _finished
    if _installed:
        _finished = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)
