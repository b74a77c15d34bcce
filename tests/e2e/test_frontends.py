"""The other inputs: a PyTorch ExportedProgram (.pt2) and a TVMScript Relax module (.py),
each built and run as a package and compared with an independent computation."""

from __future__ import annotations

import numpy as np
import pytest
from packaging_helpers import build_package, configure_build, fails_cleanly, relay2cmake, run

TVMSCRIPT = """
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R

rng = np.random.default_rng(0)
W = rng.standard_normal((4, 3)).astype("float32")
B = rng.standard_normal((3,)).astype("float32")


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), scale: R.Tensor((), "float32")):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, R.const(W)), R.const(B)))
            y = R.multiply(h, scale)
            total = R.sum(y, axis=[1])
            R.output(y, total)
        return (y, total)
"""


def _run_cli(package, inputs: list[np.ndarray], tmp_path) -> list[np.ndarray]:
    paths = []
    for index, array in enumerate(inputs):
        paths.append(tmp_path / f"in{index}.npy")
        np.save(paths[-1], array)
    cli = package.cli
    run([cli, "--output-dir", tmp_path / "out", *paths])
    return [np.load(tmp_path / "out" / f"output_{i}.npy") for i in range(len(package.metadata["outputs"]))]


def test_tvmscript_module(tmp_path):
    source = tmp_path / "scaled_mlp.py"
    source.write_text(TVMSCRIPT)
    message = relay2cmake("gen", str(source), "-o", str(tmp_path / "x"), check=False).stderr
    assert "Input 'x' has a symbolic dimension 0 (n)" in message
    package = build_package(source, tmp_path / "work", "ScaledMlp", ["--input-shape", "x=5,4"])
    meta = package.metadata
    assert [i["name"] for i in meta["inputs"]] == ["x", "scale"]
    assert [o["name"] for o in meta["outputs"]] == ["output_0", "output_1"]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    scale = np.array(1.5, dtype=np.float32)
    weights = np.random.default_rng(0)  # the script's own generator and draws
    w = weights.standard_normal((4, 3)).astype(np.float32)
    b = weights.standard_normal((3,)).astype(np.float32)
    y, total = _run_cli(package, [x, scale], tmp_path)
    expected = np.maximum(x @ w + b, 0) * scale
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total, expected.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_tvmscript_without_a_module_is_a_clear_error(tmp_path):
    (tmp_path / "empty.py").write_text("x = 1\n")
    result = relay2cmake("gen", str(tmp_path / "empty.py"), "-o", str(tmp_path / "o"), check=False)
    assert result.returncode == 1 and "must define one Relax IRModule" in result.stderr


torch = pytest.importorskip("torch", reason="PyTorch is a test dependency (pip install torch==2.13.0)")


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )  # fmt: skip
        self.head = nn.Linear(16, 4)

    def forward(self, image):
        return torch.softmax(self.head(torch.flatten(self.features(image), 1)), dim=-1)


def _export(module, example, path):
    torch.manual_seed(0)
    program = torch.export.export(module.eval(), (example,))
    torch.export.save(program, str(path))
    return program


@pytest.mark.parametrize("kind", ["cnn", pytest.param("encoder", marks=pytest.mark.slow)])
def test_pytorch_exported_program(kind, tmp_path):
    torch.manual_seed(0)
    if kind == "cnn":
        module, example = SmallCNN(), torch.randn(1, 3, 32, 32)
    else:
        module = torch.nn.TransformerEncoderLayer(
            d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0
        )
        example = torch.randn(1, 16, 64)
    path = tmp_path / f"{kind}.pt2"
    program = _export(module, example, path)
    package = build_package(path, tmp_path / "work", kind.capitalize(), [])
    meta = package.metadata
    assert meta["golden"]["reference"] == "torch"
    expected_name = "image" if kind == "cnn" else "src"
    assert meta["inputs"][0]["name"] == expected_name
    x = torch.randn(*example.shape)
    (ours,) = _run_cli(package, [x.numpy()], tmp_path)
    with torch.no_grad():
        reference = program.module()(x).numpy()
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-5)


