"""The Search tab: the library searched by words and meaning, with filters and sort; result cards with links and
two actions on a chosen result — its related papers (the Related tab) and a question about it (Chat)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import gradio as gr

from copilot.errors import UserError
from copilot.features.bibtex import bibtex_text
from copilot.features.fulltext import papers_read
from copilot.features.limits import RateLimited
from copilot.features.search import SORTS, Hit, SearchResult, query_words, search_papers
from copilot.readable import readable
from copilot.services import Services
from copilot.ui.chat import scope as scope_ui
from copilot.ui.common import escape, shown_file, user_within_rate, write_bibtex

SNIPPET_CHARS = 320
AUTHORS_SHOWN = 6


def highlighted(text: str, words: list[str]) -> str:
    """`text` escaped, with the query's words marked; the words are matched before escaping, so a mark can never
    split an HTML entity."""
    if not words:
        return escape(text)
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")", re.IGNORECASE)
    parts, last = [], 0
    for match in pattern.finditer(text):
        parts += [escape(text[last:match.start()]), f"<mark>{escape(match.group(0))}</mark>"]
        last = match.end()
    return "".join(parts) + escape(text[last:])


def snippet(abstract: str, words: list[str]) -> str:
    """About SNIPPET_CHARS of the abstract, starting near the first query word it contains."""
    text = " ".join(abstract.split())
    lowered = text.lower()
    first = min((i for i in (lowered.find(w) for w in words) if i >= 0), default=0)
    start = max(0, text.rfind(" ", 0, max(0, first - 60)) + 1) if first > 120 else 0
    cut = text[start:start + SNIPPET_CHARS]
    return ("… " if start else "") + cut + (" …" if start + SNIPPET_CHARS < len(text) else "")


FULL_TEXT_MARK = ' · <span class="full-text-mark" title="answers quote its body, with sections">full text read</span>'


def card_html(n: int, hit: Hit, words: list[str], read: frozenset[str] = frozenset()) -> str:
    p = hit.paper
    authors = ", ".join(p.authors[:AUTHORS_SHOWN]) + (f" and {len(p.authors) - AUTHORS_SHOWN} more"
                                                      if len(p.authors) > AUTHORS_SHOWN else "")
    why = " · ".join(f"{name} #{rank}" for name, rank in hit.ranks.items())
    return (f'<li class="search-card" data-id="{escape(p.id)}">'
            f'<div class="search-title"><a href="{escape(p.abs_url)}" target="_blank" rel="noopener">'
            f"{highlighted(readable(p.title), words)}</a></div>"
            f'<div class="search-meta">{escape(authors)} · {escape(p.published.isoformat())} · '
            f'{escape(" ".join(p.categories[:4]))} · arXiv {escape(p.id)}v{p.version}</div>'
            f'<div class="search-snippet">{highlighted(snippet(readable(p.abstract), words), words)}</div>'
            f'<div class="search-links"><a href="{escape(p.abs_url)}" target="_blank" rel="noopener">abs</a> · '
            f'<a href="{escape(p.pdf_url)}" target="_blank" rel="noopener">PDF</a>'
            + (FULL_TEXT_MARK if p.id in read else "")
            + (f' <span class="search-why">matched by {escape(why)}</span>' if why else "") + "</div></li>")


def results_html(result: SearchResult, read: frozenset[str] = frozenset()) -> str:
    if not result.hits:
        return f'<p class="search-empty">{escape(result.message or "No results.")}</p>'
    words = query_words(result.query)
    count = (f"{len(result.hits)} results" + (f" among {result.matched:,} papers matching the filters"
                                             if result.matched is not None else ""))
    cards = "".join(card_html(n, hit, words, read) for n, hit in enumerate(result.hits, start=1))
    # a name that fits several papers, or how results sorted by date were chosen
    notice = f'<p class="search-notice">{escape(result.message)}</p>' if result.message else ""
    return f'<p class="search-count">{escape(count)}</p>{notice}<ol class="search-results">{cards}</ol>'


@dataclass
class SearchTab:
    chosen: gr.Dropdown
    related_button: gr.Button
    ask_button: gr.Button


def build(services: Services) -> SearchTab:
    gr.Markdown("Search the library by words and meaning together (the two rankings are fused by rank), narrowed "
                "by date, category and author.")
    with gr.Row():
        query = gr.Textbox(label="Search", placeholder="e.g. retrieval-augmented generation hallucination",
                           elem_id="search-query", scale=4)
        run = gr.Button("Search", variant="primary", elem_id="search-run", scale=1)
    with gr.Row():
        date_from = gr.Textbox(label="From (YYYY-MM-DD)", elem_id="search-from", scale=1)
        date_to = gr.Textbox(label="To (YYYY-MM-DD)", elem_id="search-to", scale=1)
        categories = gr.Dropdown(services.settings.categories, multiselect=True, allow_custom_value=True,
                                 label="Categories (any of)", elem_id="search-categories", scale=2)
        author = gr.Textbox(label="Author", placeholder="e.g. Chen, Muhao", elem_id="search-author", scale=2)
        sort = gr.Radio(list(SORTS), value="relevance", label="Sort by", elem_id="search-sort", scale=1)
    results = gr.HTML(elem_id="search-results")
    with gr.Row(visible=False) as picker:        # offered once there are results to pick from
        chosen = gr.Dropdown([], value=None, label="A result", allow_custom_value=True, elem_id="search-chosen",
                             scale=3)
        related_button = gr.Button("Related papers", elem_id="search-related", scale=1)
        ask_button = gr.Button("Ask about this paper", elem_id="search-ask", scale=1)
    bib_file = gr.File(label="BibTeX of these results", elem_id="search-bibtex", interactive=False, height=72,
                       visible=False)

    def on_search(text, start, end, cats, name, order, request: gr.Request):
        try:
            user_within_rate(services, request, "searching")
            result = search_papers(services, text if isinstance(text, str) else "",
                                   start if isinstance(start, str) else None, end if isinstance(end, str) else None,
                                   [c for c in cats or [] if isinstance(c, str)] if isinstance(cats, list) else None,
                                   name if isinstance(name, str) else None,
                                   order if order in SORTS else "relevance")
        except (UserError, RateLimited) as error:
            return (f'<p class="search-empty">{escape(error)}</p>', gr.update(choices=[], value=None), shown_file(None),
                    gr.update(visible=False))
        choices = [(f"{readable(hit.paper.title)[:90]} ({hit.paper.id})", hit.paper.id) for hit in result.hits]
        bibtex = bibtex_text([hit.paper for hit in result.hits])
        read = papers_read(services, [hit.paper.id for hit in result.hits])
        return (results_html(result, read), gr.update(choices=choices, value=choices[0][1] if choices else None),
                shown_file(write_bibtex(bibtex, f"search-{result.query or 'filtered'}")),
                gr.update(visible=bool(choices)))

    gr.on([run.click, query.submit, author.submit], on_search, [query, date_from, date_to, categories, author, sort],
          [results, chosen, bib_file, picker])
    return SearchTab(chosen, related_button, ask_button)


def connect(services: Services, tab: SearchTab, tabs: gr.Tabs, related_reference: gr.Textbox, related_run,
            ask_target: scope_ui.AskTarget) -> None:
    """The two actions on a chosen result: they fill the other tab's input and switch to it (Related also runs;
    "Ask about this paper" adds the paper to the Ask box's scope and goes there, the question left as typed, as the
    other cards' do: ui.chat.scope)."""
    def to_related(paper_id):
        if not isinstance(paper_id, str) or not paper_id.strip():
            return gr.update(), gr.Tabs()
        return paper_id.strip(), gr.Tabs(selected="related")

    fn, inputs, outputs = related_run
    tab.related_button.click(to_related, [tab.chosen], [related_reference, tabs]).then(fn, inputs, outputs)
    scope_ui.connect(services, tab.ask_button, [tab.chosen], ask_target)
