"""The tile pass over the corpus: what it lifts and refuses, and every lifted kernel verified.

For each kernel of corpora/index.toml: the tile pass's verdict (the parameters it lifts,
or the reasons it refuses). For each lifted kernel with a harness spec, `kxform apply`
(the real pipeline: checks, nvcc, differential run) at the original values, where the
rewrite must verify bit-exact, and at `--points` non-default configurations (the pass's
nearest valid candidates), each verified on the CPU runtime against the original at its
own launch. Nothing is written (`--check` mode on copies). Then `tile,swizzle` in one
pipeline on the tiled GEMMs. Prints a table; exit 1 if any verification failed.

    .venv/bin/python tools/tile_corpus.py [--points 3] [--hw h100] [--only NAME]
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
from kxform.errors import InputError  # noqa: E402
from kxform.orchestrate.runner import ApplyConfig, run_apply  # noqa: E402
from kxform.hw import load_profile  # noqa: E402
from kxform.log.report import WriteBack  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GEMMS = ("sgemm_tiled", "batched_scores_3d", "macro_index_sqdist")


def _apply(path: Path, pipeline: str, kernel: str, hw: str) -> tuple[str, str]:
    """(outcome, detail) of one `kxform apply --check --verify cpu` run on a copy."""
    with tempfile.TemporaryDirectory(prefix="kxform-tile-") as tmp:
        copy = Path(tmp) / path.parent.name
        shutil.copytree(path.parent, copy)
        config = ApplyConfig(pipeline=pipeline, hw=load_profile(hw), kernels=(kernel,), verify="cpu",
                             write_back=WriteBack.CHECK, jobs=1)
        _, outcomes = run_apply([str(copy / path.name)], config, emit=lambda text: None)
    results = [r for o in outcomes for r in o.results if r.kernel == kernel]
    if not results:
        return "error", "; ".join(o.error or "" for o in outcomes)
    if any(r.outcome is not Outcome.APPLIED for r in results):
        bad = next(r for r in results if r.outcome is not Outcome.APPLIED)
        return bad.outcome.value, (bad.reasons or ("",))[0][:160]
    verify = next((c for c in results[-1].checks if c.name == "verify"), None)
    if verify is None or not verify.ok or verify.detail.startswith("skipped"):
        return "unverified", verify.detail[:160] if verify else "no verify record"
    policy = results[0].policy.compare.describe().split(" (")[0]
    exact = "within tolerance" not in verify.detail
    return "verified", f"{policy}; {'bit-identical' if exact else 'within tolerance'}"


def candidates(path: Path, kernel: str, hw: str) -> list[str]:
    """The tile pass's own candidates (valid configurations nearest the original), as specs."""
    from kxform.api import _analysed

    pass_, ctx, analysis = _analysed(path.read_bytes(), kernel, "tile", str(path), hw, None)
    return [p.label() for p in pass_.candidates(ctx, analysis)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3, help="non-default configurations per kernel (default 3)")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--only", action="append", default=[], help="only these manifest entries")
    args = parser.parse_args()
    manifest = tomllib.loads((ROOT / "corpora" / "index.toml").read_text())["kernel"]
    lifted, refused, failures = 0, 0, 0
    started = time.perf_counter()
    for entry in manifest:
        if args.only and entry["name"] not in args.only:
            continue
        path = ROOT / "corpora" / entry["path"]
        kernel = entry["kernel"].split("<")[0]
        try:
            info = explain(path.read_bytes(), kernel, path=str(path), hw=args.hw)
        except InputError as exc:  # the file does not parse: nothing is touched
            print(f"{entry['name']:<22} input error: {exc}")
            refused += 1
            continue
        if info["status"] == "refused":
            refused += 1
            print(f"{entry['name']:<22} refused   {info['reasons'][0]}")
            continue
        lifted += 1
        names = ", ".join(f"{p['name']}={p['default']}" for p in info["params"])
        print(f"{entry['name']:<22} lifted    {names}; {len(info['constraints'])} constraints")
        for note in info["not_lifted"]:
            print(f"{'':<32}not lifted: {note[:140]}")
        if "spec" not in entry:
            print(f"{'':<32}no harness spec: not verified")
            continue
        outcome, detail = _apply(path, "tile", kernel, args.hw)
        if outcome == "unchanged":  # constexprs only: already parameters, nothing to rewrite
            detail = "already parameters (constexpr): nothing to rewrite at the original values"
        else:
            failures += outcome != "verified" or "bit-exact" not in detail
        print(f"{'':<32}defaults: {outcome}: {detail}")
        for label in candidates(path, kernel, args.hw)[:args.points]:
            outcome, detail = _apply(path, label, kernel, args.hw)
            failures += outcome != "verified"
            print(f"{'':<32}{label:<34} {outcome}: {detail}")
    for name in GEMMS:
        entry = next(e for e in manifest if e["name"] == name)
        if args.only and name not in args.only:
            continue
        path = ROOT / "corpora" / entry["path"]
        outcome, detail = _apply(path, "tile{TILE=32},swizzle", entry["kernel"], args.hw)
        failures += outcome != "verified"
        print(f"{name:<22} tile{{TILE=32}},swizzle: {outcome}: {detail}")
    print(f"kernels: {lifted} lifted, {refused} refused; verification failures: {failures}; "
          f"{time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
