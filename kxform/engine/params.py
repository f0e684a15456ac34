"""Typed parameter spaces: what a pass may vary, and the constraints a choice must meet.

A `Param` has a name, a type (int, enum or bool), its finite domain (explicit values or
an integer range, kept lazy) and a default. A `Constraint` is a readable logic
expression over parameters and hardware-profile fields (`block_x * block_y <=
hw.max_threads_per_block`), evaluated by kxform's own expression language
(`kxform.expr`, never `eval`), with the source line it was derived from and why.

The same types serve every consumer: a pass's options (`swizzle{pattern=grouped}`),
the tile pass's lifted tile sizes, the tuner's search space, a recorded tuning space and
the JSON schema an LLM proposer answers in. Configurations are plain mappings from
parameter name to typed value; `ParamSpace.resolve` turns user strings into one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kxform.errors import SpecError, UsageError
from kxform.expr import Expr, Value, parse_logic

ParamValue = int | str | bool
Config = Mapping[str, ParamValue]
ParamKind = Literal["int", "enum", "bool"]

_KIND_WORDS = {"int": "an integer", "bool": "a boolean", "enum": "a name"}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Param:
    """One tunable quantity. `values` is its whole domain, in a meaningful order
    (ascending for ints); a `range` stays lazy, so wide integer domains cost nothing."""

    name: str
    kind: ParamKind
    values: Sequence[ParamValue]
    default: ParamValue
    doc: str = ""
    origin: str = ""
    """Where it came from, `file:line` (a lifted macro) or empty for built-in options."""

    def __post_init__(self) -> None:
        if not all(part.isidentifier() for part in self.name.split(".")):
            raise SpecError(
                f"parameter name {self.name!r} is not an identifier (or dotted identifiers, "
                "`tile.TILE`, in a composed space)"
            )
        if len(self.values) == 0:
            raise SpecError(f"parameter '{self.name}' has no values")
        for value in (self.default, *self._sample_values()):
            _check_type(self, value)
        if self.default not in self.values:
            raise SpecError(f"parameter '{self.name}': default {self.default!r} is not one of its values")

    def _sample_values(self) -> Sequence[ParamValue]:
        return self.values if not isinstance(self.values, range) else (self.values[0], self.values[-1])

    @classmethod
    def ints(cls, name: str, values: Sequence[int], default: int, doc: str = "", origin: str = "") -> Param:
        """An integer parameter over explicit values (kept sorted, duplicates dropped)."""
        return cls(name, "int", tuple(sorted(set(values))), default, doc, origin)

    @classmethod
    def int_range(
        cls, name: str, low: int, high: int, default: int, step: int = 1, doc: str = "", origin: str = ""
    ) -> Param:
        """An integer parameter over `low..high` (inclusive) in steps of `step`."""
        if step < 1 or high < low:
            raise SpecError(f"parameter '{name}': empty range {low}..{high} step {step}")
        return cls(name, "int", range(low, high + 1, step), default, doc, origin)

    @classmethod
    def enum(cls, name: str, values: Sequence[str], default: str, doc: str = "", origin: str = "") -> Param:
        return cls(name, "enum", tuple(values), default, doc, origin)

    @classmethod
    def boolean(cls, name: str, default: bool, doc: str = "", origin: str = "") -> Param:
        return cls(name, "bool", (False, True), default, doc, origin)

    def parse(self, text: str | ParamValue) -> ParamValue:
        """The typed value of `text` (from a spec, a flag or a proposer), or UsageError
        naming the parameter and its domain."""
        value: ParamValue
        if self.kind == "int":
            value = _as_int(self, text)
        elif self.kind == "bool":
            value = _as_bool(self, text)
        else:
            value = str(text)
        if value not in self.values:
            raise UsageError(f"{self.name}={text}: not one of {self.describe_values()}")
        return value

    def typed(self, value: object) -> ParamValue:
        """`value` as recorded data holds it (a recording, a database row): accepted only
        when its type is the parameter's (no text is parsed into a number, no number
        becomes an enum) and it is one of the domain's values; UsageError otherwise."""
        try:
            _check_type(self, value)
        except SpecError:
            raise UsageError(
                f"{self.name}={value!r:.60}: a {type(value).__name__}, expected "
                f"{_KIND_WORDS[self.kind]} of {self.describe_values()}"
            ) from None
        if value not in self.values:
            raise UsageError(f"{self.name}={value!r:.60}: not one of {self.describe_values()}")
        return value  # type: ignore[return-value]  # its type was checked above

    def format(self, value: ParamValue) -> str:
        """How a value is written in a spec (`TILE=32`, `vectorize=true`)."""
        return ("true" if value else "false") if self.kind == "bool" else str(value)

    def describe_values(self) -> str:
        """The domain in a few words: `8..64 step 8`, `{grouped, hilbert}`, `{false, true}`."""
        if isinstance(self.values, range):
            step = "" if self.values.step == 1 else f" step {self.values.step}"
            return f"{self.values[0]}..{self.values[-1]}{step}"
        shown = [self.format(v) for v in self.values[:12]]
        more = f", ... ({len(self.values)} values)" if len(self.values) > 12 else ""
        return "{" + ", ".join(shown) + more + "}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "type": self.kind, "default": self.default}
        if isinstance(self.values, range):
            data["range"] = [self.values[0], self.values[-1], self.values.step]
        else:
            data["values"] = list(self.values)
        if self.doc:
            data["doc"] = self.doc
        if self.origin:
            data["origin"] = self.origin
        return data


def _check_type(param: Param, value: object) -> None:
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "enum": isinstance(value, str),
    }[param.kind]
    if not ok:
        raise SpecError(f"parameter '{param.name}' ({param.kind}): value {value!r} has the wrong type")