class _Recurrent(torch.nn.Module):
    def __init__(self, kind: str, layers: int, bidirectional: bool, batch_first: bool):
        super().__init__()
        self.kind = kind
        self.rnn = getattr(torch.nn, kind)(
            12, 16, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first
        )

    def forward(self, x):
        out, state = self.rnn(x)
        return out, state[0] if self.kind == "LSTM" else state


# LSTM in the default run (the real-model slice runs a GRU .pt2); the rest are slow cases.
RECURRENT = [
    pytest.param(
        kind,
        layers,
        bidirectional,
        batch_first,
        marks=[pytest.mark.slow] if layers == 2 or kind != "LSTM" else [],
    )
    for kind in ("GRU", "LSTM", "RNN")
    for layers, bidirectional, batch_first in ((1, False, True), (2, True, False))
]


@pytest.mark.parametrize(("kind", "layers", "bidirectional", "batch_first"), RECURRENT)
def test_pt2_recurrent_layers_match_pytorch(kind, layers, bidirectional, batch_first, tmp_path):
    """Each package is built and checked by gen itself (its golden data are PyTorch's outputs,
    confirmed by TVM's VM); here the package's cli runs fresh inputs against PyTorch."""
    torch.manual_seed(1)
    example = torch.randn(3, 5, 12)
    path = tmp_path / "rnn.pt2"
    program = _export(_Recurrent(kind, layers, bidirectional, batch_first), example, path)
    package = build_package(path, tmp_path / "work", "Rnn", [])
    assert package.metadata["golden"]["reference"] == "torch"
    assert package.metadata["self_check"].startswith("passed")
    x = torch.randn(*example.shape) + 0.5
    ours = _run_cli(package, [x.numpy()], tmp_path)
    with torch.no_grad():
        reference = [t.numpy() for t in program.module()(x)]
    for got, want in zip(ours, reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


class _CacheConcat(torch.nn.Module):
    """A Hugging Face style KV cache that starts as torch.empty(0): torch.cat skips it."""

    def forward(self, x):
        cache = torch.empty(0)
        return torch.cat([cache, x], dim=-2) * 2.0


def test_pt2_concat_with_an_empty_cache(tmp_path):
    from relay2cmake.commands.generate import GenerateOptions, generate

    path = tmp_path / "cache.pt2"
    _export(_CacheConcat(), torch.randn(1, 2, 4, 8), path)
    generate(GenerateOptions(model=path, out=tmp_path / "pkg", name="Cache"))
    expected = np.load(tmp_path / "pkg" / "tests" / "golden" / "expected_0.npy")
    given = np.load(tmp_path / "pkg" / "tests" / "golden" / "input_0.npy")
    np.testing.assert_allclose(expected, given * 2.0)


class _Bags(torch.nn.Module):
    """nn.EmbeddingBag over fixed-size bags (2-D ids), and constant triu_indices: two ATen
    operators TVM's importer lacks (frontends/torch_converters.py)."""

    def __init__(self, mode: str):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(50, 8, mode=mode)

    def forward(self, ids, x):
        rows, cols = torch.triu_indices(4, 4, offset=1)
        return self.bag(ids) * 2.0, x[rows] + x[cols]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_pt2_embedding_bag_and_triu_indices(mode, tmp_path):
    from relay2cmake.commands.generate import GenerateOptions, generate

    torch.manual_seed(2)
    ids, x = torch.randint(0, 50, (3, 5)), torch.randn(4)
    program = torch.export.export(_Bags(mode).eval(), (ids, x))
    torch.export.save(program, str(tmp_path / "bags.pt2"))
    generate(GenerateOptions(model=tmp_path / "bags.pt2", out=tmp_path / "pkg", name="Bags"))
    golden = tmp_path / "pkg" / "tests" / "golden"
    ids_in, x_in = np.load(golden / "input_0.npy"), np.load(golden / "input_1.npy")
    with torch.no_grad():
        want = [t.numpy() for t in program.module()(torch.from_numpy(ids_in), torch.from_numpy(x_in))]
    for index, expected in enumerate(want):
        np.testing.assert_allclose(np.load(golden / f"expected_{index}.npy"), expected, rtol=1e-5, atol=1e-6)


def _indices(*values):
    return torch.tensor(values)


# x[...] on a [3, 4, 5, 6] tensor, PyTorch's advanced-indexing forms (aten.index.Tensor).
INDEX_FORMS = {
    "adjacent after a slice": lambda x: x[:, _indices(0, 3, 1, 3), _indices(1, 2, 4, 4)],
    "one index, two slices first": lambda x: x[:, :, _indices([0, 4], [2, 2])],
    "one index, first axis": lambda x: x[_indices(2, 0), :],
    "broadcast after a slice": lambda x: x[:, _indices([0], [3]), _indices(1, 4, 0)],
    "separated by a slice": lambda x: x[_indices([2], [0]), :, _indices(4, 1, 0)],
    "separated, trailing": lambda x: x[:, _indices(3, 1), :, _indices(5, 0)],
    "a new axis first": lambda x: x[None, :, _indices(1, 2), _indices(3, 3)],
    "adjacent at the end": lambda x: x[..., _indices(4, 0), _indices(5, 1)],
    "three, one of them 0-d": lambda x: x[:, _indices(1, 2), _indices(0, 4), torch.tensor(5)],
    "int32 and int64": lambda x: x[:, _indices(3, 1).int(), _indices(0, 2)],
    "negative constants": lambda x: x[:, _indices(-1, 0, -4), _indices(2, -5, -1)],
    "2-D after a slice": lambda x: x[:, _indices([0, 1], [2, 3]), _indices([4, 4], [0, 1])],
    "an integer after": lambda x: x[:, _indices(2, 0), :, 1],  # PyTorch selects first
}


class _Form(torch.nn.Module):
    def __init__(self, form):
        super().__init__()
        self.form = form

    def forward(self, x):
        return self.form(x)


@pytest.mark.parametrize("form", list(INDEX_FORMS))
def test_pt2_advanced_indexing_forms_match_pytorch(form, tmp_path):
    """Each form imported (frontends/torch_converters.py's index.Tensor) and run on TVM's VM."""
    from relay2cmake.frontends.torch import import_torch
    from relay2cmake.golden import tvm_vm_reference

    x = torch.randn(3, 4, 5, 6)
    program = torch.export.export(_Form(INDEX_FORMS[form]), (x,))
    torch.export.save(program, str(tmp_path / "form.pt2"))
    imported = import_torch(tmp_path / "form.pt2", {})
    (ours,) = tvm_vm_reference(imported, [x.numpy()])
    with torch.no_grad():
        expected = program.module()(x).numpy()
    assert ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)


