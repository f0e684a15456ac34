"""Terminal views of pass logs: `kxform log list`, `log show` and `log diff`.

Each view returns lines of text; the CLI prints them. Colour (ANSI) only when asked
(the CLI asks when stdout is a terminal and NO_COLOR is unset), so piped output is
plain text that greps and diffs well.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kxform.errors import display_path
from kxform.log.figures import l2_predictions, timing, tune_series
from kxform.log.reader import Record, Run, legacy_key, legacy_status

OUTCOMES = ("applied", "missed", "unchanged", "failed", "skipped")
_COLORS = {
    "applied": "32",
    "missed": "33",
    "failed": "31",
    "skipped": "90",
    "unchanged": "90",
    "add": "32",
    "del": "31",
    "hunk": "36",
    "head": "1",
    "dim": "90",
}


@dataclass(frozen=True)
class Style:
    color: bool = False

    def __call__(self, text: str, what: str) -> str:
        code = _COLORS.get(what)
        return f"\033[{code}m{text}\033[0m" if self.color and code else text


def _when(run: Run) -> str:
    return run.started.strftime("%Y-%m-%d %H:%M:%S") if run.started else "?"


def _duration(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.1f}s"


def _counts(counter: Counter[str]) -> str:
    parts = [f"{counter[o]} {o}" for o in OUTCOMES if counter[o]]
    parts += [f"{n} {o}" for o, n in sorted(counter.items()) if o not in OUTCOMES and n]
    return ", ".join(parts) or "no kernels"


# ------------------------------------------------------------------------------ list


def list_lines(runs: Iterable[Run]) -> list[str]:
    """One line per run: id, start (UTC), duration, passes, hardware, files and kernel counts."""
    rows = [("RUN", "STARTED (UTC)", "TIME", "PASSES", "HW", "FILES", "KERNELS", "EXIT")]
    for run in runs:
        summary = run.summary
        files = f"{summary.get('files_changed', '?')} changed" if summary else "incomplete"
        exit_code = str(summary.get("exit_code", "?")) if summary else "-"
        extra = {r.get("type") for r in run.records} - {"run", "kernel", "remark", "file", "summary", "config"}
        kernels = _counts(run.outcome_counts()) + (f" (+{', '.join(sorted(map(str, extra)))})" if extra else "")
        rows.append(
            (
                run.run_id,
                _when(run),
                _duration(run.duration_s),
                run.pipeline or "-",
                run.hw or "-",
                files,
                kernels,
                exit_code,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]


# ------------------------------------------------------------------------------ show


@dataclass(frozen=True)
class ShowFilter:
    kernel: str | None = None
    """Exact kernel name or a glob (`sgemm*`)."""
    outcome: str | None = None
    diffs: bool = True

    def keeps(self, kernel: Record) -> bool:
        name = str(kernel.get("kernel", ""))
        if self.kernel and not (name == self.kernel or fnmatch.fnmatchcase(name, self.kernel)):
            return False
        return not self.outcome or kernel.get("outcome") == self.outcome

    @property
    def active(self) -> bool:
        return bool(self.kernel or self.outcome)


def show_lines(run: Run, keep: ShowFilter, style: Style) -> list[str]:
    """The run's header, then per file: kernels (decision, reasons, checks, times), remarks, diff."""
    lines = _header(run, style)
    files: dict[str, dict[str, list[Record]]] = {}
    for record in run.records:
        kind = record.get("type")
        if kind in ("kernel", "remark", "file"):
            files.setdefault(run.file_of(record), {}).setdefault(str(kind), []).append(record)
    shown = 0
    for path, parts in files.items():
        kernels = [k for k in parts.get("kernel", []) if keep.keeps(k)]
        file_record = (parts.get("file") or [{}])[0]
        if keep.active and not kernels:
            continue
        lines.append("")
        lines.append(style(path, "head") + (f"  error: {file_record['error']}" if file_record.get("error") else ""))
        names = {k.get("kernel") for k in kernels}
        for kernel in kernels:
            lines += _kernel_lines(kernel, style)
            shown += 1
        for remark in parts.get("remark", []):
            if not keep.active or remark.get("function") in names:
                lines.append(
                    f"  remark: {remark.get('kind', '?')} {remark.get('pass', '')}/{remark.get('name', '')} "
                    f"line {remark.get('line', '?')}: {remark.get('message', '')}"
                )
        diff = str(file_record.get("diff") or "")
        if keep.diffs and diff:
            lines += ["  " + _diff_line(line, style) for line in diff.rstrip("\n").splitlines()]
    if keep.active and not shown:
        lines += ["", "no kernel matches the filter"]
    return lines + _other_lines(run, keep)


