"""What tools/bench_l2_ncu.py prints and summarises: predicted next to measured figures per
order, and Spearman's rank correlation of the two over all pairs and per kernel."""

from __future__ import annotations

from typing import Any


def print_kernel(r: dict[str, Any]) -> None:
    """One kernel's status line, then predicted and measured figures per order."""
    print(f"\n== {r['kernel']} ({r.get('function', '')}, size {r.get('size', '?')}): {r['status']}")
    if r.get("note"):
        print(f"  note: {r['note']}")
    if r.get("command") and r["status"] == "ok" and not any("measured_l2_hit_rate" in o for o in r["orders"]):
        print(f"  command: {r['command']}")
    if not r["orders"]:
        return
    print(
        f"  {'order':<38}{'rank':>5}{'L2 hit':>9}{'(ncu)':>8}{'DRAM read':>12}{'(ncu)':>11}{'ratio':>7}"
        f"{'write':>10}{'(ncu)':>10}  same order as"
    )
    for o in r["orders"]:
        hit = o.get("measured_l2_hit_rate")
        read = o.get("measured_dram_read_bytes")
        write = o.get("measured_dram_write_bytes")
        ratio = f"{o['predicted_dram_read_bytes'] / read:.2f}" if read else "-"
        print(
            f"  {o['order']:<38}{o['rank']:>5}{o['predicted_l2_hit_rate']:>9.1%}"
            f"{'-' if hit is None else f'{hit:.1%}':>8}{o['predicted_dram_read_bytes'] / 1e9:>10.3f}GB"
            f"{'-' if read is None else f'{read / 1e9:.3f}GB':>11}{ratio:>7}"
            f"{o['predicted_dram_write_bytes'] / 1e9:>8.3f}GB{'-' if write is None else f'{write / 1e9:.3f}GB':>10}  {o['same_as'] or ''}"
        )


FIGURES = (("L2 hit rate", "l2_hit_rate"), ("DRAM read", "dram_read_bytes"), ("DRAM write", "dram_write_bytes"))


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation (ties averaged); None with under 3 pairs or a constant side."""
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    try:
        from scipy.stats import spearmanr
    except ImportError:  # the GPU machine's Python may lack SciPy: the same statistic in NumPy
        import numpy as np

        def ranks(values: list[float]) -> np.ndarray:
            order = np.argsort(values, kind="stable")
            r = np.empty(len(values))
            r[order] = np.arange(len(values), dtype=float)
            for value in set(values):
                same = [i for i, v in enumerate(values) if v == value]
                r[same] = r[same].mean()
            return r

        return float(np.corrcoef(ranks(a), ranks(b))[0, 1])
    return float(spearmanr(a, b).statistic)


def correlations(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """Spearman of predicted against measured, over every measured distinct order and per kernel."""

    def pairs(orders: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
        got = [
            (o[f"predicted_{key}"], o[f"measured_{key}"])
            for o in orders
            if not o["same_as"] and o.get(f"measured_{key}") is not None
        ]
        return [float(p) for p, _ in got], [float(m) for _, m in got]

    everything = [o for k in kernels for o in k.get("orders", [])]
    out: dict[str, Any] = {"all": {}, "per_kernel": {}}
    for _, key in FIGURES:
        a, b = pairs(everything, key)
        out["all"][key] = {"pairs": len(a), "spearman": spearman(a, b)}
    for k in kernels:
        per = {}
        for _, key in FIGURES:
            a, b = pairs(k.get("orders", []), key)
            per[key] = {"pairs": len(a), "spearman": spearman(a, b)}
        if any(v["pairs"] for v in per.values()):
            out["per_kernel"][k["kernel"]] = per
    return out


def print_correlations(c: dict[str, Any]) -> None:
    def show(v: dict[str, Any]) -> str:
        rho = v["spearman"]
        return f"{'n/a' if rho is None else f'{rho:+.3f}'} ({v['pairs']} pairs)"

    print("\nSpearman rank correlation, predicted vs measured:")
    print("  all pairs: " + "; ".join(f"{title} {show(c['all'][key])}" for title, key in FIGURES))
    for name, per in c["per_kernel"].items():
        print(f"  {name}: " + "; ".join(f"{title} {show(per[key])}" for title, key in FIGURES))
