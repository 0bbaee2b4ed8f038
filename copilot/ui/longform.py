"""HTML of a RAT run (issue #15), live or finished: the text with its numbered citations as links, and the step
trace (each step's query, the items it retrieved as links, the text before and after, what was kept and why).
Used by Chat's deep answers and Related's related-work drafts. Every text is escaped before it becomes HTML."""

from __future__ import annotations

import re

from copilot.ui.common import arxiv_link, escape

_LABEL = re.compile(r"\[(\d{1,3})\]")
STATUS_TEXT = {"revised": "revised", "kept": "draft kept", "nothing retrieved": "nothing retrieved: unrevised",
               "failed": "revision failed: draft kept", "pending": "running…"}


def item_link(item: dict) -> str:
    """A paper as a link to arXiv (or plain, when its id is not an arXiv id); a thought as its id."""
    title = item.get("title") or item["id"]
    if item["kind"] == "paper":
        return arxiv_link(item["id"], title) if item.get("url") else escape(title)
    return f'<span class="rat-thought">thought <code>{escape(item["id"])}</code> {escape(title[:80])}</span>'


def text_html(text: str, sources: list[dict]) -> str:
    """Escaped text; a citation [n] of a retrieved paper links to it."""
    by_label = {s["label"]: s for s in sources}

    def cite(match: re.Match) -> str:
        source = by_label.get(int(match.group(1)))
        if source is None:
            return match.group(0)
        if source["kind"] == "paper" and source.get("url"):
            return f'<span class="rat-cite">{arxiv_link(source["id"], match.group(0))}</span>'
        return f'<span class="rat-cite" title="{escape(source["id"])}">{match.group(0)}</span>'

    paragraphs = [p for p in (text or "").split("\n\n") if p.strip()]
    return "".join(f"<p>{_LABEL.sub(cite, escape(p))}</p>" for p in paragraphs)


def sources_html(sources: list[dict], cited: list[dict]) -> str:
    if not sources:
        return ""
    cited_ids = {c["id"] for c in cited}
    rows = "".join(f'<li class="rat-source{" rat-cited" if s["id"] in cited_ids else ""}" value="{s["label"]}">'
                   f'{item_link(s)} <span class="rat-score">{s["score"]:.2f}</span>'
                   f'{" · cited" if s["id"] in cited_ids else ""}</li>' for s in sources)
    return (f'<details open><summary>Retrieved in the run ({len(sources)})</summary>'
            f'<ol class="rat-sources">{rows}</ol></details>')


def trace_html(record: dict) -> str:
    """The draft, then one block per step."""
    parts = []
    if record.get("draft"):
        parts.append(f'<div class="rat-draft"><b>Zero-shot draft</b> (written without retrieved sources)'
                     f'{text_html(record["draft"], [])}</div>')
    for step in record["trace"]:
        retrieved = "".join(f'<li value="{r["label"]}">{item_link(r)} <span class="rat-score">{r["score"]:.2f}</span>'
                            "</li>" for r in step["retrieved"]) or "<li>nothing relevant</li>"
        status = STATUS_TEXT.get(step["status"], step["status"])
        note = f'<div class="rat-note">{escape(step["note"])}</div>' if step.get("note") else ""
        after = "" if step["status"] == "pending" else (
            f'<div class="rat-after"><b>After</b>{text_html(step["after"], record["sources"])}</div>')
        parts.append(
            f'<div class="rat-step" data-step="{step["step"]}" data-status="{escape(step["status"])}">'
            f'<h4>Step {step["step"]} — {escape(status)}</h4>'
            f'<div class="rat-query"><b>Query</b> <q>{escape(" ".join(step["query"].split())[:400])}</q></div>'
            f'<div><b>Retrieved</b><ol class="rat-retrieved">{retrieved}</ol></div>'
            f'<div class="rat-before"><b>Before</b>{text_html(step["before"], record["sources"])}</div>'
            f"{after}{note}</div>")
    return f'<div class="rat-trace">{"".join(parts)}</div>'


def result_html(record: dict, text_key: str = "text", title: str = "Answer") -> str:
    """The text (or what is running now), its notes and the sources."""
    if record["done"]:
        body = text_html(record[text_key], record["sources"]) or "<p>(nothing was left after the checks)</p>"
        meta = f'<div class="rat-meta">{record["llm_calls"]} model calls · {record["seconds"]:.1f} s</div>'
    else:
        body = f'<p class="rat-writing">{escape(record["stage"])}…</p>'
        meta = ""
    notes = "".join(f"<li>{escape(n)}</li>" for n in record.get("notes") or [])
    notes = f'<ul class="rat-notes">{notes}</ul>' if notes else ""
    return (f'<div class="rat-result" data-done="{str(record["done"]).lower()}"><h3>{escape(title)}</h3>'
            f'<div class="rat-text">{body}</div>{notes}{meta}'
            f'{sources_html(record["sources"], record["citations"]) if record["done"] else ""}</div>')
