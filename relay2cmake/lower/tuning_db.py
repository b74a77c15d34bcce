"""The tuning database that ``relay2cmake tune`` writes (``tune.py``) and ``gen --tuning-db``
replays: records of MetaSchedule traces, kept only where a kernel ran faster than with the
default schedule, applied in the object set of the tuned target (other sets keep the default
schedules).

A record names its kernel by a hash of the unscheduled PrimFunc (symbol name removed), so
a database made for one model applies to any package of it, whatever ``--name``, and to
the kernels other models share with it. The file is JSON, sorted, and holds MetaSchedule's
traces in TVM's own serialization.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from relay2cmake.errors import UserError

if TYPE_CHECKING:
    from tvm.tirx import PrimFunc

FORMAT = "relay2cmake-tuning-1"


@dataclass(frozen=True)
class TuningRecord:
    kernel: str  # the kernel's name in the model it was tuned for (for people)
    workload: str  # hash of the unscheduled PrimFunc: what a record applies to
    trace: str  # MetaSchedule's trace (tvm.ir.save_json of Trace.as_json())
    tuned_us: float
    default_us: float


@dataclass(frozen=True)
class TuningDatabase:
    target: str  # the kernel set it was tuned for, e.g. "x86_64:x86-64-v3"
    records: tuple[TuningRecord, ...]

    def by_workload(self) -> dict[str, TuningRecord]:
        return {r.workload: r for r in self.records}


def normalized(func: PrimFunc) -> PrimFunc:
    """A copy of the PrimFunc as MetaSchedule sees it: named ``main``, whatever the package
    prefix, and a deep copy (``schedules.deep_copy``: scheduling it leaves ``func`` alone)."""
    from relay2cmake.lower.schedules import deep_copy

    return deep_copy(func).with_attr("global_symbol", "main")


def workload_hash(func: PrimFunc) -> str:
    import tvm_ffi

    return f"{tvm_ffi.structural_hash(normalized(func)) & (2**64 - 1):016x}"


def load(path: Path) -> TuningDatabase:
    """A database written by ``tune``, or a UserError that says what is wrong with it."""
    try:
        document = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"--tuning-db {str(path)!r} does not exist.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"--tuning-db {str(path)!r} is not readable JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise UserError(f"--tuning-db {str(path)!r} is not a relay2cmake tuning database ({FORMAT}).")
    try:
        records = tuple(TuningRecord(**r) for r in document["records"])
        return TuningDatabase(target=str(document["target"]), records=records)
    except (KeyError, TypeError) as exc:
        raise UserError(f"--tuning-db {str(path)!r} is damaged: {exc}") from None


def save(database: TuningDatabase, path: Path) -> None:
    document = {
        "format": FORMAT,
        "target": database.target,
        "records": [asdict(r) for r in sorted(database.records, key=lambda r: r.workload)],
    }
    Path(path).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


def apply(func: PrimFunc, record: TuningRecord) -> PrimFunc | None:
    """``func`` scheduled by the record's trace (same global symbol), or None if the trace
    no longer applies (a different TVM)."""
    import tvm
    from tvm import s_tir

    try:
        sch = s_tir.Schedule(normalized(func))
        s_tir.schedule.Trace.apply_json_to_schedule(tvm.ir.load_json(record.trace), sch)
    except Exception:  # a trace from another TVM version: the default schedule stays
        return None
    return sch.mod["main"].with_attr("global_symbol", func.attrs["global_symbol"])
