"""Proof that a remap formula is a bijection onto the tile grid, for every grid the GPU allows.

The compiled enumeration (bijection.py) and the sampled arithmetic check
(formula_eval.py) look at grids up to 64x64 and at samples of larger ones: a formula
that misbehaves only at `gx == 77` passes both. Here the formula is handed to the z3
SMT solver with C's unsigned 32-bit semantics (integers kept below 2^32, bitwise
operators on 32-bit bit-vectors), and three claims are
proven for *every* grid of the domain below and every block in it:

1. safety: no step wraps (a subtraction below zero, a sum, product or left shift of
   2^32 or more), divides by zero or shifts by 32 or more, where C evaluates it (only
   the chosen arm of `c ? a : b`, the right of `&&`/`||` where C reaches it);
2. range: `lx < gx` and `ly < gy`;
3. injectivity: two distinct blocks never map to the same tile.

Range and injectivity on a finite grid make the remap a bijection onto it. The domain
is the hardware's: `1 <= gx <= 2^31 - 1`, `1 <= gy <= 65535` (CUDA's gridDim limits),
with `gx * gy < 2^32` so that the linear block index `pid` fits the helper's 32-bit
arithmetic (the limit every emitted helper states). A claim the solver cannot decide
within `TIME_LIMIT_MS` ("unknown", a time-out) is not a proof: the caller refuses the
remap with that reason. A refuted claim comes with the solver's counter-example (grid
and blocks). Formula size is already bounded by the parser (formula.MAX_NODES).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import z3

from kxform.analysis.solver import PROOF_LOCK, context, proof_context
from kxform.cache import cache_root, content_key
from kxform.fileio import write_atomic
from kxform.passes.swizzle.formula import Binary, Call, Formula, Node, Num, Unary, Var, show

GX_MAX = 2**31 - 1
"""gridDim.x limit (CUDA, compute capability 3.0 and later)."""
GY_MAX = 65535
"""gridDim.y limit."""
TIME_LIMIT_MS = 60_000
"""Per claim; beyond it the solver's answer is "unknown", which refuses the remap."""
QUICK_MS = 2_000
"""The default solver alone first, this long: most claims are decided in milliseconds; only
the rest go to the portfolio (STRATEGIES) for the full limit."""
PROVER_VERSION = "1"

_W = 32


def _ctx() -> z3.Context:
    """The z3 context of the proof running on this thread (kxform.analysis.solver: z3's
    shared default context corrupted under the tuner's worker threads)."""
    return context()  # type: ignore[no-any-return]


