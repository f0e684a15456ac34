"""The analysis manager: one computation per kernel and source version, shared by the
pass's steps; preserved analyses carried over a rewrite only when they hold no offsets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis import AccessAnalysis
from kxform.analysis.manager import AnalysisInput, AnalysisManager
from kxform.engine.pass_api import PassContext, RunOptions
from kxform.engine.registry import default_registry
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import Function
from kxform.frontend.source import read_source, validate_bytes
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink
from kxform.passes.swizzle.index_usage import IndexUsage

from conftest import CORPORA

CALLS: list[str] = []


@dataclass(frozen=True)
class KernelName:
    """A toy analysis that holds no byte offsets."""

    positional: ClassVar[bool] = False
    name: str

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> KernelName:
        CALLS.append(kernel.name)
        return cls(kernel.name)


def context(text: str, manager: AnalysisManager | None = None) -> PassContext:
    model = parse_model(validate_bytes("k.cu", text.encode()))
    return PassContext(
        model,
        load_profile("h100"),
        RunOptions(),
        RemarkSink(),
        analyses=manager if manager is not None else AnalysisManager(),
    )


KERNEL = "__global__ void k(float* a) { a[threadIdx.x] = 1.0f; }\n"


def test_an_analysis_is_computed_once_per_kernel_and_version() -> None:
    CALLS.clear()
    ctx = context(KERNEL)
    (kernel,) = ctx.model.kernels
    first = ctx.analysis(KernelName, kernel)
    assert ctx.analysis(KernelName, kernel) is first and CALLS == ["k"]
    changed = context(KERNEL.replace("1.0f", "2.0f"), ctx.analyses)
    assert changed.analysis(KernelName, changed.model.kernels[0]) is not first and CALLS == ["k", "k"]
    assert ctx.analyses.computed == 2


def test_carry_moves_preserved_offset_free_analyses_only() -> None:
    manager = AnalysisManager()
    old, new = context(KERNEL, manager), context("// edited\n" + KERNEL, manager)
    old.analysis(KernelName, old.model.kernels[0])
    old.analysis(AccessAnalysis, old.model.kernels[0])
    assert manager.carry(old.model, new.model, (KernelName, AccessAnalysis)) == 1
    assert manager.cached(KernelName, new.model, new.model.kernels[0]) == KernelName("k")
    assert manager.cached(AccessAnalysis, new.model, new.model.kernels[0]) is None
    assert manager.carry(old.model, new.model, ()) == 0


def test_swizzle_computes_its_index_usage_once_per_kernel_across_its_steps() -> None:
    model = parse_model(read_source(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"))
    ctx = PassContext(model, load_profile("h100"), RunOptions(), RemarkSink())
    pass_ = default_registry().parse("swizzle{pattern=grouped}")
    analyses = pass_.analyse(ctx)
    analysis = analyses["sgemm_tiled"]
    proposal = pass_.default_proposal(ctx, analysis)
    assert proposal is not None
    pass_.candidates(ctx, analysis)
    pass_.space(ctx, analysis)
    pass_.describe(ctx, analysis)
    pass_.edit(ctx, [proposal])
    usage = ctx.analyses.cached(IndexUsage, model, analysis.kernel)
    assert usage is not None and usage is ctx.analysis(IndexUsage, analysis.kernel)
    assert ctx.analyses.computed == len(model.kernels)


def test_a_swizzle_run_computes_index_usage_once_per_version(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The original and the rewritten file: two computations for one kernel, through the
    analysis, the edit, the coverage check and the idempotence run (a spy counts the real ones)."""
    from kxform.api import rewrite

    computed: list[int] = []
    real = IndexUsage.compute.__func__  # type: ignore[attr-defined]

    def counting(cls, ctx, kernel):  # type: ignore[no-untyped-def]
        computed.append(len(ctx.model.source.data))
        return real(cls, ctx, kernel)

    monkeypatch.setattr(IndexUsage, "compute", classmethod(counting))
    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    result = rewrite(path.read_bytes(), "swizzle{pattern=grouped}", path=str(path))
    assert result.changed
    assert len(computed) == 2 and computed[0] == len(path.read_bytes()) and computed[1] == len(result.new_data)


def test_the_driver_carries_what_a_pass_preserves_to_the_rewritten_file() -> None:
    """An offset-free analysis a pass declares preserved is not computed again for the
    rewritten file (the idempotence run asks for it); one it does not declare is."""
    from dataclasses import dataclass as frozen_pass

    from kxform.engine.driver import transform_source
    from kxform.passes.unroll import Unroll

    @frozen_pass(frozen=True)
    class Asking(Unroll):
        def analyse(self, ctx):  # type: ignore[no-untyped-def]
            for kernel in ctx.model.kernels:
                ctx.analysis(KernelName, kernel)
            return super().analyse(ctx)

    @frozen_pass(frozen=True)
    class Preserving(Asking):
        preserves = (KernelName,)

    text = "__global__ void k(float* a) {\n    for (int i = 0; i < 8; ++i)\n        a[i] = 0.0f;\n}\n"
    for cls, computations in ((Asking, 2), (Preserving, 1)):
        CALLS.clear()
        result = transform_source(
            validate_bytes("k.cu", text.encode()), [cls((("loop1", "2"),))], load_profile("h100"), RunOptions()
        )
        assert result.changed and len(CALLS) == computations, (cls.__name__, CALLS)
