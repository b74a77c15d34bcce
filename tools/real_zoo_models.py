"""The models of the real-architecture zoo (tools/real_zoo.py): real architectures from
torchvision, timm and transformers plus a few standard ones written here, all with random
weights (nothing is downloaded), in eval mode, batch size 1.

A model is a ``ModelSpec`` (how to build the module and its inputs); an ``Entry`` is one way
of exporting it (``onnx9`` .. ``onnx17`` with the TorchScript exporter, ``dynamo`` with
``torch.onnx.export(dynamo=True)``, ``pt2`` with ``torch.export``), optionally post-edited to
look like an old converter's output (``caffe2``, ``caffe2-ir3``).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

IMAGE = (1, 3, 224, 224)
SEQ = 128  # tokens per text input
EXPORTERS = ("onnx9", "onnx11", "onnx13", "onnx17", "dynamo", "pt2")
# What old converters wrote that later exporters do not: see caffe2_style in real_zoo.py.
EDITS = ("caffe2", "caffe2-ir3")


@dataclass(frozen=True)
class ModelSpec:
    key: str
    source: str  # where the architecture comes from: torchvision, timm, transformers, own
    build: Callable[[np.random.Generator], tuple[object, dict[str, np.ndarray]]]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    model: str
    exporter: str
    edit: str | None = None
    ci: bool = False

    @property
    def name(self) -> str:
        return f"{self.model}-{self.exporter}" + (f"-{self.edit}" if self.edit else "")

    @property
    def is_onnx(self) -> bool:
        return self.exporter != "pt2"

    @property
    def opset(self) -> int | None:
        return int(self.exporter[4:]) if self.exporter.startswith("onnx") else None


def import_torchvision():
    """torchvision 0.28's wheel ships custom ops (_C.so) linked against CUDA libraries that a
    CPU torch does not have, so loading them fails quietly and importing torchvision then
    fails on ``register_fake("torchvision::nms")`` for an operator that does not exist.
    Defining the two schemas it registers fakes for (nms, qnms) before the import lets it
    load; the models need no custom op except nms, which gets a plain PyTorch kernel so the
    detectors' post-processing runs (and ``_has_ops`` is made true for it)."""
    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    import torch

    if not _torchvision_extension_loads():
        library = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        library.impl("nms", _greedy_nms, "CPU")
        import_torchvision.library = library  # a Library unregisters its ops when collected
        import torchvision
        import torchvision.extension

        # A def, not a lambda: tracing scripts batched_nms, and TorchScript compiles what it
        # calls from source (a lambda fails with "Expected a single top-level function").
        torchvision.extension._has_ops = _has_ops
    import torchvision

    return torchvision


def _has_ops() -> bool:
    return True


def _torchvision_extension_loads() -> bool:
    """Loads torchvision's own ops where they work (a CPU build of torchvision, say)."""
    import importlib.util

    import torch

    folder = Path(importlib.util.find_spec("torchvision").submodule_search_locations[0])
    for library in folder.glob("_C.*"):
        try:
            torch.ops.load_library(str(library))
            return True
        except (OSError, RuntimeError):
            pass
    return False


def _greedy_nms(boxes, scores, iou_threshold: float):
    """Reference greedy non-maximum suppression (indices by descending score), the semantics
    of torchvision::nms; only the CPU placeholder above uses it."""
    import torch

    order = torch.argsort(scores, descending=True)
    keep = []
    suppressed = torch.zeros(boxes.shape[0], dtype=torch.bool)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        top_left = torch.maximum(boxes[i, :2], boxes[:, :2])
        bottom_right = torch.minimum(boxes[i, 2:], boxes[:, 2:])
        inter = (bottom_right - top_left).clamp(min=0).prod(dim=1)
        suppressed |= inter / (area[i] + area - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def randomize_batchnorm(module, rng: np.random.Generator) -> None:
    """Random running statistics and affine parameters: with PyTorch's defaults (mean 0,
    var 1, weight 1, bias 0) BatchNorm is nearly the identity, which hides folding bugs."""
    import torch

    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            n = m.running_mean.shape[0]
            m.running_mean.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, n).astype(np.float32)))
            m.running_var.copy_(torch.from_numpy(rng.uniform(0.2, 4.0, n).astype(np.float32)))
            if m.affine:
                m.weight.data.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, n).astype(np.float32)))
                m.bias.data.copy_(torch.from_numpy(rng.uniform(-0.2, 0.2, n).astype(np.float32)))


def randomize_constant_parameters(module, rng: np.random.Generator) -> None:
    """Random values for parameters initialised to one small constant, which hide the layers
    they belong to: zero classifier heads (timm's MLP-Mixer and Sequencer returned all-zero
    logits, so the comparison with ONNX Runtime could not fail), layer scales of 1e-5 or
    1e-6 (ConvNeXt, PoolFormer, CaiT, ...: each block's branch reached the output at a
    hundred-thousandth of its size, below the tolerance), GRN's zero gamma and beta. The
    zero biases of linear, convolution and normalization layers stay."""
    import torch

    layers = (
        torch.nn.Linear,
        torch.nn.modules.conv._ConvNd,
        torch.nn.modules.batchnorm._BatchNorm,
        torch.nn.LayerNorm,
        torch.nn.GroupNorm,
    )
    for owner in module.modules():
        for name, parameter in owner.named_parameters(recurse=False):
            values = parameter.detach()
            if values.numel() < 2 or bool(values.max() != values.min()) or float(values.abs().max()) > 1e-3:
                continue
            if isinstance(owner, layers) and name == "bias":
                continue
            shape = tuple(values.shape)
            if values.ndim >= 2:  # a weight matrix: as a fan-in-scaled initialisation would
                new = rng.standard_normal(shape) / np.sqrt(values[0].numel())
            else:  # a scale of a residual branch
                new = rng.uniform(0.2, 0.6, shape)
            parameter.data.copy_(torch.from_numpy(new.astype(np.float32)))


def _image(rng: np.random.Generator, shape=IMAGE) -> dict[str, np.ndarray]:
    return {"input": rng.standard_normal(shape).astype(np.float32)}


def _tokens(rng: np.random.Generator, vocab: int, mask: bool = True) -> dict[str, np.ndarray]:
    ids = rng.integers(0, vocab, (1, SEQ)).astype(np.int64)
    if not mask:
        return {"input_ids": ids}
    attention = np.ones((1, SEQ), dtype=np.int64)
    attention[:, -16:] = 0  # a padded tail, so the mask changes the result
    return {"input_ids": ids, "attention_mask": attention}


