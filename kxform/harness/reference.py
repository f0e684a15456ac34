"""Running a spec's NumPy reference function and checking what it returns.

A reference is `name(size, inputs) -> {buffer: array}` in a module beside the spec
(docs/harness-spec.md). It is the user's own code, imported by file path. Its inputs
are read-only copies of the in/inout buffers and the scalars (out buffers are left
out: reading one is a bug). Its outputs are checked to cover every out/inout buffer
with the right shape, and float results are rounded to the buffer's dtype
(bfloat16: to bf16 bits) so the reference can compute in float64.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

import numpy as np

from kxform.errors import SpecError
from kxform.harness.compare import Comparison, compare
from kxform.harness.dtypes import is_float, numpy_dtype, to_storage
from kxform.harness.launch import ResolvedArg, ResolvedLaunch
from kxform.harness.model import KernelSpec

ReferenceFn = Callable[[dict[str, int], dict[str, "np.ndarray | np.generic"]], Mapping[str, object]]

__all__ = [
    "Comparison",
    "ReferenceFn",
    "check_outputs",
    "compare",
    "compare_outputs",
    "load_reference",
    "run_reference",
]

_MODULES: dict[tuple[Path, int], ModuleType] = {}
"""Imported reference modules by (path, mtime): re-import only when the file changes."""


def load_reference(kernel: KernelSpec) -> ReferenceFn:
    """Import the module named by `kernel.reference` and return its function."""
    if kernel.reference is None:
        raise SpecError(f"kernel '{kernel.name}' has no reference function", kernel.location)
    module_rel, func_name = kernel.reference.rsplit(":", 1)
    path = (kernel.spec_dir / module_rel).resolve()
    module = _import(path, kernel)
    func = getattr(module, func_name, None)
    if not callable(func):
        raise SpecError(
            f"kernel '{kernel.name}': reference module {module_rel} has no function '{func_name}'",
            kernel.location,
        )
    return func  # type: ignore[no-any-return]


def _import(path: Path, kernel: KernelSpec) -> ModuleType:
    try:
        key = (path, path.stat().st_mtime_ns)
    except OSError as err:
        raise SpecError(
            f"kernel '{kernel.name}': cannot read reference {path}: {err.strerror}", kernel.location
        ) from None
    if key in _MODULES:
        return _MODULES[key]
    name = "kxform_reference_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"kernel '{kernel.name}': cannot import {path}", kernel.location)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # the user's module may raise anything while importing
        raise SpecError(
            f"kernel '{kernel.name}': importing reference {path.name} failed: {type(err).__name__}: {err}",
            kernel.location,
        ) from err
    _MODULES[key] = module
    return module


def run_reference(
    kernel: KernelSpec, resolved: ResolvedLaunch, inputs: Mapping[str, np.ndarray | np.generic]
) -> dict[str, np.ndarray]:
    """Expected value of every out/inout buffer, in storage form, checked."""
    func = load_reference(kernel)
    frozen: dict[str, np.ndarray | np.generic] = {}
    for arg in resolved.args:
        if arg.role == "out" and arg.kind == "buffer":
            continue
        value = inputs[arg.name]
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.flags.writeable = False
        frozen[arg.name] = value
    try:
        result = func(dict(resolved.variables), frozen)
    except Exception as err:  # user code: report, do not crash the caller
        raise SpecError(
            f"kernel '{kernel.name}' size '{resolved.size}': reference {kernel.reference} raised "
            f"{type(err).__name__}: {err}",
            kernel.location,
        ) from err
    return check_outputs(kernel, resolved, result)


def check_outputs(kernel: KernelSpec, resolved: ResolvedLaunch, result: object) -> dict[str, np.ndarray]:
    """Validate a reference's return value and convert it to the buffers' storage dtypes."""
    where = f"kernel '{kernel.name}' size '{resolved.size}': reference {kernel.reference}"
    if not isinstance(result, Mapping):
        raise SpecError(f"{where} returned {type(result).__name__}, expected a dict", kernel.location)
    outputs = {a.name: a for a in resolved.args if a.kind == "buffer" and a.role != "in"}
    extra = sorted(set(result) - set(outputs))
    if extra:
        raise SpecError(f"{where} returned '{extra[0]}', which is not an out/inout buffer", kernel.location)
    checked: dict[str, np.ndarray] = {}
    for name, arg in outputs.items():
        if name not in result:
            raise SpecError(f"{where} did not return '{name}'", kernel.location)
        try:
            checked[name] = _as_buffer(np.asarray(result[name]), arg)
        except ValueError as err:
            raise SpecError(f"{where} output '{name}': {err}", kernel.location) from None
    return checked


def _as_buffer(value: np.ndarray, arg: ResolvedArg) -> np.ndarray:
    if value.shape != arg.shape:
        raise ValueError(f"shape {value.shape}, buffer is {arg.shape}")
    want = numpy_dtype(arg.dtype)
    if value.dtype == want:
        return np.ascontiguousarray(value)
    if is_float(arg.dtype) and value.dtype.kind == "f":
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(to_storage(value, arg.dtype))
    raise ValueError(f"dtype {value.dtype}, buffer is {arg.dtype} ({want})")


def compare_outputs(
    kernel: KernelSpec,
    resolved: ResolvedLaunch,
    expected: Mapping[str, np.ndarray],
    actual: Mapping[str, np.ndarray],
) -> dict[str, Comparison]:
    """Compare every output buffer with its expected value under its compare spec."""
    return {
        name: compare(expected[name], actual[name], kernel.compare_for(name), dtype=resolved.arg(name).dtype)
        for name in expected
    }
