"""The Related tab: a query paper in, related papers out — ranked by the chosen ranking (default: the one that won
the CSFCube evaluation), with each list's rank per result and the abstract-only baseline one click away."""

from __future__ import annotations

import queue
import threading

import gradio as gr

from copilot.errors import UserError
from copilot.features import related
from copilot.features.bibtex import bibtex_for_ids
from copilot.features.fulltext import papers_read
from copilot.features.limits import RateLimited, check_rate
from copilot.readable import readable
from copilot.services import Services
from copilot.ui.common import arxiv_link, current_user, escape, rate_scope, shown_file, write_bibtex
from copilot.ui.related_work import build_draft_tab

MODE_LABELS = {"Three aspect prompts (PRISM)": related.ONE_CALL_PER_ASPECT,
               "One JSON prompt (cheaper)": related.ONE_JSON_CALL}
RANK_COLUMNS = list(related.LIST_ORDER)
SOURCE_LABELS = {"llm": "written by the LLM", "extractive": "the title and the abstract's own sentences on this aspect"}


def mode_matters(ranking: str | None) -> bool:
    """Does the prompt-style choice change anything for this ranking (only those whose aspects the LLM writes)?"""
    return bool(ranking) and ranking in related.RANKINGS and related.uses_llm(ranking)


def ranking_choices() -> list[tuple[str, str]]:
    return [(f"{name}: {label}", name) for name, label in related.RANKINGS.items()]


def query_html(result: related.RelatedResult) -> str:
    q = result.query
    title = escape(readable(q.paper.title) or "(untitled text)")
    link = arxiv_link(q.paper.id, q.paper.id) if q.paper.id else "pasted text"
    origin = {"library": "from the library", "arxiv": "fetched from arXiv", "input": "your input"}[q.source]
    lines = [f"<p><strong>Query paper:</strong> {title} · {link} · {escape(q.date or '')} ({origin})</p>",
             f"<p class='related-method'><strong>Ranked by</strong> <code>{escape(result.method)}</code>: "
             f"{escape(result.method_label)}. The abstract-only list is under “Abstract only (baseline)”.</p>"]
    for notice in (q.notice, *result.notices, result.missing_notice):
        if notice:
            lines.append(f"<p class='related-notice'><strong>Note:</strong> {escape(notice)}</p>")
    lines.append(f"<p>{len(result.results)} related papers. Under the list, “How each list ranked them” shows "
                 "where each list placed each paper (– = not in that list's top 60).</p>")
    return "\n".join(lines)


def results_html(rows: list[dict], read: frozenset[str] = frozenset()) -> str:
    """The related papers (#, title with why, date); the fused score and each list's rank under a closed "How each
    list ranked them" (issue #59: "Fused score 0.0595" and six rank columns were the first thing shown)."""
    if not rows:
        return "<p>No related papers found.</p>"
    body = []
    for n, row in enumerate(rows, start=1):
        authors = row.get("authors") or []
        byline = escape(", ".join(authors[:3]) + (" et al." if len(authors) > 3 else ""))
        best = sorted(row["ranks"].items(), key=lambda kv: kv[1])[:2]
        why = "; ".join(f"#{rank} by {related.QUERY_LABELS.get(name, name).lower()}" for name, rank in best)
        body.append(f"<tr class='related-row'><td>{n}</td><td>{arxiv_link(row['id'], row['title'])}"
                    f"<br><small class='related-byline'>{byline}</small>"
                    + (f"<br><small class='related-why'>why: {escape(why)}</small>" if why else "")
                    + ("<br><small class='full-text-mark'>full text read</small>" if row["id"] in read else "")
                    + f"</td><td style='white-space:nowrap'>{escape(row['date'] or '')}</td></tr>")
    return (f"<table id='related-table'><thead><tr><th>#</th><th>Title</th><th>Date</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>" + scores_html(rows))


