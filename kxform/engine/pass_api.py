"""The pass interface: what every pass in `passes/` implements, and the records it returns.

A pass is a frozen dataclass: a class-level `name`, typed option fields declared as a
`ParamSpace` (`option_space`), and the methods analyse -> candidates/propose -> check
-> edit. Passes never touch files or print: they read the `PassContext`, return
proposals, check records and edits, and emit remarks into the context's sink. Only the
edit engine changes bytes. A pass also says how its rewrite must be verified
(`verify_policy`), describes itself for `kxform passes` and `kxform inspect`, and can
expose a kernel's parameter space and a rewrite at one configuration (`space`,
`proposal_for`) for proposers, and the part of it worth timing with the pass instance
that rewrites at one of its points (`tuning_space`, `configured`) for tuners: the
search composes these for any set of passes without naming one.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from kxform.analysis.manager import AnalysisManager
from kxform.engine.contracts import LaunchContract
from kxform.engine.edits import Edit
from kxform.engine.params import Config, Param, ParamSpace, ParamValue
from kxform.engine.pass_spec import parse_pass_spec, split_pipeline
from kxform.engine.policy import DEFAULT_POLICY, VerifyPolicy
from kxform.engine.proposal import Proposal, Provenance, Rejection, format_value
from kxform.engine.run_files import RunFiles
from kxform.engine.tool_shape import AnswerRejected, ToolShape
from kxform.errors import CheckFailed, UsageError, did_you_mean
from kxform.frontend.model import Function, SourceModel
from kxform.hw import HwProfile
from kxform.engine.remarks import Remark, RemarkKind, RemarkSink
from kxform.engine.status import Status

__all__ = [
    "BlockOrder",
    "Blocker",
    "CheckRecord",
    "KernelAnalysis",
    "KernelResult",
    "Outcome",
    "Pass",
    "PassContext",
    "Proposal",
    "Provenance",
    "Rejection",
    "RunOptions",
    "Status",
    "ValuesPass",
    "check_constraints",
    "parse_pass_spec",
    "resolve_proposal",
    "split_pipeline",
]


A = TypeVar("A")

BlockOrder = Callable[[Any, Any, int, int], tuple[Any, Any]]
"""(bx, by arrays of dispatched blocks, gx, gy) -> (lx, ly): the logical block each
dispatched block computes, over many blocks at once (numpy arrays of uint64)."""


@dataclass(frozen=True)
class CheckRecord:
    """The result of one check, as logged: its name, a typed status, what it established,
    and a stable reason key (kxform.engine.status) that later stages read instead of the
    sentence.

    `status` may be given as a bool (True: passed, False: failed), the form the passes'
    pre-edit checks use. `required` marks an UNCONFIRMED check the run required to
    confirm (`--verify compile`): it then stops the rewrite. `figures` are typed details
    (the runtime a differential run used, how many sizes it ran, the measured times) for
    reports and the pass log (kxform.log.figures reads them)."""

    name: str
    status: Status
    detail: str
    key: str = ""
    required: bool = False
    figures: tuple[tuple[str, float | str], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.status, bool):
            object.__setattr__(self, "status", Status.PASSED if self.status else Status.FAILED)
        elif not isinstance(self.status, Status):
            raise TypeError(f"check {self.name}: status must be a Status, got {self.status!r}")

    @property
    def ok(self) -> bool:
        """Whether this check lets the rewrite be written (a skipped check does; one that
        could not tell does only when unconfirmed and not required)."""
        if self.status is Status.UNCONFIRMED:
            return not self.required
        return self.status in (Status.PASSED, Status.SKIPPED)

    def figure(self, name: str) -> float | str | None:
        return dict(self.figures).get(name)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status.value, "ok": self.ok, "detail": self.detail}
        if self.key:
            out["key"] = self.key
        if self.figures:
            out["figures"] = dict(self.figures)
        return out


@dataclass(frozen=True)
class Blocker:
    """Why a pass must not touch a kernel: a stable key, a sentence, and where."""

    key: str
    message: str
    offset: int


@dataclass(frozen=True)
class KernelAnalysis:
    """What a pass learned about one kernel before proposing anything."""

    kernel: Function
    blockers: tuple[Blocker, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    """Untyped extras (kept for passes outside this package; kxform's own passes keep what
    they learn as typed analyses: `ctx.analysis(Kind, kernel)`)."""
    already_applied: bool = False

    @property
    def applicable(self) -> bool:
        return not self.blockers and not self.already_applied


@dataclass(frozen=True)
class RunOptions:
    """Options of one run that passes may read (kernel filter, hardware, candidate count)."""

    kernels: tuple[str, ...] = ()
    arch: str = "sm_90"
    max_candidates: int = 3
    """Checked candidates per kernel handed to the later stages (the first is applied first)."""

    def selects(self, kernel: str) -> bool:
        return not self.kernels or kernel in self.kernels


@dataclass(frozen=True)
class PassContext:
    """Everything a pass may read, passed explicitly (no globals)."""

    model: SourceModel
    hw: HwProfile
    options: RunOptions
    remarks: RemarkSink
    semantic: Any = None  # kxform.frontend.semantic.SemanticInfo | None
    toolchain: Any = None  # kxform.build.toolchain.Toolchain | None (compilers, cache, project flags)
    analyses: AnalysisManager = field(default_factory=AnalysisManager, compare=False, repr=False)
    """The run's analysis cache (shared by the contexts of one run's passes)."""
    run_files: RunFiles = field(default_factory=RunFiles, compare=False, repr=False)
    """The other files of the run (launch contracts read their launches and calls)."""

    def analysis(self, kind: type[A], kernel: Function) -> A:
        """The `kind` analysis of `kernel` in this version of the file, computed once
        (kxform.analysis.manager): what passes, proposers and the prompt all read."""
        return self.analyses.get(kind, self, kernel)

    def remark(
        self, kind: RemarkKind, pass_name: str, name: str, offset: int, function: str | None, message: str, **args: Any
    ) -> None:
        line, col = self.model.source.line_col(offset)
        self.remarks.emit(Remark(kind, pass_name, name, self.model.source.path, line, col, function, message, args))


class Pass(abc.ABC):
    """Base class of every pass. Subclasses are frozen dataclasses whose fields are options;
    an option left at None means "the pass chooses"."""

    name: ClassVar[str]
    description: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()
    """Passes that must run before this one when both are in a pipeline."""
    excludes: ClassVar[tuple[str, ...]] = ()
    """Passes that never apply together with this one in a tuned pipeline: both decide the
    same thing (the block size), so a point with both on would be searched twice."""
    preserves: ClassVar[tuple[type, ...]] = ()
    """Analysis kinds a rewrite by this pass leaves valid (only those that hold no byte
    offsets are carried to the rewritten file: see AnalysisManager.carry)."""
    defaults_as_written: ClassVar[bool] = False
    """Whether `tuning_space`'s defaults reproduce the code as written (a lift at the
    original values): a composed search then never times the pass on at its defaults,
    which is the original again under another name."""
    structural: ClassVar[bool] = False
    """Whether the pass changes the kernel's parallel structure (which thread does which
    work: threads per row, outputs per thread, shared-memory tiles, vector widths) rather
    than refining it (block sizes, unroll factors, block orders). A tuner explores the
    structure passes first and refines on the best structure (docs/search.md, "Structure
    before polish")."""
    falls_back: ClassVar[bool] = True
    """Whether the deterministic proposer may offer `candidates` after the default choice
    (a pass whose default is "change nothing but the form" has no fallback)."""

    # -- options ---------------------------------------------------------------------

    @classmethod
    def option_space(cls) -> ParamSpace:
        """The typed options of the pass (names match the dataclass fields)."""
        return ParamSpace()

    @classmethod
    def from_options(cls, options: Mapping[str, str | ParamValue]) -> Pass:
        """Build the pass from spec or --param strings, typed through `option_space`."""
        space = cls.option_space()
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UsageError(
                f"pass {cls.name}: unknown option {unknown[0]!r} (options: {', '.join(names) or 'none'})"
                f"{did_you_mean(unknown[0], names)}"
            )
        typed: dict[str, ParamValue] = {}
        for key, text in options.items():
            try:
                typed[key] = space.param(key).parse(text)
            except UsageError as exc:
                raise UsageError(f"pass {cls.name}: {exc.cause}") from None
        return cls(**typed)  # type: ignore[call-arg]

    def spec(self) -> str:
        """The `name{k=v,...}` spec that parses back to this pass."""
        items = self.spec_items()
        return f"{self.name}{{{','.join(f'{k}={v}' for k, v in items)}}}" if items else self.name

    def spec_items(self) -> list[tuple[str, str]]:
        return [
            (f.name, format_value(getattr(self, f.name)))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if getattr(self, f.name) is not None and getattr(self, f.name) != f.default
        ]

    @property
    def explicit(self) -> bool:
        """Whether the user fixed the options (then only that instance is proposed)."""
        return bool(self.spec_items())

    @classmethod
    def describe_options(cls) -> list[str]:
        """Lines for `kxform passes`: each option with its type and domain."""
        return [
            f"{p.name} ({p.kind}): {p.describe_values()}" + (f" - {p.doc}" if p.doc else "") for p in cls.option_space()
        ]

    # -- analyse and propose ---------------------------------------------------------------

    @abc.abstractmethod
    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        """Per kernel: can this pass apply, and what it needs to know to propose."""

    @abc.abstractmethod
    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """Every parameterised instance of this pass that would change the kernel, best first."""

    @abc.abstractmethod
    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        """The deterministic choice (documented rule); None when the pass has nothing to offer."""

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        """Remark key and sentence when no proposal was made for an applicable kernel
        (`ctx` gives the analyses computed for it)."""
        return ("NoProposal", "the proposer offered nothing for this kernel")

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """The parameter space of one kernel (default: the pass's options)."""
        return self.option_space()

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        """The proposal that rewrites the kernel at `config` (a point of `space`)."""
        values = {k: v for k, v in config.items()}
        return Proposal.of(self.name, analysis.kernel.name, values, "configuration given by the caller", provenance)

    def tuning_space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """The points of `space` a tuner times for this kernel, their defaults the code as it
        is (empty: nothing to tune). Default: `space` with every integer domain wider than
        TUNED_INT_VALUES narrowed to its powers of two and its default (what the code
        permits is not what is worth timing: 1..1024 per tile size is 1024 builds)."""
        space = self.space(ctx, analysis)
        return ParamSpace(tuple(narrowed(p) for p in space.params), space.constraints)

    def configured(self, config: Config) -> Pass:
        """The instance of this pass that rewrites a kernel at `config` (a point of
        `tuning_space`): its options set from the configuration, so it proposes exactly
        that rewrite and runs every check `apply` runs."""
        return type(self).from_options(dict(config))

    # -- asked through a tool call (kxform.propose) ---------------------------------------

    def tool_shape(self, space: ParamSpace) -> ToolShape:
        """The description of this pass's proposal tool over `space` (and any nullable
        parameters or payload field): default, every parameter required, constraints stated."""
        constraints = "; ".join(c.describe() for c in space.constraints)
        return ToolShape(
            f"Propose one configuration of the `{self.name}` pass for this kernel. Every parameter is "
            "required." + (f" Constraints kxform checks: {constraints}." if constraints else "")
        )

    def read_answer(
        self, data: Mapping[str, Any], space: ParamSpace, hw: object
    ) -> tuple[dict[str, ParamValue], str | None]:
        """The configuration (and payload) of a tool input that matched the schema; raise
        AnswerRejected naming what is wrong. Default: every parameter parsed by its type."""
        config: dict[str, ParamValue] = {}
        for param in space.params:
            try:
                config[param.name] = param.parse(data[param.name])
            except UsageError as exc:
                raise AnswerRejected("parameter", exc.cause) from None
        return config, None

    def answer_values(self, config: Mapping[str, ParamValue], payload: str | None) -> dict[str, ParamValue]:
        """The proposal's values for an accepted answer (swizzle: a formula's digest)."""
        return dict(config)

    # -- check, edit, verify -------------------------------------------------------------

    @abc.abstractmethod
    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        """Pre-edit checks of a proposal; raise CheckFailed on the first failure."""

    @abc.abstractmethod
    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        """The byte edits that apply all accepted proposals of one file."""

    def check_result(
        self, new_model: SourceModel, proposals: Sequence[Proposal], ctx: PassContext | None = None
    ) -> list[CheckRecord]:
        """Checks of the rewritten file itself (after re-parsing it); raise CheckFailed.

        The driver adds the generic ones (re-parse, idempotence); a pass adds what only
        it can know, such as swizzle's coverage of every index read (compiled with the
        project's flags from `ctx.toolchain`)."""
        return []

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """How the differential verification of `proposal` launches and compares (see
        kxform.engine.policy), given the file the pass's edits left (`rewritten`, as
        `check_result` gets it: the rewritten launch is read there, never by applying the
        edits again). Default: the spec's launch, bit-exact outputs."""
        return DEFAULT_POLICY

    def launch_contract(self, ctx: PassContext, proposal: Proposal) -> LaunchContract | None:
        """What the rewrite of `proposal` requires of every launch of its kernel in the run
        (kxform.engine.contracts): a pass that changes a kernel's geometry or assumes its
        buffers do not overlap says so, and the driver checks every launch the run shows.
        Default None: any launch that worked before works after."""
        return None

    def block_order(self, proposal: Proposal) -> BlockOrder | None:
        """The order in which the rewrite of `proposal` has the grid's blocks compute their
        work, for the predictions that rank verified attempts without a GPU
        (kxform.propose.predict). Default None: the pass keeps the hardware's order, so
        there is nothing to predict."""
        return None

    def verify_warnings(self, rewritten: SourceModel, kernel: str, spec: Any) -> list[str]:
        """What verifying `kernel` of a file this pass rewrote cannot tell at the sizes of
        `spec` (a KernelSpec), as warnings for `kxform verify` (a remap that moves no block
        at any check size "verifies" whatever it does). Default: none."""
        return []

    # -- describe ---------------------------------------------------------------------

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        """What `kxform inspect` shows for this pass and kernel (JSON-ready)."""
        status = "already applied" if analysis.already_applied else "applicable" if analysis.applicable else "refused"
        return {"status": status, "reasons": [f"{b.key}: {b.message}" for b in analysis.blockers]}


TUNED_INT_VALUES = 16
"""Integer domains up to this many values are tuned whole; wider ones are narrowed."""

POW2 = tuple(2**i for i in range(11))


def narrowed(param: Param) -> Param:
    """`param` with a wide integer domain cut to its powers of two (up to 1024) and its
    default; other parameters as they are."""
    if param.kind != "int" or len(param.values) <= TUNED_INT_VALUES:
        return param
    values = {v for v in POW2 if v in param.values} | {param.default}
    return Param.ints(
        param.name, sorted(v for v in values if isinstance(v, int)), int(param.default), param.doc, param.origin
    )


FORCED_REFUSED = "analyse"
"""`KernelResult.stage` of a kernel MISSED because the pass's analysis refused a
configuration the user fixed (`--pattern`, `tile{TILE=32}`): the run exits 1."""


def resolve_proposal(space: ParamSpace, options: Mapping[str, ParamValue]) -> Config:
    """A proposal's options as a point of `space`; CheckFailed("proposal") naming what
    is not (an unknown name, a value outside its domain)."""
    try:
        return space.resolve(options)
    except UsageError as exc:
        raise CheckFailed("proposal", exc.cause) from None


def check_constraints(
    space: ParamSpace, config: Config, hw: HwProfile, label: Callable[[Config], str] | None = None
) -> CheckRecord:
    """The passed `constraints` record of `config`, or CheckFailed("constraints") naming
    the first derived constraint it breaks on `hw`. `label`: how the pass prints a point."""
    shown = (label or space.label)(config)
    broken = space.violations(config, hw)
    if broken:
        raise CheckFailed("constraints", f"{shown} breaks {broken[0].describe()}")
    return CheckRecord(
        "constraints", True, f"{len(space.constraints)} derived constraint(s) hold at {shown} on {hw.name}"
    )


@dataclass(frozen=True)
class ValuesPass(Pass):
    """A pass configured by `NAME=VALUE` pairs kept as text (`tile{TILE=32}`,
    `rows{lanes=32,rows=4}`): the names are the kernel's own parameters, so they are
    typed and checked against the kernel's space when the pass analyses it, not here.
    `option_names`: the names every kernel shares (None where they differ per kernel)."""

    option_names: ClassVar[tuple[str, ...] | None] = None

    config: tuple[tuple[str, str], ...] = ()
    """`NAME=VALUE` per parameter, as given."""

    @classmethod
    def from_options(cls, options: Mapping[str, str | ParamValue]) -> Pass:
        names = cls.option_names
        unknown = sorted(set(options) - set(names)) if names is not None else []
        if names is not None and unknown:
            raise UsageError(
                f"pass {cls.name}: unknown option {unknown[0]!r} (options: {', '.join(names)})"
                f"{did_you_mean(unknown[0], list(names))}"
            )
        return cls(tuple((k, str(v)) for k, v in options.items()))  # type: ignore[call-arg]

    def spec_items(self) -> list[tuple[str, str]]:
        return list(self.config)

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """None by default: values no rule picks come from measurement (`kxform tune`) or the user."""
        return []

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        """The point `config` of the kernel's space, every parameter set."""
        space = self.space(ctx, analysis)
        resolved = space.resolve(config)
        why = f"configuration {space.label(resolved)}"
        return Proposal.of(self.name, analysis.kernel.name, resolved, why, provenance)

    def requested(
        self, kernel: Function, space: ParamSpace, known: Collection[str] | None = None
    ) -> tuple[tuple[Blocker, ...], Config]:
        """The values given (`config`) for `kernel`'s parameters, as a point of its `space`
        ({} when none is given), or why not, with the keys every pass uses: a name that is
        no parameter (`UnknownParameter`: of any kernel of the file when `known` lists the
        file's names, since names of other kernels are theirs; else of this kernel), a
        value outside its parameter's domain (`BadValue`). Constraints between values are
        the check's (`check_constraints`)."""
        given = dict(self.config)
        names = set(space.names) if known is None else set(known)
        unknown = sorted(set(given) - names)
        blockers: list[Blocker] = []
        if unknown:
            where = "any kernel in this file" if known is not None else f"'{kernel.name}'"
            blockers.append(
                Blocker(
                    UNKNOWN_PARAMETER,
                    f"{unknown[0]} is not a parameter of {where} (parameters: {', '.join(sorted(names)) or 'none'})",
                    kernel.span.start,
                )
            )
        wanted = {k: v for k, v in given.items() if k in space.names}
        try:
            config = space.resolve(wanted) if wanted else {}
        except UsageError as exc:
            blockers.append(Blocker(BAD_VALUE, exc.cause, kernel.span.start))
            config = {}
        return tuple(blockers), config


UNKNOWN_PARAMETER = "UnknownParameter"
"""A requested value names no parameter (`ValuesPass.requested`)."""
BAD_VALUE = "BadValue"
"""A requested value lies outside its parameter's domain (`ValuesPass.requested`)."""


class Outcome(enum.Enum):
    APPLIED = "applied"
    MISSED = "missed"  # not applicable or refused, with reasons
    UNCHANGED = "unchanged"  # already transformed
    FAILED = "failed"  # a check failed after proposing
    SKIPPED = "skipped"  # filtered out (--kernel)


@dataclass(frozen=True)
class KernelResult:
    """What happened to one kernel in one pass: frozen and picklable, for logs and reports."""

    path: str
    kernel: str
    pass_name: str
    outcome: Outcome
    line: int
    reasons: tuple[str, ...] = ()
    proposal: Proposal | None = None
    checks: tuple[CheckRecord, ...] = ()
    stage: str = ""
    policy: VerifyPolicy = DEFAULT_POLICY
    """How the later stages must verify the applied proposal (from the pass)."""
    alternates: tuple[Proposal, ...] = ()
    """Checked candidates not applied (yet): what the later stages may fall back to."""
    rejected: tuple[Rejection, ...] = ()
    """Candidates refused on the way here, by a check or a later stage."""
    key: str = ""
    """The stable key of the first reason (a blocker's key, `CheckFailed`'s, or one of
    kxform.engine.status): what later stages and reports test, never `reasons`' text."""

    def undecided(self) -> CheckRecord | None:
        """The check that stopped this kernel without refuting it (could not tell), if any."""
        return next((c for c in self.checks if c.status.could_not_tell and not c.ok), None)
