"""The tuning space of a kernel under a pass pipeline (`tile`, `swizzle` or both), and the
pipeline that realises one configuration of it.

The tile pass's own space (`kxform.api.space_of`) admits every integer from 1 to 1024
per tile size: what the code permits, not what is worth timing. A tuner searches the
values a tile size is chosen from in practice, the pass's preferred ones (powers of two
and the original value), under the pass's derived constraints; everything else about
validity (ptxas resources, the rewritten launch, the differential run) is decided per
configuration by the objective. The swizzle pass contributes one categorical parameter,
`swizzle`, whose values are the library remaps that apply to the kernel's grid with
their parameters bound (`grouped(along=y,group=4)`); its default `row` is the hardware
order, i.e. no swizzle at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kxform.engine.params import Config, Constraint, Param, ParamSpace, ParamValue
from kxform.errors import SpecError, UsageError

PASSES = ("tile", "swizzle")
"""The passes whose parameters a tuning space is made of, in pipeline order."""

SWIZZLE = "swizzle"
"""The name of the swizzle parameter in a tuning space."""

IDENTITY = "row"
"""The swizzle value meaning the hardware's own block order (no remap)."""

POW2 = tuple(2**i for i in range(11))
GROUPS = (2, 4, 8, 16, 32)


@dataclass(frozen=True)
class KernelSpace:
    """A kernel's tuning space and how a configuration of it becomes a pass pipeline."""

    kernel: str
    passes: tuple[str, ...]
    space: ParamSpace
    tile_names: tuple[str, ...] = ()

    def pipeline(self, config: Config) -> str:
        """The `--pass` text that rewrites the kernel at `config` ("" for the original:
        no tile parameters to lift and no remap)."""
        stages = []
        if "tile" in self.passes:
            values = ",".join(f"{name}={config[name]}" for name in self.tile_names)
            stages.append(f"tile{{{values}}}" if values else "tile")
        remap = config.get(SWIZZLE, IDENTITY) if "swizzle" in self.passes else IDENTITY
        if remap != IDENTITY:
            stages.append(_swizzle_spec(str(remap)))
        return ",".join(stages)

    def defaults(self) -> dict[str, ParamValue]:
        return self.space.defaults()


def _swizzle_spec(label: str) -> str:
    """`grouped(along=y,group=4)` -> `swizzle{pattern=grouped,along=y,group=4}`."""
    name, _, inner = label.partition("(")
    options = [f"pattern={name}", *(item for item in inner.rstrip(")").split(",") if item)]
    return f"swizzle{{{','.join(options)}}}"


def parse_passes(text: str) -> tuple[str, ...]:
    """`tile`, `swizzle`, `tile,swizzle`: the passes, in pipeline order, each once."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in PASSES]
    if not names or unknown or len(set(names)) != len(names):
        what = f"unknown pass '{unknown[0]}'" if unknown else "each pass at most once"
        raise UsageError(f"--pass {text!r}: {what} (tunable: {', '.join(PASSES)})")
    return tuple(p for p in PASSES if p in names)


def tuning_values(param: Param) -> tuple[ParamValue, ...]:
    """The values a tuner tries for a tile size: powers of two in its domain, and its default."""
    if param.kind != "int":
        return tuple(param.values)
    values = {v for v in POW2 if v in param.values} | {param.default}
    return tuple(sorted(v for v in values if isinstance(v, int)))


def swizzle_choices(pass_space: ParamSpace, xcds: int) -> tuple[str, ...]:
    """The library remaps the swizzle pass offers for this kernel, parameters bound:
    every group in GROUPS along both axes; XCD patterns only on chiplet GPUs."""
    from kxform.passes.swizzle.patterns import PATTERNS

    offered = [str(v) for v in pass_space.param("pattern").values]
    choices = [IDENTITY]
    for name in offered:
        pattern = PATTERNS.get(name)
        if pattern is None or (name.startswith("xcd") and xcds <= 1):
            continue  # `custom` is a formula, not a point of a grid
        takes = {p.name for p in pattern.params}
        groups = GROUPS if "group" in takes else (None,)
        axes = ("y", "x") if "along" in takes else (None,)
        for group in groups:
            for along in axes:
                raw: dict[str, str | int] = {"xcds": xcds} if "xcds" in takes else {}
                if group is not None:
                    raw["group"] = group
                if along is not None:
                    raw["along"] = along
                choices.append(pattern.resolve(raw).label())
    return tuple(dict.fromkeys(choices))


def kernel_space(data: bytes, kernel: str, passes: tuple[str, ...], *, path: str, hw: str,
                 build_dir: str | None = None, require: tuple[str, ...] = (), whole: bool = False) -> KernelSpace:
    """The tuning space of `kernel` under `passes`, with the extra constraints `require`
    (what the code assumes and the pass cannot see, as Kernel Tuner's restrictions);
    UsageError naming the pass's reason when it refuses the kernel (nothing to tune).
    `whole`: each tile size keeps the pass's whole domain instead of the values a tuner
    tries (what a configuration found elsewhere, a recording's, is typed against)."""
    from kxform.api import explain, space_of
    from kxform.hw import load_profile

    params: list[Param] = []
    constraints: list[Constraint] = []
    tile_names: tuple[str, ...] = ()
    for name in passes:
        pass_space = space_of(data, kernel, name, path=path, hw=hw, build_dir=build_dir)
        if not pass_space.params:
            reasons = explain(data, kernel, name, path=path, hw=hw, build_dir=build_dir).get("reasons") or []
            why = reasons[0] if reasons else "the pass refuses it"
            raise UsageError(f"{path}: '{kernel}' has nothing to tune under {name}: {why}")
        if name == "tile":
            params += [p if whole else Param.ints(p.name, tuning_values(p), int(p.default),  # type: ignore[arg-type]
                                                  p.doc, p.origin) for p in pass_space.params]
            constraints += list(pass_space.constraints)
            tile_names = pass_space.names
        else:
            choices = swizzle_choices(pass_space, load_profile(hw).xcds)
            params.append(Param.enum(SWIZZLE, choices, IDENTITY, doc="block order: a library remap, or row "
                                     "(the hardware's)"))
    names = {p.name for p in params}
    for text in require:
        try:
            constraint = Constraint.parse(text, "required by the user")
        except SpecError as exc:
            raise UsageError(f"--require {text!r}: {exc.cause}") from None
        unknown = sorted(constraint.params - names)
        if unknown:
            raise UsageError(f"--require {text!r}: '{unknown[0]}' is not a parameter of '{kernel}' "
                             f"(parameters: {', '.join(sorted(names))})")
        constraints.append(constraint)
    return KernelSpace(kernel, passes, ParamSpace(tuple(params), tuple(constraints)), tile_names)


def label(config: Mapping[str, ParamValue]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())
