"""`apply` cost is linear in the kernels of a file: the swizzle pass's analysis does a
bounded amount of work per kernel (counted, not timed: tools/bench_apply_scaling.py
prints the times)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kxform.engine.pass_api import PassContext, RunOptions
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import SourceModel
from kxform.frontend.source import validate_bytes
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink
from kxform.passes.swizzle import Swizzle, opaque

_spec = importlib.util.spec_from_file_location(
    "bench_apply_scaling", Path(__file__).resolve().parents[2] / "tools" / "bench_apply_scaling.py"
)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


_CLOSURE, _FILE_FACTS = SourceModel.closure, opaque.file_facts


def _analyse_counting(n: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"closure": 0, "file_facts": 0}
    closure, facts = _CLOSURE, _FILE_FACTS

    def counted_closure(self: SourceModel, root: str) -> set[str]:
        counts["closure"] += 1
        return closure(self, root)

    def counted_facts(model: SourceModel) -> opaque.FileFacts:
        counts["file_facts"] += 1
        return facts(model)

    monkeypatch.setattr(SourceModel, "closure", counted_closure)
    monkeypatch.setattr(opaque, "file_facts", counted_facts)
    monkeypatch.setattr("kxform.passes.swizzle.swizzle.file_facts", counted_facts)
    model = parse_model(validate_bytes(f"many_{n}.cu", bench.kernel_file(n).encode()))
    hw = load_profile("h100")
    analyses = Swizzle(pattern="grouped").analyse(PassContext(model, hw, RunOptions(arch=hw.arch), RemarkSink()))
    assert len(analyses) == n and all(a.applicable for a in analyses.values())
    return counts


def test_the_swizzle_analysis_does_a_bounded_amount_of_work_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = _analyse_counting(40, monkeypatch), _analyse_counting(160, monkeypatch)
    assert small["file_facts"] == large["file_facts"] == 1  # the file-level facts once per file
    # closures per kernel stay constant: four times the kernels, four times the closures (not sixteen)
    assert large["closure"] <= 4 * small["closure"] + 8, (small, large)


def test_model_lookups_by_name_agree_with_a_scan() -> None:
    model = parse_model(validate_bytes("many.cu", bench.kernel_file(12).encode()))
    for function in model.functions:
        assert model.functions_named(function.name) == tuple(f for f in model.functions if f.name == function.name)
        assert model.reads_in(function.name) == tuple(r for r in model.index_reads if r.function == function.name)
        assert model.calls_from(function.name) == tuple(c for c in model.calls if c.caller == function.name)
        assert model.calls_to(function.name) == tuple(c for c in model.calls if c.callee == function.name)
    assert model.functions_named("nosuch") == () and model.macro("NOSUCH") is None


def _default_apply_counting(n: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The default swizzle (no pattern: a drafted spec and the locality model per kernel)
    over a file of `n` kernels, counting the whole-file steps that were once per kernel:
    libclang parses for constants, the parse mask and the file digest."""
    from kxform.analysis import manager
    from kxform.frontend import constants, cuda, launches

    counts = {"libclang": 0, "mask": 0, "digest": 0}
    evaluate, mask, blake = constants._evaluate_names, cuda.mask_for_parse, manager.hashlib.blake2b

    def counted(name: str, real):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(constants, "_evaluate_names", counted("libclang", evaluate))
    monkeypatch.setattr(launches, "mask_for_parse", counted("mask", mask))
    monkeypatch.setattr(manager.hashlib, "blake2b", counted("digest", blake))
    constants._KNOWN.clear()
    work = tmp_path / str(n)
    work.mkdir()
    bench.run_once(n, None, work)
    return counts


def test_the_default_swizzle_parses_a_file_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _default_apply_counting(16, tmp_path, monkeypatch)
    large = _default_apply_counting(64, tmp_path, monkeypatch)
    assert small["libclang"] >= 1, small  # the drafted specs do ask for constants
    # four times the kernels, no more whole-file work (it was one parse per launched kernel)
    assert large["libclang"] <= max(small["libclang"], 2) and large["mask"] <= max(small["mask"], 1), (small, large)
    assert large["digest"] <= small["digest"] + 2, (small, large)
