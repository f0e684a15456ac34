"""A pass over the corpus: what it applies to and refuses, and each configuration verified.

`apply_config` runs the real pipeline, `kxform apply --check --verify cpu` on a copy of
the kernel's directory (the pass's checks, nvcc, the differential run on the CPU runtime
against the original at its own launch); nothing is written. `read_results` turns the
engine's per-kernel results into an `Applied`, read only from typed fields: each
result's `Outcome` and reason key, the `verify` check's `Status`, its `max_abs` figure
and the passes' composed verification policy. The sentences are carried for the table
and never tested: a reworded message changes no verdict.

`configurations` says which configurations of a pass a corpus run verifies: for a pass
whose defaults are the code as written (tile, launch), the bare pass (it must verify
bit-exact) and its nearest candidates; for one that proposes nothing without values
(vectorize, coarsen, smem-tile, rows), its candidates, else the points of its space.
`kernels` lists the corpus: the manifest (corpora/index.toml), the naive versions of the
naive corpus (corpora/naive/index.toml) and the kernels of the test fixtures.
"""

from __future__ import annotations

import itertools
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kxform.api import analyse_kernel, explain, kernel_context
from kxform.bench.paths import CORPORA, ROOT
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome
from kxform.engine.policy import VerifyPolicy
from kxform.engine.registry import default_registry
from kxform.engine.status import UNVERIFIABLE_LAUNCH, UNVERIFIED, VERIFY_INCONCLUSIVE, Status

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

COULD_NOT_TELL = frozenset({VERIFY_INCONCLUSIVE, UNVERIFIED, UNVERIFIABLE_LAUNCH})
"""Reason keys of a configuration nothing could judge: neither verified nor refuted."""
DETAIL = 160
"""Characters of a sentence shown in a table cell."""


@dataclass(frozen=True)
class Applied:
    """What one `apply --check --verify cpu` of a configuration established for a kernel."""

    outcome: Outcome | None
    """APPLIED when every pass of the pipeline applied; else the first result that did not
    (its outcome); None when the file itself could not be processed (`error`)."""
    key: str = ""
    """The stable reason key of the result that stopped the kernel ("" when applied)."""
    reason: str = ""
    """That result's first reason, or the file's error: for people."""
    verify: CheckRecord | None = None
    """The differential run's check record (None: none ran)."""
    policy: VerifyPolicy | None = None
    """The applied passes' verification policies composed in pipeline order."""
    rewritten: bytes = b""
    """The file as the run would write it (empty when it would write nothing)."""

    @property
    def verified(self) -> bool:
        """Applied and the differential run passed."""
        return self.outcome is Outcome.APPLIED and self.verify is not None and self.verify.status is Status.PASSED

    @property
    def identical(self) -> bool:
        """Verified with every compared output bit-identical (the run's `max_abs` figure is 0)."""
        return self.verified and self.verify is not None and self.verify.figure("max_abs") == 0.0

    @property
    def exact_policy(self) -> bool:
        """The passes asked for a bit-exact comparison (not a tolerance)."""
        return self.policy is not None and self.policy.compare.mode == "exact"

    @property
    def bit_exact(self) -> bool:
        """Verified under a bit-exact policy: what a rewrite that changes no arithmetic must show."""
        return self.verified and self.exact_policy

    @property
    def could_not_tell(self) -> bool:
        """Stopped because nothing could judge it (inconclusive run, no runtime, a launch
        the verifier cannot read): its own outcome, never a pass and never a refutation."""
        return self.outcome is not Outcome.APPLIED and self.key in COULD_NOT_TELL

    @property
    def label(self) -> str:
        """The table's word: verified, unverified (applied, no differential run passed or
        ran), error, or the stopping result's outcome (failed, missed, unchanged, skipped)."""
        if self.outcome is None:
            return "error"
        if self.outcome is not Outcome.APPLIED:
            return self.outcome.value
        return "verified" if self.verified else "unverified"

    @property
    def detail(self) -> str:
        """The table's note: the policy and whether the outputs were identical, else why not."""
        if self.outcome is not Outcome.APPLIED:
            return self.reason[:DETAIL]
        if not self.verified:
            return self.verify.detail[:DETAIL] if self.verify is not None else "no verify record"
        assert self.policy is not None
        policy = self.policy.compare.describe().split(" (")[0]
        return f"{policy}; {'bit-identical' if self.identical else 'within tolerance'}"

    def line(self) -> str:
        return f"{self.label}: {self.detail}"


