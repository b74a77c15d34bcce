"""What ``relay2cmake inspect`` reports, the same for every model format."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class TensorReport:
    name: str
    dtype: str
    shape: list[int | str]  # symbolic dimensions by name ("?" when unnamed)


@dataclass(frozen=True)
class Report:
    model: str
    format: str  # "ONNX", "PyTorch ExportedProgram", "TVMScript (Relax)"
    opset: int | None  # ONNX's default-domain opset; None for the other formats
    inputs: list[TensorReport]
    outputs: list[TensorReport]
    operators: dict[str, int]
    nodes: int
    parameters: int
    parameter_bytes: int
    unsupported: list[str]
    estimated_arena_bytes: int | None  # None: shapes unknown (symbolic, or inference failed)
    # Quantized models: the operators that compute in integers (after QDQ folding) and the
    # computing ones that stay float; both empty for other models.
    integer_operators: dict[str, int] = field(default_factory=dict)
    float_operators: dict[str, int] = field(default_factory=dict)

    @property
    def lowerable(self) -> bool:
        return not self.unsupported

    def as_dict(self) -> dict:
        return {**asdict(self), "lowerable": self.lowerable}