# torch.amax / torch.amin forms (aten.amax / aten.amin, which TVM's importer lacks).
EXTREMUM_FORMS = {
    "amax over one axis": lambda x: torch.amax(x, dim=1),
    "amax over two, kept": lambda x: torch.amax(x, dim=(1, 3), keepdim=True),
    "amin over a negative axis": lambda x: torch.amin(x, dim=-2),
    "amax over every axis": lambda x: torch.amax(x),
}


@pytest.mark.parametrize("form", list(EXTREMUM_FORMS))
def test_pt2_amax_and_amin_match_pytorch(form, tmp_path):
    from relay2cmake.frontends.torch import import_torch
    from relay2cmake.golden import tvm_vm_reference

    x = torch.randn(3, 4, 5, 6)
    program = torch.export.export(_Form(EXTREMUM_FORMS[form]), (x,))
    torch.export.save(program, str(tmp_path / "form.pt2"))
    (ours,) = tvm_vm_reference(import_torch(tmp_path / "form.pt2", {}), [x.numpy()])
    with torch.no_grad():
        expected = program.module()(x).numpy()
    assert ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)


class _Mask(torch.nn.Module):
    def forward(self, x):
        return x[:, x[0] > 0]


def test_pt2_boolean_mask_index_is_a_clear_error(tmp_path):
    program = torch.export.export(_Mask(), (torch.randn(2, 3),))
    torch.export.save(program, str(tmp_path / "mask.pt2"))
    message = fails_cleanly("gen", tmp_path / "mask.pt2", "-o", tmp_path / "pkg")
    assert "index.Tensor is supported with int32/int64 index tensors" in message, message