class ProofFailed(Exception):
    """The remap is not proven: `kind` is `refuted` (with a counter-example) or `unknown`."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class ProofReport:
    detail: str
    cached: bool


class _Encoder:
    """The formula as integer terms over one block (bx, by) of one grid (gx, gy),
    collecting the conditions under which a step would misbehave. Every value is kept in
    [0, 2^32): where no step wraps (claim 1), C's unsigned arithmetic is integer arithmetic
    with truncating division, which the solver's nonlinear integer reasoning handles far
    better than bit-blasted 32-bit division. Bitwise operators go through bit-vectors."""

    def __init__(self, bx: z3.ArithRef, by: z3.ArithRef, gx: z3.ArithRef, gy: z3.ArithRef) -> None:
        self.env: dict[str, z3.ArithRef] = {
            "bx": bx,
            "by": by,
            "gx": gx,
            "gy": gy,
            "pid": by * gx + bx,
            "total": gx * gy,
        }
        self.hazards: list[tuple[z3.BoolRef, str]] = []

    def hazard(self, when: z3.BoolRef, bad: z3.BoolRef, node: Node, what: str) -> None:
        self.hazards.append((z3.And(when, bad), f"{what} in `{show(node)}`"))

    def eval(self, node: Node, when: z3.BoolRef) -> z3.ArithRef:
        if isinstance(node, Num):
            return z3.IntVal(node.value, _ctx())
        if isinstance(node, Var):
            return self.env[node.name]
        if isinstance(node, Unary):
            value = self.eval(node.operand, when)
            return _int(~_bv(value)) if node.op == "~" else _bool(value == 0)
        if isinstance(node, Call):
            return self.call(node, when)
        return self.binary(node, when)

    def call(self, node: Call, when: z3.BoolRef) -> z3.ArithRef:
        if node.fn == "select":
            cond = self.eval(node.args[0], when) != 0
            yes = self.eval(node.args[1], z3.And(when, cond))
            no = self.eval(node.args[2], z3.And(when, z3.Not(cond)))
            return z3.If(cond, yes, no)
        a, b = (self.eval(arg, when) for arg in node.args)
        return z3.If(a < b, a, b) if node.fn == "min" else z3.If(a > b, a, b)

    def binary(self, node: Binary, when: z3.BoolRef) -> z3.ArithRef:
        op = node.op
        a = self.eval(node.left, when)
        if op in ("&&", "||"):
            left = a != 0
            b = self.eval(node.right, z3.And(when, left if op == "&&" else z3.Not(left))) != 0
            return _bool(z3.And(left, b) if op == "&&" else z3.Or(left, b))
        b = self.eval(node.right, when)
        if op in ("/", "%"):
            self.hazard(when, b == 0, node, "division by zero" if op == "/" else "modulo by zero")
            safe = z3.If(b == 0, z3.IntVal(1, _ctx()), b)
            return a / safe if op == "/" else a % safe
        if op in ("<<", ">>"):
            self.hazard(when, b >= 32, node, "shift by 32 or more")
            if isinstance(node.right, Num):
                factor = z3.IntVal(2 ** min(node.right.value, 31), _ctx())
            else:
                factor = _int(z3.BitVecVal(1, _W, _ctx()) << _bv(z3.If(b < 32, b, z3.IntVal(31, _ctx()))))
            if op == ">>":
                return a / factor
            return self.wrapping(a * factor, when, node, "left shift past 32 bits")
        if op == "-":
            self.hazard(when, a < b, node, "subtraction below zero")
            return z3.If(a < b, z3.IntVal(0, _ctx()), a - b)
        if op == "+":
            return self.wrapping(a + b, when, node, "sum of 2^32 or more")
        if op == "*":
            return self.wrapping(a * b, when, node, "product of 2^32 or more")
        return _BINARY[op](a, b)

    def wrapping(self, value: z3.ArithRef, when: z3.BoolRef, node: Node, what: str) -> z3.ArithRef:
        self.hazard(when, value >= _LIMIT, node, what)
        return z3.If(value >= _LIMIT, z3.IntVal(0, _ctx()), value)


_LIMIT = 2**32


def _bv(value: z3.ArithRef) -> z3.BitVecRef:
    return z3.Int2BV(value, _W)


def _int(value: z3.BitVecRef) -> z3.ArithRef:
    return z3.BV2Int(value, is_signed=False)


def _bool(cond: z3.BoolRef) -> z3.ArithRef:
    return z3.If(cond, z3.IntVal(1, _ctx()), z3.IntVal(0, _ctx()))


_BINARY = {
    "&": lambda a, b: _int(_bv(a) & _bv(b)),
    "|": lambda a, b: _int(_bv(a) | _bv(b)),
    "^": lambda a, b: _int(_bv(a) ^ _bv(b)),
    "<": lambda a, b: _bool(a < b),
    "<=": lambda a, b: _bool(a <= b),
    ">": lambda a, b: _bool(a > b),
    ">=": lambda a, b: _bool(a >= b),
    "==": lambda a, b: _bool(a == b),
    "!=": lambda a, b: _bool(a != b),
}


def _grid() -> tuple[z3.ArithRef, z3.ArithRef, list[z3.BoolRef]]:
    gx, gy = z3.Ints("gx gy", _ctx())
    domain = [gx >= 1, gx <= GX_MAX, gy >= 1, gy <= GY_MAX, gx * gy < _LIMIT]
    return gx, gy, domain


def _block(gx: z3.ArithRef, gy: z3.ArithRef, tag: str) -> tuple[_Encoder, list[z3.BoolRef]]:
    bx, by = z3.Ints(f"bx{tag} by{tag}", _ctx())
    return _Encoder(bx, by, gx, gy), [bx >= 0, bx < gx, by >= 0, by < gy]


def _outputs(formula: Formula, enc: _Encoder) -> tuple[z3.ArithRef, z3.ArithRef]:
    for name, node in formula.statements:
        enc.env[name] = enc.eval(node, z3.BoolVal(True, _ctx()))
    return enc.env["lx"], enc.env["ly"]


STRATEGIES = ("smt", "qfnia", "simplify-then-smt")
"""The solvers a claim is handed to at once (a portfolio): z3's default, its nonlinear
integer tactic, and preprocessing (simplify, solve-eqs, purify-arith) before the default.
Which one decides a nonlinear claim quickly varies between claims and z3 releases (z3
4.15 decides a grouped remap's range only after preprocessing and its injectivity only
with qfnia, each in seconds, while the default runs past the limit on both), so the first
definite answer wins and the others are interrupted."""


def _strategy(name: str, ctx: z3.Context) -> z3.Solver:
    if name == "qfnia":
        return z3.Tactic("qfnia", ctx=ctx).solver()
    if name == "simplify-then-smt":
        steps = [z3.Tactic(t, ctx=ctx) for t in ("simplify", "solve-eqs", "purify-arith", "smt")]
        return z3.Then(*steps, ctx=ctx).solver()
    return z3.Solver(ctx=ctx)


@dataclass
class _Model:
    """A counter-example found in a strategy's own context: terms are evaluated there."""

    model: z3.ModelRef
    ctx: z3.Context

    def eval(self, term: z3.ExprRef, model_completion: bool = True) -> z3.ExprRef:
        here = term if term.ctx == self.ctx else term.translate(self.ctx)
        return self.model.eval(here, model_completion=model_completion)


