"""The pure core: source text in, rewritten text and remarks out, through a pass pipeline.

No files are written and nvcc is not run for the rewrite itself: `kxform apply` and
`kxform tune` are layers above (kxform.orchestrate). `kxform.api` is the public face of
these functions; the packages that rewrite on their way (the search, the locality model,
the proposers) import them from here, so that the API can also reach the layers above
(tuning) without an import cycle.

For tuners: `space_of(data, kernel)` is the typed parameter space of a kernel under a
pass (tile by default), `rewrite_with(data, kernel, config)` the file rewritten at one
point of it, and `explain` what the pass found (parameters, constraints, refusals).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from kxform.build.toolchain import Toolchain
from kxform.engine.driver import FileTransform, transform_source, unparsable
from kxform.engine.params import ParamSpace, ParamValue
from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, RunOptions
from kxform.engine.registry import default_registry
from kxform.errors import InputError, UsageError
from kxform.frontend.cuda import parse_model
from kxform.build.semantic import semantic_provider
from kxform.frontend.source import validate_bytes
from kxform.hw import HwProfile, load_profile
from kxform.log.remarks import RemarkSink


def rewrite(
    data: str | bytes,
    spec: str = "swizzle",
    *,
    path: str = "<memory>.cu",
    hw: str = "h100",
    kernels: tuple[str, ...] = (),
    semantic: bool = False,
    build_dir: str | None = None,
    **options: str,
) -> FileTransform:
    """Run the pipeline `spec` (e.g. "swizzle" or "swizzle{pattern=grouped}") over `data`.

    `options` go to every pass that takes them (like --pattern/--param); `semantic`
    consults libclang (with `build_dir`'s compile_commands.json) where the syntax
    leaves a question open, as `kxform apply` does.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    passes = _pipeline(spec, tuple(sorted(options.items())))
    provider = semantic_provider(path, build_dir) if semantic else None
    profile = (
        _shipped_profile(hw) if not hw.endswith(".toml") and "/" not in hw and "\\" not in hw else load_profile(hw)
    )
    return transform_source(
        validate_bytes(path, raw),
        passes,
        profile,
        RunOptions(kernels=kernels),
        semantic=provider,
        toolchain=Toolchain.create(build_dir),
    )


def space_of(
    data: str | bytes,
    kernel: str,
    pass_name: str = "tile",
    *,
    path: str = "<memory>.cu",
    hw: str = "h100",
    build_dir: str | None = None,
) -> ParamSpace:
    """The parameter space of `kernel` in the file `data` under pass `pass_name` (the tile
    pass: its lifted tile sizes with their domains and derived constraints). UsageError
    when the kernel is not in the file; an empty space when the pass refuses the kernel
    (`explain` says why)."""
    pass_, ctx, analysis = _analysed(data, kernel, pass_name, path, hw, build_dir)
    return pass_.space(ctx, analysis) if not analysis.blockers else ParamSpace()


def explain(
    data: str | bytes,
    kernel: str,
    pass_name: str = "tile",
    *,
    path: str = "<memory>.cu",
    hw: str = "h100",
    build_dir: str | None = None,
) -> dict[str, Any]:
    """What the pass makes of `kernel` (as `kxform inspect --json` shows it)."""
    pass_, ctx, analysis = _analysed(data, kernel, pass_name, path, hw, build_dir)
    return pass_.describe(ctx, analysis)


def rewrite_with(
    data: str | bytes,
    kernel: str,
    config: Mapping[str, ParamValue],
    pass_name: str = "tile",
    *,
    path: str = "<memory>.cu",
    hw: str = "h100",
    build_dir: str | None = None,
) -> FileTransform:
    """`data` with `kernel` rewritten at `config` (a point of `space_of`), checked like any
    proposal (constraints, ptxas where nvcc exists, re-parse, idempotence). Differential
    verification is the caller's next step (`kxform.verify`), with the result's policy:
    `result.results[i].policy`."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    pass_ = default_registry().get(pass_name).from_options(dict(config))
    return transform_source(
        validate_bytes(path, raw),
        [pass_],
        load_profile(hw),
        RunOptions(kernels=(kernel,)),
        toolchain=Toolchain.create(build_dir),
    )


def _analysed(
    data: str | bytes, kernel: str, pass_name: str, path: str, hw: str, build_dir: str | None
) -> tuple[Pass, PassContext, KernelAnalysis]:
    pass_ = default_registry().get(pass_name)()
    ctx = kernel_context(data, kernel, path=path, hw=hw, build_dir=build_dir)
    return pass_, ctx, analyse_kernel(pass_, ctx, kernel)


def kernel_context(
    data: str | bytes, kernel: str, *, path: str = "<memory>.cu", hw: str = "h100", build_dir: str | None = None
) -> PassContext:
    """The context passes analyse `kernel` of the file `data` in (libclang consulted with
    `build_dir`'s flags); InputError when the kernel does not parse, UsageError when the
    file has no such kernel."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    source = validate_bytes(path, raw)
    model = parse_model(source)
    defined = next((k for k in model.kernels if k.name == kernel), None)
    if defined is None:
        known = ", ".join(k.name for k in model.kernels) or "none"
        raise UsageError(f"{path}: no kernel '{kernel}' (kernels: {known})")
    broken = unparsable(model, kernel)
    if broken is not None:  # as `apply` refuses it; the rest of the file is no concern
        raise InputError(
            f"syntax error: {broken} (tree-sitter-cuda could not parse it)", source.location(defined.span.start)
        )
    toolchain = Toolchain.create(build_dir)
    return PassContext(
        model,
        load_profile(hw),
        RunOptions(kernels=(kernel,)),
        RemarkSink(),
        semantic_provider(path, build_dir, toolchain=toolchain)(model),
        toolchain,
    )


def analyse_kernel(pass_: Pass, ctx: PassContext, kernel: str) -> KernelAnalysis:
    """What `pass_` found about `kernel` in `ctx`."""
    analyses = pass_.analyse(ctx)
    if kernel not in analyses:
        known = ", ".join(k.name for k in ctx.model.kernels) or "none"
        raise UsageError(f"{ctx.model.source.path}: no kernel '{kernel}' (kernels: {known})")
    return analyses[kernel]


def rewrite_passes(
    data: str | bytes,
    passes: Sequence[Pass],
    *,
    path: str = "<memory>.cu",
    hw: str = "h100",
    kernels: tuple[str, ...] = (),
    build_dir: str | None = None,
    compiles: bool = True,
) -> FileTransform:
    """`data` rewritten by pass instances (any registry's), checked like `rewrite`;
    `compiles=False`: the checks that build the candidate (ptxas's registers, the
    compiler's confirmation of coverage) are skipped, as where there is no nvcc."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    profile = (
        _shipped_profile(hw) if not hw.endswith(".toml") and "/" not in hw and "\\" not in hw else load_profile(hw)
    )
    return transform_source(
        validate_bytes(path, raw),
        list(passes),
        profile,
        RunOptions(kernels=kernels),
        toolchain=Toolchain.create(build_dir, compiles),
    )


@functools.lru_cache(maxsize=32)
def _pipeline(spec: str, options: tuple[tuple[str, str], ...]) -> tuple[Pass, ...]:
    """Passes and shipped profiles are frozen values: built once per process, not per call."""
    return tuple(default_registry().pipeline(spec, dict(options)))


@functools.lru_cache(maxsize=16)
def _shipped_profile(name: str) -> HwProfile:
    return load_profile(name)
