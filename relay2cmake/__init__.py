"""relay2cmake: a model file in, a standalone CMake/Conan C package out."""

from __future__ import annotations

__version__ = "0.1.0"