def _solve(claims: list[z3.BoolRef], claim: str) -> _Model | None:
    """A model of `claims` (a counter-example to what they negate), None when unsat. Each
    strategy of the portfolio runs on a thread of its own with the claims translated into
    a context of its own (a z3 context is used by one thread at a time); the first sat or
    unsat decides, and a claim no strategy decides within TIME_LIMIT_MS is "unknown"."""
    if QUICK_MS > 0:  # most claims are decided at once: no threads for them
        quick = z3.Solver(ctx=_ctx())
        quick.set("timeout", min(QUICK_MS, TIME_LIMIT_MS))
        quick.add(*claims)
        answer = quick.check()
        if answer == z3.unsat:
            return None
        if answer == z3.sat:
            return _Model(quick.model(), _ctx())
    jobs = []
    for name in STRATEGIES:  # translated here, on the proof's thread, before any other thread starts
        ctx = z3.Context()
        jobs.append((name, ctx, [c.translate(ctx) for c in claims]))
    decided: list[tuple[int, z3.CheckSatResult, _Model | None]] = []
    reasons: dict[int, str] = {}
    done = threading.Event()
    lock = threading.Lock()

    def run(index: int, name: str, ctx: z3.Context, translated: list[z3.BoolRef]) -> None:
        answer, found, why = z3.unknown, None, "not run: decided by another solver"
        try:
            solver = _strategy(name, ctx)
            solver.set("timeout", TIME_LIMIT_MS)
            solver.add(*translated)
            if done.is_set():  # decided by another strategy before this one started
                return
            answer = solver.check()
            found = _Model(solver.model(), ctx) if answer == z3.sat else None
            why = solver.reason_unknown() if answer == z3.unknown else ""
        except z3.Z3Exception as exc:  # interrupted, or a tactic that gave up
            answer, found, why = z3.unknown, None, str(exc)
        finally:
            _finish(index, answer, found, why)

    def _finish(index: int, answer: z3.CheckSatResult, found: _Model | None, why: str) -> None:
        with lock:
            if answer in (z3.sat, z3.unsat) and not decided:
                decided.append((index, answer, found))
                done.set()
            reasons[index] = why or "unknown"
            if len(reasons) == len(jobs):
                done.set()

    threads = [threading.Thread(target=run, args=(i, *job), daemon=True) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    done.wait()
    for i, (_, ctx, _) in enumerate(jobs):
        if not decided or i != decided[0][0]:  # the winner's context still holds its model
            ctx.interrupt()
    for thread in threads:
        thread.join()
    if decided:
        _, answer, model = decided[0]
        return model if answer == z3.sat else None
    said = "; ".join(f"{jobs[i][0]}: {why}" for i, why in sorted(reasons.items()))
    raise ProofFailed(
        "unknown", f"could not prove {claim} (solvers: {said} within {TIME_LIMIT_MS // 1000} s); not proven is refused"
    )


def _value(model: _Model, term: z3.ArithRef) -> int:
    return model.eval(term, model_completion=True).as_long()  # type: ignore[no-any-return]


def prove_stages(stages: tuple[Formula, ...]) -> ProofReport:
    """Prove a remap given as stages applied in turn (each reads the previous one's
    (lx, ly) as its (bx, by)): each stage a bijection of the grid onto itself, so their
    composition is one. ProofFailed (refuted or unknown) names the stage when there are
    several; no stage at all is "unknown"."""
    if not stages:
        raise ProofFailed("unknown", "no proof: the remap has no formula the solver can check")
    details = []
    for i, stage in enumerate(stages):
        try:
            details.append(prove_formula(stage))
        except ProofFailed as exc:
            if len(stages) == 1:
                raise
            raise ProofFailed(exc.kind, f"stage {i + 1} of {len(stages)}: {exc}") from None
    detail = details[0].detail + (f" (each of {len(stages)} stages; bijections compose)" if len(stages) > 1 else "")
    return ProofReport(detail, cached=all(d.cached for d in details))


def prove_formula(formula: Formula) -> ProofReport:
    """Prove safety, range and injectivity of `formula` on every grid of the domain;
    ProofFailed naming the counter-example or why the solver could not decide. Proofs
    are cached by the formula's canonical text."""
    key = content_key(PROVER_VERSION, formula.canonical, str(GX_MAX), str(GY_MAX), str(TIME_LIMIT_MS))
    marker = cache_root() / "proof" / f"{key}.ok"
    if marker.exists():
        return ProofReport(marker.read_text(encoding="utf-8"), cached=True)
    with PROOF_LOCK:
        if marker.exists():  # proven by another thread while this one waited
            return ProofReport(marker.read_text(encoding="utf-8"), cached=True)
        detail = _prove(formula)
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, detail.encode())  # a temporary name of its own: threads prove side by side
    return ProofReport(detail, cached=False)


