"""`kxform hw`: list, show and detect hardware profiles.

    kxform hw list [--json]        the shipped profiles, one line each
    kxform hw show NAME [--json]   every figure of one profile with its source
    kxform hw detect [--json]      the profile of this machine's GPU (through nvidia-smi)

NAME is a profile name, an alias, or the path of a `.toml` profile file.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kxform.hw import HwProfile, detect, list_profiles, load_profile

_MIB = 1 << 20
_KIB = 1 << 10


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "hw",
        help="list, show or detect GPU hardware profiles",
        description="GPU hardware profiles: the figures passes and tuners reason with.",
    )
    actions = parser.add_subparsers(dest="hw_action", metavar="ACTION", required=True)
    list_parser = actions.add_parser("list", help="list the shipped profiles")
    list_parser.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="show one profile with the source of each figure")
    show.add_argument("name", metavar="NAME", help="profile name, alias, or path to a .toml file")
    show.add_argument("--json", action="store_true", help="print JSON")
    detect_parser = actions.add_parser("detect", help="match this machine's GPU to a profile")
    detect_parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.hw_action == "list":
        profiles = list_profiles()
        if args.json:
            _print_json([p.to_dict() for p in profiles])
        else:
            print(format_table(profiles))
        return 0
    profile = load_profile(args.name) if args.hw_action == "show" else detect()
    if args.json:
        _print_json(profile.to_dict())
    else:
        print(format_profile(profile))
    return 0


def format_table(profiles: list[HwProfile]) -> str:
    """One line per profile, aligned columns."""
    rows = [("NAME", "VENDOR", "ARCH", "SMS", "L2", "XCDS", "BANDWIDTH", "ALIASES")]
    for p in profiles:
        rows.append(
            (
                p.name,
                p.vendor,
                p.arch,
                str(p.sm_count),
                _bytes(p.l2_bytes),
                str(p.xcds),
                f"{p.mem_bandwidth_gbs:g} GB/s",
                ", ".join(p.aliases) or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def format_profile(profile: HwProfile) -> str:
    """`field: value  (source)` lines, figures first, then aliases."""
    data = profile.to_dict()
    sources = data.pop("sources")
    width = max(len(k) for k in data)
    lines = []
    for key, value in data.items():
        if value is None:
            continue
        shown = _show(key, value)
        source = sources.get(key)
        lines.append(f"{key.ljust(width)}  {shown}" + (f"\n{' ' * width}    source: {source}" if source else ""))
    return "\n".join(lines)


def _show(key: str, value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    sized = key.endswith(("bytes", "_xcd", "smem_per_sm", "smem_per_block"))
    if sized and isinstance(value, int) and not isinstance(value, bool):
        return f"{value} ({_bytes(value)})"
    return str(value)


def _bytes(n: int) -> str:
    if n % _MIB == 0:
        return f"{n // _MIB} MiB"
    if n % _KIB == 0:
        return f"{n // _KIB} KiB"
    return f"{n} B"


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2))
