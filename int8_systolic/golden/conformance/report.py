"""Render a conformance :class:`~golden.conformance.harness.Result` as Markdown, HTML and JSON."""

import html
import json
import pathlib

from ..variants import VARIANTS

__all__ = ["markdown", "summary_lines", "write_reports"]

MAX_MISMATCHES = 200   # listed in full; the JSON has every case


def _pct(m, n):
    return f"{100 * m / n:.1f}%" if n else "-"


def _variant_lines(result):
    table, n = result.variant_table()
    if not n:
        return ["No discriminator cases were run (the pack's MAC ops have them)."]
    lines = []
    for op in sorted(n):
        parts = ", ".join(f"`{v}` on {table[op][v]}/{n[op]}" for v in VARIANTS)
        lines.append(f"- {op}: matches {parts} discriminator cases")
    verdict, per_op = result.verdict(), result.matching_variants()
    lines.append("")
    if verdict:
        lines.append(f"**Verdict: the DUT's requantization is {' / '.join(f'`{v}`' for v in verdict)}** (it matches "
                     f"every discriminator case).")
    else:
        each = "; ".join(f"{op}: {' / '.join(f'`{v}`' for v in vs) if vs else 'none'}" for op, vs in per_op.items())
        lines.append(f"**Verdict: no one variant matches every discriminator case.** Per op: {each}.")
    return lines
    return lines


def summary_lines(result):
    """The few lines a terminal shows."""
    n = len(result.cases)
    ok = sum(c.status == "match" for c in result.cases)
    lines = [f"{result.dut}: {ok}/{n} cases match (expected arithmetic: {result.expect}), "
             f"{'PASS' if result.passed else 'FAIL'} in {result.seconds:.1f} s"]
    for op, (k, m) in result.by("op").items():
        if k != m:
            lines.append(f"  {op}: {m}/{k} match")
    lines += ["  " + line for line in _variant_lines(result) if line]
    return lines


def markdown(result):
    n = len(result.cases)
    ok = sum(c.status == "match" for c in result.cases)
    gen = result.pack.get("generator") or {}
    out = [f"# Conformance report: {result.dut}", "",
           f"**{'PASS' if result.passed else 'FAIL'}**: {ok} of {n} cases match the pack's expected outputs "
           f"(MAC ops: the `{result.expect}` arithmetic; every other op: TFLite's reference). "
           f"Pack format {result.pack.get('format')} v{result.pack.get('format_version')}, written by "
           f"int8-systolic {gen.get('int8-systolic')} ({gen.get('git')}), checked against tflite-micro "
           f"{gen.get('tflite-micro')}. Run time {result.seconds:.1f} s.", "",
           "## Which arithmetic", "", *_variant_lines(result),
           "", "## Per op", "", "| op | cases | match | % |", "|---|---:|---:|---:|"]
    for op, (k, m) in result.by("op").items():
        out.append(f"| {op} | {k} | {m} | {_pct(m, k)} |")
    out += ["", "## Per tag", "", "| tag | cases | match | % |", "|---|---:|---:|---:|"]
    for tag, (k, m) in result.by("tag").items():
        out.append(f"| {tag} | {k} | {m} | {_pct(m, k)} |")
    bad = [c for c in result.cases if c.status != "match"]
    out += ["", f"## Mismatches ({len(bad)})", ""]
    if not bad:
        out.append("None.")
    for c in bad[:MAX_MISMATCHES]:
        out.append(f"- `{c.id}` ({c.description}; {', '.join(c.tags)}): **{c.status}**: {c.detail}")
    if len(bad) > MAX_MISMATCHES:
        out.append(f"- ... {len(bad) - MAX_MISMATCHES} more in report.json")
    return "\n".join(out) + "\n"


def _html(result):
    """The same content as :func:`markdown`, as a standalone HTML page."""
    e = html.escape
    n = len(result.cases)
    ok = sum(c.status == "match" for c in result.cases)
    colour = "#1a7f37" if result.passed else "#cf222e"

    def table(head, rows):
        th = "".join(f"<th>{e(h)}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in row) + "</tr>" for row in rows)
        return f"<table><tr>{th}</tr>{body}</table>"

    vt, vn = result.variant_table()
    verdict, per_op = result.verdict(), result.matching_variants()
    per_op_text = "; ".join(f"{op}: {' / '.join(vs) or 'none'}" for op, vs in per_op.items())
    verdict_text = " / ".join(verdict) if verdict else f"no one variant matches every case; per op: {per_op_text}"
    parts = [f"<h1>Conformance report: {e(result.dut)}</h1>",
             f"<p style='color:{colour};font-weight:bold'>{'PASS' if result.passed else 'FAIL'}: {ok} of {n} cases "
             f"match (MAC ops: the {e(result.expect)} arithmetic)</p>",
             "<h2>Which arithmetic</h2>",
             table(["op", "discriminator cases", *VARIANTS],
                   [[op, vn[op], *(f"{vt[op][v]}/{vn[op]}" for v in VARIANTS)] for op in sorted(vn)]),
             f"<p><b>Verdict:</b> {e(verdict_text)}</p>",
             "<h2>Per op</h2>",
             table(["op", "cases", "match", "%"], [[op, k, m, _pct(m, k)] for op, (k, m) in result.by("op").items()]),
             "<h2>Per tag</h2>",
             table(["tag", "cases", "match", "%"], [[t, k, m, _pct(m, k)] for t, (k, m) in result.by("tag").items()])]
    bad = [c for c in result.cases if c.status != "match"]
    parts.append(f"<h2>Mismatches ({len(bad)})</h2>")
    parts.append(table(["case", "status", "tags", "first difference"],
                       [[f"{c.id} ({c.description})", c.status, ", ".join(c.tags), c.detail]
                        for c in bad[:MAX_MISMATCHES]]) if bad else "<p>None.</p>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}th{background:#f4f4f4}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Conformance: {e(result.dut)}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def write_reports(result, out_dir):
    """report.md, report.html and report.json in ``out_dir``; returns the HTML path."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown(result))
    (out / "report.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
    (out / "report.html").write_text(_html(result))
    return out / "report.html"
