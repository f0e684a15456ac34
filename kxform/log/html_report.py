"""`kxform report`: one run's pass log as a single self-contained HTML file.

The page holds everything inline (style, SVG plots; no script, font, image or
stylesheet is fetched): per-kernel outcomes with their decisions, reasons and checks,
before/after times, the diffs, and, when the log has them, tuning (convergence, time
against each parameter, the speed-up table of pipeline tuning: `tune` records) and
L2-model predictions (`l2` records, swizzle's `LocalityPrediction` remarks); then each
file's source with its remarks under their lines (kxform.log.sourceview). Like LLVM's
opt-viewer, but one file you can attach to a review.

Extension point: `SECTIONS` lists the renderers of the page after the kernel table,
each `(run) -> html`; a new record type gets its renderer added there (and its fields
documented in docs/pass-log.md). Record types no renderer claims are listed, with one
example each, at the end, so nothing in a log is silently dropped.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable

from kxform.log import plots, sourceview
from kxform.log.figures import TuneOutcome, l2_predictions, original_ms, timing, tune_outcomes, tune_series
from kxform.log.reader import Record, Run, relative_to_run
from kxform.log.view import OUTCOMES, check_mark, policy, provenance

_MARKS = {
    "skip": ("skip", "skipped"),
    "ok": ("ok", "ok"),
    "UNDECIDED": ("undecided", "could not tell"),
    "UNCONFIRMED": ("undecided", "unconfirmed"),
}

Section = Callable[[Run], str]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}h3{font-size:1rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{border-radius:.6rem;padding:0 .5rem;font-size:.85em;white-space:nowrap}
.applied{background:#d7f0d7}.missed{background:#fbeec2}.failed{background:#f8d0d0}.skipped,.unchanged{background:#eee}
.ok{color:#1a7f37}.fail{color:#c62828;font-weight:600}.skip{color:#777}.undecided{color:#b26a00;font-weight:600}
pre.diff{background:#fafafa;border:1px solid #ddd;padding:.5rem;overflow-x:auto;font-size:12px}
.add{background:#e6ffec}.del{background:#ffebe9}.hunk{color:#0550ae}
.kernel{border-left:3px solid #ddd;padding-left:.8rem;margin:1rem 0}.meta{color:#555}
figure{margin:.5rem 0}svg{max-width:100%;height:auto}.kernels code{white-space:normal;overflow-wrap:anywhere}
table.tuned td:last-child{min-width:18em;overflow-wrap:anywhere}
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _badge(outcome: str) -> str:
    return f'<span class="badge {esc(outcome)}">{esc(outcome)}</span>'


def _anchor(file: str, kernel: str, pass_name: str) -> str:
    """One id per kernel record: a kernel rewritten by two passes has two records."""
    return "k-" + "".join(c if c.isalnum() else "-" for c in f"{file}-{kernel}-{pass_name}")


def render(run: Run) -> str:
    """The whole page."""
    files = sourceview.views(run)
    body = [
        _header(run),
        _kernel_table(run, files),
        *(section(run) for section in SECTIONS),
        sourceview.render(run, files),
        _other(run),
    ]
    title = f"kxform report {run.run_id}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{esc(title)}</title>'
        f"<style>{_CSS}{sourceview.CSS}</style></head><body>\n" + "\n".join(b for b in body if b) + "\n</body></html>\n"
    )


def _header(run: Run) -> str:
    header, summary = run.header, run.summary
    versions = header.get("versions") if isinstance(header.get("versions"), dict) else {}
    counts = run.outcome_counts()
    badges = " ".join(f"{_badge(o)} {counts[o]}" for o in OUTCOMES if counts[o])
    rows = [
        ("run", run.run_id),
        ("started", f"{run.started:%Y-%m-%d %H:%M:%S} UTC" if run.started else "?"),
        ("duration", f"{run.duration_s:.1f} s" if run.duration_s is not None else "? (incomplete run)"),
        ("passes", run.pipeline),
        ("hardware", run.hw),
        ("kxform", versions.get("kxform", "?")),
        ("command", "kxform " + " ".join(map(str, header.get("argv") or []))),
    ]
    config = run.first("config")
    if config:
        rows.append(("configuration", config.get("path", "?")))
    if summary:
        rows.append(
            (
                "files",
                f"{summary.get('files_changed', 0)} changed, {summary.get('files_unchanged', 0)} "
                f"unchanged; exit code {summary.get('exit_code', '?')}",
            )
        )
    cells = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    errors = [*(summary.get("input_errors") or []), *(summary.get("internal_errors") or [])]
    shown = {str(r.get("error")): run.file_of(r) for r in run.of_type("file") if r.get("error")}
    # an error its file's section shows is named here once, as a link, not repeated whole
    error_html = "".join(
        f'<p class="fail">error in <a href="#{_file_anchor(run, shown[e])}">{esc(shown[e])}</a></p>'
        if e in shown
        else f'<p class="fail">error: {esc(e)}</p>'
        for e in errors
    )
    what = badges or ("a tuning run" if run.of_type("tune") else "no kernels")
    return f'<h1>kxform run {esc(run.run_id)}</h1><p>{what}</p><table class="run">{cells}</table>{error_html}'


def _kernel_table(run: Run, files: dict[str, sourceview.FileView]) -> str:
    kernels = run.kernels()
    if not kernels:  # a tuning run has its own section
        return "" if run.of_type("tune") else "<h2>Kernels</h2><p>This run logged no kernels.</p>"
    rows = []
    timed = [(str(k.get("kernel", "")), t) for k in kernels if (t := timing(k))]
    for k in kernels:
        file, name = run.file_of(k), str(k.get("kernel", ""))
        proposal = k.get("proposal") if isinstance(k.get("proposal"), dict) else {}
        t = timing(k)
        failing = [c.get("name") for c in k.get("checks") or [] if isinstance(c, dict) and not c.get("ok")]
        if not failing and k.get("outcome") in ("missed", "failed") and k.get("key"):
            failing = [f"{k['key']} (at {k.get('stage') or 'analysis'})"]  # refused before any check ran
        times = (
            ""
            if not timed
            else (
                f'<td class="num">{t.original_ms:.4f}</td><td class="num">'
                f'{t.rewritten_ms:.4f}</td><td class="num">{t.speedup:.3f}x</td>'
                if t
                else "<td></td><td></td><td></td>"
            )
        )
        anchor = _anchor(file, name, str(k.get("pass", "")))
        line = sourceview.line_anchor(files, file, k)
        where = f'<a href="#{line}">{esc(file)}:{esc(line.rsplit("-L", 1)[1])}</a>' if line else esc(file)
        rows.append(
            f'<tr><td>{where}</td><td><a href="#{anchor}">{esc(name)}</a></td>'
            f"<td>{esc(k.get('pass', ''))}</td><td>{_badge(str(k.get('outcome', '?')))}</td>"
            f"<td><code>{esc(proposal.get('spec', ''))}</code></td>{times}"
            f"<td>{esc(', '.join(map(str, failing)))}</td></tr>"
        )
    time_heads = "<th>original ms</th><th>rewritten ms</th><th>speedup</th>" if timed else ""
    table = (
        '<table class="kernels"><tr><th>file</th><th>kernel</th><th>pass</th><th>outcome</th><th>decision</th>'
        f"{time_heads}<th>failed checks, or why not</th></tr>" + "".join(rows) + "</table>"
    )
    plot = _plot_or_note(plots.timings_plot(timed), "speedup of each measured rewrite") if timed else ""
    return f"<h2>Kernels</h2>{table}{plot}{_files(run, files)}"


def _file_anchor(run: Run, file: str) -> str:
    """The id of `file`'s section: its place among the run's files (names may sanitise alike)."""
    order = dict.fromkeys(run.file_of(r) for r in run.records if r.get("type") in ("kernel", "remark", "file"))
    return f"file-{list(order).index(file) + 1}" if file in order else ""


def _plot_or_note(svg: str | None, what: str) -> str:
    if svg:
        return f'<figure class="plot">{svg}<figcaption>{esc(what)}</figcaption></figure>'
    ok, why = plots.available()
    return "" if ok else f'<p class="meta">No plot of {esc(what)}: {esc(why)}.</p>'


def _files(run: Run, files: dict[str, sourceview.FileView]) -> str:
    """Per file: each kernel's decision, reasons, checks and times; the remarks; the diff."""
    by_file: dict[str, dict[str, list[Record]]] = {}
    for record in run.records:
        kind = record.get("type")
        if kind in ("kernel", "remark", "file"):
            by_file.setdefault(run.file_of(record), {}).setdefault(str(kind), []).append(record)
    out = []
    for file, parts in by_file.items():
        file_record = (parts.get("file") or [{}])[0]
        out.append(f'<h2 id="{_file_anchor(run, file)}">{esc(file)}</h2>')
        if file_record.get("error"):
            out.append(f'<p class="fail">error: {esc(file_record["error"])}</p>')
        out += [_kernel_block(file, k) for k in parts.get("kernel", [])]
        remarks = parts.get("remark", [])
        if remarks and file in files:  # shown whole, under their lines, in the source view
            kinds = Counter(str(r.get("kind", "?")) for r in remarks)
            out.append(
                f'<p class="meta"><a href="#src-{files[file].prefix}">{len(remarks)} remark'
                f"{'s' if len(remarks) != 1 else ''} in the source view</a> ("
                + ", ".join(f"{n} {esc(k)}" for k, n in sorted(kinds.items()))
                + ")</p>"
            )
        elif remarks:
            items = "".join(
                f"<li><b>{esc(r.get('kind', ''))}</b> {esc(r.get('pass', ''))}/{esc(r.get('name', ''))} "
                f"line {esc(r.get('line', '?'))}: {esc(r.get('message', ''))}</li>"
                for r in remarks
            )
            out.append(f'<h3>Remarks</h3><ul class="remarks">{items}</ul>')
        diff = str(file_record.get("diff") or "")
        if diff:
            out.append(f"<details open><summary>diff</summary>{_diff(diff)}</details>")
    return "".join(out)


