"""The launch pass over the corpus and the test fixtures: which kernels' block sizes it lifts
and which it refuses (with the reasons), and every lift verified.

For each kernel of corpora/index.toml and of every `.cu` file under tests/fixtures: the
launch pass's verdict (the parameters it lifts and where each was written, or the
reasons it refuses). For each lifted kernel with a harness spec, `kxform apply` (the real
pipeline: checks, nvcc, differential run) at the original values, where the rewrite must
verify bit-exact, and at `--points` other block sizes (the pass's nearest valid
candidates), each verified on the CPU runtime against the original at its own launch.
Nothing is written (`--check` mode on copies). A value whose launch cannot be read in
terms of the kernel's arguments, or whose launch read at the original value is not the
spec's (the verifier's "could not tell"), is "not verifiable", nothing written, and
counted apart. Prints a table; exit 1 if any verification failed.

    .venv/bin/python tools/launch_corpus.py [--points 3] [--hw h100] [--only NAME]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kxform.api import explain  # noqa: E402
from kxform.engine.pass_api import Outcome  # noqa: E402
from kxform.orchestrate.runner import ApplyConfig, run_apply  # noqa: E402
from kxform.errors import InputError  # noqa: E402
from kxform.frontend.cuda import parse_model  # noqa: E402
from kxform.frontend.source import validate_bytes  # noqa: E402
from kxform.harness.spec import find_spec_for, load_spec  # noqa: E402
from kxform.hw import load_profile  # noqa: E402
from kxform.log.report import WriteBack  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _apply(path: Path, pipeline: str, kernel: str, hw: str) -> tuple[str, str]:
    """(outcome, detail) of one `kxform apply --check --verify cpu` run on a copy."""
    with tempfile.TemporaryDirectory(prefix="kxform-launch-") as tmp:
        copy = Path(tmp) / path.parent.name
        shutil.copytree(path.parent, copy)
        config = ApplyConfig(pipeline=pipeline, hw=load_profile(hw), kernels=(kernel,), verify="cpu",
                             write_back=WriteBack.CHECK, jobs=1)
        _, outcomes = run_apply([str(copy / path.name)], config, emit=lambda text: None)
    results = [r for o in outcomes for r in o.results if r.kernel == kernel]
    if not results:
        return "error", "; ".join(o.error or "" for o in outcomes)
    bad = next((r for r in results if r.outcome is not Outcome.APPLIED), None)
    if bad is not None:
        return bad.outcome.value, (bad.reasons or ("",))[0][:160]
    verify = next((c for c in results[-1].checks if c.name == "verify"), None)
    if verify is None or not verify.ok or verify.detail.startswith("skipped"):
        return "unverified", verify.detail[:160] if verify else "no verify record"
    policy = results[0].policy.compare.describe().split(" (")[0]
    exact = "within tolerance" not in verify.detail
    return "verified", f"{policy}; {'bit-identical' if exact else 'within tolerance'}"


def candidates(path: Path, kernel: str, hw: str) -> list[str]:
    """The launch pass's own candidates (valid block sizes nearest the original), as specs."""
    from kxform.api import _analysed

    pass_, ctx, analysis = _analysed(path.read_bytes(), kernel, "launch", str(path), hw, None)
    return [p.label() for p in pass_.candidates(ctx, analysis)]


def _kernels() -> list[tuple[str, Path, str]]:
    """(label, file, kernel) for the corpus manifest and every kernel of the test fixtures."""
    manifest = tomllib.loads((ROOT / "corpora" / "index.toml").read_text())["kernel"]
    out = [(e["name"], ROOT / "corpora" / e["path"], e["kernel"].split("<")[0]) for e in manifest]
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.cu")):
        try:
            model = parse_model(validate_bytes(str(path), path.read_bytes()))
        except InputError:
            continue
        rel = path.relative_to(ROOT / "tests" / "fixtures")
        out += [(f"fixtures/{rel.parent}/{k.name}", path, k.name) for k in model.kernels]
    return out


def _has_spec(path: Path, kernel: str) -> bool:
    found = find_spec_for(path)
    if found is None:
        return False
    try:
        load_spec(found).kernel(kernel)
    except Exception:  # noqa: BLE001 - a spec without this kernel, or one that does not load
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3, help="non-default block sizes per kernel (default 3)")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--only", action="append", default=[], help="only entries whose label contains this")
    args = parser.parse_args()
    lifted, refused, failures, unverifiable = 0, 0, 0, 0
    started = time.perf_counter()
    for label, path, kernel in _kernels():
        if args.only and not any(o in label for o in args.only):
            continue
        try:
            info = explain(path.read_bytes(), kernel, "launch", path=str(path), hw=args.hw)
        except InputError as exc:
            print(f"{label:<44} input error: {str(exc)[:120]}")
            refused += 1
            continue
        if info["status"] == "refused":
            refused += 1
            print(f"{label:<44} refused   {info['reasons'][0][:150]}")
            continue
        lifted += 1
        names = ", ".join(f"{p['name']}={p['default']}" for p in info["params"])
        print(f"{label:<44} lifted    {names}; {len(info['constraints'])} constraints")
        for where in info["written"]:
            print(f"{'':<54}written: {where}")
        for constraint in info["constraints"][1:]:
            print(f"{'':<54}requires {constraint['expr']} [{constraint['origin']}]")
        if not _has_spec(path, kernel):
            print(f"{'':<54}no harness spec: not verified")
            continue
        outcome, detail = _apply(path, "launch", kernel, args.hw)
        failures += outcome != "verified" or "bit-exact" not in detail
        print(f"{'':<54}defaults: {outcome}: {detail}")
        for spec in candidates(path, kernel, args.hw)[:args.points]:
            outcome, detail = _apply(path, spec, kernel, args.hw)
            if (outcome == "failed" and detail.startswith("launch:")) or "VerifyInconclusive" in detail:
                unverifiable += 1  # the launch the source writes is not the spec's: could not tell, nothing written
                outcome = "not verifiable (nothing written)"
            else:
                failures += outcome != "verified"
            print(f"{'':<54}{spec:<46} {outcome}: {detail}")
    print(f"kernels: {lifted} lifted, {refused} refused; verification failures: {failures}; not verifiable "
          f"(refused, nothing written): {unverifiable}; {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
