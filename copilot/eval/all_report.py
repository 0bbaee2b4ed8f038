"""`eval all`'s report: one row per method and metric (its effect against its baseline, a paired bootstrap interval
where the part has paired data, n), the model, the machine and the wall time, as Markdown, JSON and an SVG plot.
Each finished part is saved on its own (`parts/<name>.json`), so a killed run resumes where it stopped."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from copilot.eval.metrics import compare_paired
from copilot.eval.report_files import json_text, write_files

PARTS = ("csfcube", "thoughts", "slim", "related-work", "gor")


@dataclass
class Effect:
    part: str
    method: str
    baseline: str
    metric: str
    method_value: float | None
    baseline_value: float | None
    n: int
    difference: float | None = None
    ci_low: float | None = None          # paired bootstrap 95 % interval of the difference (None: not paired)
    ci_high: float | None = None
    note: str = ""


def paired_effect(part: str, method: str, baseline: str, metric: str, ours: Sequence[float],
                  theirs: Sequence[float], note: str = "") -> Effect:
    """An effect from per-item scores of the method and its baseline over the same items."""
    test = compare_paired(list(ours), list(theirs))
    def mean(values):
        return float(sum(values) / len(values)) if values else None
    return Effect(part, method, baseline, metric, mean(ours), mean(theirs), len(ours), test["mean_difference"],
                  test["bootstrap_ci_low"], test["bootstrap_ci_high"], note)


def not_measured(effect: Effect, why: str) -> Effect:
    """The effect with no difference and no interval, saying why: a measurement that could not show anything (e.g.
    the method's list equalled the baseline's for every item) is not a zero effect."""
    return Effect(effect.part, effect.method, effect.baseline, effect.metric, effect.method_value,
                  effect.baseline_value, effect.n, None, None, None, f"not measured: {why}")


def unpaired_effect(part: str, method: str, baseline: str, metric: str, ours: float | None, theirs: float | None,
                    n: int, note: str = "") -> Effect:
    difference = None if ours is None or theirs is None else ours - theirs
    return Effect(part, method, baseline, metric, ours, theirs, n, difference, note=note or "no paired data")


@dataclass
class PartResult:
    name: str
    status: str                          # "ran", "failed", "skipped"
    reason: str = ""                     # why it failed or was skipped
    seconds: float = 0.0
    load: str = ""                       # the load average when the part finished
    size: str = ""                       # what was run (e.g. "8 queries"), said so because --quick cuts it
    effects: list[Effect] = field(default_factory=list)
    judge: str = ""                      # "judged by …" or "not judged: …"
    details: str = ""                    # the part's own report files

    def as_json(self) -> dict:
        return {**asdict(self), "effects": [asdict(e) for e in self.effects]}

    @classmethod
    def from_json(cls, data: dict) -> PartResult:
        return cls(**{**data, "effects": [Effect(**e) for e in data.get("effects", [])]})


def saved_part(run_dir: Path, name: str) -> PartResult | None:
    """A part an earlier run finished (ran or failed), or None."""
    path = run_dir / "parts" / f"{name}.json"
    try:
        return PartResult.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def save_part(run_dir: Path, result: PartResult) -> None:
    folder = run_dir / "parts"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{result.name}.json.partial"
    partial.write_text(json.dumps(result.as_json(), indent=1), encoding="utf-8")
    partial.replace(folder / f"{result.name}.json")


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:+.{digits}f}" if digits < 0 else f"{value:.{digits}f}"


def _interval(effect: Effect) -> str:
    if effect.ci_low is None or effect.ci_high is None:
        return effect.note or "—"
    return f"[{effect.ci_low:+.3f}, {effect.ci_high:+.3f}]"


def markdown(parts: Sequence[PartResult], meta: dict) -> str:
    lines = [f"# Does each method help? ({meta['model']})", "",
             f"Model: {meta['model']} · machine: {meta['cpu']} ({meta['cores']} cores) · wall time "
             f"{meta['wall_seconds']:.0f} s · {_sizes_line(meta)} · {meta['finished']}", "",
             "| part | method vs baseline | metric | method | baseline | difference | 95% paired interval | n |",
             "|---|---|---|---|---|---|---|---|"]
    for part in parts:
        for e in part.effects:
            lines.append(f"| {part.name} | {e.method} vs {e.baseline} | {e.metric} | {_number(e.method_value)} | "
                         f"{_number(e.baseline_value)} | {_number(e.difference)} | {_interval(e)} | {e.n} |")
        if not part.effects:
            lines.append(f"| {part.name} | {part.status}: {part.reason} | | | | | | |")
    lines += ["", "| part | status | what ran | judge | time (s) | load at end |", "|---|---|---|---|---|---|"]
    for part in parts:
        lines.append(f"| {part.name} | {part.status}{': ' + part.reason if part.reason else ''} | {part.size} | "
                     f"{part.judge or '—'} | {part.seconds:.0f} | {part.load} |")
    return "\n".join(lines) + "\n"


def _sizes_line(meta: dict) -> str:
    if meta.get("limit"):
        return f"--limit {meta['limit']}: a plumbing check, the figures mean nothing"
    if meta["quick"]:
        return "--quick: small n per part (table below), so the figures are weak"
    return "full sizes"


def svg_plot(parts: Sequence[PartResult]) -> str:
    """Each effect's difference as a dot, its paired interval as a bar, on one axis per row (values differ in
    scale across metrics, so each row is scaled to its own largest magnitude)."""
    effects = [(e, e.difference) for p in parts for e in p.effects if e.difference is not None]
    row, width, left = 22, 760, 360
    height = 30 + row * max(1, len(effects))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">', f'<line x1="{left + 180}" y1="10" x2="{left + 180}" y2="{height - 10}" stroke="#999"/>']
    for i, (e, difference) in enumerate(effects):
        y = 24 + i * row
        scale = max(abs(v) for v in (difference, e.ci_low or 0, e.ci_high or 0)) or 1.0
        def x(v, scale=scale):
            return left + 180 + 170 * v / scale
        label = f"{e.part}: {e.method} vs {e.baseline}, {e.metric}"
        out.append(f'<text x="5" y="{y + 4}">{_escape(label[:60])}</text>')
        if e.ci_low is not None and e.ci_high is not None:
            out.append(f'<line x1="{x(e.ci_low):.1f}" y1="{y}" x2="{x(e.ci_high):.1f}" y2="{y}" stroke="#1f77b4" '
                       'stroke-width="3"/>')
        colour = "#2ca02c" if difference > 0 else "#d62728" if difference < 0 else "#777"
        out.append(f'<circle cx="{x(difference):.1f}" cy="{y}" r="4" fill="{colour}"/>')
        out.append(f'<text x="{width - 60}" y="{y + 4}">{difference:+.3f}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_report(run_dir: Path, parts: Sequence[PartResult], meta: dict) -> tuple[dict, dict[str, Path]]:
    report = {"meta": meta, "parts": [p.as_json() for p in parts]}
    paths = write_files(run_dir, {"json": ("report.json", json_text(report)),
                                  "md": ("report.md", markdown(parts, meta)), "svg": ("report.svg", svg_plot(parts))})
    return report, paths


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