def _torchvision(name: str, shape=IMAGE, calibrate: bool = False, **kwargs):
    """``calibrate``: BatchNorm statistics from a batch (calibrate_batchnorm) instead of random
    ones, for nets whose random weights blow activations up (Inception v3 reached 1e10, where
    float32 rounding alone exceeds the zoo's absolute tolerance)."""

    def build(rng):
        module = import_torchvision().models
        for part in name.split("."):  # segmentation.*, video.*
            module = getattr(module, part)
        module = module(weights=None, **kwargs)
        randomize_batchnorm(module, rng)
        randomize_constant_parameters(module, rng)
        inputs = _image(rng, shape)
        if calibrate:
            calibrate_on_images(module, inputs["input"], rng)
        return module, inputs

    return build


def _timm(name: str, shape=IMAGE, calibrate: bool = False):
    """``calibrate`` as ``_torchvision``'s (lambda layers' random weights reach 4e4)."""

    def build(rng):
        import_torchvision()  # timm imports torchvision
        import timm

        module = timm.create_model(name, pretrained=False)
        randomize_batchnorm(module, rng)
        randomize_constant_parameters(module, rng)
        inputs = _image(rng, shape)
        if calibrate:
            calibrate_on_images(module, inputs["input"], rng)
        return module, inputs

    return build


def calibrate_on_images(module, image: np.ndarray, rng: np.random.Generator) -> None:
    """calibrate_batchnorm on ``image`` and three random ones."""
    import torch

    module.eval()
    batch = np.concatenate([image, rng.standard_normal((3, *image.shape[1:])).astype(np.float32)])
    calibrate_batchnorm(module, lambda: module(torch.from_numpy(batch)), rng)


def calibrate_batchnorm(module, run: Callable[[], object], rng: np.random.Generator) -> None:
    """Running statistics from the data (``run`` feeds a batch through ``module`` with every
    BatchNorm in training mode), then randomly perturbed. Random statistics do not follow
    the activations, so through a deep net of random weights the signal decays (depthwise
    convolutions are initialised for fan-out, a factor sqrt(channels) too small) until
    every position sees the same features: a detector's scores then tie across anchors, to
    1e-8, and which of the tied boxes top-k and NMS keep is decided by float rounding."""
    import torch

    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.train()
        m.momentum = 1.0  # the running statistics become this batch's
    run()
    for m, momentum in zip(norms, momenta, strict=True):
        m.eval()
        m.momentum = momentum
        n = m.running_var.shape[0]
        m.running_var.mul_(torch.from_numpy(rng.uniform(0.5, 2.0, n).astype(np.float32)))
        shift = rng.uniform(-0.3, 0.3, n).astype(np.float32)
        m.running_mean.add_(m.running_var.sqrt() * torch.from_numpy(shift))


def _ssdlite(rng):
    """torchvision's ssdlite320_mobilenet_v3_large (random weights, 91 classes), its
    BatchNorm statistics randomised and then calibrated on the image and three random ones
    (see calibrate_batchnorm), and the zoo's 320x320 input."""
    import torch

    models = import_torchvision().models.detection
    detector = models.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    randomize_batchnorm(detector, rng)
    detector.eval()
    inputs = _image(rng, (1, 3, 320, 320))
    extra = rng.standard_normal((3, 3, 320, 320)).astype(np.float32)
    images = torch.from_numpy(np.concatenate([inputs["input"], extra]))
    normalized = detector.transform(list(images))[0].tensors
    calibrate_batchnorm(detector, lambda: detector.head(list(detector.backbone(normalized).values())), rng)
    return detector, inputs


def _detector(rng):
    import torch

    _exportable_batched_nms()
    detector, inputs = _ssdlite(rng)

    class FirstImage(torch.nn.Module):
        """The detector takes a list of images and returns a list of dicts; an exported
        model takes a batch tensor and returns the first image's boxes, scores, labels."""

        def __init__(self):
            super().__init__()
            self.detector = detector

        def forward(self, images):
            result = self.detector(list(images))[0]
            return result["boxes"], result["scores"], result["labels"]

    return FirstImage(), inputs


def _exportable_batched_nms() -> None:
    """torchvision's batched_nms picks per-class NMS or the coordinate trick by the number of
    boxes unless it is being traced by TorchScript, so torch.export stops there ("Could not
    guard on data-dependent expression"; the count depends on the scores), and its
    coordinate trick returns early for no boxes, another guard. While torch.export traces,
    this runs the coordinate trick without those branches (one torchvision::nms, which
    torch.onnx translates to NonMaxSuppression); otherwise torchvision's own."""
    import torch

    boxes_module = import_torchvision().ops.boxes
    original = boxes_module.batched_nms
    if getattr(original, "zoo_exportable", False):
        return

    def batched_nms(boxes, scores, idxs, iou_threshold: float):
        if not torch.compiler.is_exporting():
            return original(boxes, scores, idxs, iou_threshold)
        offsets = idxs.to(boxes) * (boxes.max() + 1)
        return torch.ops.torchvision.nms(boxes + offsets[:, None], scores, iou_threshold)

    batched_nms.zoo_exportable = True
    boxes_module.batched_nms = batched_nms


# ONNX NonMaxSuppression's thresholds in ssd_topk_nms (see _ssd_topk_nms).
TOPK = 200
NMS_MAX_PER_CLASS, NMS_IOU, NMS_SCORE = 100, 0.5, 0.028


def onnx_nms(boxes, scores, max_output_boxes_per_class: int, iou_threshold: float, score_threshold: float):
    """ONNX NonMaxSuppression on one batch and one class: ``boxes`` [N, 4] (two opposite
    corners, center_point_box=0), ``scores`` [N]; returns selected_indices [M, 3] int64
    (batch 0, class 0, box index) as ONNX Runtime does: boxes scoring more than
    score_threshold, by descending score, each kept unless its IoU with a kept box exceeds
    iou_threshold, at most max_output_boxes_per_class (ONNX Runtime leaves the order of
    equal scores unspecified; here the lower index first). A custom op (zoo::onnx_nms): the
    exporters turn it into NonMaxSuppression, eager runs this."""
    return _onnx_nms_op()(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold)


