"""What a tuner times of the swizzle pass: every library remap that applies to a kernel's
grid with its parameters bound, as one categorical parameter.

`pattern` takes labels such as `grouped(along=y,group=4)`: the group sizes CUTLASS 3
tunes (GROUPS) along both axes, XCD patterns only where the hardware has several
chiplets (`custom` is a formula, not a point of a grid). A label parses back into the
pass's options (`pattern=grouped,along=y,group=4`), so the tuned configuration is the
same explicit spec `apply --pass` takes.
"""

from __future__ import annotations

from collections.abc import Sequence

from kxform.engine.params import Param, ParamSpace, ParamValue
from kxform.errors import UsageError
from kxform.passes.swizzle.patterns import PATTERNS

GROUPS = (2, 4, 8, 16, 32)


def tuning_labels(offered: Sequence[ParamValue], xcds: int) -> tuple[str, ...]:
    """The bound remaps of the patterns `offered` (the pass's space for the kernel), the
    identity `row` left out: it is the pass turned off."""
    labels: list[str] = []
    for name in offered:
        pattern = PATTERNS.get(str(name))
        if pattern is None or pattern.name == "row" or (pattern.name.startswith("xcd") and xcds <= 1):
            continue
        if pattern.formula is None:  # no formula twin: it cannot be proven a bijection, so never a point
            continue
        takes = {p.name for p in pattern.params}
        for group in GROUPS if "group" in takes else (None,):
            for along in ("y", "x") if "along" in takes else (None,):
                raw: dict[str, str | int] = {"xcds": xcds} if "xcds" in takes else {}
                if group is not None:
                    raw["group"] = group
                if along is not None:
                    raw["along"] = along
                labels.append(pattern.resolve(raw).label())
    return tuple(dict.fromkeys(labels))


def tuning_space(offered: Sequence[ParamValue], xcds: int) -> ParamSpace:
    """One `pattern` parameter over `tuning_labels` (empty when none applies)."""
    labels = tuning_labels(offered, xcds)
    if not labels:
        return ParamSpace()
    return ParamSpace((Param.enum("pattern", labels, labels[0], doc="a library remap with its parameters bound"),))


def label_options(label: str) -> dict[str, str]:
    """`grouped(along=y,group=4)` -> {pattern: grouped, along: y, group: 4} (as strings)."""
    name, paren, inner = label.partition("(")
    if paren and not inner.endswith(")"):
        raise UsageError(f"swizzle pattern {label!r}: expected NAME or NAME(k=v,...)")
    options = {"pattern": name.strip()}
    for item in (i for i in inner[:-1].split(",") if i.strip()) if paren else ():
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"swizzle pattern {label!r}: {item!r} is not k=v")
        options[key.strip()] = value.strip()
    return options
