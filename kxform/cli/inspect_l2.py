"""`kxform inspect --l2 [--json] FILE --kernel K [--spec S] [--size NAME] [--hw H]`.

Per candidate block order: predicted L2 hit rate, DRAM bytes read and written, rank and
the predicted time and DRAM bytes saved against row-major (a saving is positive, as in
the remarks' "saves 12%"), from the locality model
(docs/locality-model.md). Bad input of any kind is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from kxform import exitcodes
from kxform.errors import KxformError, SpecError, UsageError
from kxform.harness.model import KernelSpec


def run_l2(args: argparse.Namespace) -> int:
    try:
        ranking = _ranking(args)
    except KxformError as exc:
        print(f"kxform: error: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    data = ranking.to_json()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        print()
        return 0
    _print(data)
    return 0


def _ranking(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from kxform.harness.spec import find_spec_for, load_spec, missing_spec
    from kxform.hw import load_profile
    from kxform.locality.predict import rank_orders
    from kxform.locality.trace import ModelRefused
    from kxform.frontend.source import read_source

    if len(args.paths) != 1:
        raise UsageError("--l2 takes exactly one FILE")
    path = args.paths[0]
    if not args.kernel:
        raise UsageError(f"{path}: --l2 needs --kernel NAME")
    hw = load_profile(args.hw or "h100")
    source = read_source(path)
    spec_path = args.spec or find_spec_for(path)
    if spec_path is None:
        raise SpecError(missing_spec(path, args.kernel))
    spec: KernelSpec = load_spec(spec_path).kernel(args.kernel)
    if args.size is not None:
        spec.size(args.size)  # unknown size: a SpecError naming the known ones
    try:
        return rank_orders(source, spec, hw, args.size)
    except ModelRefused as exc:
        raise KxformError(f"{path}: kernel '{args.kernel}': {exc.cause}") from None


def _print(data: dict) -> None:  # type: ignore[type-arg]
    print(
        f"{data['kernel']} [{data['size']}] on {data['hw']}: grid {'x'.join(map(str, data['grid']))}, "
        f"{data['occupancy']}"
    )
    print(
        f"  {'rank':>4}  {'order':<38}{'L2 hit':>8}{'DRAM read':>12}{'DRAM write':>12}{'time saved':>11}"
        f"{'DRAM saved':>11}{'write loc':>10}"
    )
    for o in data["orders"]:
        same = f"  (= {o['same_as']})" if o["same_as"] else ""
        print(
            f"  {o['rank']:>4}  {o['order']:<38}{o['l2_hit_rate']:>8.1%}{_gb(o['dram_read_bytes']):>12}"
            f"{_gb(o['dram_write_bytes']):>12}{o['time_saving']:>+11.1%}{o['dram_saving']:>+11.1%}"
            f"{o['write_page_locality']:>10.2f}{same}"
        )
    print(f"  proposal: {data['chosen'] or 'none'}: {data['decision']}")
    print(f"  model: {'; '.join(data['notes'])}; {data['seconds']['total']:.1f} s")


def _gb(value: float) -> str:
    if value >= 1e8:
        return f"{value / 1e9:.3f} GB"
    return f"{value / 1e6:.1f} MB" if value >= 1e5 else f"{value / 1e3:.1f} kB"
