"""Nsight Compute's summary for the refactoring prompt (kxform.profile.nsight): ncu's CSV
read into the headline figures and the top stall reasons, the prompt's line when there is
no profiler, and on a GPU with ncu a real profile of a corpus naive kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.profile.ncu_csv import parse_ncu_csv
from kxform.profile.nsight import FIGURES, STALL_REASONS, stall_metric, summarize, summary_text

NAIVE = Path(__file__).resolve().parents[2] / "corpora" / "naive"
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _row(metric: str, unit: str, value: str) -> str:
    return (
        f'"0","7","python3","h","kxform_entry_k","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","Command line '
        f'profiler metrics","{metric}","{unit}","{value}"'
    )


def test_the_summary_names_the_figures_and_the_largest_stalls_first() -> None:
    rows = [
        _row(FIGURES[0][0], "nsecond", "1,234,000"),
        _row(FIGURES[1][0], "%", "81.5"),
        _row(FIGURES[4][0], "%", "43.25"),
        _row(FIGURES[3][0], "%", "n/a"),
        _row(stall_metric("long_scoreboard"), "", "12.5"),
        _row(stall_metric("wait"), "", "0.8"),
        _row(stall_metric("barrier"), "", "3.1"),
        _row(stall_metric("lg_throttle"), "", "5.0"),
        _row(stall_metric("selected"), "", "0"),
    ]
    (launch,) = parse_ncu_csv("\n".join([HEADER, *rows])).launches
    summary = summarize(launch)
    assert [name for name, _, _ in summary.figures] == ["duration", "memory throughput", "achieved occupancy"]
    assert summary.stalls == (("long_scoreboard", 12.5), ("lg_throttle", 5.0), ("barrier", 3.1))
    text = summary.text()
    assert text.startswith("duration 1.234 ms; memory throughput 81.5% of peak; achieved occupancy 43.2")
    assert "long_scoreboard 12.50, lg_throttle 5.00, barrier 3.10" in text and "SM throughput" not in text


def test_every_stall_reason_is_a_distinct_metric() -> None:
    assert len({stall_metric(r) for r in STALL_REASONS}) == len(STALL_REASONS)


def test_without_ncu_the_prompt_says_there_is_no_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kxform.build.extract import extract_kernel
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setattr("kxform.profile.nsight.glob.glob", lambda pattern: [])
    monkeypatch.setattr("kxform.profile.nsight.os.path.isfile", lambda path: False)
    spec = load_spec(NAIVE / "layernorm" / "naive.kxspec.toml").kernel("layernorm_naive")
    extracted = extract_kernel(read_source(NAIVE / "layernorm" / "naive.cu"), "layernorm_naive")
    assert (
        summary_text(extracted, spec, spec.check_sizes[0])
        == "No Nsight Compute summary: ncu not found (not $NCU, not on PATH, not in /usr/local/cuda/bin)"
    )


@pytest.mark.gpu
def test_a_naive_kernel_is_profiled_on_the_gpu() -> None:
    from kxform.build.extract import extract_kernel
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec
    from kxform.profile.nsight import NsightSummary, find_ncu, profile
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    runtime.close()
    if not ok or find_ncu() is None:
        pytest.skip(f"needs a GPU and ncu: {why if not ok else 'ncu not found'}")
    spec = load_spec(NAIVE / "layernorm" / "naive.kxspec.toml").kernel("layernorm_naive")
    extracted = extract_kernel(read_source(NAIVE / "layernorm" / "naive.cu"), "layernorm_naive")
    found = profile(extracted, spec, spec.check_sizes[-1])
    if isinstance(found, str) and "ERR_NVGPUCTRPERM" in found:
        pytest.skip(f"this machine does not let ncu read the counters: {found}")
    assert isinstance(found, NsightSummary), found
    names = [name for name, _, _ in found.figures]
    assert "duration" in names and "achieved occupancy" in names and found.stalls, found