def _linear_form(formula: Formula) -> str | None:
    """The name `id` when the formula is `lx = id % gx`, `ly = id / gx` with every other
    statement reading only `pid`, `total`, constants and earlier names: a permutation of
    the linear index, unflattened row-major (the XCD remap)."""
    statements = dict(formula.statements)
    lx, ly = statements.get("lx"), statements.get("ly")
    if not (
        isinstance(lx, Binary)
        and isinstance(ly, Binary)
        and lx.op == "%"
        and ly.op == "/"
        and isinstance(lx.left, Var)
        and lx.left == ly.left
        and lx.right == Var("gx") == ly.right
    ):
        return None
    if [name for name, _ in formula.statements][-2:] not in (["lx", "ly"], ["ly", "lx"]):
        return None
    if any(_reads_any(node, {"bx", "by", "gx", "gy"}) for name, node in formula.statements if name not in ("lx", "ly")):
        return None
    return lx.left.name


def _reads_any(node: Node, names: set[str]) -> bool:
    if isinstance(node, Var):
        return node.name in names
    if isinstance(node, Unary):
        return _reads_any(node.operand, names)
    if isinstance(node, Binary):
        return _reads_any(node.left, names) or _reads_any(node.right, names)
    if isinstance(node, Call):
        return any(_reads_any(a, names) for a in node.args)
    return False