def read_results(results: Sequence[KernelResult], kernel: str, error: str = "") -> Applied:
    """The `Applied` of `kernel` from one apply run's results (every pass, in order)."""
    mine = [r for r in results if r.kernel == kernel]
    if not mine:
        return Applied(None, reason=error or "the run produced no result for the kernel")
    verify = next((c for r in reversed(mine) for c in r.checks if c.name == "verify"), None)
    policy: VerifyPolicy | None = None
    for r in mine:
        if r.outcome is Outcome.APPLIED:
            policy = r.policy if policy is None else policy.then(r.policy)
    stopped = next((r for r in mine if r.outcome is not Outcome.APPLIED), None)
    if stopped is not None:
        return Applied(stopped.outcome, stopped.key, (stopped.reasons or ("",))[0], verify, policy)
    return Applied(Outcome.APPLIED, "", "", verify, policy)


def apply_config(path: Path, pipeline: str, kernel: str, hw: str) -> Applied:
    """`kxform apply --check --verify cpu` of `pipeline` (`tile{TILE=32},swizzle`) on
    `kernel`, on a copy of `path`'s directory (its harness spec travels with it)."""
    from kxform.hw import load_profile
    from kxform.log.report import WriteBack
    from kxform.orchestrate.runner import ApplyConfig, run_apply

    with tempfile.TemporaryDirectory(prefix="kxform-corpus-") as tmp:
        copy = Path(tmp) / path.parent.name
        shutil.copytree(path.parent, copy)
        config = ApplyConfig(
            pipeline=pipeline, hw=load_profile(hw), kernels=(kernel,), verify="cpu", write_back=WriteBack.CHECK, jobs=1
        )
        _, outcomes = run_apply([str(copy / path.name)], config, emit=lambda text: None)
    error = "; ".join(o.error for o in outcomes if o.error)
    applied = read_results([r for o in outcomes for r in o.results], kernel, error)
    written = next((o.transform.new_data for o in outcomes if o.transform is not None and o.transform.changed), b"")
    return replace(applied, rewritten=written)


# -- which configurations a corpus run verifies ------------------------------------------


def candidates(path: Path, kernel: str, pass_name: str, hw: str) -> list[str]:
    """The pass's own candidates for the kernel (valid configurations nearest the
    original, best first), as pipeline specs."""
    pass_ = default_registry().get(pass_name)()
    ctx = kernel_context(path.read_bytes(), kernel, path=str(path), hw=hw)
    return [p.label() for p in pass_.candidates(ctx, analyse_kernel(pass_, ctx, kernel))]


def space_points(path: Path, kernel: str, pass_name: str, hw: str) -> list[str]:
    """Every point of the kernel's space, within its constraints, at which the pass proposes
    a rewrite (not at a factor of 1: the code as written), as pipeline specs."""
    kind = default_registry().get(pass_name)
    ctx = kernel_context(path.read_bytes(), kernel, path=str(path), hw=hw)
    space = kind().space(ctx, analyse_kernel(kind(), ctx, kernel))
    points = [dict(zip(space.names, combo)) for combo in itertools.product(*(p.values for p in space.params))]
    out = []
    for point in (p for p in points if space.params and not space.violations(space.resolve(p), ctx.hw)):
        configured = kind.from_options({k: str(v) for k, v in point.items()})
        analysis = analyse_kernel(configured, ctx, kernel)
        if analysis.applicable and configured.default_proposal(ctx, analysis) is not None:
            out.append(configured.spec())
    return out


def configurations(path: Path, kernel: str, pass_name: str, hw: str, limit: int | None) -> list[str]:
    """What a corpus run verifies of `pass_name` on `kernel`, as pipeline specs: the bare
    pass first where its defaults are the code as written, then up to `limit` (None: all)
    of its candidates, or of its space's points where it has no candidates."""
    kind = default_registry().get(pass_name)
    others = candidates(path, kernel, pass_name, hw) or space_points(path, kernel, pass_name, hw)
    return ([pass_name] if kind.defaults_as_written else []) + others[:limit]


# -- the corpus --------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """One kernel of the corpus: its label (`naive/gelu_f32`), file and name."""

    label: str
    path: Path
    name: str


def manifest() -> list[dict[str, Any]]:
    """The entries of corpora/index.toml."""
    return tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]  # type: ignore[no-any-return]


def naive_pairs() -> list[dict[str, Any]]:
    """The entries of corpora/naive/index.toml."""
    return tomllib.loads((CORPORA / "naive" / "index.toml").read_text())["pair"]  # type: ignore[no-any-return]


def manifest_kernels() -> list[Kernel]:
    return [Kernel(e["name"], CORPORA / e["path"], e["kernel"].split("<")[0]) for e in manifest()]


def naive_kernels() -> list[Kernel]:
    """The naive version of every pair of the naive corpus."""
    return [Kernel(f"naive/{p['name']}", CORPORA / "naive" / p["naive"], p["naive_kernel"]) for p in naive_pairs()]


