"""Verification of a validated template everywhere it can run: a covering sample of its
configurations, each instantiated and run against the original at every check size of
the kernel's harness spec (CPU runtime; on a GPU also under compute-sanitizer's memcheck
and racecheck). Any failure rejects the whole template, with the configuration, size
and cause.

The sample holds every value of every parameter at least once, the all-low and
all-high corners, and every pair of extremes of two parameters (the others at the
reproducing configuration, else their lowest value); configurations that break a
constraint are replaced by valid ones holding the same value. Outputs compare
bit-exact, unless the original sums floats in a loop (a template may reorder such a
sum): then within the bound the original's reorder probe measures for any order of its
sums (kxform.engine.policy.reordered_sums, docs/trust.md). A spec whose check sizes are all multiples of some
parameter value cannot expose a ragged-edge error: that is "could not tell", a refusal.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from kxform.engine.params import ParamSpace, ParamValue
from kxform.errors import SpecError
from kxform.engine.policy import LaunchBinding, OutputCompare, VerifyPolicy, reordered_sums
from kxform.engine.reorder_probe import ProbeRefused
from kxform.frontend.model import Function, SourceModel
from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.model import KernelSpec
from kxform.propose.template import Refusal, Template, config_label
from kxform.runtime.base import Runtime

MAX_SAMPLE = 48
Config = dict[str, ParamValue]


@dataclass(frozen=True)
class Verified:
    """A template that passed: the configurations run and the comparison used."""

    configs: tuple[tuple[tuple[str, ParamValue], ...], ...]
    compare: OutputCompare
    sizes: tuple[str, ...]


def covering_sample(space: ParamSpace, hw: object, base: Config | None = None) -> list[Config]:
    """Valid configurations covering every value, the corners and pairs of extremes."""
    params = space.params
    low = {p.name: p.values[0] for p in params}
    high = {p.name: p.values[-1] for p in params}
    start = dict(base) if base is not None else dict(low)
    wanted: list[Config] = [dict(low), dict(high), dict(start)]
    wanted += [{**start, p.name: v} for p in params for v in p.values]
    for a, b in itertools.combinations(params, 2):
        wanted += [
            {**start, a.name: ea, b.name: eb}
            for ea in (low[a.name], high[a.name])
            for eb in (low[b.name], high[b.name])
        ]
    chosen: list[Config] = []
    for config in wanted:
        valid = config if space.is_valid(config, hw) else _valid_like(space, hw, config)
        if valid is not None and valid not in chosen:
            chosen.append(valid)
    return chosen[:MAX_SAMPLE]


def _valid_like(space: ParamSpace, hw: object, config: Config) -> Config | None:
    """A valid configuration agreeing with `config` on as many parameters as possible."""
    best: tuple[int, Config] | None = None
    for values in _all(space):
        candidate = dict(zip(space.names, values))
        if space.is_valid(candidate, hw):
            same = sum(candidate[k] == v for k, v in config.items())
            if best is None or same > best[0]:
                best = (same, candidate)
    return best[1] if best else None


def _all(space: ParamSpace) -> Iterator[tuple[ParamValue, ...]]:
    return itertools.product(*(p.values for p in space.params))


def instantiate(original: SourceText, kernel: Function, template: Template, config: Config) -> SourceText:
    """The original file with the kernel's definition replaced by the template at `config`:
    each parameter a `#define` just before the definition and `#undef` just after."""
    data = original.data
    defines = "".join(f"#define {k} {v}\n" for k, v in config.items())
    undefs = "".join(f"\n#undef {k}" for k in config)
    text = data[: kernel.span.start] + (defines + template.code.strip() + undefs).encode() + data[kernel.span.end :]
    return validate_bytes(original.path, text)


def launch_of(template: Template, config: Config) -> LaunchBinding:
    return LaunchBinding(
        template.grid,
        template.block,
        None,
        tuple((k, int(v)) for k, v in config.items()),
        origin="the template's launch",
        anchored=False,
    )


def comparison(model: SourceModel, kernel: Function, hw: object = None) -> OutputCompare:
    """Exact where the original sums no floats in its loops; otherwise a template may
    reorder any of its sums, so outputs are held to the bound the original's reorder probe
    measures for any order (docs/trust.md). A sum the probe cannot instrument leaves the
    spec's tolerance, doubled (both versions within it of the exact result), and says why."""
    from kxform.analysis import AccessAnalysis
    from kxform.engine.pass_api import PassContext, RunOptions
    from kxform.log.remarks import RemarkSink

    ctx = PassContext(model, hw, RunOptions(), RemarkSink())  # type: ignore[arg-type]
    analysis = ctx.analysis(AccessAnalysis, kernel)
    sums = [r for loop in analysis.loops for r in loop.reductions if r.loop == loop.id and r.op == "+"]
    try:
        return reordered_sums(model, kernel, sums, {loop.id: loop for loop in analysis.loops}, "a template")
    except ProbeRefused as exc:
        return OutputCompare(
            "spec",
            2.0,
            f"the template may reorder the original's sums, whose bound cannot be measured ({exc.cause}); both "
            "orders lie within the spec's single-order tolerance of the exact result, so within twice it of each other",
        )