def _onnx_nms_reference(
    boxes, scores, max_output_boxes_per_class: int, iou_threshold: float, score_threshold: float
):
    import torch

    lo = torch.minimum(boxes[:, :2], boxes[:, 2:])
    hi = torch.maximum(boxes[:, :2], boxes[:, 2:])
    area = (hi - lo).prod(dim=1)
    # A stable sort of the negated scores: equal scores keep index order.
    order = torch.sort(-scores, stable=True).indices.tolist()
    keep: list[int] = []
    for i in order:
        if len(keep) >= max_output_boxes_per_class or not scores[i] > score_threshold:
            break
        if keep:
            kept = torch.tensor(keep)
            inter = (torch.minimum(hi[i], hi[kept]) - torch.maximum(lo[i], lo[kept])).clamp(min=0).prod(dim=1)
            union = area[i] + area[kept] - inter
            iou = torch.where((inter > 0) & (area[i] > 0) & (area[kept] > 0), inter / union, 0.0)
            if bool((iou > iou_threshold).any()):
                continue
        keep.append(i)
    selected = torch.zeros((len(keep), 3), dtype=torch.int64)
    selected[:, 2] = torch.tensor(keep, dtype=torch.int64)
    return selected


def _onnx_nms_op():
    """Defines zoo::onnx_nms once: the eager kernel, a fake kernel with a data-dependent
    row count (for torch.export) and the TorchScript exporter's symbolic."""
    import torch

    if hasattr(_onnx_nms_op, "op"):
        return _onnx_nms_op.op

    # An explicit schema: with `from __future__ import annotations` the hints are strings.
    schema = (
        "(Tensor boxes, Tensor scores, int max_output_boxes_per_class, float iou_threshold, "
        "float score_threshold) -> Tensor"
    )
    op = torch.library.custom_op("zoo::onnx_nms", _onnx_nms_reference, mutates_args=(), schema=schema)

    @op.register_fake
    def _(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold):
        count = torch.library.get_ctx().new_dynamic_size(max=min(max_output_boxes_per_class, boxes.shape[0]))
        return boxes.new_empty((count, 3), dtype=torch.int64)

    from torch.onnx import symbolic_opset11
    from torch.onnx.symbolic_helper import parse_args

    @parse_args("v", "v", "i", "f", "f")
    def symbolic(g, boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold):
        unsqueeze = symbolic_opset11.unsqueeze  # axes an attribute before opset 13, an input after
        return g.op(
            "NonMaxSuppression",
            unsqueeze(g, boxes, 0),
            unsqueeze(g, unsqueeze(g, scores, 0), 0),
            g.op("Constant", value_t=torch.tensor([max_output_boxes_per_class], dtype=torch.int64)),
            g.op("Constant", value_t=torch.tensor([iou_threshold], dtype=torch.float32)),
            g.op("Constant", value_t=torch.tensor([score_threshold], dtype=torch.float32)),
        )

    torch.onnx.register_custom_op_symbolic("zoo::onnx_nms", symbolic, 11)
    _onnx_nms_op.op = op
    return op


def _onnx_nms_translation(
    boxes, scores, max_output_boxes_per_class: int, iou_threshold: float, score_threshold: float
):
    """zoo::onnx_nms for torch.onnx.export(dynamo=True): one NonMaxSuppression."""
    from onnxscript import opset18 as op

    return op.NonMaxSuppression(
        op.Unsqueeze(boxes, [0]),
        op.Unsqueeze(scores, [0, 1]),
        op.Constant(value_ints=[max_output_boxes_per_class]),
        op.Constant(value_floats=[iou_threshold]),
        op.Constant(value_floats=[score_threshold]),
    )


def onnx_translation_table() -> dict:
    """The dynamo exporter's translations of the zoo's custom ops (custom_translation_table)."""
    import torch

    _onnx_nms_op()
    return {torch.ops.zoo.onnx_nms.default: _onnx_nms_translation}


def _ssd_topk_nms(rng):
    """SSDlite320 as it is commonly exported for deployment: backbone and SSD head, the
    anchors decoded to boxes (torchvision's anchor generator and box coder on the fixed
    320x320 image; constants), softmax class scores, each anchor's best foreground class,
    a static top-k of those, and ONNX NonMaxSuppression on the top-k boxes as the last
    step, its selected_indices [M, 3] an output that nothing consumes."""
    import torch

    detector, inputs = _ssdlite(rng)
    image = torch.zeros(1, 3, 320, 320)
    normalized = detector.transform(list(image))[0]
    features = list(detector.backbone(normalized.tensors).values())
    anchors = detector.anchor_generator(normalized, features)[0]  # [A, 4], x1 y1 x2 y2
    mean = torch.tensor(detector.transform.image_mean).view(1, 3, 1, 1)
    std = torch.tensor(detector.transform.image_std).view(1, 3, 1, 1)

    class TopKNMS(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = detector.backbone
            self.head = detector.head
            self.box_coder = detector.box_coder
            self.register_buffer("anchors", anchors)
            self.register_buffer("mean", mean)
            self.register_buffer("std", std)

        def forward(self, images):
            head = self.head(list(self.backbone((images - self.mean) / self.std).values()))
            boxes = self.box_coder.decode_single(head["bbox_regression"][0], self.anchors).clamp(0.0, 320.0)
            scores = torch.softmax(head["cls_logits"][0], dim=-1)
            best, labels = scores[:, 1:].max(dim=-1)  # class 0 is the background
            top_scores, top = torch.topk(best, TOPK)
            top_boxes = boxes[top]
            selected = onnx_nms(top_boxes, top_scores, NMS_MAX_PER_CLASS, NMS_IOU, NMS_SCORE)
            return top_boxes, top_scores, labels[top] + 1, selected

    return TopKNMS(), inputs


def _hf_text(config_name: str, model_name: str, outputs: int, mask: bool = True, **config):
    """A transformers model built from a Config (random weights), returning plain tensors."""

    def build(rng):
        import torch
        import transformers

        cfg = getattr(transformers, config_name)(**config)
        model = getattr(transformers, model_name)(cfg)

        class Plain(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask=None):
                kwargs = {"attention_mask": attention_mask} if mask else {}
                if "use_cache" in model.forward.__code__.co_varnames:
                    kwargs["use_cache"] = False
                result = self.model(input_ids, return_dict=False, **kwargs)
                return tuple(result[:outputs])

        return Plain(), _tokens(rng, config["vocab_size"], mask)

    return build


def _whisper_encoder(rng):
    import transformers

    cfg = transformers.WhisperConfig(
        d_model=128,
        encoder_layers=2,
        encoder_attention_heads=2,
        encoder_ffn_dim=512,
        decoder_layers=1,
        decoder_attention_heads=2,
        num_mel_bins=80,
        max_source_positions=100,
    )
    encoder = transformers.WhisperModel(cfg).get_encoder()
    import torch

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_features):
            return self.encoder(input_features, return_dict=False)[0]

    # The encoder requires 2 * max_source_positions frames.
    return Plain(), {"input_features": rng.standard_normal((1, 80, 200)).astype(np.float32)}


