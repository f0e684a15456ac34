"""`kxform tune --sizes ... --dispatch OUT.h`: per-size winners as a C++ decision table.

The times are replayed (`--objective cpu+replay:FILE`, one summary per size) and chosen
so that every size has a different winner, the original included; each configuration
is still rewritten, compiled and verified on the CPU runtime. The header is compiled by
nvcc and by g++ into a host program whose `pick` answers are checked against classes
worked out by hand, for sizes on, between and beyond the classes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPORA, NVCC, needs_nvcc, run_cli

from kxform.engine.params import Param
from kxform.errors import InputError
from kxform.hw import load_profile
from kxform.search.dispatch import (
    MARKER,
    SizeClass,
    build_table,
    check_writable,
    pick_class,
    render,
    write_header,
)
from kxform.search.kernel_space import kernel_space

KERNEL = "sgemm_tiled"
PASS = ("--pass", "tile", "--require", "tile.TILE >= 8", "--strategy", "exhaustive")
WINNERS = {"tiles": 8, "ragged": 32, "bench": None}
"""The fastest configuration recorded per size: TILE=8, TILE=32, the original (None)."""


def _ms(size: str, config: dict[str, Any]) -> float:
    tile = config["tile.TILE"] if config["tile"] else None
    return 5.0 if tile == WINNERS[size] else 9.0 if tile else 10.0 if WINNERS[size] else 9.5


def _setup(tmp_path: Path, sizes: tuple[str, ...]) -> Path:
    shutil.copytree(CORPORA / KERNEL, tmp_path / "k")
    source = tmp_path / "k" / f"{KERNEL}.cu"
    rows = kernel_space(source.read_bytes(), KERNEL, ("tile",), path=str(source), hw="h100").search(
        load_profile("h100")
    )
    summaries = [
        {
            "kernel": KERNEL,
            "size": size,
            "evaluations": [
                {"params": rows.config(r), "time_ms": _ms(size, rows.config(r)), "spread_ms": 0.05}
                for r in range(len(rows))
            ],
        }
        for size in sizes
    ]
    (tmp_path / "times.json").write_text(json.dumps({"kernel": KERNEL, "sizes": summaries}))
    return source


def _tune(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"OPENBLAS_NUM_THREADS": "1"}
    return run_cli(
        "tune",
        "k/sgemm_tiled.cu",
        "--kernel",
        KERNEL,
        "--db",
        str(cwd / "t.sqlite"),
        "--log",
        "t.jsonl",
        *args,
        cwd=cwd,
        env=env,
        timeout=600,
    )


PROBE = """#include <cstdio>
#include "d.h"
using namespace kxform_dispatch_sgemm_tiled;
int main() {
  const long long asked[][3] = {ASKED};
  for (const auto& a : asked) {
    const Entry& e = pick(a[0], a[1], a[2]);
    std::printf("%s %d %d %lld\\n", e.size, e.config.original, e.config.tile, e.config.tile_TILE);
  }
  static_assert(pick(1, 1, 1).M == 70, "pick is usable in constant expressions");
  return 0;
}
"""

ASKED = {  # (M, N, K) -> the class by the rule: the smallest (by volume) >= in every variable, else the largest
    (70, 45, 33): "ragged",
    (1, 1, 1): "ragged",
    (60, 40, 30): "ragged",  # on and below the smallest
    (64, 64, 64): "tiles",
    (64, 46, 33): "tiles",
    (71, 10, 10): "bench",  # between classes
    (100, 100, 100): "bench",
    (8192, 8192, 8192): "bench",
    (9000, 1, 1): "bench",
    (10**6, 10**6, 10**6): "bench",
}  # beyond every class: the largest


@pytest.mark.slow
@needs_nvcc
def test_dispatch_header_holds_each_size_s_winner_compiles_and_picks_by_the_documented_rule(tmp_path: Path) -> None:
    _setup(tmp_path, tuple(WINNERS))
    proc = _tune(
        tmp_path,
        *PASS,
        "--objective",
        "cpu+replay:times.json",
        "--sizes",
        "tiles,ragged,bench",
        "--dispatch",
        "d.h",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [s["size"] for s in out["sizes"]] == ["tiles", "ragged", "bench"]
    for summary in out["sizes"]:  # each size's run found its own winner
        won = summary["result"]["values"].get("tile.TILE")
        assert won == WINNERS[summary["size"]] and summary["result"]["kept_original"] == (won is None)
    classes = out["dispatch"]["classes"]
    assert [c["size"] for c in classes] == ["ragged", "tiles", "bench"]  # by volume
    assert {c["size"]: c["original"] for c in classes} == {"ragged": False, "tiles": False, "bench": True}
    header = (tmp_path / "d.h").read_text()
    assert header.startswith(MARKER + "\n")
    assert '{"ragged", 70, 45, 33, {false, true, 32}}' in header
    assert '{"tiles", 64, 64, 64, {false, true, 8}}' in header
    assert '{"bench", 8192, 8192, 8192, {true, false, 16}}' in header  # the original: TILE as written
    compiled = subprocess.run(
        [str(NVCC), "-x", "cu", "-std=c++17", "-c", "d.h", "-o", "d.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: the host program that checks pick() cannot be built")
    probe = PROBE.replace("ASKED", ", ".join(f"{{{m}, {n}, {k}}}" for m, n, k in ASKED))
    (tmp_path / "probe.cpp").write_text(probe)
    built = subprocess.run(
        [gxx, "-std=c++17", "-Wall", "-Werror", "probe.cpp", "-o", "probe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    lines = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout.splitlines()
    expected = {name: (WINNERS[name] is None, WINNERS[name] or 16) for name in WINNERS}
    for asked, line in zip(ASKED, lines, strict=True):
        name, original, tile, value = line.split()
        assert name == ASKED[asked], (asked, line)
        assert (original == "1", int(value)) == expected[name] and (tile == "1") == (not expected[name][0])


@pytest.mark.slow
@needs_nvcc
def test_a_size_with_nothing_verified_and_timed_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    _setup(tmp_path, ("tiles",))  # no times for 'ragged'
    proc = _tune(tmp_path, *PASS, "--objective", "cpu+replay:times.json", "--sizes", "ragged", "--dispatch", "d.h")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "size 'ragged': no configuration was verified and timed" in lines[0]
    assert not (tmp_path / "d.h").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--sizes", "tiles,huge"), "--sizes tiles,huge: kernel 'sgemm_tiled' has no size 'huge' (sizes: tiles, "),
        (("--sizes", "tiles,tiles"), "a size is named twice"),
        (("--sizes", "tiles", "--size", "bench"), "--sizes/--dispatch: --size is one size's option"),
        (("--sizes", "tiles", "--write"), "--sizes/--dispatch: --write is one size's option"),
        (("--sizes", "tiles", "--gpus", "all"), "--sizes/--dispatch: --gpus/--ray is one size's option"),
        (("--sizes", "tiles", "--objective", "replay:x.json"), "a recorded space has no sizes"),
        (("--dispatch", "nodir/d.h"), "--dispatch nodir/d.h: its directory does not exist"),
        (("--dispatch", "mine.h"), "--dispatch mine.h: exists and was not generated by `kxform tune --dispatch`"),
    ],
)
def test_bad_dispatch_arguments_are_one_line_exit_2_and_nothing_written(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    _setup(tmp_path, ("tiles",))
    (tmp_path / "mine.h").write_text("// my own header\n")
    proc = _tune(tmp_path, *PASS, "--objective", "cpu+replay:times.json", "--dispatch", "d.h", *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "d.h").exists() and (tmp_path / "mine.h").read_text() == "// my own header\n"
    assert not (tmp_path / "t.sqlite").exists()  # refused before any evaluation


def _table(configs: dict[str, dict[str, Any] | None]) -> Any:
    params = (
        Param.ints("tile.TILE", (8, 16, 32), 16),
        Param("swizzle.pattern", "enum", ("column", "grouped"), "column"),
    )
    sizes = {"a": {"M": 10, "N": 10}, "b": {"M": 100, "N": 5}}
    classes = [SizeClass(name, sizes[name], config) for name, config in configs.items()]
    return build_table("k<float>", ("tile", "swizzle"), params, {"tile.TILE": 16, "swizzle.pattern": "column"}, classes)


def test_the_table_is_typed_from_the_space_and_refuses_values_outside_it(tmp_path: Path) -> None:
    good = {"tile": True, "swizzle": True, "tile.TILE": 32, "swizzle.pattern": "grouped"}
    table = _table({"b": good, "a": None})
    text = render(table)
    assert "enum class swizzle_pattern_t : int { column = 0, grouped = 1 };" in text
    assert '{"b", 100, 5, {false, true, true, 32, swizzle_pattern_t::grouped}}' in text
    assert '{"a", 10, 10, {true, false, false, 16, swizzle_pattern_t::column}}' in text
    assert "namespace kxform_dispatch_k_float_ {" in text
    assert pick_class(table, {"M": 50, "N": 5}).name == "b" and pick_class(table, {"M": 5, "N": 9}).name == "a"
    assert pick_class(table, {"M": 5, "N": 50}).name == "b"  # beyond every class: the largest
    for bad, cause in (
        ({**good, "tile.TILE": 64}, "tile.TILE=64 is not one of its values"),
        ({**good, "tile.TILE": "32"}, "tile.TILE='32' is not one of its values"),
        ({**good, "swizzle.pattern": "row"}, "swizzle.pattern='row' is not one of its values"),
        ({k: v for k, v in good.items() if k != "tile"}, "its configuration has no value for 'tile'"),
    ):
        with pytest.raises(InputError, match=re.escape("size 'b': " + cause)):
            _table({"b": bad, "a": None})
    with pytest.raises(InputError, match="sizes 'a' and 'b' have the same values"):
        build_table("k", (), (), {}, [SizeClass("a", {"M": 1}, None), SizeClass("b", {"M": 1}, None)])


def test_a_generated_header_is_replaced_and_any_other_file_is_refused(tmp_path: Path) -> None:
    table = _table({"a": None})
    out = tmp_path / "d.h"
    write_header(str(out), table)
    write_header(str(out), _table({"b": None}))  # its own earlier output: replaced
    assert '{"b", 100, 5,' in out.read_text()
    foreign = tmp_path / "f.h"
    foreign.write_text("#pragma once\n" + MARKER + "\n")  # the marker, but not as the first line
    with pytest.raises(InputError, match="was not generated by"):
        write_header(str(foreign), table)
    assert foreign.read_text() == "#pragma once\n" + MARKER + "\n"
    with pytest.raises(InputError, match="is a directory"):
        check_writable(str(tmp_path))


def test_a_recording_of_several_sizes_gives_each_size_its_own_times(tmp_path: Path) -> None:
    from kxform.search.recorded_times import load_times

    def summary(size: str, ms: float) -> dict[str, Any]:
        return {
            "kernel": KERNEL,
            "size": size,
            "original_ms": ms * 2,
            "evaluations": [{"params": {"tile": True, "tile.TILE": 8}, "time_ms": ms}],
        }

    path = tmp_path / "sizes.json"
    path.write_text(json.dumps({"kernel": KERNEL, "sizes": [summary("tiles", 1.5), summary("bench", 7.0)]}))
    config = {"tile.TILE": 8, "tile": True}  # any order
    for size, ms in (("tiles", 1.5), ("bench", 7.0)):
        times = load_times(path, KERNEL, size)
        timing = times.timing(config)
        assert timing is not None and timing.median_ms == ms and times.original is not None
        assert times.original.median_ms == ms * 2
    assert load_times(path, KERNEL, "ragged").timing(config) is None  # a size it lacks has no times
    with pytest.raises(InputError, match="times of kernel 'sgemm_tiled', not 'other'"):
        load_times(path, "other", "tiles")
