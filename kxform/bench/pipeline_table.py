"""The printed table of tools/bench_pipeline.py: one row per naive kernel, then the
geometric means (GPU run) or the verification and build summary (dry run)."""

from __future__ import annotations

from typing import Any


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def spaces_text(spaces: dict[str, Any]) -> str:
    """`tile: refused (NoTileSize); swizzle: 15 configurations`."""
    parts = []
    for name, what in spaces.items():
        if name == "offered":
            continue
        if "refused" in what:
            parts.append(f"{name}: refused ({what['refused'].split(':', 1)[0]})")
        else:
            parts.append(f"{name}: {what['configs']} configuration{'s' if what['configs'] != 1 else ''}")
    return "; ".join(parts)


def _verified(row: dict[str, Any]) -> str:
    v = row.get("verify", {})
    return " / ".join(v[side]["status"] if side in v else "-" for side in ("naive", "expert"))


def _kxform(row: dict[str, Any]) -> str:
    k = row.get("kxform")
    if not k:
        return "-"
    if k["status"] == "tuned":
        won = ", ".join(f"{a}={b}" for a, b in (k.get("best_config") or {}).items())
        failed = f" ({k['failed']} failed)" if k.get("failed") else ""
        kept = f"{k['kept']} kept" + (f" ({won})" if won and k["kept"] == "tuned" else "")
        return f"{'+'.join(k['passes']) or 'tune'}: {k['evaluated']} evals{failed}, {kept}"
    return f"{k['status']}" + (f": {k['detail'][:80]}" if k.get("detail") else "")


def _checker(row: dict[str, Any]) -> str:
    c = row.get("checker")
    if not c:
        return "-"
    found = [_checked(c)] + [f"{name}: {_checked(v)}" for name, v in row.get("structural", {}).items()]
    return "; ".join(found)


def _checked(c: dict[str, Any]) -> str:
    if c["status"] == "verified":
        return f"verified ({c['pipeline']})"
    return c["status"] + (f": {c['detail'][:80]}" if c.get("detail") else "")


def _also(row: dict[str, Any], also: str, column: dict[str, Any]) -> str:
    """`gemm, also smem-tile=defaults: 3.5000 ms, 4.00x the original, 78% of cuBLAS (...)`."""
    y = row.get("yardstick") or {}
    share = y.get(f"also {also}")
    what = "" if share is None else f", {_pct(share)} {'of copy' if y['kind'] == 'copy' else 'of cuBLAS'}"
    if column["status"] != "tuned":
        return f"{row['name']}, also {also}: {_kxform({'kxform': column})}"
    return (
        f"{row['name']}, also {also}: {_ms(column.get('ms'))} ms, {_x(column.get('raw_speedup'))} the original{what}; "
        + _kxform({"kxform": column})
    )


def _yardstick(row: dict[str, Any]) -> str:
    y = row.get("yardstick")
    if not y:
        return "-"
    what = "of copy" if y["kind"] == "copy" else "of cuBLAS"
    return f"{_pct(y['original'])} / {_pct(y['kxform'])} / {_pct(y['expert'])} {what}"


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any], dry_run: bool) -> None:
    if dry_run:
        print(
            "\n| kernel | verified on the CPU (naive / expert) | spaces of the naive kernel | offered | "
            "nvcc builds (registers naive / expert) | the tuner's CPU checker (first point with one pass on; "
            "structural passes alone) |"
        )
        print("|---|---|---|---|---|---|")
        for r in rows:
            if r.get("skipped") or r.get("failed"):
                print(f"| {r['name']} | {'skipped: ' + r['skipped'] if r.get('skipped') else r['failed']} | | | | |")
                continue
            b = r["builds"]
            builds = " / ".join(
                f"ok ({b[s]['registers']})" if b[s]["ok"] else f"FAILED: {b[s]['detail'][:60]}"
                for s in ("naive", "expert")
            )
            print(
                f"| {r['name']} | {_verified(r)} | {spaces_text(r['spaces'])} | "
                f"{', '.join(r['spaces']['offered']) or 'none'} | {builds} | {_checker(r)} |"
            )
        verified = sum(
            1 for r in rows if r.get("verify") and all(v["status"] == "verified" for v in r["verify"].values())
        )
        print(
            f"\n{verified} of {len(rows)} pairs verified on both sides; "
            f"{sum(1 for r in rows if r.get('spaces', {}).get('offered'))} naive kernels with a space to tune"
        )
        return
    print(
        "\n| kernel | size | original ms | kxform ms | expert ms | kxform | expert | fraction (log) | "
        "yardstick (original / kxform / expert) | kxform tune |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("skipped") or r.get("failed"):
            print(f"| {r['name']} | {r.get('skipped') or r.get('failed')} | | | | | | | | |")
            continue
        size = ",".join(f"{k}={v}" for k, v in r["size"].items() if k != "name")
        print(
            f"| {r['name']} | {size} | {_ms(r.get('original_ms'))} | {_ms(r.get('kxform_ms'))} | "
            f"{_ms(r.get('expert_ms'))} | {_x(r['kxform']['speedup'])} | {_x(r.get('expert_speedup'))} | "
            f"{_pct(r.get('fraction'))} | {_yardstick(r)} | {_kxform(r)} |"
        )
    for r in rows:
        for also, column in r.get("also", {}).items():
            print(_also(r, also, column))
    s = summary
    print(
        f"\ngeometric mean over {s['kernels']} kernels: kxform {_x(s['kxform_speedup'])}, expert "
        f"{_x(s['expert_speedup'])}, fraction of the expert's log speed-up {_pct(s['fraction'])}; "
        f"kernels slower than their original: {s['slower_than_original']}"
    )
