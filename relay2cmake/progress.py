"""Progress on stderr: a spinner while a step runs (on a terminal), then one line with its time."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape

from relay2cmake.naming import terminal_text


class Progress:
    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.console = Console(stderr=True, highlight=False)

    @contextlib.contextmanager
    def __call__(self, message: str) -> Iterator[None]:
        if self.quiet:
            yield
            return
        start = time.perf_counter()
        message = escape(terminal_text(message))  # a file name is neither markup nor escapes
        try:
            if self.console.is_terminal:
                with self.console.status(message):
                    yield
            else:
                yield
        except BaseException:
            self.console.print(f"[red]✗[/] {message}")
            raise
        self.console.print(f"[green]✓[/] {message} [dim]({time.perf_counter() - start:.1f}s)[/]")
