"""The sample model and application used by ``relay2cmake demo``."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parent
DIGITS_MODEL = SAMPLES / "digits.onnx"
DEMO_APP = SAMPLES / "demo_app"
