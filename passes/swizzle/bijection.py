"""Check (a): the emitted remap helper itself is a bijection.

The helper text that would be written is compiled for the host with the system C++
compiler (with a few definitions standing in for CUDA's) and run over every grid from
1x1 to 64x64 plus sampled large grids up to 65535 on a side: each physical block must map
to a distinct, in-range logical block. Checking the emitted code, not a model of it,
catches emitter bugs. Given the helper of the formula the solver proved (proof.py), it
also holds the emitted helper to it: the same tile for every block of every grid run.
Results are cached by the hash of the helpers and the compiler.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kxform.build.toolchain import HostCompiler
from kxform.cache import cache_root, content_key
from kxform.errors import CheckFailed
from kxform.fileio import write_atomic

EXHAUSTIVE_SIDE = 64
LARGE_SHAPES: tuple[tuple[int, int], ...] = (
    (65535, 1),
    (1, 65535),
    (65535, 2),
    (3, 65535),
    (65535, 7),
    (64, 65535),
    (65535, 65),
    (4097, 1023),
    (1000, 1000),
    (1024, 1024),
    (257, 255),
    (4095, 4097),
    (12345, 321),
)
CHECKER_VERSION = "2"

_HOST_PRELUDE = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __device__
#define __forceinline__ inline
struct uint2 { unsigned x, y; };
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
"""

_HOST_MAIN = r"""
static int check(unsigned gx, unsigned gy) {
    std::vector<unsigned char> seen((size_t)gx * gy, 0);
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            uint2 l = HELPER(bx, by, gx, gy);
#ifdef REFERENCE
            uint2 r = REFERENCE(bx, by, gx, gy);
            if (r.x != l.x || r.y != l.y) {
                std::printf("grid %ux%u: block (%u,%u) -> (%u,%u), the proven formula gives (%u,%u)\n",
                            gx, gy, bx, by, l.x, l.y, r.x, r.y);
                return 1;
            }
#endif
            if (l.x >= gx || l.y >= gy) {
                std::printf("grid %ux%u: block (%u,%u) -> (%u,%u) out of range\n", gx, gy, bx, by, l.x, l.y);
                return 1;
            }
            unsigned char &s = seen[(size_t)l.y * gx + l.x];
            if (s) {
                std::printf("grid %ux%u: block (%u,%u) -> (%u,%u) already taken\n", gx, gy, bx, by, l.x, l.y);
                return 1;
            }
            s = 1;
        }
    return 0;
}
int main(int argc, char **argv) {
    for (unsigned gy = 1; gy <= SIDE; ++gy)
        for (unsigned gx = 1; gx <= SIDE; ++gx)
            if (check(gx, gy)) return 1;
    for (int i = 1; i + 1 < argc; i += 2)
        if (check((unsigned)std::atoi(argv[i]), (unsigned)std::atoi(argv[i + 1]))) return 1;
    std::puts("ok");
    return 0;
}
"""


@dataclass(frozen=True)
class BijectionReport:
    ok: bool
    shapes: int
    detail: str
    cached: bool


def host_compiler() -> HostCompiler | None:
    """The host compiler of the toolchain service (kxform.build.toolchain)."""
    return HostCompiler.find()


_memo: dict[str, BijectionReport] = {}


def check_helper(helper_source: str, helper_name: str, reference: tuple[tuple[str, str], ...] = ()) -> BijectionReport:
    """Compile and run the exhaustive check; raise CheckFailed with the counterexample.
    `reference`: (source, name) of stage helpers applied in turn (the proven formula);
    the emitted helper must agree with their composition on every block checked."""
    compiler = host_compiler()
    if compiler is None:
        raise CheckFailed("bijection", "no host C++ compiler (set CXX) to check the emitted remap")
    key = content_key(
        CHECKER_VERSION, helper_source, helper_name, compiler.version, *[part for pair in reference for part in pair]
    )
    shapes = EXHAUSTIVE_SIDE * EXHAUSTIVE_SIDE + len(LARGE_SHAPES)
    if key in _memo:
        return _memo[key]
    marker = cache_root() / "bijection" / f"{key}.ok"
    if marker.exists():
        report = BijectionReport(True, shapes, marker.read_text(encoding="utf-8"), cached=True)
        _memo[key] = report
        return report
    program = "\n".join(
        [
            _HOST_PRELUDE,
            helper_source,
            *_reference(reference),
            f"#define HELPER {helper_name}",
            f"#define SIDE {EXHAUSTIVE_SIDE}u",
            _HOST_MAIN,
        ]
    )
    with tempfile.TemporaryDirectory(prefix="kxform-bij-") as tmp:
        src = Path(tmp) / "check.cpp"
        exe = Path(tmp) / "check"
        src.write_text(program, encoding="utf-8")
        build = subprocess.run(
            [*compiler.command, "-O2", "-std=c++17", "-o", str(exe), str(src)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if build.returncode != 0:
            first = next((line for line in build.stderr.splitlines() if "error" in line), build.stderr.strip())
            raise CheckFailed("bijection", f"emitted helper does not compile for the host: {first}")
        args = [str(v) for shape in LARGE_SHAPES for v in shape]
        run = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise CheckFailed("bijection", f"emitted remap is not a bijection: {run.stdout.strip()}")
    detail = f"{shapes} grid shapes (1x1..{EXHAUSTIVE_SIDE}x{EXHAUSTIVE_SIDE} and {len(LARGE_SHAPES)} up to 65535)"
    if reference:
        detail += ", equal to the proven formula on each"
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, detail.encode())  # a temporary name of its own: threads check side by side
    report = BijectionReport(True, shapes, detail, cached=False)
    _memo[key] = report
    return report


def _reference(stages: tuple[tuple[str, str], ...]) -> list[str]:
    """The stage helpers and `REFERENCE`, their composition (none: no comparison)."""
    if not stages:
        return []
    calls = "l"
    lines = [source for source, _ in stages]
    body = ["    uint2 l = make_uint2(bx, by);"]
    for _, name in stages:
        body.append(f"    l = {name}(l.x, l.y, gx, gy);")
    lines.append(
        "static uint2 kxform_reference(unsigned bx, unsigned by, unsigned gx, unsigned gy) {\n"
        + "\n".join(body)
        + f"\n    return {calls};\n}}"
    )
    lines.append("#define REFERENCE kxform_reference")
    return lines