def _hf_first_output(config_name: str, model_name: str, inputs: Callable, **config):
    """A transformers model built from a Config (random weights) on ``inputs(rng)``, returning
    its first output (a last hidden state, a segmentation's logits)."""

    def build(rng):
        import torch
        import transformers

        model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))

        class Plain(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *values):
                return self.model(*values, return_dict=False)[0]

        return Plain(), inputs(rng)

    return build


def _pixels(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"pixel_values": _image(rng)["input"]}


# Wav2Vec2's and WavLM's size: 2 small layers over a feature extractor of 64 channels.
SMALL_AUDIO_ENCODER = dict(
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=512,
    conv_dim=(64,) * 7,
    num_conv_pos_embeddings=32,
    num_conv_pos_embedding_groups=4,
)


def _audio(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input_values": rng.standard_normal((1, 16000)).astype(np.float32)}  # 1 s at 16 kHz


def _unet(rng):
    """The standard U-Net (Ronneberger et al.): two 3x3 conv-BN-ReLU per level, max-pool down,
    2x2 transposed conv up, skip concatenation; 16 base channels, 4 levels."""
    import torch
    from torch import nn

    def double_conv(cin, cout):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    class UNet(nn.Module):
        def __init__(self, channels=(16, 32, 64, 128, 256), classes=2):
            super().__init__()
            self.down = nn.ModuleList()
            cin = 3
            for c in channels:
                self.down.append(double_conv(cin, c))
                cin = c
            self.up = nn.ModuleList()
            self.up_conv = nn.ModuleList()
            for c in reversed(channels[:-1]):
                self.up.append(nn.ConvTranspose2d(cin, c, 2, stride=2))
                self.up_conv.append(double_conv(2 * c, c))
                cin = c
            self.head = nn.Conv2d(cin, classes, 1)

        def forward(self, x):
            skips = []
            for i, block in enumerate(self.down):
                x = block(x if i == 0 else nn.functional.max_pool2d(x, 2))
                skips.append(x)
            for up, conv, skip in zip(self.up, self.up_conv, reversed(skips[:-1]), strict=True):
                x = conv(torch.cat([skip, up(x)], dim=1))
            return self.head(x)

    module = UNet()
    randomize_batchnorm(module, rng)
    return module, _image(rng, (1, 3, 256, 256))


def _recurrent(kind: str, layers: int, bidirectional: bool):
    """A sequence classifier: nn.LSTM / nn.GRU / nn.RNN over 32 steps, then a linear head on
    every step's output (the final states are returned too, as users export them)."""

    def build(rng):
        from torch import nn

        class Recurrent(nn.Module):
            def __init__(self):
                super().__init__()
                cell = getattr(nn, kind)
                self.rnn = cell(32, 64, num_layers=layers, batch_first=True, bidirectional=bidirectional)
                self.head = nn.Linear(64 * (2 if bidirectional else 1), 10)

            def forward(self, x):
                out, state = self.rnn(x)
                hidden = state[0] if isinstance(state, tuple) else state
                return self.head(out), hidden

        return Recurrent(), {"input": rng.standard_normal((1, 32, 32)).astype(np.float32)}

    return build


def _recommender(rng):
    """DLRM-like: a bottom MLP on dense features, sum-pooled EmbeddingBags over fixed-size bags
    of categorical ids plus one plain Embedding, their pairwise dot products, a top MLP."""
    import torch
    from torch import nn

    tables = (100000, 20000, 5000)

    class Recommender(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
            self.bags = nn.ModuleList(nn.EmbeddingBag(n, 32, mode="sum") for n in tables)
            self.user = nn.Embedding(1000, 32)
            self.top = nn.Sequential(nn.Linear(32 + 10, 64), nn.ReLU(), nn.Linear(64, 1))  # 10 pairs of 5

        def forward(self, dense, sparse, user):
            features = [self.bottom(dense)]
            features += [bag(sparse[:, i, :]) for i, bag in enumerate(self.bags)]
            features.append(self.user(user))
            stacked = torch.stack(features, dim=1)  # [1, 5, 32]
            dots = torch.bmm(stacked, stacked.transpose(1, 2))
            upper = torch.triu_indices(5, 5, offset=1)
            pairs = dots[:, upper[0], upper[1]]
            return torch.sigmoid(self.top(torch.cat([features[0], pairs], dim=1)))

    sparse = np.stack([rng.integers(0, min(tables), (1, 8)) for _ in tables], axis=1).astype(np.int64)
    inputs = {
        "dense": rng.standard_normal((1, 13)).astype(np.float32),
        "sparse": sparse,
        "user": rng.integers(0, 1000, (1,)).astype(np.int64),
    }
    return Recommender(), inputs


def _spec(key: str, source: str, build, outputs=("output",)) -> ModelSpec:
    return ModelSpec(key, source, build, tuple(outputs))


_BERT = dict(
    vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512
)
MODELS: dict[str, ModelSpec] = {
    s.key: s
    for s in [
        _spec("resnet18", "torchvision", _torchvision("resnet18")),
        _spec("resnet50", "torchvision", _torchvision("resnet50")),
        _spec("mobilenet_v2", "torchvision", _torchvision("mobilenet_v2")),
        _spec("mobilenet_v3_small", "torchvision", _torchvision("mobilenet_v3_small")),
        _spec("mobilenet_v3_large", "torchvision", _torchvision("mobilenet_v3_large")),
        _spec("efficientnet_b0", "torchvision", _torchvision("efficientnet_b0")),
        _spec("densenet121", "torchvision", _torchvision("densenet121")),
        _spec(
            "inception_v3",
            "torchvision",
            _torchvision(
                "inception_v3", (1, 3, 299, 299), calibrate=True, aux_logits=False, init_weights=True
            ),
        ),
        _spec("googlenet", "torchvision", _torchvision("googlenet", aux_logits=False, init_weights=True)),
        _spec("squeezenet1_1", "torchvision", _torchvision("squeezenet1_1")),
        _spec("shufflenet_v2_x1_0", "torchvision", _torchvision("shufflenet_v2_x1_0")),
        _spec("vgg11", "torchvision", _torchvision("vgg11")),
        _spec("alexnet", "torchvision", _torchvision("alexnet")),
        _spec("regnet_y_400mf", "torchvision", _torchvision("regnet_y_400mf")),
        _spec("convnext_tiny", "torchvision", _torchvision("convnext_tiny")),
        _spec("vit_tiny", "timm", _timm("vit_tiny_patch16_224")),
        _spec("deit_tiny", "timm", _timm("deit_tiny_patch16_224")),
        _spec("swin_tiny", "timm", _timm("swin_tiny_patch4_window7_224")),
        _spec("unet", "own", _unet),
        _spec("ssdlite320", "torchvision", _detector, ("boxes", "scores", "labels")),
        _spec("ssd_topk_nms", "torchvision", _ssd_topk_nms, ("boxes", "scores", "labels", "selected")),
        _spec(
            "bert",
            "transformers",
            _hf_text("BertConfig", "BertModel", 2, **_BERT),
            ("last_hidden_state", "pooler_output"),
        ),
        _spec(
            "distilbert",
            "transformers",
            _hf_text(
                "DistilBertConfig",
                "DistilBertModel",
                1,
                vocab_size=30522,
                dim=128,
                n_layers=2,
                n_heads=2,
                hidden_dim=512,
            ),
            ("last_hidden_state",),
        ),
        # The real GPT-2 vocabulary and its LM head tied to the token embedding; 2 small layers.
        _spec(
            "gpt2",
            "transformers",
            _hf_text(
                "GPT2Config",
                "GPT2LMHeadModel",
                1,
                mask=False,
                vocab_size=50257,
                n_positions=SEQ,
                n_embd=128,
                n_layer=2,
                n_head=2,
            ),
            ("logits",),
        ),
        _spec(
            "t5_encoder",
            "transformers",
            _hf_text(
                "T5Config",
                "T5EncoderModel",
                1,
                vocab_size=32128,
                d_model=128,
                d_kv=32,
                d_ff=512,
                num_layers=2,
                num_heads=4,
            ),
            ("last_hidden_state",),
        ),
        _spec("whisper_encoder", "transformers", _whisper_encoder, ("last_hidden_state",)),
        _spec("lstm", "own", _recurrent("LSTM", 2, True), ("output", "hidden")),
        _spec("gru", "own", _recurrent("GRU", 1, False), ("output", "hidden")),
        _spec("rnn", "own", _recurrent("RNN", 2, True), ("output", "hidden")),
        _spec("recommender", "own", _recommender, ("probability",)),
        # Added in session 11, first run at the commit that added them (models the
        # schedules were not written for): grouped convs, ghost and pooling token mixers,
        # MLP-Mixer, LeViT's conv-attention hybrid, MobileViT's unfold/fold, a Llama decoder
        # (RMSNorm, rotary embeddings, grouped-query attention, SiLU gate), ALBERT's shared
        # layers and MobileBERT's bottlenecks.
        _spec("resnext50_32x4d", "torchvision", _torchvision("resnext50_32x4d")),
        _spec("mnasnet0_5", "torchvision", _torchvision("mnasnet0_5")),
        _spec("regnet_x_400mf", "torchvision", _torchvision("regnet_x_400mf")),
        _spec("ghostnet_050", "timm", _timm("ghostnet_050")),
        _spec("poolformer_s12", "timm", _timm("poolformer_s12")),
        _spec("levit_128s", "timm", _timm("levit_128s")),
        _spec("mobilevit_xs", "timm", _timm("mobilevit_xs")),
        _spec("mixer_s16", "timm", _timm("mixer_s16_224")),
        _spec(
            "llama",
            "transformers",
            _hf_text(
                "LlamaConfig",
                "LlamaForCausalLM",
                1,
                mask=False,
                vocab_size=32000,
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=SEQ,
            ),
            ("logits",),
        ),
        _spec(
            "albert",
            "transformers",
            _hf_text(
                "AlbertConfig",
                "AlbertModel",
                2,
                vocab_size=30000,
                embedding_size=64,
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=256,
            ),
            ("last_hidden_state", "pooler_output"),
        ),
        # Added in session 21, first run at the commit that added them: fused MBConv, MaxViT's
        # block and grid attention with relative position bias, Swin v2's cosine attention and
        # continuous position bias, EfficientFormer's meta-blocks, DeBERTa's disentangled
        # attention (relative-position gathers), Wav2Vec2's audio front end.
        _spec("efficientnet_v2_s", "torchvision", _torchvision("efficientnet_v2_s")),
        _spec("maxvit_t", "torchvision", _torchvision("maxvit_t")),
        _spec("swin_v2_t", "torchvision", _torchvision("swin_v2_t")),
        _spec("efficientformer_l1", "timm", _timm("efficientformer_l1")),
        _spec(
            "deberta_v2",
            "transformers",
            _hf_text(
                "DebertaV2Config",
                "DebertaV2Model",
                1,
                vocab_size=32000,
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=512,
                max_position_embeddings=SEQ,
                relative_attention=True,
                position_buckets=64,
                pos_att_type=["p2c", "c2p"],
            ),
            ("last_hidden_state",),
        ),
        # Wav2Vec2: a strided conv1d feature extractor with a group norm, a grouped positional
        # conv1d, GELU; 2 small layers on one second of audio
        _spec(
            "wav2vec2",
            "transformers",
            _hf_first_output(
                "Wav2Vec2Config",
                "Wav2Vec2Model",
                _audio,
                **SMALL_AUDIO_ENCODER,
            ),
            ("last_hidden_state",),
        ),
        # Second batch: LR-ASPP's segmentation head (bilinear Resize, sigmoid gating), a 3D
        # ResNet (Conv3d) on 8 frames, EfficientViT's ReLU linear attention, XCiT's
        # cross-covariance attention, NFNet's weight standardization, EdgeNeXt's transposed
        # attention, SegFormer.
        _spec(
            "lraspp_mobilenet_v3",
            "torchvision",
            _torchvision("segmentation.lraspp_mobilenet_v3_large", weights_backbone=None),
        ),
        _spec("r3d_18", "torchvision", _torchvision("video.r3d_18", (1, 3, 8, 112, 112))),
        _spec("efficientvit_b0", "timm", _timm("efficientvit_b0")),
        _spec("xcit_nano", "timm", _timm("xcit_nano_12_p16_224")),
        _spec("nfnet_l0", "timm", _timm("nfnet_l0")),
        _spec("edgenext_xx_small", "timm", _timm("edgenext_xx_small")),
        # SegFormer, one block a stage: overlapping patch embeddings, attention over spatially
        # reduced keys, Mix-FFN's depthwise conv, an all-MLP decoder to a quarter of the image
        _spec(
            "segformer",
            "transformers",
            _hf_first_output(
                "SegformerConfig",
                "SegformerForSemanticSegmentation",
                _pixels,
                depths=[1, 1, 1, 1],
                hidden_sizes=[16, 32, 80, 128],
                decoder_hidden_size=64,
                num_labels=5,
            ),
            ("logits",),
        ),
        # Third batch: BiT's weight-standardized ResNet v2, MobileOne and FastViT (train-time
        # branches), DINOv2 (position embeddings interpolated bicubically), CLIP's vision
        # tower, DeepLab v3's atrous pyramid.
        _spec("bit_resnetv2_50", "timm", _timm("resnetv2_50x1_bit")),
        _spec("mobileone_s0", "timm", _timm("mobileone_s0")),
        _spec("fastvit_t8", "timm", _timm("fastvit_t8")),
        _spec(
            "dinov2",
            "transformers",
            _hf_first_output(
                "Dinov2Config",
                "Dinov2Model",
                _pixels,
                hidden_size=192,
                num_hidden_layers=2,
                num_attention_heads=3,
                image_size=518,
                patch_size=14,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "clip_vision",
            "transformers",
            _hf_first_output(
                "CLIPVisionConfig",
                "CLIPVisionModel",
                _pixels,
                hidden_size=192,
                intermediate_size=768,
                num_hidden_layers=2,
                num_attention_heads=3,
                image_size=224,
                patch_size=16,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "deeplabv3_mobilenet_v3",
            "torchvision",
            _torchvision("segmentation.deeplabv3_mobilenet_v3_large", weights_backbone=None, aux_loss=False),
        ),
        # Fourth batch: VOLO's outlook attention (unfold / fold), Sequencer's bidirectional
        # LSTMs over rows and columns, MobileViT v2's separable attention, HRNet's
        # multi-resolution fusion, ConvNeXt v2's global response norm, CaiT's talking heads
        # and class attention, MobileNet v4, HaloNet's blocked local attention, CrossViT's
        # two scales; BLOOM's ALiBi, BART (encoder-decoder), ConvBERT's span-based dynamic
        # convolution, Phi's partial rotary embeddings and parallel blocks.
        _spec("volo_d1", "timm", _timm("volo_d1_224")),
        _spec("sequencer2d_s", "timm", _timm("sequencer2d_s")),
        _spec("mobilevitv2_050", "timm", _timm("mobilevitv2_050", (1, 3, 256, 256))),
        _spec("hrnet_w18_small", "timm", _timm("hrnet_w18_small")),
        _spec("convnextv2_atto", "timm", _timm("convnextv2_atto")),
        _spec("cait_xxs24", "timm", _timm("cait_xxs24_224")),
        _spec("mobilenetv4_conv_small", "timm", _timm("mobilenetv4_conv_small")),
        _spec("halonet26t", "timm", _timm("halonet26t", (1, 3, 256, 256))),
        _spec("crossvit_9", "timm", _timm("crossvit_9_240", (1, 3, 240, 240))),
        _spec(
            "bloom",
            "transformers",
            _hf_text("BloomConfig", "BloomModel", 1, vocab_size=32000, hidden_size=128, n_layer=2, n_head=4),
            ("last_hidden_state",),
        ),
        _spec(
            "bart",
            "transformers",
            _hf_text(
                "BartConfig",
                "BartModel",
                1,
                vocab_size=32000,
                d_model=128,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=256,
                decoder_ffn_dim=256,
                max_position_embeddings=SEQ,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "convbert",
            "transformers",
            _hf_text(
                "ConvBertConfig",
                "ConvBertModel",
                1,
                vocab_size=30522,
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=256,
                embedding_size=128,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "phi",
            "transformers",
            _hf_text(
                "PhiConfig",
                "PhiModel",
                1,
                vocab_size=32000,
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=4,
                partial_rotary_factor=0.5,
                max_position_embeddings=SEQ,
            ),
            ("last_hidden_state",),
        ),
        # Fifth batch: ResNeSt's split attention (a softmax over radix groups), SKNet's
        # selective kernels, PVT v2's spatial-reduction attention, Res2Net's hierarchical
        # splits, gMLP's spatial gating, TinyViT, EfficientViT-M's cascaded group attention,
        # StarNet's elementwise products, MambaOut's gated convs, GhostNet v2's DFC attention,
        # EVA-02's rotary embeddings and SwiGLU, DLA's aggregation trees, CoaT's convolutional
        # relative position encoding; GPT-Neo's local attention, MPNet's relative position
        # buckets, SqueezeBERT's grouped 1-d convs, BEiT's relative position bias, Funnel's
        # sequence pooling and upsampling, ESM's rotary embeddings.
        _spec("resnest14d", "timm", _timm("resnest14d")),
        _spec("skresnet18", "timm", _timm("skresnet18")),
        _spec("pvt_v2_b0", "timm", _timm("pvt_v2_b0")),
        _spec("res2net50_14w_8s", "timm", _timm("res2net50_14w_8s")),
        _spec("gmlp_s16", "timm", _timm("gmlp_s16_224")),
        _spec("tiny_vit_5m", "timm", _timm("tiny_vit_5m_224")),
        _spec("efficientvit_m0", "timm", _timm("efficientvit_m0")),
        _spec("starnet_s1", "timm", _timm("starnet_s1")),
        _spec("mambaout_femto", "timm", _timm("mambaout_femto")),
        _spec("ghostnetv2_100", "timm", _timm("ghostnetv2_100")),
        _spec("eva02_tiny", "timm", _timm("eva02_tiny_patch14_224")),
        _spec("dla34", "timm", _timm("dla34")),
        _spec("coat_lite_tiny", "timm", _timm("coat_lite_tiny")),
        _spec(
            "gpt_neo",
            "transformers",
            _hf_text(
                "GPTNeoConfig",
                "GPTNeoModel",
                1,
                vocab_size=32000,
                hidden_size=128,
                num_layers=2,
                num_heads=4,
                attention_types=[[["global", "local"], 1]],
                window_size=32,
                max_position_embeddings=SEQ,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "mpnet",
            "transformers",
            _hf_text(
                "MPNetConfig",
                "MPNetModel",
                1,
                vocab_size=30527,
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=256,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "squeezebert",
            "transformers",
            _hf_text(
                "SqueezeBertConfig",
                "SqueezeBertModel",
                1,
                vocab_size=30528,
                hidden_size=128,
                embedding_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=256,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "beit",
            "transformers",
            _hf_first_output(
                "BeitConfig",
                "BeitModel",
                _pixels,
                hidden_size=192,
                intermediate_size=768,
                num_hidden_layers=2,
                num_attention_heads=3,
                image_size=224,
                patch_size=16,
                use_relative_position_bias=True,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "funnel",
            "transformers",
            _hf_text(
                "FunnelConfig",
                "FunnelModel",
                1,
                vocab_size=30522,
                block_sizes=[1, 1, 1],
                d_model=128,
                n_head=4,
                d_head=32,
                d_inner=256,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "esm",
            "transformers",
            _hf_text(
                "EsmConfig",
                "EsmModel",
                1,
                vocab_size=33,
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=256,
                position_embedding_type="rotary",
                pad_token_id=1,
                mask_token_id=32,
                max_position_embeddings=SEQ + 2,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "mobilebert",
            "transformers",
            _hf_text("MobileBertConfig", "MobileBertModel", 1, vocab_size=30522, num_hidden_layers=2),
            ("last_hidden_state",),
        ),
        # Sixth batch: MixNet's mixed depthwise kernel sizes, ECA's 1-d conv across channels,
        # lambda layers, BoTNet's relative-position attention in a conv net, TResNet's
        # space-to-depth stem and anti-aliased downsampling, DPN's dual paths, Xception's
        # separable convs, FocalNet's focal modulation, Hiera's unrolled tokens, InceptionNeXt's
        # band kernels (1 x 11, 11 x 1), TNT's inner transformer, PPHGNet v2, EfficientFormer v2,
        # MViT v2's pooling attention; Mistral's sliding window, Qwen3's query/key norms, OPT,
        # FNet's Fourier transforms, XLNet's relative attention, ModernBERT's alternating local
        # and global attention, WavLM's gated relative position bias.
        _spec("mixnet_s", "timm", _timm("mixnet_s")),
        _spec("ecaresnet26t", "timm", _timm("ecaresnet26t")),
        _spec("lambda_resnet26t", "timm", _timm("lambda_resnet26t", (1, 3, 256, 256), calibrate=True)),
        _spec("botnet26t", "timm", _timm("botnet26t_256", (1, 3, 256, 256))),
        _spec("tresnet_m", "timm", _timm("tresnet_m")),
        _spec("dpn68", "timm", _timm("dpn68")),
        _spec("xception41", "timm", _timm("xception41")),
        _spec("focalnet_tiny", "timm", _timm("focalnet_tiny_srf")),
        _spec("hiera_tiny", "timm", _timm("hiera_tiny_224")),
        _spec("inception_next_tiny", "timm", _timm("inception_next_tiny")),
        _spec("tnt_s", "timm", _timm("tnt_s_patch16_224")),
        _spec("hgnetv2_b0", "timm", _timm("hgnetv2_b0")),
        _spec("efficientformerv2_s0", "timm", _timm("efficientformerv2_s0")),
        _spec("mvitv2_tiny", "timm", _timm("mvitv2_tiny")),
        _spec(
            "mistral",
            "transformers",
            _hf_text(
                "MistralConfig",
                "MistralModel",
                1,
                vocab_size=32000,
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                sliding_window=32,
                max_position_embeddings=SEQ,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "qwen3",
            "transformers",
            _hf_text(
                "Qwen3Config",
                "Qwen3Model",
                1,
                vocab_size=32000,
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=32,
                max_position_embeddings=SEQ,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "opt",
            "transformers",
            _hf_text(
                "OPTConfig",
                "OPTModel",
                1,
                vocab_size=32000,
                hidden_size=128,
                word_embed_proj_dim=128,
                ffn_dim=512,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=SEQ + 2,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "fnet",
            "transformers",
            _hf_text(
                "FNetConfig",
                "FNetModel",
                1,
                mask=False,
                vocab_size=32000,
                hidden_size=128,
                intermediate_size=512,
                num_hidden_layers=2,
                max_position_embeddings=SEQ,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "xlnet",
            "transformers",
            _hf_text(
                "XLNetConfig",
                "XLNetModel",
                1,
                vocab_size=32000,
                d_model=128,
                n_layer=2,
                n_head=4,
                d_inner=512,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "modernbert",
            "transformers",
            _hf_text(
                "ModernBertConfig",
                "ModernBertModel",
                1,
                vocab_size=32000,
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=3,
                num_attention_heads=4,
                global_attn_every_n_layers=3,
                local_attention=32,
                max_position_embeddings=SEQ,
                pad_token_id=0,
                bos_token_id=1,
                eos_token_id=2,
                cls_token_id=1,
                sep_token_id=2,
            ),
            ("last_hidden_state",),
        ),
        _spec(
            "wavlm",
            "transformers",
            _hf_first_output(
                "WavLMConfig",
                "WavLMModel",
                _audio,
                **SMALL_AUDIO_ENCODER,
            ),
            ("last_hidden_state",),
        ),
    ]
}


def _entries(model: str, *exporters: str, ci: str | None = None) -> list[Entry]:
    out = []
    for exporter in exporters:
        base, _, edit = exporter.partition(":")
        out.append(Entry(model, base, edit or None, ci=exporter == ci))
    return out


ENTRIES: list[Entry] = [
    *_entries("squeezenet1_1", "onnx9", "onnx9:caffe2", "pt2", ci="onnx9:caffe2"),
    *_entries("mobilenet_v3_small", "onnx17", "dynamo"),
    *_entries("bert", "onnx17", "dynamo", "pt2", ci="onnx17"),
    *_entries("gpt2", "onnx17", "dynamo", "pt2", ci="pt2"),
    *_entries("gru", "onnx11", "pt2"),
    *_entries("lstm", "onnx13", "pt2"),
    *_entries("rnn", "onnx17", "pt2"),
    *_entries("resnet18", "onnx13", "dynamo", "pt2"),
    *_entries("resnet50", "onnx9", "onnx17"),
    *_entries("mobilenet_v2", "onnx11", "pt2"),
    *_entries("mobilenet_v3_large", "onnx13"),
    *_entries("efficientnet_b0", "onnx13", "dynamo"),
    *_entries("densenet121", "onnx11"),
    *_entries("inception_v3", "onnx11"),
    *_entries("googlenet", "onnx9", "onnx9:caffe2"),
    *_entries("shufflenet_v2_x1_0", "onnx9", "onnx13"),
    *_entries("vgg11", "onnx9"),
    *_entries("alexnet", "onnx9", "onnx9:caffe2", "onnx9:caffe2-ir3"),
    *_entries("regnet_y_400mf", "onnx13"),
    *_entries("convnext_tiny", "onnx17", "dynamo"),
    *_entries("vit_tiny", "onnx17", "dynamo", "pt2"),
    *_entries("deit_tiny", "onnx14"),
    *_entries("swin_tiny", "onnx17"),
    *_entries("unet", "onnx11", "pt2"),
    *_entries("ssdlite320", "onnx11", "dynamo"),
    # Not in the CI slice (2+ minutes there); TopK and NonMaxSuppression are checked against
    # ONNX Runtime in tests/e2e/test_sorting.py and under the sanitizers (data_dependent).
    *_entries("ssd_topk_nms", "onnx11", "dynamo"),
    *_entries("distilbert", "onnx14", "pt2"),  # SDPA exports from opset 14
    *_entries("t5_encoder", "onnx17"),
    *_entries("whisper_encoder", "onnx17", "pt2"),
    *_entries("recommender", "onnx13", "pt2"),
    *_entries("resnext50_32x4d", "onnx17"),
    *_entries("mnasnet0_5", "onnx13"),
    *_entries("regnet_x_400mf", "onnx17"),
    *_entries("ghostnet_050", "onnx17"),
    *_entries("poolformer_s12", "onnx17"),
    *_entries("levit_128s", "onnx17"),
    *_entries("mobilevit_xs", "onnx17"),
    *_entries("mixer_s16", "onnx17"),
    *_entries("llama", "dynamo", "pt2"),  # the TorchScript exporter refuses SDPA with GQA
    *_entries("albert", "onnx17"),
    *_entries("mobilebert", "onnx17"),
    *_entries("efficientnet_v2_s", "onnx17"),
    *_entries("maxvit_t", "onnx17"),
    *_entries("swin_v2_t", "onnx17"),
    *_entries("efficientformer_l1", "onnx17"),
    *_entries("deberta_v2", "onnx17"),
    *_entries("wav2vec2", "onnx17"),
    *_entries("lraspp_mobilenet_v3", "onnx17"),
    *_entries("r3d_18", "onnx17"),
    *_entries("efficientvit_b0", "onnx17"),
    *_entries("xcit_nano", "onnx17"),
    *_entries("nfnet_l0", "onnx17"),
    *_entries("edgenext_xx_small", "onnx17"),
    *_entries("segformer", "onnx17"),
    *_entries("bit_resnetv2_50", "onnx17"),
    *_entries("mobileone_s0", "onnx17"),
    *_entries("fastvit_t8", "onnx17"),
    *_entries("dinov2", "onnx17"),
    *_entries("clip_vision", "onnx17"),
    *_entries("deeplabv3_mobilenet_v3", "onnx17"),
    # The fourth batch with the exporter torch.onnx.export uses by default (dynamo) and the
    # TorchScript one.
    *_entries("volo_d1", "dynamo", "pt2"),  # the TorchScript exporter fails on col2im (F.fold)
    *_entries("sequencer2d_s", "dynamo", "onnx17"),
    *_entries("mobilevitv2_050", "dynamo", "onnx17"),
    *_entries("hrnet_w18_small", "dynamo", "onnx17"),
    *_entries("convnextv2_atto", "dynamo", "onnx17"),
    *_entries("cait_xxs24", "dynamo", "onnx17"),
    *_entries("mobilenetv4_conv_small", "dynamo", "onnx17"),
    *_entries("halonet26t", "dynamo", "onnx17"),
    *_entries("crossvit_9", "dynamo", "onnx17"),
    *_entries("bloom", "dynamo", "onnx17"),
    *_entries("bart", "dynamo", "onnx17"),
    *_entries("convbert", "dynamo", "onnx17"),
    *_entries("phi", "dynamo", "onnx17"),
    # The fifth batch, with the default exporter (dynamo) and the TorchScript one.
    *_entries("resnest14d", "dynamo", "onnx17"),
    *_entries("skresnet18", "dynamo", "onnx17"),
    *_entries("pvt_v2_b0", "dynamo", "onnx17"),
    *_entries("res2net50_14w_8s", "dynamo", "onnx17"),
    *_entries("gmlp_s16", "dynamo", "onnx17"),
    *_entries("tiny_vit_5m", "dynamo", "onnx17"),
    *_entries("efficientvit_m0", "dynamo", "onnx17"),
    *_entries("starnet_s1", "dynamo", "onnx17"),
    *_entries("mambaout_femto", "dynamo", "onnx17"),
    *_entries("ghostnetv2_100", "dynamo", "onnx17"),
    *_entries("eva02_tiny", "dynamo"),  # the TorchScript exporter fails on its SDPA (is_causal a tensor)
    *_entries("dla34", "dynamo", "onnx17"),
    *_entries("coat_lite_tiny", "dynamo", "onnx17"),
    *_entries("gpt_neo", "dynamo", "onnx17"),
    *_entries("mpnet", "dynamo", "onnx17"),
    *_entries("squeezebert", "dynamo", "onnx17"),
    *_entries("beit", "dynamo", "onnx17"),
    *_entries("funnel", "dynamo", "onnx17"),
    *_entries("esm", "dynamo", "onnx17"),
    # The sixth batch, with the default exporter (dynamo) and the TorchScript one.
    *_entries("mixnet_s", "dynamo", "onnx17"),
    *_entries("ecaresnet26t", "dynamo", "onnx17"),
    *_entries("lambda_resnet26t", "dynamo", "onnx17"),
    *_entries("botnet26t", "dynamo", "onnx17"),
    *_entries("tresnet_m", "dynamo", "onnx17"),
    *_entries("dpn68", "dynamo", "onnx17"),
    *_entries("xception41", "dynamo", "onnx17"),
    *_entries("focalnet_tiny", "dynamo", "onnx17"),
    *_entries("hiera_tiny", "pt2", "onnx17"),  # the dynamo exporter refuses its 5-d SDPA
    *_entries("inception_next_tiny", "dynamo", "onnx17"),
    *_entries("tnt_s", "dynamo", "onnx17"),
    *_entries("hgnetv2_b0", "dynamo", "onnx17"),
    *_entries("efficientformerv2_s0", "dynamo", "onnx17"),
    *_entries("mvitv2_tiny", "dynamo", "onnx17"),
    *_entries("mistral", "dynamo", "onnx17"),
    *_entries("qwen3", "dynamo", "onnx17"),
    *_entries("opt", "dynamo", "onnx17"),
    *_entries("fnet", "dynamo", "pt2"),  # TorchScript has no fft_fftn; the .pt2 fails in gen (_fft_c2c)
    *_entries("xlnet", "pt2", "onnx17"),  # the dynamo exporter fails on its relative positions (aten.sub)
    *_entries("modernbert", "dynamo", "onnx17"),
    *_entries("wavlm", "dynamo", "onnx17"),
]


def model_rng(key: str) -> np.random.Generator:
    """One fixed generator per model, so its weights' statistics and inputs never change."""
    return np.random.default_rng(zlib.crc32(key.encode()))
