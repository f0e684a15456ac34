"""The steps of `kxform optimize` (kxform.cli.optimize): spec, verification of the
original, the space, tuning, and what is written. Each step says what it did through
`say` (a line on stdout) and records it in the report `--json` prints."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kxform import exitcodes
from kxform.cli.tune_print import format_table
from kxform.orchestrate.tune_request import TuneRequest
from kxform.errors import KxformError, UsageError
from kxform.frontend.source import SourceText, read_source
from kxform.harness.model import KernelSpec
from kxform.harness.request import UnitFlags

MAX_COUNTED = 100_000
"""Valid configurations of one pass counted at most (a wider space says `100000+`)."""


def tune_kernel(request: TuneRequest, quiet: bool = False) -> tuple[dict[str, Any], Path]:
    """The one call into the tuner (`kxform.api.tune`, what `kxform tune FILE --kernel K`
    runs): its summary, what `tune --json` prints, and the pass log's path. The progress
    bar is drawn on a terminal unless `quiet`; a named pass left out is told on stderr."""
    from kxform.api import Listeners, tune
    from kxform.cli.progress import interactive
    from kxform.cli.tune_print import print_left_out
    from kxform.search.progress import Progress

    drawn = not quiet and interactive(sys.stderr)  # never into a pipe or a CI log
    with Progress(enabled=drawn, total=request.search.evaluations, time_s=request.search.time_s) as progress:
        outcome = tune(request, listeners=Listeners(on_step=progress.step, on_left_out=print_left_out))
    return outcome.record, Path(str(outcome.log_path))


class OptimizeRun:
    """One `kxform optimize` run over `args` (its options), with the file's build flags."""

    def __init__(self, args: argparse.Namespace, flags: UnitFlags, say: Callable[[str], None]) -> None:
        self.args = args
        self.flags = flags
        self.say = say
        self.report: dict[str, Any] = {"file": args.file, "kernel": args.kernel, "exit": exitcodes.OK}

    def run(self) -> dict[str, Any]:
        source = read_source(self.args.file)
        _check_kernel(source, self.args.kernel)
        spec_path, drafted = self.spec(source)
        kspec = _load(spec_path, self.args.kernel)
        if drafted:
            self.show_draft(kspec, spec_path)
        if not self.verify(source, kspec):
            return self.report
        space = self.space(source)
        if space is None:
            self.keep_draft(source, spec_path, drafted)
            return self.report
        gpu_missing = self.gpu_missing()
        if gpu_missing:
            self.report["not_tuned"] = gpu_missing
            self.say(
                f"not tuned: no GPU here ({gpu_missing}). On a machine with a CUDA GPU this command times "
                f"the {self.report['space']['configurations']} configurations above and keeps the fastest "
                "verified one (--write writes it); here, times recorded there stand in with "
                "--objective cpu+replay:FILE (docs/search.md, 'Tuning without a GPU')"
            )
            self.keep_draft(source, spec_path, drafted)
            return self.report
        spec_path = self.keep_draft(source, spec_path, drafted) or spec_path
        self.tune(source, kspec, spec_path)
        return self.report

    # ------------------------------------------------------------------ the spec

    def spec(self, source: SourceText) -> tuple[Path, bool]:
        """The spec's path, and whether it was drafted in this run."""
        from kxform.harness.spec import find_spec_for

        found = Path(self.args.spec) if self.args.spec else find_spec_for(source.path)
        if found is not None:
            self.say(f"spec: {found}")
            self.report["spec"] = {"path": str(found), "drafted": False}
            return found, False
        return self.draft(source), True

    def draft(self, source: SourceText) -> Path:
        """Draft the spec as `harness infer` does, into `.kxform/specs/NAME.kxspec.toml`;
        UsageError naming the lines to fill in when the draft is incomplete."""
        from kxform.harness.infer import infer_spec
        from kxform.harness.spec import SPEC_SUFFIX
        from kxform.runtime.cpu import CpuRuntime
        from kxform.workspace.files import state_dir, write_atomic

        cpu = CpuRuntime()
        runtime = cpu if cpu.available()[0] else None
        folder = state_dir() / "specs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{Path(source.path).stem}{SPEC_SUFFIX}"
        drafted = infer_spec(source, self.args.kernel, runtime, str(folder), flags=self.flags)
        write_atomic(path, drafted.text.encode("utf-8"))
        self.report["spec"] = {"path": str(path), "drafted": True, "guessed": drafted.guessed or None}
        self.say(f"spec: none beside {source.path}; drafted one as `kxform harness infer` does: {path} (review it)")
        if drafted.guessed:
            self.say(f"  warning: {drafted.guessed}")
        if drafted.todos:
            lines = "; ".join(f"{path}:{t.removeprefix('line ')}" for t in drafted.todos)
            raise UsageError(
                f"{source.path}: the drafted spec of '{self.args.kernel}' has lines to fill in ({lines}); "
                f"fill them in and run again with --spec {path}"
            )
        return path

    def show_draft(self, kspec: KernelSpec, path: Path) -> None:
        """What the draft assumed, one line per fact, with the draft's own note on each."""
        notes = _notes(path.read_text(encoding="utf-8"))
        grid = ", ".join(e.text for e in kspec.grid)
        block = ", ".join(e.text for e in kspec.block)
        assumed = {
            "launch": f"grid ({grid}), block ({block})" + (f"  ({notes['grid']})" if "grid" in notes else ""),
            "sizes": "; ".join(f"{s.name}: {_values(s.values)}" for s in kspec.sizes),
            "compare": str(kspec.compare),
        }
        for arg in kspec.args:
            if arg.kind == "buffer":
                count = arg.count.text if arg.count is not None else "?"
                fact = f"{arg.role:<6} {arg.dtype}[{count}]"
                why = notes.get(f"count:{arg.name}", "")
            else:
                fact = f"scalar {arg.dtype} = {arg.value.text if arg.value is not None else '?'}"
                why = notes.get(f"value:{arg.name}", "")
            assumed[f"arg {arg.name}"] = fact + (f"  ({why})" if why else "")
        self.report["spec"]["assumed"] = assumed
        width = max(len(k) for k in assumed)
        for key, value in assumed.items():
            self.say(f"  {key:<{width}}  {value}")

    def keep_draft(self, source: SourceText, path: Path, drafted: bool) -> Path | None:
        """With --write, a drafted spec that verified the original is written beside the
        source (`NAME.kxspec.toml`, never over a file), so the next run reads it."""
        from kxform.harness.spec import SPEC_SUFFIX
        from kxform.workspace.files import write_atomic

        if not (drafted and self.args.write):
            return None
        target = Path(source.path).parent / f"{Path(source.path).stem}{SPEC_SUFFIX}"
        if target.exists():
            self.say(f"spec: {target} exists; the draft stays in {path}")
            return None
        text = re.sub(r'(?m)^file = ".*"$', f'file = "{Path(source.path).name}"', path.read_text("utf-8"), count=1)
        write_atomic(target, text.encode("utf-8"))
        self.report["spec"]["written"] = str(target)
        self.say(f"spec: written beside the source: {target}")
        return target

    # ------------------------------------------------------------------ the original

    def verify(self, source: SourceText, kspec: KernelSpec) -> bool:
        """The original against itself at every check size of the spec, on the CPU
        runtime: it must run, write the outputs the spec names, and agree with itself."""
        from kxform.cli.verify import EXIT_BY_STATUS
        from kxform.runtime.cpu import CpuRuntime
        from kxform.verify.differential import verify_pair
        from kxform.verify.verdict import WORD

        cpu = CpuRuntime()
        ok, why = cpu.available()
        if not ok:
            self.report["original"] = {"status": "unverified", "why": why}
            self.say(f"original: not verified: the CPU runtime is not available here ({why})")
            return True  # the GPU objective verifies every configuration against the original anyway
        report = verify_pair(source, source, kspec, cpu, flags=self.flags)
        sizes = [v.size for v in report.sizes]
        self.report["original"] = {"status": report.status, "sizes": sizes, "summary": report.summary()}
        if report.status == "ok":
            self.say(f"original: runs and writes its outputs at every check size ({', '.join(sizes)}), CPU runtime")
            return True
        for verdict in report.sizes:
            if not verdict.ok:
                self.say(f"  {verdict.summary()}")
        self.say(
            f"original: {WORD[report.status]} against this spec on the CPU runtime: the spec cannot verify a "
            f"rewrite of '{kspec.name}' as it stands; fix it ({self.report['spec']['path']}) and run again with --spec"
        )
        self.report["exit"] = EXIT_BY_STATUS[report.status]
        return False

    # ------------------------------------------------------------------ the space

    def space(self, source: SourceText) -> Any:
        """The kernel's composed space (kxform.search.kernel_space), shown pass by pass;
        None (and the reasons) when no pass has anything to tune."""
        from kxform.hw import load_profile
        from kxform.search.kernel_space import NothingToTune, kernel_space, parse_passes
        from kxform.search.space import iter_valid

        hw = self.hw()
        try:
            space = kernel_space(
                source.data,
                self.args.kernel,
                parse_passes(self.args.passes) if self.args.passes else None,
                path=source.path,
                hw=hw,
                build_dir=self.args.build_dir,
                require=tuple(self.args.require),
            )
        except NothingToTune as exc:
            self.report["space"] = {"passes": [], "not_offered": [{"pass": p, "reason": w} for p, _, w in exc.refused]}
            self.say(f"passes: none has anything to tune in '{self.args.kernel}'; the original is kept:")
            for name, _, why in exc.refused:
                self.say(f"  {name}: {why}")
            return None
        profile = load_profile(hw)
        passes = []
        for part in space.composed.parts:
            counted = sum(1 for _, _ in zip(iter_valid(part.space, profile), range(MAX_COUNTED + 1)))
            params = {p.name: [str(v) for v in p.values] for p in part.space.params}
            passes.append({"pass": part.pass_.name, "params": params, "configurations": counted})
        total = len(space.search(profile))
        self.report["space"] = {
            "passes": passes,
            "not_offered": [{"pass": name, "reason": why} for name, why in space.not_offered],
            "configurations": total,
            "hw": hw,
        }
        self.say(f"passes that can tune '{self.args.kernel}' ({total} configurations with each pass on or off, {hw}):")
        for entry in passes:
            shown = "; ".join(f"{name} in {{{_domain(values)}}}" for name, values in entry["params"].items())
            many = f"{MAX_COUNTED}+" if entry["configurations"] > MAX_COUNTED else str(entry["configurations"])
            self.say(f"  {entry['pass']}: {many} valid ({shown})")
        for name, why in space.not_offered:
            self.say(f"  not {name}: {why}")
        return space

    def hw(self) -> str:
        """`--hw`, else this machine's GPU's profile (when there is a GPU), else h100."""
        if self.args.hw:
            return str(self.args.hw)
        if "hw" in self.report:
            return str(self.report["hw"])
        name = "h100"
        if self.gpu_missing() is None and self.args.objective in (None, "gpu"):
            from kxform.hw import detect

            try:
                name = detect().name
            except KxformError as exc:
                self.say(f"note: {exc}; using the h100 profile")
        self.report["hw"] = name
        return name

    def gpu_missing(self) -> str | None:
        """Why nothing can be timed here (None: a GPU, or recorded times, can)."""
        if self.args.objective not in (None, "gpu"):
            return None
        if "gpu_missing" not in self.report:
            from kxform.runtime.gpu import GpuRuntime

            ok, why = GpuRuntime().available()
            self.report["gpu_missing"] = None if ok else why
        return self.report["gpu_missing"]  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ tuning

    def tune(self, source: SourceText, kspec: KernelSpec, spec_path: Path) -> None:
        from kxform.hw import load_profile
        from kxform.search.kernel_objective import timing_size

        size_text = self.args.size or self.derived_size(kspec)
        size = timing_size(kspec, size_text)
        request = self.request(source, spec_path, size_text)
        shown = (
            size.name
            if size.name == _values(size.values).replace(", ", ",")
            else f"{size.name} ({_values(size.values)})"
        )
        self.say(f"tuning at size {shown} ...")
        summary, log_path = tune_kernel(request, quiet=self.args.json)
        self.report["tuned"] = summary
        profile = load_profile(self.hw())
        moved = _bytes_moved(kspec, size)
        self.say(table(summary, moved, profile.mem_bandwidth_gbs, profile.name))
        result = summary.get("result") or {}
        if result.get("kept_original"):
            self.say(f"kept the original: {result.get('reason')}")
        written = summary.get("written") or {}
        if written.get("refused"):
            self.say(f"not written: {written['refused']}")
            self.report["exit"] = exitcodes.CHANGES
        elif written.get("written"):
            self.say(f"written: {source.path} ({', '.join(written['written'])})")
        elif self.args.write is False and not result.get("kept_original"):
            self.say("not written (--write writes it)")
        self.report["log"] = str(log_path)
        self.report["report"] = self.html_report(log_path)

    def derived_size(self, kspec: KernelSpec) -> str | None:
        """A spec without a bench size (a draft) is timed where block order and memory
        traffic show: the locality model's timing size (4 waves of blocks, buffers 4x the
        L2); its check sizes, a few blocks each, time mostly the launch."""
        from kxform.hw import load_profile
        from kxform.locality.sizing import timing_size
        from kxform.locality.trace import ModelRefused

        if kspec.bench_sizes:
            return None
        try:
            size = timing_size(kspec, load_profile(self.hw()))
        except ModelRefused as exc:
            self.say(f"note: timed at the last check size: no larger one could be derived ({exc.cause})")
            return None
        return ",".join(f"{k}={v}" for k, v in size.values.items())

    def request(self, source: SourceText, spec_path: Path, size: str | None) -> TuneRequest:
        """The tuning run of the options given here, as `kxform tune` would run them; the
        build flags (`-p`, `-I`, `-D`, the project configuration or `--config`, none with
        `--no-config`) resolved here, so the tuner reads no configuration of its own."""
        from kxform.api import BuildInputs, MeasureSettings, OutputSettings, SearchSettings
        from kxform.cli.options import project_config
        from kxform.search.kernel_space import parse_passes
        from kxform.search.strategy import DEFAULT

        a = self.args
        project = project_config(a, [source.path])
        include = tuple(os.path.abspath(d) for d in a.include) + (project.include if project else ())
        defines = tuple(a.define) + (project.defines if project else ())
        build_dir = a.build_dir or (project.build_dir if project else None)
        return TuneRequest(
            source.path,
            a.kernel,
            parse_passes(a.passes) if a.passes else None,
            str(spec_path),
            self.hw(),
            SearchSettings(
                strategy=a.strategy or DEFAULT, budget=a.budget, time_s=a.time, db=a.db, require=tuple(a.require)
            ),
            MeasureSettings(objective=a.objective or "gpu", size=size),
            BuildInputs(include, defines, build_dir, project_config=False),
            OutputSettings(write=a.write, log=a.log, argv=tuple(sys.argv[1:])),
        )

    def html_report(self, log_path: Path) -> str | None:
        """The run's HTML report beside its log (kxform report), or None when it cannot be made."""
        from kxform.log.html_report import render
        from kxform.log.reader import resolve_run
        from kxform.workspace.files import write_atomic

        target = log_path.with_suffix(".html")
        try:
            write_atomic(target, render(resolve_run(str(log_path), None)).encode("utf-8"))
        except (KxformError, OSError) as exc:
            self.say(f"report: not written ({exc}); the log: {log_path}")
            return None
        self.say(f"report: {target} (log: {log_path})")
        return str(target)


