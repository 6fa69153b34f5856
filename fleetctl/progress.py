"""A line on stderr while something slow runs (planning a stack offline takes seconds).

Shown only when stderr is a terminal, so pipes, files and CI logs never see it, and only once
the work has taken DELAY_SECONDS, so quick runs stay quiet. The line is rewritten in place
with the time so far and erased when the work ends.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

DELAY_SECONDS = 2.0
INTERVAL_SECONDS = 1.0
ERASE_LINE = "\r\x1b[K"


@contextmanager
def progress(label: str, stream: TextIO | None = None) -> Iterator[None]:
    """``label: N s`` on ``stream`` (stderr) while the block runs, once it has run DELAY_SECONDS."""
    out = sys.stderr if stream is None else stream
    if not _is_terminal(out):
        yield
        return
    done = threading.Event()
    shown = threading.Event()
    start = time.monotonic()

    def show() -> None:
        if done.wait(DELAY_SECONDS):
            return
        while True:
            out.write(f"{ERASE_LINE}{label}: {time.monotonic() - start:.0f} s")
            out.flush()
            shown.set()
            if done.wait(INTERVAL_SECONDS):
                return

    thread = threading.Thread(target=show, name="fleetctl-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown.is_set():
            out.write(ERASE_LINE)
            out.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
