from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "support"))  # model_zoo, packaging_helpers

import model_zoo
from packaging_helpers import BuiltPackage, build_package


@pytest.fixture(scope="session")
def zoo_dir(tmp_path_factory) -> Path:
    """Every zoo model written once as .onnx."""
    root = tmp_path_factory.mktemp("zoo")
    for name, builder in model_zoo.MODELS.items():
        onnx.save(builder(), str(root / f"{name}.onnx"))
    onnx.save(model_zoo.unsupported_ops(), str(root / "unsupported.onnx"))
    return root


_built: dict[str, BuiltPackage] = {}


@pytest.fixture(scope="session")
def built(zoo_dir, tmp_path_factory):
    """Generate, build, test and install a zoo model once per session; returns a getter."""

    def get(model: str) -> BuiltPackage:
        if model not in _built:
            extra = model_zoo.GEN_ARGS.get(model, [])
            _built[model] = build_package(
                zoo_dir / f"{model}.onnx",
                tmp_path_factory.mktemp(f"pkg_{model}"),
                model_zoo.package_name(model),
                extra,
            )
        return _built[model]

    return get