def _check_kernel(source: SourceText, kernel: str) -> None:
    from kxform.frontend.cuda import parse_model

    names = sorted({k.name for k in parse_model(source).kernels})
    if kernel not in names:
        raise UsageError(f"{source.path}: no kernel '{kernel}' (kernels: {', '.join(names) or 'none'})")


def _load(path: Path, kernel: str) -> KernelSpec:
    from kxform.harness.spec import load_spec

    return load_spec(path).kernel(kernel)


def _notes(text: str) -> dict[str, str]:
    """The draft's comments on its grid, counts and scalar values ("measured: ...",
    "review"), by field: what the summary shows beside each assumption."""
    notes: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        found = re.match(r'name = "([^"]*)"', line)
        if found:
            name = found.group(1)
        key, _, comment = line.partition("  # ")
        field = key.split(" = ", 1)[0].strip()
        if comment and field == "grid":
            notes["grid"] = comment
        elif comment and field in ("count", "value") and name:
            notes[f"{field}:{name}"] = comment
    return notes


def _values(values: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "no size variables"


def _domain(values: list[str]) -> str:
    return ", ".join(values) if len(values) <= 8 else f"{', '.join(values[:3])}, ..., {values[-1]} ({len(values)})"


def _bytes_moved(kspec: KernelSpec, size: Any) -> int | None:
    """Bytes the launch at `size` must move at least: each buffer read once (`in`),
    written once (`out`), or both (`inout`)."""
    try:
        launch = kspec.launch(size)
    except KxformError:
        return None
    factor = {"in": 1, "out": 1, "inout": 2}
    return sum(a.nbytes * factor.get(a.role, 1) for a in launch.args if a.kind == "buffer")


def table(summary: dict[str, Any], bytes_moved: int | None, bandwidth_gbs: float, hw: str) -> str:
    """The result in a few rows: original and best time, speed-up, what changed, and the
    share of the copy bandwidth each reaches (bytes every buffer must move once: read for
    `in`, written for `out`, both for `inout`)."""
    result = summary.get("result") or {}
    original, best = result.get("original_ms"), result.get("time_ms")
    changed = result.get("pipeline") or "nothing (the original is kept)"
    rows = [
        ("", "TIME ms", f"COPY BANDWIDTH ({hw}: {bandwidth_gbs:g} GB/s)"),
        ("original", _ms(original), _share(bytes_moved, original, bandwidth_gbs)),
        ("best verified", _ms(best), _share(bytes_moved, best, bandwidth_gbs)),
    ]
    speedup = f"{result['speedup']:.3f}x" if result.get("speedup") else "-"
    return f"{format_table(rows)}\nspeed-up: {speedup}\nchanged: {changed}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _share(nbytes: int | None, ms: float | None, bandwidth_gbs: float) -> str:
    if not nbytes or not ms:
        return "-"
    gbs = nbytes / (ms * 1e6)
    return f"{gbs:.4g} GB/s, {100 * gbs / bandwidth_gbs:.1f}%"
