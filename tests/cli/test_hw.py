"""Hardware profiles: the shipped files, validation, lookup, detection and `kxform hw`."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from conftest import run_cli as run_kxform
from kxform.cli.hw import format_profile, format_table
from kxform.errors import KxformError, SpecError, UsageError
from kxform.hw import SMI_QUERY, HwProfile, detect, list_profiles, load_profile, load_profile_file, match_device

HW_DIR = Path(__file__).resolve().parents[2] / "hw"
EXPECTED = {"h100-sxm", "h100-pcie", "h200", "a100", "l40s", "rtx4090", "mi300x", "mi250x"}
MIB = 1 << 20

VALID = """\
name = "test-gpu"
vendor = "nvidia"
arch = "sm_90"
aliases = ["tg"]
sm_count = 10
l2_bytes = 1048576
xcds = 1
smem_per_sm = 65536
smem_per_block = 49152
regs_per_sm = 65536
regs_per_block = 65536
max_threads_per_block = 1024
max_threads_per_sm = 2048
warp_size = 32
mem_bandwidth_gbs = 100

[sources]
sm_count = "measured"
l2_bytes = "measured"
smem_per_sm = "table"
smem_per_block = "table"
regs_per_sm = "table"
regs_per_block = "table"
max_threads_per_block = "table"
max_threads_per_sm = "table"
warp_size = "table"
mem_bandwidth_gbs = "datasheet"
"""


def write(tmp_path: Path, text: str, name: str = "gpu.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ shipped profiles


def test_every_gpu_has_a_profile_named_after_its_file() -> None:
    profiles = list_profiles()
    assert {p.name for p in profiles} == EXPECTED
    assert [p.name for p in profiles] == sorted(EXPECTED)
    assert {p.stem for p in HW_DIR.glob("*.toml")} == EXPECTED


def test_every_figure_names_its_source() -> None:
    unsourced = ("name", "vendor", "arch", "aliases", "sources", "xcds")
    figures = [f.name for f in fields(HwProfile) if f.name not in unsourced]
    for profile in list_profiles():
        for figure in figures:
            if getattr(profile, figure) is not None:
                assert profile.sources.get(figure), f"{profile.name}: no source for {figure}"


def test_reference_figures_of_h100_and_h200() -> None:
    h100, h200 = load_profile("h100-sxm"), load_profile("h200")
    assert (h100.sm_count, h100.l2_bytes, h100.mem_bandwidth_gbs) == (132, 50 * MIB, 3000.0)
    assert (h200.sm_count, h200.l2_bytes, h200.mem_bandwidth_gbs) == (132, 60 * MIB, 4300.0)
    assert "measured" in h200.sources["mem_bandwidth_gbs"] and "REFERENCE.md" in h200.sources["l2_bytes"]
    assert h100.arch == h200.arch == "sm_90"


def test_chiplet_profiles() -> None:
    mi300x, mi250x = load_profile("mi300x"), load_profile("mi250x")
    assert mi300x.is_chiplet and mi300x.xcds == 8 and mi300x.warp_size == 64
    assert mi300x.l2_bytes == 8 * 4 * MIB == mi300x.l2_bytes_per_xcd * mi300x.xcds  # type: ignore[operator]
    assert not mi250x.is_chiplet and mi250x.sm_count == 110  # one GCD is one device
    assert all(not p.is_chiplet for p in list_profiles() if p.vendor == "nvidia")


def test_asynchronous_copies_are_nvidia_sm_80_and_later() -> None:
    """cp.async (global to shared memory without registers) decides how smem-tile stages."""
    import dataclasses

    assert {p.name for p in list_profiles() if p.async_copies} == {
        p.name for p in list_profiles() if p.vendor == "nvidia"
    }  # every NVIDIA profile shipped is sm_80 or later
    assert not load_profile("mi300x").async_copies
    assert not dataclasses.replace(load_profile("a100"), arch="sm_75").async_copies
    assert dataclasses.replace(load_profile("a100"), arch="sm_100a").async_copies


def test_lookup_by_name_alias_and_path() -> None:
    assert load_profile("H100").name == "h100-sxm"
    assert load_profile(" h200-sxm ").name == "h200"
    assert load_profile(str(HW_DIR / "l40s.toml")).name == "l40s"
    assert hash(load_profile("a100")) == hash(load_profile("a100"))


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown hardware profile 'b200'; known: a100, h100-pcie, .*rtx4090"):
        load_profile("b200")


# ------------------------------------------------------------------------ validation


def test_valid_custom_file(tmp_path: Path) -> None:
    profile = load_profile(str(write(tmp_path, VALID)))
    assert profile.name == "test-gpu" and profile.aliases == ("tg",) and profile.mem_bandwidth_gbs == 100.0
    assert profile.l2_slices is None and profile.to_dict()["is_chiplet"] is False


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace("sm_count = 10\n", ""), "sm_count"),
        (lambda t: t.replace("sm_count = 10", 'sm_count = "ten"'), "sm_count"),
        (lambda t: t.replace("sm_count = 10", "sm_count = 0"), "sm_count"),
        (lambda t: t.replace('vendor = "nvidia"', 'vendor = "intel"'), "vendor"),
        (lambda t: t.replace('arch = "sm_90"', 'arch = "gfx942"'), "arch"),
        (lambda t: t.replace("warp_size = 32", "warp_size = 64"), "warp_size"),
        (lambda t: t.replace("xcds = 1", "xcds = 2"), "xcds"),
        (lambda t: t.replace("smem_per_block = 49152", "smem_per_block = 99999999"), "smem_per_block"),
        (lambda t: t.replace("mem_bandwidth_gbs = 100", "mem_bandwidth_gbs = true"), "mem_bandwidth_gbs"),
        (lambda t: t.replace('aliases = ["tg"]', 'aliases = "tg"'), "aliases"),
        (lambda t: "bogus = 1\n" + t, "bogus"),
        (lambda t: t.replace('warp_size = "table"\n', ""), "sources.warp_size"),
        (lambda t: t + 'sm_cout = "typo"\n', "sources.sm_cout"),
        (lambda t: t.replace("l2_bytes = 1048576", "l2_bytes = 1048576\nl2_slices = 4"), "sources.l2_slices"),
    ],
)
def test_invalid_file_names_file_and_field(tmp_path: Path, edit, field: str) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, edit(VALID))
    with pytest.raises(SpecError) as info:
        load_profile(str(path))
    assert str(info.value).startswith(f"{path}: field '{field}'")


def test_amd_chiplet_needs_consistent_l2(tmp_path: Path) -> None:
    amd = VALID.replace('"nvidia"', '"amd"').replace('"sm_90"', '"gfx942"').replace("xcds = 1", "xcds = 8")
    with pytest.raises(SpecError, match="field 'l2_bytes_per_xcd': required when xcds > 1"):
        load_profile(str(write(tmp_path, amd)))
    with pytest.raises(SpecError, match="field 'l2_bytes': must equal l2_bytes_per_xcd"):
        load_profile(str(write(tmp_path, amd.replace("xcds = 8", "xcds = 8\nl2_bytes_per_xcd = 4096"))))


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read hardware profile"):
        load_profile_file(tmp_path / "missing.toml")
    with pytest.raises(SpecError, match="invalid TOML"):
        load_profile(str(write(tmp_path, "name = ")))


# ------------------------------------------------------------------------- detection


def test_match_device_by_sm_count_and_l2() -> None:
    assert match_device("NVIDIA H100 80GB HBM3", 132, 50 * MIB).name == "h100-sxm"
    assert match_device("NVIDIA H200", 132, 60 * MIB).name == "h200"
    assert match_device("NVIDIA H100 PCIe", 114, 50 * MIB).name == "h100-pcie"
    assert match_device("NVIDIA A100-SXM4-80GB", 108, 40 * MIB).name == "a100"
    assert match_device("NVIDIA GeForce RTX 4090", 128, 72 * MIB).name == "rtx4090"
    with pytest.raises(KxformError, match=r"no hardware profile matches 'NVIDIA H100 MIG 1g.10gb' \(16 SMs"):
        match_device("NVIDIA H100 MIG 1g.10gb", 16, 50 * MIB)


def _fake_smi(folder: Path, output: str, status: int = 0) -> dict[str, str]:
    """A `nvidia-smi` on PATH that prints `output` for the query `detect` sends (and
    fails for any other), run as a real subprocess."""
    folder.mkdir(exist_ok=True)
    script = folder / "nvidia-smi"
    query = " ".join(SMI_QUERY[1:])
    script.write_text(
        f'#!/bin/sh\nif [ "$*" != "{query}" ]; then echo "bad query: $*" >&2; exit 9; fi\n'
        f"cat <<'OUT'\n{output}OUT\nexit {status}\n"
    )
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.parametrize(
    ("smi_line", "expected"),
    [
        ("NVIDIA H100 80GB HBM3, 9.0, 81559\n", "h100-sxm"),
        ("NVIDIA H100 PCIe, 9.0, 81559\n", "h100-pcie"),
        ("NVIDIA H200, 9.0, 143771\nNVIDIA H200, 9.0, 143771\n", "h200"),
        ("NVIDIA GeForce RTX 4090, 8.9, 24564\n", "rtx4090"),
    ],
)
def test_detect_reads_nvidia_smi(tmp_path: Path, smi_line: str, expected: str) -> None:
    proc = run_kxform("hw", "detect", "--json", env=_fake_smi(tmp_path / "bin", smi_line))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["name"] == expected


def test_detect_failures_are_one_line(tmp_path: Path) -> None:
    proc = run_kxform("hw", "detect", env=_fake_smi(tmp_path / "b", "NVIDIA Quadro P1000, 6.1, 4096\n"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "no hardware profile matches 'NVIDIA Quadro P1000' (compute capability 6.1)" in proc.stderr
    proc = run_kxform("hw", "detect", env=_fake_smi(tmp_path / "c", "No devices were found\n", status=6))
    assert proc.returncode == 2 and "nvidia-smi: No devices were found" in proc.stderr
    proc = run_kxform("hw", "detect", env={"PATH": str(tmp_path / "empty")})
    assert proc.returncode == 2 and "nvidia-smi is not on PATH" in proc.stderr


@pytest.mark.gpu
def test_detect_on_a_gpu() -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not on PATH: no NVIDIA driver here")
    assert detect().vendor == "nvidia"


# ------------------------------------------------------------------------------- CLI


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from kxform.cli.main import main

    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["hw", "list"], capsys)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["NAME", "VENDOR", "ARCH"]
    assert any(line.startswith("mi300x") and " 8 " in line for line in out.splitlines())
    code, out, _ = run_cli(["hw", "list", "--json"], capsys)
    assert code == 0 and {p["name"] for p in json.loads(out)} == EXPECTED
    code, out, _ = run_cli(["hw", "show", "h100"], capsys)
    assert code == 0 and "l2_bytes" in out and "50 MiB" in out and "source: measured" in out
    code, out, _ = run_cli(["hw", "show", "mi300x", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["is_chiplet"] is True and data["sources"]["xcds"]


def test_cli_errors_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(["hw", "show", "nope"], capsys)
    assert code == 2 and err.count("\n") == 1 and "unknown hardware profile 'nope'" in err
    code, _, err = run_cli(["hw", "show", str(write(tmp_path, "name = 1\n"))], capsys)
    assert code == 2 and "field 'name'" in err


def test_formatters_cover_every_profile() -> None:
    profiles = list_profiles()
    assert len(format_table(profiles).splitlines()) == len(profiles) + 1
    text = format_profile(load_profile("mi250x"))
    assert "l2_bytes_per_xcd" in text and "l2_slices" not in text
