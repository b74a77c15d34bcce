"""Progress on stderr: a spinner while a step runs (on a terminal; elsewhere a line when it
starts), then one line with its time.

What TVM, ONNX and PyTorch print while a step runs (C++ ``LOG(WARNING)`` lines, Python
warnings: "Fast mode segfaults when there are out-of-bounds indices", "BlockBuilder destroyed
with remaining blocks", ...) is captured at the file-descriptor level and shown only when the
step fails or with ``--debug``: a user's own one-liners (fallbacks, approximations) come from
the tool itself. The spinner and our lines go to a duplicate of the original stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from relay2cmake.naming import terminal_text

_SHOWN_BYTES = 20_000  # of what a failed step printed: the end, where the cause usually is


@contextlib.contextmanager
def captured_stderr() -> Iterator[list[str]]:
    """Everything written to file descriptor 2 inside the block (by Python or by C++), as one
    string in the yielded list once the block ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    text: list[str] = []
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text.append(sink.read().decode("utf-8", "replace"))


class Progress:
    def __init__(self, quiet: bool = False, debug: bool = False):
        self.quiet = quiet
        self.debug = debug
        # Our own lines go to the original stderr, also while a step's output is captured.
        self._stream: TextIO = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        self.console = Console(file=self._stream, stderr=True, highlight=False)

    @contextlib.contextmanager
    def __call__(self, message: str) -> Iterator[None]:
        start = time.perf_counter()
        message = escape(terminal_text(message))  # a file name is neither markup nor escapes
        output: list[str] = []
        try:
            with captured_stderr() as output:
                if self.console.is_terminal and not self.quiet:
                    with self.console.status(message):
                        yield
                else:
                    if not self.quiet:  # a log: what runs now, in case it takes long
                        self.console.print(f"… {message}")
                    yield
        except BaseException:
            self._show(output, always=True)
            if not self.quiet:
                self.console.print(f"[red]✗[/] {message}")
            raise
        self._show(output, always=False)
        if not self.quiet:
            self.console.print(f"[green]✓[/] {message} [dim]({time.perf_counter() - start:.1f}s)[/]")

    def _show(self, output: list[str], always: bool) -> None:
        text = "".join(output).strip()
        if text and (always or self.debug):
            shown = text[-_SHOWN_BYTES:]
            self._stream.write(terminal_text(shown) + "\n")
            self._stream.flush()
