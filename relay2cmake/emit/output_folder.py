"""The output folder: refuse to clobber before any long step, swap a staged package in.

Light on purpose (no NumPy, no Jinja): ``gen`` checks the folder before its first step.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from relay2cmake.errors import UserError


def _is_package(folder: Path) -> bool:
    """Whether ``folder`` holds a package relay2cmake wrote (its metadata.json says so)."""
    try:
        metadata = json.loads((folder / "metadata.json").read_text())
        return metadata["generator"]["name"] == "relay2cmake"
    except (OSError, ValueError, KeyError, TypeError):
        return False


def check_output_dir(out: Path, force: bool, keep: tuple[Path, ...] = ()) -> None:
    """Fail before any long step if writing ``out`` would clobber something. Even with
    ``force``, never replace a folder that holds the working directory, the user's home or a
    file in ``keep`` (the model: ``gen m.onnx -o . --force`` would delete it)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"Output path {str(out)!r} exists and is not a directory.")
    if out.is_dir() and force:
        target = out.resolve()
        guarded = [Path.cwd().resolve(), Path.home().resolve(), *(k.resolve() for k in keep)]
        for path in guarded:
            if path == target or target in path.parents:
                raise UserError(
                    f"--force would delete {str(out)!r}, which holds {str(path)!r}. Choose an output "
                    "folder of its own (for example a new subfolder)."
                )
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(
            f"Output folder {str(out)!r} is not empty. Choose another folder, or pass --force to replace it."
        )
    if out.is_dir() and force and any(out.iterdir()) and not _is_package(out):
        raise UserError(
            f"--force replaces only a package relay2cmake wrote, and {str(out)!r} holds other files (no "
            "relay2cmake metadata.json). Remove it yourself, or choose another folder."
        )
    parent = out.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise UserError(f"Cannot write next to {str(out)!r}: Not a directory ({str(parent)!r} is a file).")
    if not parent.exists():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"Cannot create the folder {str(parent)!r}: {exc.strerror}.") from None
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UserError(f"Cannot write to {str(out)!r}: permission denied.")


def commit_package(staging: Path, out: Path, force: bool) -> None:
    check_output_dir(out, force)
    out = out.resolve()
    try:
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except OSError as exc:
        discard_staging(staging)
        raise UserError(f"Cannot write the package to {str(out)!r}: {exc.strerror or exc}.") from None


def discard_staging(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
