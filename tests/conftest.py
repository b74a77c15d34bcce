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


# Modules that take minutes, started first: with `--dist loadfile` a worker takes whole
# modules, and xdist by default queues those with the most tests first, which put the
# conformance slice (2 tests, 7 minutes on a slow machine) last while the other worker sat
# idle. The Makefile turns that order off (--no-loadscope-reorder); the rest keep theirs.
LONG_MODULES = (
    "test_conformance.py",
    "test_quantized_zoo.py",
    "test_real_zoo.py",
    "test_schedules.py",
    "test_scheduled_kernels.py",
    "test_quantized_models.py",
    "test_fallbacks.py",
    "test_cross_aarch64.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    def rank(item) -> int:
        name = item.path.name
        return LONG_MODULES.index(name) if name in LONG_MODULES else len(LONG_MODULES)

    items.sort(key=rank)  # stable: each module's tests keep their order


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