def _header(run: Run, style: Style) -> list[str]:
    header, summary = run.header, run.summary
    versions = header.get("versions") if isinstance(header.get("versions"), dict) else {}
    lines = [
        style(f"run {run.run_id}", "head") + f"  {_when(run)} UTC  ({_duration(run.duration_s)})  "
        f"{display_path(run.path)}",
        f"  kxform {versions.get('kxform', '?')}, hw {run.hw or '?'}, passes {run.pipeline or '?'}, "
        f"argv: {' '.join(map(str, header.get('argv') or []))}",
    ]
    config = run.first("config")
    if config:
        lines.append(f"  configuration: {config.get('path', '?')}")
    if summary:
        lines.append(
            f"  files: {summary.get('files_changed', 0)} changed, {summary.get('files_unchanged', 0)} "
            f"unchanged; kernels: {_counts(run.outcome_counts())}; exit {summary.get('exit_code', '?')}"
        )
        for error in (summary.get("input_errors") or []) + (summary.get("internal_errors") or []):
            lines.append(f"  error: {error}")
    else:
        lines.append("  incomplete: the run has no summary record (killed, or still running)")
    return lines


def _kernel_lines(kernel: Record, style: Style) -> list[str]:
    outcome = str(kernel.get("outcome", "?"))
    proposal = kernel.get("proposal") if isinstance(kernel.get("proposal"), dict) else None
    spec = f"  {proposal.get('spec', '')}" if proposal else ""
    stage = f" at {kernel['stage']}" if kernel.get("stage") else ""
    lines = [
        f"  {kernel.get('kernel', '?')} (line {kernel.get('line', '?')}) {kernel.get('pass', '')}: "
        f"{style(outcome + stage, outcome)}{spec}"
    ]
    if proposal and proposal.get("rationale"):
        lines.append(f"    why: {proposal['rationale']} [{provenance(proposal)}]")
    if proposal and proposal.get("payload") is not None:
        text = json.dumps(proposal["payload"], default=str)
        lines.append(f"    payload: {text if len(text) <= 200 else text[:197] + '...'}")
    if policy(kernel):
        lines.append(f"    policy: {policy(kernel)}")
    rationale = proposal.get("rationale") if proposal else None
    lines += [f"    reason: {reason}" for reason in kernel.get("reasons") or [] if reason != rationale]
    if kernel.get("alternates"):
        lines.append(f"    alternates: {', '.join(map(str, kernel['alternates']))}")
    for item in kernel.get("rejected") or []:
        if isinstance(item, dict):
            lines.append(f"    rejected: {item.get('spec', '?')} at {item.get('stage', '?')}: {item.get('reason', '')}")
    for check in kernel.get("checks") or []:
        if isinstance(check, dict):
            detail = str(check.get("detail", ""))
            mark = check_mark(check)
            lines.append(f"    check {check.get('name', '?')}: {style(mark, 'dim' if mark == 'skip' else '')} {detail}")
    times = timing(kernel)
    if times:
        lines.append(
            f"    times: original {times.original_ms:.4f} ms, rewritten {times.rewritten_ms:.4f} ms, "
            f"speedup {times.speedup:.3f}x (size {times.size}, {times.runtime})"
        )
    return lines


MARKS = {"passed": "ok", "skipped": "skip", "failed": "FAIL", "unconfirmed": "UNCONFIRMED", "inconclusive": "UNDECIDED"}
"""A check's status (kxform.engine.status) as `log show` marks it."""


def check_mark(check: Record) -> str:
    """`ok`, `skip`, `FAIL`, `UNCONFIRMED` (the compile check could not confirm) or
    `UNDECIDED` (a verification that could not tell: nothing was proven wrong, and
    nothing was written), from the check's status (schema-1 logs: `legacy_status`)."""
    status = check.get("status")
    return MARKS.get(status if isinstance(status, str) else legacy_status(check), "FAIL")


def provenance(proposal: Record) -> str:
    """`deterministic, predicted` / `llm, measured, model M, $0.012, 1200 tokens` (older logs: measured or not)."""
    origin = proposal.get("provenance") if isinstance(proposal.get("provenance"), dict) else {}
    parts = [
        str(origin.get("proposer") or proposal.get("proposer") or "?"),
        str(origin.get("evidence") or ("measured" if proposal.get("measured") else "unmeasured")),
    ]
    if origin.get("model"):
        parts.append(f"model {origin['model']}")
    if isinstance(origin.get("cost_usd"), (int, float)):
        parts.append(f"${origin['cost_usd']:.3f}")
    if origin.get("tokens"):
        parts.append(f"{origin['tokens']} tokens")
    return ", ".join(parts)