def _prove_linear(formula: Formula, name: str) -> str:
    """`name` a permutation of [0, total) for every total < 2^32, pid and total free: the
    unflattening (`% gx`, `/ gx`) of an index below gx*gy is a bijection onto the grid,
    so the remap is one. One variable less of nonlinear arithmetic than the 2-D claim."""
    total, p, q = z3.Ints("total p q", _ctx())
    domain = [total >= 1, total < _LIMIT]
    values = []
    for pid in (p, q):
        enc = _Encoder(pid, z3.IntVal(0, _ctx()), z3.IntVal(1, _ctx()), z3.IntVal(1, _ctx()))
        enc.env.update(pid=pid, total=total)
        for stmt, node in formula.statements:
            if stmt not in ("lx", "ly"):
                enc.env[stmt] = enc.eval(node, z3.BoolVal(True, _ctx()))
        values.append((enc, enc.env[name]))
    (enc, first), (_, second) = values
    inside = [p >= 0, p < total, q >= 0, q < total]
    for bad, what in enc.hazards:
        model = _solve([*domain, *inside, bad], "that no step wraps, divides by zero or shifts too far")
        if model is not None:
            raise ProofFailed("refuted", f"{what} at total {_value(model, total)}, pid {_value(model, p)}")
    model = _solve([*domain, *inside, z3.Or(first < 0, first >= total)], f"that `{name}` stays below total")
    if model is not None:
        raise ProofFailed(
            "refuted",
            f"maps outside the grid: total {_value(model, total)}, pid {_value(model, p)} "
            f"-> {name} = {_value(model, first)}",
        )
    model = _solve([*domain, *inside, p != q, first == second], "that no two blocks share a tile")
    if model is not None:
        raise ProofFailed(
            "refuted",
            f"not a bijection: with {_value(model, total)} blocks, pid {_value(model, p)} "
            f"and {_value(model, q)} both map to {name} = {_value(model, first)}",
        )
    return (
        "proven (z3) a permutation of the linear block index, unflattened row-major, for every grid with gx*gy < 2^32"
    )


@functools.lru_cache(maxsize=256)
def _prove(formula: Formula) -> str:
    with proof_context():
        return _prove_in_context(formula)


def _prove_in_context(formula: Formula) -> str:
    linear = _linear_form(formula)
    if linear is not None:
        return _prove_linear(formula, linear)
    gx, gy, domain = _grid()
    enc, inside = _block(gx, gy, "")
    lx, ly = _outputs(formula, enc)

    def at(m: z3.ModelRef) -> str:
        return f"grid {_value(m, gx)}x{_value(m, gy)}, block ({_value(m, enc.env['bx'])}, {_value(m, enc.env['by'])})"

    for bad, what in enc.hazards:
        model = _solve([*domain, *inside, bad], "that no step wraps, divides by zero or shifts too far")
        if model is not None:
            raise ProofFailed("refuted", f"{what} at {at(model)}")
    model = _solve([*domain, *inside, z3.Or(lx >= gx, ly >= gy)], "that every block maps into the grid")
    if model is not None:
        raise ProofFailed(
            "refuted", f"maps outside the grid at {at(model)}: ({_value(model, lx)}, {_value(model, ly)})"
        )
    other, inside2 = _block(gx, gy, "'")
    lx2, ly2 = _outputs(formula, other)
    distinct = z3.Or(enc.env["bx"] != other.env["bx"], enc.env["by"] != other.env["by"])
    model = _solve([*domain, *inside, *inside2, distinct, lx == lx2, ly == ly2], "that no two blocks share a tile")
    if model is not None:
        raise ProofFailed(
            "refuted",
            f"not a bijection: on grid {_value(model, gx)}x{_value(model, gy)}, blocks "
            f"({_value(model, enc.env['bx'])}, {_value(model, enc.env['by'])}) and "
            f"({_value(model, other.env['bx'])}, {_value(model, other.env['by'])}) both map to "
            f"({_value(model, lx)}, {_value(model, ly)})",
        )
    return (
        f"proven (z3) a bijection onto the grid, without wrap-around, for every gx <= {GX_MAX}, gy <= {GY_MAX} "
        "with gx*gy < 2^32"
    )