def ragged_problem(spec: KernelSpec, template: Template) -> Refusal | None:
    """Could not tell unless some check size is a multiple of no parameter value > 1."""
    values = {v for _, vs in template.params for v in vs if v > 1}
    for size in spec.check_sizes:
        sizes = [int(v) for v in size.values.values()]
        if sizes and all(s % v for s in sizes for v in values):
            return None
    return Refusal(
        "could-not-tell",
        "no check size of the harness spec is ragged for every parameter value (each "
        "is a multiple of one): an edge error could not show; add a size such as a prime",
    )


def blocks_problem(spec: KernelSpec, template: Template, configs: list[Config]) -> Refusal | None:
    """Could not tell unless, for every sampled configuration, some check size launches
    several blocks along every dimension the template's grid uses."""
    from kxform.expr import parse_expr

    envs = []
    for size in spec.check_sizes:
        resolved = spec.launch(size)
        envs.append(
            {
                a.name: int(a.value)
                for a in resolved.args
                if a.kind == "scalar" and a.value is not None and float(a.value).is_integer()
            }
        )
    for config in configs:
        try:
            several = any(
                all(parse_expr(g).evaluate_int({**env, **config}) >= 2 for g in template.grid) for env in envs
            )
        except SpecError as exc:
            return Refusal("launch", f"at {config_label(config)} the grid cannot be evaluated: {exc.cause}")
        if not several:
            return Refusal(
                "could-not-tell",
                f"at {config_label(config)} no check size launches several blocks "
                f"along every dimension of the grid ({', '.join(template.grid)}): an error between "
                "blocks could not show; add a larger check size",
            )
    return None


def verify_template(
    original: SourceText,
    kernel: Function,
    template: Template,
    spec: KernelSpec,
    runtime: Runtime,
    compare: OutputCompare,
    configs: list[Config],
) -> Verified | Refusal:
    """Differential verification of every configuration of `configs` at every check size."""
    from kxform.verify.differential import verify_pair

    sizes = tuple(s.name for s in spec.check_sizes)
    too_few = blocks_problem(spec, template, configs)
    if too_few is not None:
        return too_few
    for config in configs:
        rewritten = instantiate(original, kernel, template, config)
        policy = VerifyPolicy(launch_of(template, config), compare, required=True)
        try:
            report = verify_pair(original, rewritten, spec, runtime, sizes=sizes, policy=policy)
        except Exception as exc:  # a build or runtime failure of the template is its refusal
            return Refusal("build", f"at {config_label(config)}: {' '.join(str(exc).split())[:300]}")
        if not report.ok:
            key = "mismatch" if report.status == "mismatch" else "could-not-tell"
            return Refusal(key, f"at {config_label(config)}: {report.reason[:400]}")
    return Verified(tuple(tuple(c.items()) for c in configs), compare, sizes)


def sanitize_template(
    original: SourceText,
    kernel: Function,
    template: Template,
    spec: KernelSpec,
    configs: list[Config],
    tools: tuple[str, ...] = ("memcheck", "racecheck"),
) -> Refusal | None:
    """On a GPU: every sampled configuration under compute-sanitizer (each tool), at the
    first check size; a finding rejects the template."""
    from kxform.runtime.gpu import GpuRuntime

    size = spec.check_sizes[0].name
    for tool in tools:
        runtime = GpuRuntime(sanitize=True, sanitizer_tool=tool)
        ok, why = runtime.available()
        if not ok:
            return Refusal("could-not-tell", f"compute-sanitizer {tool}: {why}")
        try:
            found = verify_template(original, kernel, template, _only(spec, size), runtime, EXACT_OR_SPEC, configs)
        finally:
            runtime.close()
        if isinstance(found, Refusal):
            return Refusal(tool, found.message)
    return None


EXACT_OR_SPEC = OutputCompare("spec", 2.0, "under the sanitizer only its findings are judged")


def _only(spec: KernelSpec, size: str) -> KernelSpec:
    from dataclasses import replace

    return replace(spec, sizes=tuple(s for s in spec.sizes if s.name == size))
