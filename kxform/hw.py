"""Hardware profiles: the figures of one GPU model that passes and tuners reason with.

Profiles are TOML files, one per GPU, shipped in the top-level `hw/` directory (installed
as the package data `kxform.hwdata`). Every figure carries its source in a `[sources]`
table, because a swizzle or tile choice is only as good as the L2 size or SM count it
assumed, and a reader must be able to check where that number came from.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from kxform.errors import KxformError, Location, SpecError, UsageError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_DATA_PACKAGE = "kxform.hwdata"
_REPO_HW_DIR = Path(__file__).resolve().parent.parent / "hw"

_INT_FIGURES = (
    "sm_count",
    "l2_bytes",
    "xcds",
    "smem_per_sm",
    "smem_per_block",
    "regs_per_sm",
    "regs_per_block",
    "max_threads_per_block",
    "max_threads_per_sm",
    "warp_size",
)
_OPTIONAL_INT_FIGURES = ("l2_bytes_per_xcd", "l2_slices")
_LOCALITY_INT_FIGURES = (
    "max_blocks_per_sm",
    "l2_line_bytes",
    "l2_sector_bytes",
    "l2_ways",
    "l2_partitions",
    "schedulers_per_sm",
    "dram_page_bytes",
    "clock_mhz",
)
"""Optional figures the L2/DRAM locality model reads (kxform.locality; docs/locality-model.md)."""
_SOURCED = tuple(f for f in _INT_FIGURES if f != "xcds") + ("mem_bandwidth_gbs",)
"""Figures that must name a source (xcds is 1 by definition on NVIDIA parts)."""

_ARCH_RE = {"nvidia": re.compile(r"^sm_\d{2,3}[af]?$"), "amd": re.compile(r"^gfx[0-9a-f]{3,4}$")}
_WARP_SIZES = {"nvidia": (32,), "amd": (32, 64)}


@dataclass(frozen=True)
class HwProfile:
    """One GPU model. On AMD parts "SM" figures are per compute unit (CU)."""

    name: str
    vendor: str
    arch: str
    sm_count: int
    l2_bytes: int
    xcds: int
    smem_per_sm: int
    smem_per_block: int
    regs_per_sm: int
    regs_per_block: int
    max_threads_per_block: int
    max_threads_per_sm: int
    warp_size: int
    mem_bandwidth_gbs: float
    aliases: tuple[str, ...]
    sources: dict[str, str] = field(hash=False)
    """Figure name -> where it comes from (datasheet, CUDA tables, or "measured: ...")."""
    l2_bytes_per_xcd: int | None = None
    l2_slices: int | None = None
    max_blocks_per_sm: int | None = None
    l2_line_bytes: int | None = None
    l2_sector_bytes: int | None = None
    l2_ways: int | None = None
    l2_partitions: int | None = None
    """L2 partitions of one die that each cache for their own SMs (NVIDIA A100/H100: 2)."""
    schedulers_per_sm: int | None = None
    dram_page_bytes: int | None = None
    clock_mhz: int | None = None
    fp32_tflops: float | None = None
    """Peak FP32 arithmetic (non-tensor, fused multiply-add counted as two), TFLOP/s: the
    compute side of the tuner's roofline bound (kxform.search.cost)."""

    @property
    def is_chiplet(self) -> bool:
        """True when blocks are spread over dies with separate L2s (MI300X): the L2 a
        block shares with its neighbours is `l2_bytes_per_xcd`, not `l2_bytes`."""
        return self.xcds > 1

    @property
    def async_copies(self) -> bool:
        """Whether the GPU copies global memory into shared memory without going through
        registers (cp.async, `__pipeline_memcpy_async`): NVIDIA compute capability 8.0 and later."""
        m = re.match(r"sm_(\d+)", self.arch)
        return self.vendor == "nvidia" and m is not None and int(m.group(1)) >= 80

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, field order as declared, `is_chiplet` included."""
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        data["aliases"] = list(self.aliases)
        data["sources"] = dict(self.sources)
        data["is_chiplet"] = self.is_chiplet
        return data


# ---------------------------------------------------------------------------- loading


def parse_profile(data: Mapping[str, Any], path: str) -> HwProfile:
    """Validate TOML data and build a profile; `path` only names the file in errors."""
    known = {f.name for f in fields(HwProfile)}
    for key in data:
        if key not in known:
            raise _bad(path, key, "unknown field (typo?)")
    for key in ("name", "vendor", "arch"):
        _require_str(data, key, path)
    vendor = data["vendor"]
    if vendor not in _ARCH_RE:
        raise _bad(path, "vendor", f"must be 'nvidia' or 'amd', not {vendor!r}")
    if not _ARCH_RE[vendor].match(data["arch"]):
        raise _bad(path, "arch", f"{data['arch']!r} is not a {vendor} architecture name")
    ints = {key: _require_int(data, key, path) for key in _INT_FIGURES}
    optional = {key: _optional_int(data, key, path) for key in _OPTIONAL_INT_FIGURES + _LOCALITY_INT_FIGURES}
    bandwidth = data.get("mem_bandwidth_gbs")
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or bandwidth <= 0:
        raise _bad(path, "mem_bandwidth_gbs", "required, a positive number of GB/s")
    flops = data.get("fp32_tflops")
    if flops is not None and (isinstance(flops, bool) or not isinstance(flops, (int, float)) or flops <= 0):
        raise _bad(path, "fp32_tflops", "a positive number of TFLOP/s")
    _check_consistency(vendor, ints, optional, path)
    aliases = _str_list(data.get("aliases", []), "aliases", path)
    sources = _sources(data, {**optional, "fp32_tflops": flops}, path)
    return HwProfile(
        name=data["name"],
        vendor=vendor,
        arch=data["arch"],
        sm_count=ints["sm_count"],
        l2_bytes=ints["l2_bytes"],
        xcds=ints["xcds"],
        smem_per_sm=ints["smem_per_sm"],
        smem_per_block=ints["smem_per_block"],
        regs_per_sm=ints["regs_per_sm"],
        regs_per_block=ints["regs_per_block"],
        max_threads_per_block=ints["max_threads_per_block"],
        max_threads_per_sm=ints["max_threads_per_sm"],
        warp_size=ints["warp_size"],
        mem_bandwidth_gbs=float(bandwidth),
        aliases=aliases,
        sources=sources,
        fp32_tflops=None if flops is None else float(flops),
        **optional,
    )


MAX_PROFILE_BYTES = 1 << 20


def load_profile_file(path: str | Path) -> HwProfile:
    """Read and validate one profile file."""
    file = Path(path)
    from kxform.frontend.source import read_text_bounded

    try:
        text = read_text_bounded(file, MAX_PROFILE_BYTES, "a hardware profile")
    except UnicodeDecodeError:
        raise SpecError("hardware profile is not UTF-8 text", Location(str(file))) from None
    except OSError as exc:
        raise SpecError(f"cannot read hardware profile: {exc.strerror or exc}", Location(str(file))) from None
    return _parse_text(text, str(file))


def list_profiles() -> list[HwProfile]:
    """Every shipped profile, sorted by name."""
    profiles = [_parse_text(text, origin) for origin, text in _shipped_texts()]
    return sorted(profiles, key=lambda p: p.name)


def is_profile_path(name_or_path: str) -> bool:
    """Whether `load_profile` reads `name_or_path` as a file (else as a shipped name)."""
    return name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path


def load_profile(name_or_path: str) -> HwProfile:
    """A shipped profile by name or alias (case-insensitive), or a `.toml` file by path."""
    if is_profile_path(name_or_path):
        return load_profile_file(name_or_path)
    wanted = name_or_path.strip().lower()
    profiles = list_profiles()
    for profile in profiles:
        if wanted == profile.name or wanted in (a.lower() for a in profile.aliases):
            return profile
    known = ", ".join(p.name for p in profiles)
    names = [p.name for p in profiles] + [a.lower() for p in profiles for a in p.aliases]
    raise UsageError(f"unknown hardware profile {name_or_path!r}; known: {known}{did_you_mean(wanted, names)}")


# -------------------------------------------------------------------------- detection


def match_device(
    device_name: str, sm_count: int, l2_bytes: int, profiles: Iterable[HwProfile] | None = None
) -> HwProfile:
    """The NVIDIA profile whose SM count and L2 size are those of the device.

    SM count and L2 size tell the shipped parts apart (H100 SXM and H200 share 132 SMs
    but not the L2); the device name only breaks ties. A part with the same counts as
    a profile (an A100 40GB against `a100`) maps to it: pass a profile file when the
    bandwidth figure matters. MIG slices and unknown parts match nothing.
    """
    candidates = [
        p
        for p in (profiles if profiles is not None else list_profiles())
        if p.vendor == "nvidia" and p.sm_count == sm_count and _close(p.l2_bytes, l2_bytes)
    ]
    if not candidates:
        raise KxformError(
            f"no hardware profile matches {device_name!r} ({sm_count} SMs, "
            f"{l2_bytes // (1 << 20)} MiB L2); write one (see docs/hardware.md) and pass its path"
        )
    tokens = set(re.findall(r"[a-z0-9]+", device_name.lower()))
    return max(candidates, key=lambda p: len(tokens & _name_tokens(p)))


SMI_QUERY = ("nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits")
"""What `detect` asks the driver's own tool: no compiled Python package is needed to
read a GPU's name (pycuda is for running kernels)."""


