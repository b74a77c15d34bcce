"""Render the template tree and the generated sources into files, then write them safely."""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from relay2cmake import __version__
from relay2cmake.dtypes import RAW_BITS
from relay2cmake.emit.context import (
    PackageIdentity,
    PackageView,
    build_view,
    c_banner,
    c_fallback_path,
    golden_stride,
    weights_file_path,
    workspace_bytes,
)
from relay2cmake.emit.output_folder import check_output_dir
from relay2cmake.errors import UserError
from relay2cmake.golden import GoldenData
from relay2cmake.plan import PackagePlan
from relay2cmake.weights_file import WeightsFile

# A package's files: their bytes, or the weights file (on disk until staged).
Files = dict[str, bytes | WeightsFile]


def templates_dir() -> Path:
    """Installed wheels carry the templates inside the package; a checkout has them beside it."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "cmake_templates", here.parent / "cmake_templates"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError("cmake_templates/ is missing from this installation of relay2cmake")


@functools.cache  # Jinja compiles a template once per environment (0.45 s a render)
def _environment(root: Path, cmake: bool = False) -> jinja2.Environment:
    # CMake's own ${...} and {...} must not meet Jinja's braces: its templates say << x >> and <% for %>.
    delimiters: dict[str, Any] = (
        dict(variable_start_string="<<", variable_end_string=">>", block_start_string="<%",
             block_end_string="%>", comment_start_string="<#", comment_end_string="#>")
        if cmake
        else {}
    )  # fmt: skip
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        **delimiters,
    )


def is_cmake_template(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return name == "CMakeLists.txt.j2" or name.endswith((".cmake.j2", ".cmake.in.j2"))


def render_templates(view: PackageView) -> dict[str, bytes]:
    root = templates_dir()
    environments = {False: _environment(root), True: _environment(root, cmake=True)}
    names = view.template_names()
    files: dict[str, bytes] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        if "__pycache__" in relative:
            continue
        target = relative.replace("__prefix__", view.prefix).replace("__name__", view.name)
        if target.endswith(".j2"):
            template = environments[is_cmake_template(relative)].get_template(relative)
            files[target[:-3]] = template.render(**names).encode("utf-8")
        else:
            files[target] = static_source(path.read_text(encoding="utf-8"), view).encode("utf-8")
    return files


def static_source(text: str, view: PackageView) -> str:
    """A file that is the same in every package (the C runtime): real C with ``__prefix__``
    (``__PREFIX__``) where the package's prefix goes and ``/*__banner__*/`` for the banner;
    whatever depends on the model is a macro in the generated headers."""
    return (
        text.replace("/*__banner__*/", view.banner_c)
        .replace("__prefix__", view.prefix)
        .replace("__PREFIX__", view.PREFIX)
    )


def golden_samples(golden: GoldenData) -> dict[str, bytes]:
    """The expected outputs the package keeps as every k-th element (``golden_stride``): gen
    checks the package against the whole outputs first, then writes these in their place."""
    # A case at other dimensions is sampled like the largest (the golden test's stride
    # table is the largest's) when it is large itself.
    strides = [golden_stride(array.size) for array in golden.expected]
    return {
        f"tests/{folder}/expected_{index}.npy": _npy_bytes(array.reshape(-1)[:: strides[index]])
        for folder, data in golden_folders(golden)
        for index, array in enumerate(data.expected)
        if golden_stride(array.size) > 1
    }


def golden_folders(golden: GoldenData) -> list[tuple[str, GoldenData]]:
    """tests/golden (the largest dimensions), then tests/golden_1, ... for other cases."""
    return [("golden", golden)] + [(f"golden_{k}", case) for k, case in enumerate(golden.cases, start=1)]


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    stream = io.BytesIO()
    if array.dtype.name in RAW_BITS:  # ml_dtypes' own descriptors are not loadable by NumPy
        array = array.view(f"u{array.dtype.itemsize}")
    np.save(stream, array, allow_pickle=False)
    return stream.getvalue()


def metadata(
    identity: PackageIdentity,
    plan: PackagePlan,
    golden: GoldenData,
    operators: tuple[str, ...],
) -> dict[str, Any]:
    def io(t):
        return {
            "name": t.name,
            "c_name": t.c_name,
            "dtype": t.dtype,
            "shape": list(t.shape),
            "bytes": t.nbytes,
            **({"dynamic_axis": t.dynamic_axis} if t.dynamic_axis is not None else {}),
        }

    return {
        "generator": {"name": "relay2cmake", "version": __version__},
        "tvm_version": plan.kernels.tvm_version,
        "model": {"file": identity.model_file, "sha256": identity.model_sha256, "operators": list(operators)},
        "package": {"name": identity.name, "prefix": identity.prefix, "version": identity.version},
        "targets": list(identity.targets),
        # Dimensions chosen at run time; the shapes above are at their largest values.
        "dims": [{"name": d.name, "min": d.low, "max": d.high} for d in plan.dims],
        "inputs": [io(t) for t in plan.inputs],
        "outputs": [io(t) for t in plan.outputs],
        "weights_file": {
            "path": weights_file_path(identity.prefix),
            "bytes": plan.weights.size,
            "sha256": plan.weights.sha256.hex(),
        },
        "memory": {
            "arena_bytes": plan.arena_bytes,
            "intermediate_bytes": plan.intermediate_bytes,
            "workspace_bytes": workspace_bytes(plan),
            "weight_bytes": plan.weight_bytes,
            "tvm_static_plan_bytes": plan.tvm_storage_bytes,
        },
        "kernels": sorted({s.kernel for s in plan.steps}),
        "steps": len(plan.steps),
        "golden": {
            "reference": golden.reference,
            "confirmed_by": list(golden.confirmed_by),
            "notes": list(golden.notes),
            "unavailable": list(golden.unavailable),
            "tolerances": [{"atol": t.atol, "rtol": t.rtol} for t in golden.tolerances],
        },
    }


def render_package(
    identity: PackageIdentity,
    plan: PackagePlan,
    golden: GoldenData,
    operators: tuple[str, ...],
    fallbacks: tuple[str, ...] = (),
    self_check: str = "not run",
) -> Files:
    """``fallbacks``: one line per optimisation declined; ``self_check``: what gen checked."""
    kernels = plan.kernels
    c_fallbacks = {arch: o.c_source for arch, o in kernels.objects.items() if o.in_c}
    view = build_view(identity, plan, golden, fallbacks, self_check)
    files: Files = dict(render_templates(view))
    banner = c_banner(identity) + "\n"
    prefix = identity.prefix
    files[f"src/{prefix}_kernels.c"] = (banner + kernels.c_source).encode("utf-8")
    for arch, source in c_fallbacks.items():
        files[c_fallback_path(prefix, arch)] = (banner + source).encode("utf-8")
    for arch, object_set in kernels.objects.items():
        files[f"objects/{arch}/{prefix}_kernels.o"] = object_set.code
        for twin in object_set.twins:
            files[f"objects/{arch}/{prefix}_kernels_{twin.tag}.o"] = twin.code
    # The only copy of the weights: compiled in by cmake/weights.cmake, or read at run time.
    files[view.weights_file] = plan.weights
    for folder, data in golden_folders(golden):
        for index, array in enumerate(data.inputs):
            files[f"tests/{folder}/input_{index}.npy"] = _npy_bytes(array)
        for index, array in enumerate(data.expected):
            # Whole, for gen's own check; golden_samples() replaces the large ones afterwards.
            files[f"tests/{folder}/expected_{index}.npy"] = _npy_bytes(array)
    document = metadata(identity, plan, golden, operators)
    document["fallbacks"] = list(fallbacks)
    document["self_check"] = self_check
    sets = dict(kernels.objects)
    sets.update({f"{arch}-{t.tag}": t for arch, o in kernels.objects.items() for t in o.twins})
    document["scheduled_kernels"] = {name: list(o.scheduled) for name, o in sorted(sets.items())}
    document["serial_kernels"] = {name: list(o.serial) for name, o in sorted(sets.items())}
    document["tuned_kernels"] = {name: list(o.tuned) for name, o in sorted(sets.items()) if o.tuned}
    files["metadata.json"] = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def stage_package(out: Path, files: Files, force: bool) -> Path:
    """Write into a fresh hidden sibling of ``out`` (``commit_package`` swaps it in, or
    ``discard_staging`` removes it): until then ``out`` is as it was."""
    check_output_dir(out, force)
    out = out.resolve()
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as exc:
        raise UserError(f"Cannot write next to {str(out)!r}: {exc.strerror}.") from None
    try:
        for relative, content in sorted(files.items()):
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, WeightsFile):
                content.copy_to(path)
            else:
                path.write_bytes(content)
        staging.chmod(0o755)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"Cannot write the package to {str(out)!r}: {exc.strerror or exc}.") from None
    except BaseException:  # interrupted: no hidden half-written folder stays behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging
