"""One error hierarchy: the CLI turns a UserError into one paragraph and exit code 1."""

from __future__ import annotations


class Relay2CMakeError(Exception):
    """Base of every error this tool raises on purpose."""


class UserError(Relay2CMakeError):
    """Something about the user's input (model, flags, paths) that they can fix.

    The message is shown as is, without a traceback, so it must say what is wrong and
    what to do about it.
    """


class ModelError(UserError):
    """The model file is unreadable, invalid, or uses something we cannot lower."""


class BuildError(Relay2CMakeError):
    """An external build step (CMake, compiler) failed; the message carries its log tail."""


def describe(exc: BaseException, limit: int = 800) -> str:
    """``Type: message`` on one line, the message at most ``limit`` characters: how an error
    from TVM, PyTorch or ONNX is quoted inside one of ours."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit]}"