def scores_html(rows: list[dict]) -> str:
    """Each result's fused score and its rank in each list, closed by default."""
    columns = [c for c in RANK_COLUMNS if any(c in row["ranks"] for row in rows)]   # no column that is all "–"
    head = "".join(f"<th>{escape(related.QUERY_LABELS[c])} rank</th>" for c in columns)
    body = "".join(f"<tr class='related-score-row'><td>{n}</td><td>{row['score']:.4f}</td>"
                   + "".join(f"<td class='rank-{c}'>{row['ranks'].get(c, '–')}</td>" for c in columns) + "</tr>"
                   for n, row in enumerate(rows, start=1))
    return ("<details id='related-scores'><summary>How each list ranked them (fused score and ranks)</summary>"
            f"<table id='related-ranks'><thead><tr><th>#</th><th>Fused score</th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></details>")


def baseline_html(rows: list[dict]) -> str:
    if not rows:
        return "<p>No papers found.</p>"
    body = "".join(f"<tr class='baseline-row'><td>{n}</td><td>{arxiv_link(r['id'], r['title'])}</td>"
                   f"<td>{escape(r['date'] or '')}</td><td>{r['score']:.4f}</td></tr>"
                   for n, r in enumerate(rows, start=1))
    return ("<p>The abstract alone as the query (cosine similarity), for comparison with the fused ranking.</p>"
            f"<table id='baseline-table'><thead><tr><th>#</th><th>Title</th><th>Date</th><th>Cosine</th></tr>"
            f"</thead><tbody>{body}</tbody></table>")


def aspects_html(result: related.RelatedResult) -> str:
    source = arxiv_link(result.query.paper.id) if result.query.paper.id else "the pasted text"
    if not result.aspect_queries and not result.aspects.missing:
        return f"<p>The ranking <code>{escape(result.method)}</code> uses no aspect queries.</p>"
    parts = [f"<p>The aspect queries of {source}; each searched the library on its own.</p>"]
    for aspect in related.ASPECTS:
        label = escape(related.QUERY_LABELS[aspect])
        why = result.aspects.missing.get(aspect)
        if aspect in result.aspect_queries:
            origin = SOURCE_LABELS[result.aspect_sources[aspect]]
            from_llm = result.aspect_sources[aspect] == "llm"
            cached = " (cached)" if from_llm and aspect in result.aspects.from_cache else ""
            note = f" — the LLM's description was not used: {why}" if why else ""
            parts.append(f"<h4>{label}{cached}</h4><p class='aspect-{aspect}'>{escape(result.aspect_queries[aspect])}"
                         f"</p><p><em>{escape(origin + note)}</em></p>")
        else:
            reason = why or "no sentence of the abstract is on this aspect"
            parts.append(f"<h4>{label}</h4><p><em>no query: {escape(reason)}</em></p>")
    return "\n".join(parts)


def _status(text: str) -> str:
    return f"<p class='related-status'>{escape(text)}</p>"


def related_view(services: Services, user: str, scope: str | None, reference_text: str, title_text: str,
                 abstract_text: str, ranking_name: str | None, mode_label: str):
    """The Related tab's run: (status, results, baseline, aspects, BibTeX file, the "Ask about this paper" row, its
    paper picker) after each step of the search."""
    empty = ("", "", "", shown_file(None), gr.update(visible=False), gr.update(choices=[], value=None))
    try:
        check_rate(services, user, scope, "a related search")
    except RateLimited as error:
        yield _status(f"⚠ {error}"), *empty
        return
    yield _status("Looking up the query paper…"), *empty
    try:
        query = related.parse_query(services, reference_text, title_text, abstract_text)
    except UserError as error:
        yield _status(f"⚠ {error}"), *empty
        return
    outcome: dict = {}
    for step in _search_steps(services, query, MODE_LABELS[mode_label], ranking_name or None, outcome):
        yield _status(f"{query.paper.title or 'Query'}: {step}…"), *empty
    if "error" in outcome:
        yield _status(f"⚠ {outcome['error']}"), *empty
        return
    result = outcome["result"]
    bibtex = bibtex_for_ids(services, [row["id"] for row in result.results]) if result.results else ""
    read = papers_read(services, [row["id"] for row in result.results])
    yield (query_html(result), results_html(result.results, read), baseline_html(result.baseline), aspects_html(result),
           shown_file(write_bibtex(bibtex, f"related-to-{query.paper.id or query.paper.title or 'paper'}")),
           *picker_updates(result.results))