def detect() -> HwProfile:
    """The profile of GPU 0, read with `nvidia-smi` (`SMI_QUERY`) and matched by name and
    compute capability (`match_name`)."""
    import shutil
    import subprocess

    exe = shutil.which(SMI_QUERY[0])
    if exe is None:
        raise KxformError(
            "cannot detect the GPU: nvidia-smi is not on PATH (is the NVIDIA driver installed?); pass --hw NAME"
        )
    try:
        proc = subprocess.run([exe, *SMI_QUERY[1:]], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KxformError(f"cannot detect the GPU: nvidia-smi did not run: {exc}") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        said = " ".join((proc.stderr or proc.stdout).split()) or f"exit status {proc.returncode}"
        raise KxformError(f"cannot detect the GPU: nvidia-smi: {said}")
    fields = [f.strip() for f in lines[0].split(",")]
    if len(fields) < 2:
        raise KxformError(f"cannot detect the GPU: unexpected nvidia-smi output {lines[0]!r}")
    return match_name(fields[0], fields[1])


def match_name(device_name: str, compute_cap: str, profiles: Iterable[HwProfile] | None = None) -> HwProfile:
    """The NVIDIA profile of a device named `device_name` ("NVIDIA H100 80GB HBM3") with
    compute capability `compute_cap` ("9.0"): same architecture, most name tokens in
    common; a tie goes to the profile that has the model itself as its name or alias
    (`h100` is the SXM part: a PCIe part says "PCIe" in its name)."""
    arch = "sm_" + compute_cap.replace(".", "")
    tokens = set(re.findall(r"[a-z0-9]+", device_name.lower())) - {"nvidia", "tesla"}
    scored = [
        (len(tokens & _name_tokens(p)), bool(tokens & {p.name, *p.aliases}), p)
        for p in (profiles if profiles is not None else list_profiles())
        if p.vendor == "nvidia" and p.arch == arch
    ]
    scored = [s for s in scored if s[0] > 0]
    if not scored:
        raise KxformError(
            f"no hardware profile matches {device_name!r} (compute capability {compute_cap}); "
            "write one (see docs/hardware.md) and pass its path"
        )
    return max(scored, key=lambda s: (s[0], s[1]))[2]


# --------------------------------------------------------------------------- helpers


def _shipped_texts() -> list[tuple[str, str]]:
    """(origin, text) of each shipped profile: installed package data, else the repo's hw/."""
    try:
        root = resources.files(_DATA_PACKAGE)
        found = [(f"hw/{e.name}", e.read_text(encoding="utf-8")) for e in root.iterdir() if e.name.endswith(".toml")]
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        found = []
    if found:
        return found
    return [(str(p), p.read_text(encoding="utf-8")) for p in sorted(_REPO_HW_DIR.glob("*.toml"))]


def _parse_text(text: str, origin: str) -> HwProfile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"invalid TOML: {exc}", Location(origin)) from exc
    return parse_profile(data, origin)