class _SlicedIndexing(torch.nn.Module):
    """Advanced indexing after whole axes (``aten.index.Tensor`` with None entries), which
    TVM's importer took as an outer product: a DLRM's ``dots[:, rows, cols]``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("r", torch.tensor([[0], [2]]))  # broadcasts with c: [2, 3]
        self.register_buffer("c", torch.tensor([1, 3, -1]))
        self.register_buffer("first", torch.tensor([[1], [0]]))
        self.register_buffer("last", torch.tensor([4, 0]))

    def forward(self, x, rows, cols):
        return (
            x[:, rows, cols],  # adjacent after a slice: [2, 4, 5]
            x[:, self.r, self.c],  # constant, broadcast: [2, 2, 3, 5]
            x[self.first, :, cols],  # separated by a slice: broadcast dims first, [2, 4, 3, 5]
            x[:, rows, :, self.last[:, None]],  # separated, broadcast: [2, 4, 2, 4]
            x[..., self.last],  # one index tensor, last axis: [2, 3, 4, 2]
        )


SLICED_INDEXING_EXAMPLE = (torch.randn(2, 3, 4, 5), torch.tensor([0, 2, -1, 1]), torch.tensor([3, -4, 0, 1]))


def test_pt2_advanced_indexing_after_slices(tmp_path):
    """Generated (self-checked against PyTorch's golden outputs), built, and run on fresh
    inputs; indices from the caller still reach the kernels only through the check."""
    from relay2cmake.commands.generate import GenerateOptions, generate

    program = torch.export.export(_SlicedIndexing().eval(), SLICED_INDEXING_EXAMPLE)
    torch.export.save(program, str(tmp_path / "sliced.pt2"))
    generate(GenerateOptions(model=tmp_path / "sliced.pt2", out=tmp_path / "pkg", name="Sliced"))
    build = tmp_path / "build"
    configure_build(tmp_path / "pkg", build)
    cli = build / "sliced_cli"

    def run_cli(arrays, folder):
        folder.mkdir()
        paths = [folder / f"in{i}.npy" for i in range(len(arrays))]
        for path, array in zip(paths, arrays, strict=True):
            np.save(path, array)
        return run([cli, "--output-dir", folder / "out", *paths], check=False), folder / "out"

    x = torch.randn(2, 3, 4, 5)
    rows, cols = torch.tensor([-3, 1, 2, -1]), torch.tensor([-1, 2, 3, 0])
    result, out = run_cli([t.numpy() for t in (x, rows, cols)], tmp_path / "good")
    assert result.returncode == 0, result.stderr
    with torch.no_grad():
        want = [t.numpy() for t in program.module()(x, rows, cols)]
    for index, expected in enumerate(want):
        np.testing.assert_array_equal(np.load(out / f"output_{index}.npy"), expected)
    for case, (name, value) in enumerate([("rows", 3), ("rows", -4), ("cols", 4), ("cols", -5)]):
        bad = {"rows": rows.numpy().copy(), "cols": cols.numpy().copy()}
        bad[name][2] = value
        result, out = run_cli([x.numpy(), bad["rows"], bad["cols"]], tmp_path / f"bad{case}")
        assert result.returncode != 0, (name, value)
        assert f"input '{name}'): index {value} is outside" in result.stderr, result.stderr
        assert "an index out of range" in result.stderr, result.stderr
        assert not out.exists() or not any(out.iterdir())
