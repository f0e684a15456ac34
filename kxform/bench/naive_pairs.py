"""The naive/expert corpus (corpora/naive/index.toml) as tools/bench_pipeline.py uses it:
the pairs, and the steps that need no GPU: verification against the NumPy reference on a
runtime, the tuning spaces the existing passes offer for a naive kernel, one rewritten
point of the offered space confirmed by the tuner's own CPU checker, and the nvcc builds
of both versions.

Importable without a GPU; every function here runs (and is tested) on the CPU runtime.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from kxform.bench.paths import CORPORA
from kxform.errors import KxformError, UsageError
from kxform.frontend.source import SourceText, read_source
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec

NAIVE = CORPORA / "naive"


@dataclass(frozen=True)
class Version:
    """One side of a pair: its source, kernel and harness spec."""

    source: SourceText
    spec: KernelSpec
    spec_path: Path

    @property
    def kernel(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Pair:
    """A naive kernel and its expert version (a yardstick, never an input to a pass)."""

    name: str
    family: str
    naive: Version
    expert: Version
    yardstick: str
    """"copy" or "cublas"."""
    cublas: tuple[str, ...] = ()
    """For "cublas": the GEMM shape (batch, M, N, K) as expressions of the size variables."""


def _version(entry: dict[str, Any], side: str) -> Version:
    spec_path = NAIVE / entry[f"{side}_spec"]
    spec = load_spec(spec_path).kernel(entry[f"{side}_kernel"])
    return Version(read_source(str(NAIVE / entry[side])), spec, spec_path)


def load_pairs(names: tuple[str, ...] = ()) -> list[Pair]:
    """The pairs of the manifest, in its order; `names` selects some (UsageError naming
    the known ones for an unknown name)."""
    entries = tomllib.loads((NAIVE / "index.toml").read_text(encoding="utf-8"))["pair"]
    known = [e["name"] for e in entries]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown kernel {unknown[0]!r} (corpus pairs: {', '.join(known)})")
    return [
        Pair(
            e["name"],
            e["family"],
            _version(e, "naive"),
            _version(e, "expert"),
            e["yardstick"],
            tuple(e.get("cublas", ())),
        )
        for e in entries
        if not names or e["name"] in names
    ]


# ----------------------------------------------------------------- verification


def verify(version: Version, runtime: Any) -> dict[str, Any]:
    """The version against its NumPy reference at every check size on `runtime`:
    {"status": verified | mismatch | inconclusive | unverified | error, "detail": ...}."""
    from kxform.verify.differential import verify_reference

    try:
        report = verify_reference(version.source, version.spec, runtime)
    except KxformError as exc:
        return {"status": "error", "detail": str(exc)}
    status = "verified" if report.ok else report.status
    return {"status": status, "sizes": len(report.sizes), "detail": "" if report.ok else report.summary()}


# ----------------------------------------------------------------- spaces


def spaces(version: Version, hw: str) -> dict[str, Any]:
    """What each tunable pass offers for the naive kernel: {pass: {"configs": n} or
    {"refused": why}}, and `offered`, the passes whose space has more than the code as it
    is (a space of one configuration is the original alone)."""
    from kxform.hw import load_profile
    from kxform.engine.registry import default_registry
    from kxform.search.kernel_space import NothingToTune, kernel_space

    out: dict[str, Any] = {}
    offered = []
    for name in default_registry().names():
        try:
            space = kernel_space(version.source.data, version.kernel, (name,), path=version.source.path, hw=hw)
            size = len(space.search(load_profile(hw)))
        except NothingToTune as exc:
            out[name] = {"refused": "; ".join(f"{key}: {why}" for _, key, why in exc.refused) or str(exc)}
            continue
        out[name] = {"configs": size, "params": [p.name for p in space.space.params]}
        if size > 1:
            offered.append(name)
        else:
            out[name]["note"] = "only the code as it is"
    out["offered"] = offered
    return out


# ----------------------------------------------------------------- the tuner's checker


def check(version: Version, hw: str, passes: tuple[str, ...]) -> dict[str, Any]:
    """The tuner's CPU checker for the kernel over `passes` (kxform.search.checker: what
    `kxform tune --write` builds to confirm a result), and the first point of their
    composed space that switches one pass on (the rewrite nearest the code as it is) checked by it (rewritten, built and verified against the
    original on the CPU runtime): {"status": "verified" | a failure class | "error" |
    "nothing offered", "config": the point, "detail": why not}."""
    from kxform.hw import load_profile
    from kxform.search.checker import cpu_checker

    if not passes:
        return {"status": "nothing offered"}
    try:
        checker = cpu_checker(version.source, version.kernel, version.spec, passes, hw=hw)
    except KxformError as exc:  # the spec does not match the kernel, the original does not build here, ...
        return {"status": "error", "detail": str(exc)}
    try:
        space = checker.space.search(load_profile(hw))
        config = _one_pass_on(space)
        if config is None:
            return {"status": "nothing offered"}
        failure, why = checker.check(config)
    finally:
        checker.close()
    shown = {k: v for k, v in config.items()}
    if failure is None:
        return {"status": "verified", "config": shown, "pipeline": checker.space.spec(config)}
    return {"status": failure.value, "config": shown, "detail": why}


def structural(offered: tuple[str, ...], named: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The offered passes that restructure how work is divided among threads
    (`kxform.engine.pass_api.Pass.structural`), and those `named`: the dry run checks a
    point of each on its own, so a new shape shows verified even where another pass's
    point comes first in the composed space."""
    from kxform.engine.registry import default_registry

    registry = default_registry()
    return tuple(name for name in offered if name in named or type(registry.parse(name)).structural)


def _one_pass_on(space: Any) -> dict[str, Any] | None:
    """The first configuration of a composed search space with exactly one pass switched on
    (its on/off parameters are the pass names, without a dot)."""
    for row in range(len(space)):
        config = space.config(row)
        if sum(1 for k, v in config.items() if "." not in k and v is True) == 1:
            return config
    return None


# ----------------------------------------------------------------- builds


def build(version: Version, arch: str) -> dict[str, Any]:
    """The version's kernel built with nvcc to a cubin for `arch`, as the GPU runtime
    builds it: {"ok": True, "registers": n, ...} or {"ok": False, "detail": nvcc's error}."""
    from kxform.build.builder import Builder
    from kxform.build.extract import extract_kernel
    from kxform.runtime.base import LaunchRequest
    from kxform.runtime.gpu import compile_kernel

    try:
        extracted = extract_kernel(version.source, version.kernel)
        request = LaunchRequest(
            extracted.source,
            extracted.entry,
            extracted.params,
            (),
            (1, 1, 1),
            (1, 1, 1),
            label=f"{version.kernel} build",
            filename=extracted.path,
        )
        compiled = compile_kernel(Builder(), request, arch)
    except KxformError as exc:
        return {"ok": False, "detail": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    resources = compiled.resources
    return {
        "ok": True,
        "arch": arch,
        "registers": getattr(resources, "registers", None),
        "shared_bytes": getattr(resources, "shared_bytes", None),
    }


def gemm_shape(pair: Pair, size: Any) -> tuple[int, ...] | None:
    """The cuBLAS yardstick's (batch, M, N, K) at `size`, for a "cublas" pair."""
    from kxform.expr import parse_expr

    if pair.yardstick != "cublas":
        return None
    return tuple(parse_expr(text).evaluate_int(size.values) for text in pair.cublas)