def _bad(path: str, field: str, problem: str) -> SpecError:
    return SpecError(f"field '{field}': {problem}", Location(path))


def _require_str(data: Mapping[str, Any], key: str, path: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _bad(path, key, "required, a non-empty string")
    return value


def _require_int(data: Mapping[str, Any], key: str, path: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _bad(path, key, f"required, a positive integer (got {value!r})")
    return value


def _optional_int(data: Mapping[str, Any], key: str, path: str) -> int | None:
    return None if key not in data else _require_int(data, key, path)


def _str_list(value: object, key: str, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _bad(path, key, "must be a list of non-empty strings")
    return tuple(value)


def _check_consistency(vendor: str, ints: Mapping[str, int], optional: Mapping[str, int | None], path: str) -> None:
    if ints["warp_size"] not in _WARP_SIZES[vendor]:
        raise _bad(path, "warp_size", f"{ints['warp_size']} is not a {vendor} warp size")
    if vendor == "nvidia" and ints["xcds"] != 1:
        raise _bad(path, "xcds", "NVIDIA GPUs have one L2 domain: xcds = 1")
    per_xcd = optional["l2_bytes_per_xcd"]
    if ints["xcds"] > 1 and per_xcd is None:
        raise _bad(path, "l2_bytes_per_xcd", "required when xcds > 1")
    if per_xcd is not None and per_xcd * ints["xcds"] != ints["l2_bytes"]:
        raise _bad(path, "l2_bytes", "must equal l2_bytes_per_xcd * xcds")
    if ints["smem_per_block"] > ints["smem_per_sm"]:
        raise _bad(path, "smem_per_block", "exceeds smem_per_sm")
    if ints["max_threads_per_block"] > ints["max_threads_per_sm"]:
        raise _bad(path, "max_threads_per_block", "exceeds max_threads_per_sm")


def _sources(data: Mapping[str, Any], optional: Mapping[str, float | None], path: str) -> dict[str, str]:
    table = data.get("sources")
    if not isinstance(table, dict):
        raise _bad(path, "sources", "required, a table naming where each figure comes from")
    known = {f.name for f in fields(HwProfile)}
    for key, value in table.items():
        if key not in known:
            raise _bad(path, f"sources.{key}", "names no field of a profile")
        if not isinstance(value, str) or not value.strip():
            raise _bad(path, f"sources.{key}", "must be a non-empty string")
    needed = list(_SOURCED) + [k for k, v in optional.items() if v is not None]
    for key in needed:
        if key not in table:
            raise _bad(path, f"sources.{key}", "missing: every figure names its source")
    return dict(table)


def _close(expected: int, actual: int) -> bool:
    """L2 sizes as drivers report them differ from datasheet megabytes by a few percent."""
    return abs(expected - actual) <= 0.05 * expected


def _name_tokens(profile: HwProfile) -> set[str]:
    words = " ".join((profile.name, *profile.aliases)).lower()
    return set(re.findall(r"[a-z0-9]+", words))