def _as_int(param: Param, text: str | ParamValue) -> int:
    if isinstance(text, bool):
        raise UsageError(f"{param.name}={text}: expected an integer")
    if isinstance(text, int):
        return text
    try:
        return int(str(text).strip(), 0)
    except ValueError:
        raise UsageError(f"{param.name}={text}: expected an integer") from None


def _as_bool(param: Param, text: str | ParamValue) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise UsageError(f"{param.name}={text}: expected true or false")


@dataclass(frozen=True)
class Constraint:
    """A condition every chosen configuration must meet, with where and why it holds."""

    expr: Expr
    reason: str = ""
    """Why the code needs it ("the tile load assumes blockDim.x == TILE")."""
    origin: str = ""
    """`file:line` of the code it was derived from; empty for hardware limits."""

    @classmethod
    def parse(cls, text: str, reason: str = "", origin: str = "") -> Constraint:
        return cls(parse_logic(text), reason, origin)

    @property
    def text(self) -> str:
        return self.expr.text

    @property
    def params(self) -> frozenset[str]:
        """The parameter names it reads (hardware fields excluded)."""
        return frozenset(v for v in self.expr.variables if not v.startswith("hw."))

    def holds(self, env: Mapping[str, Value]) -> bool:
        return self.expr.holds(env)

    def renamed(self, names: Mapping[str, str], guard: str = "") -> Constraint:
        """The same condition over renamed parameters (`TILE` -> `tile.TILE`), optionally
        waived unless `guard` holds (`not tile or (...)`): how a pass's constraints enter a
        space composed of several passes."""
        import ast

        class _Rename(ast.NodeTransformer):
            def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
                return node  # dotted names (`hw.l2_bytes`) are never a pass's parameters

            def visit_Name(self, node: ast.Name) -> ast.AST:
                return ast.copy_location(ast.Name(names.get(node.id, node.id), node.ctx), node)

        tree = _Rename().visit(ast.parse(self.text, mode="eval"))
        text = ast.unparse(tree)
        return Constraint.parse(f"not ({guard}) or ({text})" if guard else text, self.reason, self.origin)

    def describe(self) -> str:
        where = f" [{self.origin}]" if self.origin else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{self.text}{where}{why}"

    def to_json(self) -> dict[str, str]:
        return {"expr": self.text, "reason": self.reason, "origin": self.origin}


def hw_env(hw: object | None) -> dict[str, Value]:
    """Hardware-profile figures as `hw.<field>` names for constraints (numbers only)."""
    if hw is None:
        return {}
    out: dict[str, Value] = {}
    for name, value in vars(hw).items():
        if isinstance(value, (int, float)):
            out[f"hw.{name}"] = value
    return out


class UnknownName(SpecError):
    """A constraint reads a name that is no parameter of its space (callers that answer
    with a reason key catch this type, not the sentence)."""


@dataclass(frozen=True)
class ParamSpace:
    """Typed parameters plus the constraints that couple them."""

    params: tuple[Param, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    _index: dict[str, Param] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SpecError(f"parameter '{duplicates[0]}' defined twice")
        self._index.update({p.name: p for p in self.params})
        for constraint in self.constraints:
            unknown = sorted(constraint.params - set(names))
            if unknown:
                raise UnknownName(
                    f"constraint '{constraint.text}' reads unknown name '{unknown[0]}' "
                    f"(parameters: {', '.join(names) or 'none'})"
                )

    def __iter__(self) -> Iterator[Param]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        try:
            return self._index[name]
        except KeyError:
            known = ", ".join(self.names) or "none"
            raise UsageError(f"unknown parameter {name!r} (parameters: {known})") from None

    def defaults(self) -> dict[str, ParamValue]:
        return {p.name: p.default for p in self.params}

    def cardinality(self) -> int:
        """Size of the unconstrained product of the domains."""
        total = 1
        for param in self.params:
            total *= len(param.values)
        return total

    def resolve(self, given: Mapping[str, str | ParamValue], base: Config | None = None) -> dict[str, ParamValue]:
        """`base` (default: the defaults) with `given` parsed into it; unknown names and
        values outside a domain are UsageErrors naming them."""
        config = dict(base if base is not None else self.defaults())
        for name, text in given.items():
            config[name] = self.param(name).parse(text)
        return config

    def typed(self, given: Mapping[str, object]) -> dict[str, ParamValue]:
        """The defaults with the recorded values `given` in place, each typed by
        `Param.typed`; a name that is not a parameter is a UsageError."""
        config = self.defaults()
        for name, value in given.items():
            config[name] = self.param(name).typed(value)
        return config

    def violations(self, config: Config, hw: object | None = None) -> list[Constraint]:
        """The constraints `config` breaks (an expression error counts as broken)."""
        env: dict[str, Value] = {**hw_env(hw), **config}  # an enum's value is compared as a quoted name
        broken = []
        for constraint in self.constraints:
            try:
                if not constraint.holds(env):
                    broken.append(constraint)
            except SpecError:
                broken.append(constraint)
        return broken

    def is_valid(self, config: Config, hw: object | None = None) -> bool:
        return all(config.get(p.name) in p.values for p in self.params) and not self.violations(config, hw)

    def label(self, config: Config) -> str:
        """`NAME=value,...` in parameter order (a pass spec's option list)."""
        return ",".join(f"{p.name}={p.format(config[p.name])}" for p in self.params if p.name in config)

    def to_json(self) -> dict[str, Any]:
        return {"params": [p.to_json() for p in self.params], "constraints": [c.to_json() for c in self.constraints]}