def policy(kernel: Record) -> str:
    """The kernel record's `verify_policy` in one line (as the pass asked the verifier to
    launch and compare; '' when the record has none): `the spec's launch; outputs bit-exact
    (reason)`, or the launch read from the source with its expressions and values."""
    data = kernel.get("verify_policy")
    if not isinstance(data, dict):
        return ""
    launch = data.get("launch") if isinstance(data.get("launch"), dict) else {}
    if not launch or launch.get("launch") == "spec":
        where = "the spec's launch"
    else:
        values = launch.get("values") if isinstance(launch.get("values"), dict) else {}
        dims = [
            f"{key} ({', '.join('spec' if d is None else str(d) for d in launch[key])})"
            for key in ("grid", "block")
            if isinstance(launch.get(key), list) and launch[key]
        ]
        if launch.get("shared_bytes"):
            dims.append(f"shared {launch['shared_bytes']} B")
        where = (
            f"launch from {launch.get('origin') or 'the source'}"
            + (f" at {','.join(f'{k}={v}' for k, v in values.items())}" if values else "")
            + (f": {', '.join(dims)}" if dims else "")
        )
    compare = data.get("compare") if isinstance(data.get("compare"), dict) else {}
    mode, scale = compare.get("mode"), compare.get("scale")
    what = (
        "bit-exact"
        if mode == "exact"
        else "the spec's tolerance" + (f" x{scale:g}" if isinstance(scale, (int, float)) and scale != 1 else "")
        if mode == "spec"
        else str(mode or "?")
    )
    probe = compare.get("probe")
    if mode == "bound" and isinstance(probe, dict) and isinstance(probe.get("sums"), list):
        sums = ", ".join(f"'{s.get('var')}' ({s.get('ctype')}, line {s.get('line')})" for s in probe["sums"])
        what = f"an absolute bound per output, measured by the reorder probe ({sums})"
    reason = f" ({compare['reason']})" if compare.get("reason") else ""
    required = "; a differential run is required before writing" if data.get("required") else ""
    return f"{where}; outputs {what}{reason}{required}"


def _diff_line(line: str, style: Style) -> str:
    if line.startswith(("+++", "---")):
        return style(line, "head")
    if line.startswith("@@"):
        return style(line, "hunk")
    return style(line, "add") if line.startswith("+") else style(line, "del") if line.startswith("-") else line


def _other_lines(run: Run, keep: ShowFilter) -> list[str]:
    """Tuning runs, L2 predictions, and a count of record types this viewer does not know."""
    lines: list[str] = []
    for series in tune_series(run.records):
        if keep.kernel and not fnmatch.fnmatchcase(series.kernel, keep.kernel):
            continue
        best = series.best
        found = (
            f"best {best.time_ms:.4f} ms at eval {best.index} {best.params}" if best and best.time_ms else "no success"
        )
        lines.append(
            f"tune {series.file} {series.kernel} ({series.strategy or '?'}): "
            f"{len(series.evaluations)} evaluations, {found}"
        )
    kept = {k.get("kernel") for k in run.kernels() if keep.keeps(k)}
    for pset in l2_predictions(run.records):
        if keep.kernel and not fnmatch.fnmatchcase(pset.kernel, keep.kernel):
            continue
        if keep.active and run.kernels() and pset.kernel not in kept:
            continue  # the predictions of a kernel the filter leaves out
        lines.append(f"l2 model {pset.file} {pset.kernel} (hw {pset.hw or '?'}, size {pset.size or '?'}):")
        for p in pset.predictions:
            hit = "?" if p.l2_hit_rate is None else f"{100 * p.l2_hit_rate:.1f}%"
            dram = "?" if p.dram_read_bytes is None else f"{p.dram_read_bytes / 1e6:.1f} MB"
            lines.append(f"    {p.pattern:<14} L2 hit {hit:>6}  DRAM read {dram:>10}  rank {p.rank or '-'}")
    known = {"run", "kernel", "remark", "file", "summary", "config", "tune", "l2"}
    unknown = Counter(str(r.get("type")) for r in run.records if r.get("type") not in known)
    if unknown:
        lines.append("other records: " + ", ".join(f"{n} {t}" for t, n in sorted(unknown.items())))
    return ([""] + lines) if lines else []


# ------------------------------------------------------------------------------ diff


