"""The runtimes our packages are measured against, each in a process of its own.

``Worker(runtime, model, inputs, threads)`` starts ``python benchmarks/runtimes.py`` as a
child that loads the model once (ONNX Runtime's CPU provider with every graph optimisation,
or OpenVINO's CPU plugin with the latency hint and f32 precision) and then, for every
``median_ms(runs)`` asked, runs it that many times and answers with the median. A child of
its own keeps each runtime's thread pool out of the others' way (ONNX Runtime's workers spin
after a run), and it lets rounds of the three runtimes interleave without reloading models.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RUNTIMES = ("ort", "openvino")
LABELS = {"ort": "ONNX Runtime", "openvino": "OpenVINO"}


def _onnxruntime(model: Path, threads: int, inputs: dict[str, np.ndarray]):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feeds = {n: inputs[n] for n in names}
    return lambda: session.run(None, feeds)


def _openvino(model: Path, threads: int, inputs: dict[str, np.ndarray]):
    import openvino

    core = openvino.Core()
    config = {
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32",
    }
    compiled = core.compile_model(core.read_model(str(model)), "CPU", config)
    request = compiled.create_infer_request()
    feeds = {}
    for port in compiled.inputs:
        names = port.get_names()
        feeds[port.get_any_name()] = next(inputs[n] for n in inputs if n in names)
    return lambda: request.infer(feeds)


def serve(runtime: str, model: Path, inputs_file: Path, threads: int) -> None:
    """The child's side: load, warm up, then answer each run count on stdin with a median."""
    with np.load(inputs_file) as archive:
        inputs = {name: archive[name] for name in archive.files}
    run = (_onnxruntime if runtime == "ort" else _openvino)(model, threads, inputs)
    for _ in range(3):
        run()
    print("ready", flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1e3)
        print(json.dumps(statistics.median(times)), flush=True)


class Worker:
    """One runtime with one model at one thread count, loaded once in a child process."""

    def __init__(self, runtime: str, model: Path, inputs_file: Path, threads: int):
        self.runtime = runtime
        command = [sys.executable, __file__, runtime, str(model), str(inputs_file), str(threads)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        if self._line() != "ready":
            raise RuntimeError(f"{LABELS[runtime]} could not load {model.name}: {self._error()}")

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def _error(self) -> str:
        self.process.kill()
        _, err = self.process.communicate()
        lines = [line for line in err.splitlines() if line.strip()]
        return lines[-1][:300] if lines else f"exit code {self.process.returncode}"

    def median_ms(self, runs: int) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{runs}\n")
        self.process.stdin.flush()
        answer = self._line()
        if not answer:
            raise RuntimeError(f"{LABELS[self.runtime]} stopped: {self._error()}")
        return float(answer)

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


if __name__ == "__main__":
    serve(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