def _kernel_block(file: str, k: Record) -> str:
    name = str(k.get("kernel", ""))
    outcome = str(k.get("outcome", "?"))
    proposal = k.get("proposal") if isinstance(k.get("proposal"), dict) else None
    anchor = _anchor(file, name, str(k.get("pass", "")))
    parts = [
        f'<div class="kernel" id="{anchor}"><h3>{esc(name)} {_badge(outcome)} '
        f'<span class="meta">line {esc(k.get("line", "?"))}, pass {esc(k.get("pass", ""))}'
        f"{', stage ' + esc(k['stage']) if k.get('stage') else ''}</span></h3>"
    ]
    if proposal:
        parts.append(
            f"<p>decision <code>{esc(proposal.get('spec', ''))}</code> ({esc(provenance(proposal))}): "
            f"{esc(proposal.get('rationale', ''))}</p>"
        )
        if proposal.get("payload") is not None:
            payload = json.dumps(proposal["payload"], indent=1, default=str)
            parts.append(f"<details><summary>payload</summary><pre>{esc(payload)}</pre></details>")
        extra = {
            key: value
            for key, value in proposal.items()
            if key not in ("spec", "params", "rationale", "proposer", "measured", "provenance", "payload")
        }
        if extra:  # fields added by newer writers: shown as they are
            parts.append(f"<pre>{esc(json.dumps(extra, indent=1, default=str))}</pre>")
    if policy(k):
        parts.append(f"<p>verification policy: {esc(policy(k))}</p>")
    if k.get("alternates"):
        parts.append(f"<p>alternates: {esc(', '.join(map(str, k['alternates'])))}</p>")
    rejected = [r for r in k.get("rejected") or [] if isinstance(r, dict)]
    if rejected:
        parts.append(
            '<p>candidates refused on the way:</p><ul class="rejected">'
            + "".join(
                f"<li><code>{esc(r.get('spec', '?'))}</code> at {esc(r.get('stage', '?'))}: {esc(r.get('reason', ''))}</li>"
                for r in rejected
            )
            + "</ul>"
        )
    rationale = proposal.get("rationale") if proposal else None
    refused = {str(r.get("reason")) for r in rejected}  # a refusal listed above is not repeated
    reasons = [r for r in k.get("reasons") or [] if r != rationale and r not in refused]
    if reasons:
        parts.append('<ul class="reasons">' + "".join(f"<li>{esc(r)}</li>" for r in reasons) + "</ul>")
    checks = [c for c in k.get("checks") or [] if isinstance(c, dict)]
    if checks:
        rows = []
        for c in checks:
            detail = str(c.get("detail", ""))
            mark = _MARKS.get(check_mark(c), ("fail", "FAILED"))
            rows.append(
                f'<tr><td>{esc(c.get("name", "?"))}</td><td class="{mark[0]}">{mark[1]}</td><td>{esc(detail)}</td></tr>'
            )
        parts.append(
            '<table class="checks"><tr><th>check</th><th>result</th><th>detail</th></tr>' + "".join(rows) + "</table>"
        )
    t = timing(k)
    if t:
        parts.append(
            f"<p>times (size {esc(t.size)}, {esc(t.runtime)}): original {t.original_ms:.4f} ms, rewritten "
            f"{t.rewritten_ms:.4f} ms, speedup <b>{t.speedup:.3f}x</b></p>"
        )
    return "".join(parts) + "</div>"