def fixture_kernels() -> list[Kernel]:
    """Every kernel of the `.cu` files under tests/fixtures that parse."""
    from kxform.errors import InputError
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import validate_bytes

    out = []
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.cu")):
        try:
            model = parse_model(validate_bytes(str(path), path.read_bytes()))
        except InputError:
            continue
        rel = path.relative_to(ROOT / "tests" / "fixtures")
        out += [Kernel(f"fixtures/{rel.parent}/{k.name}", path, k.name) for k in model.kernels]
    return out


SETS = {"manifest": manifest_kernels, "naive": naive_kernels, "fixtures": fixture_kernels}
"""The corpus's kernel sets, by name."""


def kernels(sets: Sequence[str], only: Sequence[str] = ()) -> list[Kernel]:
    """The kernels of the named sets whose label contains one of `only` (all when empty)."""
    found = [k for name in sets for k in SETS[name]()]
    return [k for k in found if not only or any(o in k.label for o in only)]


def has_spec(path: Path, kernel: str) -> bool:
    """Whether a harness spec beside `path` names `kernel` (and loads)."""
    from kxform.errors import KxformError
    from kxform.harness.spec import find_spec_for, load_spec

    found = find_spec_for(path)
    if found is None:
        return False
    try:
        load_spec(found).kernel(kernel)
    except KxformError:  # a spec without this kernel, or one that does not load
        return False
    return True


def verdict(kernel: Kernel, pass_name: str, hw: str) -> dict[str, Any]:
    """What the pass makes of the kernel (`kxform inspect --json`'s record)."""
    return explain(kernel.path.read_bytes(), kernel.name, pass_name, path=str(kernel.path), hw=hw)


def tuning_points(kernel: Kernel, pass_name: str, hw: str) -> list[str]:
    """Every point of the pass's tuning space for the kernel (what `kxform tune` times) on
    `hw`, as pipeline specs."""
    from kxform.hw import load_profile
    from kxform.search.kernel_space import kernel_space

    tuned = kernel_space(kernel.path.read_bytes(), kernel.name, (pass_name,), path=str(kernel.path), hw=hw)
    valid = tuned.search(load_profile(hw))
    return [s for s in (tuned.spec(valid.config(r)) for r in range(len(valid))) if s]


def checked(kernel: Kernel, spec: str, hw: str) -> tuple[bool, str]:
    """`spec` through the pass's checks (its constraints, nvcc and ptxas for `hw`'s
    architecture, re-parse, idempotence): whether it applied, and ptxas's registers (or
    the check's words, or why it did not)."""
    from kxform.api import rewrite

    result = rewrite(kernel.path.read_bytes(), spec, path=str(kernel.path), hw=hw)
    done = next(r for r in result.results if r.kernel == kernel.name)
    if done.outcome is not Outcome.APPLIED:
        return False, f"{done.outcome.value}: {(done.reasons or ('',))[0][:140]}"
    record = next((c for c in done.checks if c.name == "resources"), None)
    if record is None:
        return True, "applied"
    registers = record.figure("registers")
    return True, f"{registers} registers" if registers else record.detail


def reverify(path: Path, kernel: str, rewritten: bytes) -> tuple[bool, str]:
    """`kxform verify ORIGINAL REWRITTEN` of one rewrite on the CPU runtime: each file
    launched as its own launcher says, nothing taken from the pass (the rewritten file
    beside a copy of the original's directory, so its headers resolve as they did).
    Whether it verified, and the verdict's words."""
    from kxform.frontend.source import read_source, validate_bytes
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.verify.differential import pick_runtime, verify_pair
    from kxform.verify.own_launch import pair_policy
    from kxform.verify.verdict import combined_status

    spec_path = find_spec_for(path)
    if spec_path is None:
        return False, f"no harness spec beside {path}"
    spec = load_spec(spec_path)
    notes = []
    with tempfile.TemporaryDirectory(prefix="kxform-reverify-") as tmp:
        copy = Path(tmp) / path.parent.name
        shutil.copytree(path.parent, copy)
        target = copy / path.name
        target.write_bytes(rewritten)
        original = read_source(str(path))
        new = validate_bytes(str(target), rewritten)
        reports = []
        for kernel_spec in spec.instantiations(kernel) or (spec.kernel(kernel),):
            policy, note = pair_policy(original, new, kernel_spec.base_name)
            notes.append(note)
            reports.append(verify_pair(original, new, kernel_spec, pick_runtime("cpu"), policy=policy))
    status = combined_status(reports)
    sizes = "; ".join(v.summary() for r in reports for v in r.sizes)
    return status == "ok", f"{status}: {'; '.join(dict.fromkeys(notes))} | {sizes}"