def _decisions(run: Run) -> dict[tuple[str, str, str], Record]:
    return {(run.file_of(k), str(k.get("kernel", "")), str(k.get("pass", ""))): k for k in run.kernels()}


def _spec(kernel: Record) -> str:
    proposal = kernel.get("proposal")
    return str(proposal.get("spec", "")) if isinstance(proposal, dict) else ""


def _reason_key(kernel: Record) -> str:
    """The kernel's stable reason key (schema-1 logs: kxform.log.reader.legacy_key)."""
    return str(kernel.get("key") or "") if "key" in kernel else legacy_key(kernel)


def _failed_checks(kernel: Record) -> set[str]:
    return {str(c.get("name")) for c in kernel.get("checks") or [] if isinstance(c, dict) and not c.get("ok")}


def diff_lines(a: Run, b: Run, style: Style) -> tuple[list[str], bool]:
    """What changed from run `a` to run `b`; the flag says whether any decision or outcome did."""
    lines = [style(f"{a.run_id} ({_when(a)}) -> {b.run_id} ({_when(b)})", "head")]
    if a.pipeline != b.pipeline or a.hw != b.hw:
        lines.append(f"  settings: passes {a.pipeline} -> {b.pipeline}, hw {a.hw} -> {b.hw}")
    old, new = _decisions(a), _decisions(b)
    changed = False
    for key in sorted(old.keys() | new.keys()):
        label = f"{key[0]} {key[1]} [{key[2]}]"
        if key not in new:
            lines.append(style(f"- {label}: {old[key].get('outcome')} {_spec(old[key])}", "del"))
            changed = True
            continue
        if key not in old:
            lines.append(style(f"+ {label}: {new[key].get('outcome')} {_spec(new[key])}", "add"))
            changed = True
            continue
        notes, decided = _kernel_changes(old[key], new[key])
        changed |= decided
        if notes:
            lines.append(f"~ {label}: " + "; ".join(notes))
    same = sum(1 for k in old.keys() & new.keys() if not _kernel_changes(old[k], new[k])[1])
    lines.append(f"kernels: {same} with the same decision and outcome, {len(old.keys() ^ new.keys())} in one run only")
    lines.append(f"outcomes: {_counts(a.outcome_counts())} -> {_counts(b.outcome_counts())}")
    lines.append(f"time: {_duration(a.duration_s)} -> {_duration(b.duration_s)}; per pass: {_pass_times(a, b)}")
    return lines, changed


def _kernel_changes(old: Record, new: Record) -> tuple[list[str], bool]:
    notes = []
    if old.get("outcome") != new.get("outcome"):
        notes.append(
            f"outcome {old.get('outcome')} -> {new.get('outcome')}"
            + (f" ({(new.get('reasons') or [''])[0]})" if new.get("reasons") else "")
        )
    if _spec(old) != _spec(new):
        notes.append(f"decision {_spec(old) or 'none'} -> {_spec(new) or 'none'}")
    if _reason_key(old) != _reason_key(new) and old.get("outcome") == new.get("outcome"):
        notes.append(f"reason {_reason_key(old) or 'none'} -> {_reason_key(new) or 'none'}")
    if _failed_checks(old) != _failed_checks(new):
        notes.append(f"failing checks {sorted(_failed_checks(old))} -> {sorted(_failed_checks(new))}")
    decided = bool(notes)
    if policy(old) != policy(new) and policy(old) and policy(new):
        notes.append(f"verification policy {policy(old)} -> {policy(new)}")
    t_old, t_new = timing(old), timing(new)
    if t_old and t_new:
        notes.append(
            f"rewritten {t_old.rewritten_ms:.4f} -> {t_new.rewritten_ms:.4f} ms, "
            f"speedup {t_old.speedup:.3f}x -> {t_new.speedup:.3f}x"
        )
    elif bool(t_old) != bool(t_new):
        notes.append("measured in one run only")
    return notes, decided


def _pass_times(a: Run, b: Run) -> str:
    def totals(run: Run) -> dict[str, float]:
        out: dict[str, float] = {}
        for record in run.of_type("file"):
            for name, seconds in (record.get("timings_s") or {}).items():
                if isinstance(seconds, (int, float)):
                    out[name] = out.get(name, 0.0) + float(seconds)
        return out

    ta, tb = totals(a), totals(b)
    names = sorted(ta.keys() | tb.keys())
    return ", ".join(f"{n} {ta.get(n, 0.0):.2f}s -> {tb.get(n, 0.0):.2f}s" for n in names) or "none logged"