def _diff(diff: str) -> str:
    lines = []
    for line in diff.rstrip("\n").splitlines():
        kind = (
            "hunk"
            if line.startswith("@@")
            else ""
            if line.startswith(("+++", "---"))
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else ""
        )
        lines.append(f'<span class="{kind}">{esc(line)}</span>' if kind else esc(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _tuning(run: Run) -> str:
    series = tune_series(run.records)
    outcomes = tune_outcomes(run.records)
    if not series and not outcomes:
        return ""
    out = ["<h2>Tuning</h2>", _tune_table(outcomes, str(run.header.get("cwd") or ""))]
    for s in series:
        best = s.best
        failed = sum(1 for e in s.evaluations if e.time_ms is None)
        found = (
            f"best {best.time_ms:.4f} ms at evaluation {best.index}: <code>{esc(best.params)}</code>"
            if best and best.time_ms is not None
            else "no successful evaluation"
        )
        out.append(
            f"<h3>{esc(run.file_of({'file': s.file}))} {esc(s.kernel)}</h3>"
            f"<p>{esc(s.strategy or 'strategy ?')}: {len(s.evaluations)} evaluations ({failed} failed), "
            f"{found}</p>"
        )
        out.append(
            _plot_or_note(
                plots.convergence_plot(s, original_ms(run.records, s.file, s.kernel)),
                f"tuning convergence of {s.kernel}",
            )
        )
        out.append(_plot_or_note(plots.parameters_plot(s), f"time against each parameter of {s.kernel}"))
    return "".join(out)


def _tune_table(outcomes: list[TuneOutcome], cwd: str) -> str:
    """The speed-up table of a pipeline tuning run (`tune FILE` or `tune DIR`), and its plot."""
    if not outcomes:
        return ""

    def ms(value: float | None) -> str:
        return "" if value is None else f"{value:.4g}"

    rows = "".join(
        f"<tr><td>{esc(relative_to_run(o.file, cwd))}</td><td>{esc(o.kernel)}</td>"
        f"<td>{esc(','.join(o.passes) or '-')}</td>"
        f"<td><code>{esc(', '.join(f'{k}={v}' for k, v in o.values.items()) or '(original kept)')}</code></td>"
        f'<td class="num">{ms(o.original_ms)}</td><td class="num">{ms(o.time_ms)}</td>'
        f'<td class="num">{ms(o.spread_ms)}</td><td class="num">{"" if o.speedup is None else f"{o.speedup:.3f}x"}'
        f'</td><td class="{"fail" if o.note.startswith("error") else "meta"}">{esc(o.note)}</td></tr>'
        for o in outcomes
    )
    table = (
        '<table class="tuned"><tr><th>file</th><th>kernel</th><th>passes</th><th>values</th><th>original ms</th>'
        "<th>best ms</th><th>spread ms</th><th>speed-up</th><th>note</th></tr>" + rows + "</table>"
    )
    timed = [(o.kernel, t) for o in outcomes if (t := o.timing)]
    plot = _plot_or_note(plots.timings_plot(timed, "tuned"), "speed-up of each tuned kernel") if timed else ""
    return table + plot


def _l2(run: Run) -> str:
    sets = l2_predictions(run.records)
    if not sets:
        return ""
    chosen = {
        str(k.get("kernel")): str((k.get("proposal") or {}).get("params", {}).get("pattern", ""))
        for k in run.kernels()
        if isinstance(k.get("proposal"), dict)
    }
    out = ["<h2>L2 model predictions</h2>"]
    for p in sets:
        rows = "".join(
            f'<tr><td>{esc(x.pattern)}</td><td class="num">{"" if x.l2_hit_rate is None else f"{100 * x.l2_hit_rate:.1f}%"}</td>'
            f'<td class="num">{"" if x.dram_read_bytes is None else f"{x.dram_read_bytes / 1e6:.1f}"}</td>'
            f'<td class="num">{"" if x.dram_write_bytes is None else f"{x.dram_write_bytes / 1e6:.1f}"}</td>'
            f'<td class="num">{"" if x.rank is None else x.rank}</td>'
            f'<td class="num">{"" if x.margin is None else f"{x.margin:+.3f}"}</td></tr>'
            for x in p.predictions
        )
        out.append(
            f'<h3>{esc(run.file_of({"file": p.file}))} {esc(p.kernel)}</h3><table class="l2"><tr>'
            "<th>order</th><th>L2 hit</th><th>DRAM read MB</th><th>DRAM write MB</th><th>rank</th>"
            f"<th>margin</th></tr>{rows}</table>"
        )
        figure = plots.l2_plot(p, p.chosen or chosen.get(p.kernel))
        out.append(_plot_or_note(figure, f"L2 predictions for {p.kernel}"))
    return "".join(out)


KNOWN = {"run", "kernel", "remark", "file", "summary", "config", "tune", "l2"}


def _other(run: Run) -> str:
    counts = Counter(str(r.get("type")) for r in run.records if r.get("type") not in KNOWN)
    if not counts:
        return ""
    rows = []
    for kind, count in sorted(counts.items()):
        sample = next(r for r in run.records if r.get("type") == kind)
        rows.append(
            f'<tr><td>{esc(kind)}</td><td class="num">{count}</td><td><details><summary>first record'
            f"</summary><pre>{esc(json.dumps(sample, indent=1, default=str))}</pre></details></td></tr>"
        )
    return (
        '<h2>Other records</h2><p class="meta">Record types this report does not draw yet.</p>'
        "<table><tr><th>type</th><th>records</th><th>example</th></tr>" + "".join(rows) + "</table>"
    )


SECTIONS: list[Section] = [_tuning, _l2]
"""Renderers after the kernel table, in page order (the extension point); the source
view (kxform.log.sourceview) and the unclaimed records follow them."""