def picker_updates(rows: list[dict]) -> tuple:
    """The "Ask about this paper" row under the results: shown with results, its picker listing them (#57)."""
    choices = [(f"{n}. {readable(row['title'] or '')[:90]} ({row['id']})", row["id"])
               for n, row in enumerate(rows, start=1) if row.get("id")]
    return gr.update(visible=bool(choices)), gr.update(choices=choices, value=choices[0][1] if choices else None)


def _search_steps(services: Services, query, mode: str, method: str | None, outcome: dict):
    """find_related on a worker thread, yielding its progress steps as they come; `outcome` receives the result or
    the error's message (every failure is shown to the user instead of failing silently)."""
    steps: queue.Queue = queue.Queue()

    def work() -> None:
        try:
            outcome["result"] = related.find_related(services, query, mode=mode, progress=steps.put, method=method)
        except UserError as error:
            outcome["error"] = str(error)
        except Exception as error:  # shown to the user instead of a silent failure
            outcome["error"] = f"related search failed: {type(error).__name__}: {error}"
        steps.put(None)

    threading.Thread(target=work, daemon=True).start()
    while (step := steps.get()) is not None:
        yield step


def build(services: Services):
    gr.Markdown("Find papers related to a query paper. Several queries each search the library — the abstract, the "
                "title, one query per aspect (research question, method, experiments: PRISM) and the words the "
                "papers share (BM25) — and Reciprocal Rank Fusion merges their lists. The default ranking is the "
                "one that ranked best on a benchmark with expert judgements (docs/related-eval.md).")
    with gr.Row():
        reference = gr.Textbox(label="arXiv id or URL", placeholder="2501.01234 or https://arxiv.org/abs/2501.01234",
                               elem_id="related-input", scale=3)
        run_button = gr.Button("Find related papers", variant="primary", elem_id="related-run", scale=1)
    with gr.Row():
        ranking = gr.Dropdown(ranking_choices(), value=services.generation.related_ranking, label="Ranking",
                              elem_id="related-ranking", scale=3)
        mode = gr.Radio(list(MODE_LABELS), value=next(iter(MODE_LABELS)), scale=2, elem_id="related-mode",
                        label="How the LLM writes aspect descriptions",
                        visible=mode_matters(services.generation.related_ranking))
    with gr.Accordion("…or paste a title and abstract", open=False):
        title = gr.Textbox(label="Title", elem_id="related-title")
        abstract = gr.Textbox(label="Abstract (or any pasted text)", lines=6, elem_id="related-abstract")
    status = gr.HTML(elem_id="related-status")
    with gr.Tabs():
        with gr.Tab("Related"):
            results = gr.HTML(elem_id="related-results")
            with gr.Row(visible=False, elem_id="related-ask-row") as picker:
                chosen = gr.Dropdown([], value=None, label="A related paper", elem_id="related-chosen", scale=3)
                ask_button = gr.Button("Ask about this paper", elem_id="related-ask", scale=1)
            bib_file = gr.File(label="BibTeX of these results", elem_id="related-bibtex", interactive=False, height=72,
                               visible=False)
        with gr.Tab("Abstract only (baseline)"):
            baseline = gr.HTML(elem_id="related-baseline")
        with gr.Tab("Aspect queries"):
            aspects = gr.HTML(elem_id="related-aspects")
        with gr.Tab("Related-work draft (RAT)", id="related-work-tab"):
            build_draft_tab(services, reference, title, abstract)

    def on_run(reference_text, title_text, abstract_text, ranking_name, mode_label, request: gr.Request):
        user = current_user(request)
        yield from related_view(services, user, rate_scope(request, user), reference_text, title_text,
                                abstract_text, ranking_name, mode_label)

    # the prompt style is shown only with a ranking whose aspect descriptions the LLM writes (issue #38)
    ranking.change(lambda name: gr.update(visible=mode_matters(name)), ranking, mode, show_progress="hidden")
    inputs = [reference, title, abstract, ranking, mode]
    outputs = [status, results, baseline, aspects, bib_file, picker, chosen]
    gr.on([run_button.click, reference.submit], on_run, inputs=inputs, outputs=outputs, concurrency_limit=2,
          concurrency_id="related")
    # the Search tab's "Related papers" fills the id and runs; "Ask about this paper" is wired by ui.main
    return reference, (on_run, inputs, outputs), (ask_button, chosen)
