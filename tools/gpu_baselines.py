#!/usr/bin/env python3
"""Yardsticks for tuned kernels on this GPU: cuBLAS GEMM times and the copy bandwidth.

    python tools/gpu_baselines.py [--gemm B,M,N,K ...] [--copy-mib N] [--repeat N] [--json]

Each `--gemm` shape is timed as cuBLAS's single-precision GEMM (`B` batches of an M x K
by K x N product; TF32 off, so it is the same arithmetic as a float32 kernel); `--copy-mib`
times a device-to-device copy of that many MiB and reports the bandwidth as bytes read
plus bytes written per second. Both through PyTorch (else CuPy), timed with CUDA events
after warm-up launches, the median of `--repeat` launches, on random (never zero) inputs.

It runs as its own process (tools/bench_tune_gpu.py calls it) so that the framework's
CUDA context never meets pycuda's. Prints one line per figure, or with `--json` one JSON
object: {"library", "device", "gemm": [{"shape", "ms", "tflops"}], "copy": {"mib", "ms",
"gbps"}}. Exit 2 with one line when there is no GPU or neither library imports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any
from collections.abc import Callable


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gemm", action="append", default=[], metavar="B,M,N,K", help="a GEMM shape, repeatable")
    p.add_argument("--copy-mib", type=int, default=0, help="time a device-to-device copy of this many MiB")
    p.add_argument("--repeat", type=int, default=30, help="timed launches per figure (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    shapes = []
    for text in args.gemm:
        try:
            shape = tuple(int(v) for v in text.split(","))
        except ValueError:
            p.error(f"--gemm {text}: expected four integers B,M,N,K")
        if len(shape) != 4 or min(shape) < 1:
            p.error(f"--gemm {text}: expected four positive integers B,M,N,K")
        shapes.append(shape)
    args.shapes = shapes
    if args.repeat < 1 or args.copy_mib < 0:
        p.error("--repeat must be at least 1 and --copy-mib at least 0")
    return args


class Library:
    """What both libraries share: the operands, the timed operations and the timing loop;
    a subclass supplies arrays, the product, the copy and CUDA events."""

    name = ""
    device = ""

    def random(self, *shape: int) -> Any:  # uniform in [0.5, 1.5): never zero, nothing cancels
        raise NotImplementedError

    def empty(self, *shape: int) -> Any:
        raise NotImplementedError

    def matmul(self, a: Any, b: Any, out: Any) -> Any:
        raise NotImplementedError

    def copy_into(self, dst: Any, src: Any) -> Any:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def event(self) -> Any:
        raise NotImplementedError

    def elapsed_ms(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def gemm(self, b: int, m: int, n: int, k: int) -> Callable[[], Any]:
        batch = (b,) if b > 1 else ()
        a, bt, out = self.random(*batch, m, k), self.random(*batch, k, n), self.empty(*batch, m, n)
        return lambda: self.matmul(a, bt, out)

    def copy(self, nbytes: int) -> Callable[[], Any]:
        src, dst = self.random(nbytes // 4), self.empty(nbytes // 4)
        return lambda: self.copy_into(dst, src)

    def time(self, fn: Callable[[], Any], repeat: int) -> float:
        """Median of `repeat` launches timed with CUDA events, after three warm-up launches."""
        for _ in range(3):
            fn()
        self.synchronize()
        times = []
        for _ in range(repeat):
            start, end = self.event(), self.event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(self.elapsed_ms(start, end))
        return statistics.median(times)


class Torch(Library):
    name = "torch"

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.t = torch
        self.device = torch.cuda.get_device_name(0)

    def random(self, *shape: int) -> Any:
        return self.t.rand(*shape, device="cuda", dtype=self.t.float32) + 0.5

    def empty(self, *shape: int) -> Any:
        return self.t.empty(shape, device="cuda", dtype=self.t.float32)

    def matmul(self, a: Any, b: Any, out: Any) -> Any:
        return self.t.matmul(a, b, out=out)

    def copy_into(self, dst: Any, src: Any) -> Any:
        return dst.copy_(src)

    def synchronize(self) -> None:
        self.t.cuda.synchronize()

    def event(self) -> Any:
        return self.t.cuda.Event(enable_timing=True)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))


class Cupy(Library):
    name = "cupy"

    def __init__(self) -> None:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        self.cp = cupy
        self.device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()

    def random(self, *shape: int) -> Any:
        return self.cp.random.random(shape, dtype=self.cp.float32) + 0.5

    def empty(self, *shape: int) -> Any:
        return self.cp.empty(shape, dtype=self.cp.float32)

    def matmul(self, a: Any, b: Any, out: Any) -> Any:
        return self.cp.matmul(a, b, out=out)

    def copy_into(self, dst: Any, src: Any) -> Any:
        dst[...] = src
        return dst

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()

    def event(self) -> Any:
        return self.cp.cuda.Event()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self.cp.cuda.get_elapsed_time(start, end))


def library() -> Library:
    """PyTorch, else CuPy; exit 2 with the reasons when neither works."""
    reasons = []
    for kind in (Torch, Cupy):
        try:
            return kind()
        except Exception as exc:  # noqa: BLE001 - an import or driver error: try the next, say why at the end
            reasons.append(f"{kind.name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    print(f"gpu_baselines: no GPU library for the baselines ({'; '.join(reasons)})", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    lib = library()
    result: dict[str, Any] = {"library": lib.name, "device": lib.device, "gemm": [], "copy": None}
    for b, m, n, k in args.shapes:
        ms = lib.time(lib.gemm(b, m, n, k), args.repeat)
        result["gemm"].append({"shape": [b, m, n, k], "ms": ms, "tflops": 2.0 * b * m * n * k / ms / 1e9})
    if args.copy_mib:
        nbytes = args.copy_mib << 20
        ms = lib.time(lib.copy(nbytes), args.repeat)
        result["copy"] = {"mib": args.copy_mib, "ms": ms, "gbps": 2.0 * nbytes / ms / 1e6}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"device: {lib.device} ({lib.name})")
    for g in result["gemm"]:
        print(f"cuBLAS sgemm {'x'.join(map(str, g['shape']))}: {g['ms']:.4f} ms, {g['tflops']:.1f} TFLOP/s")
    if result["copy"]:
        c = result["copy"]
        print(f"copy {c['mib']} MiB: {c['ms']:.4f} ms, {c['gbps']:.0f} GB/s (read + write)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
