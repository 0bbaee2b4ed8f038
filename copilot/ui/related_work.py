"""Related's "Related-work draft (RAT)" tab: for the query paper above, a related-work section citing library papers,
streamed with its step trace; the cited papers' BibTeX as a download and the draft in LaTeX."""

from __future__ import annotations

import time

import gradio as gr

from copilot.errors import UserError
from copilot.features import related
from copilot.features.limits import RateLimited
from copilot.features.longform import needs_a_writer
from copilot.features.related_work import stream_related_work
from copilot.services import Services
from copilot.ui.common import escape, shown_file, user_within_rate, write_bibtex
from copilot.ui.longform import result_html, trace_html

_STREAM_EVERY_S = 0.2


def build_draft_tab(services: Services, reference: gr.Textbox, title: gr.Textbox, abstract: gr.Textbox) -> None:
    """The tab's parts and events; the query paper comes from the Related tab's own inputs. On the tiny profile the
    tab says why there is no draft (the model would write it)."""
    if not services.model_profile.writes:
        gr.Markdown(needs_a_writer("A related-work draft"), elem_id="related-work-off")
        return
    gr.Markdown("A related-work section for the query paper, citing papers of the library: the library is ranked "
                "by the paper's aspects (PRISM), a draft is written without sources, then each paragraph is checked "
                "against the best-matching ranked papers and the whole draft revised (RAT). Citations are checked: "
                "only retrieved papers can be cited.")
    with gr.Row():
        with_thoughts = gr.Checkbox(label="Also use stored thoughts", value=False, elem_id="related-work-thoughts")
        run_button = gr.Button("Draft related work (RAT)", variant="primary", elem_id="related-work-run")
        stop_button = gr.Button("Stop", size="sm", visible=False, elem_id="related-work-stop")
    result = gr.HTML(elem_id="related-work-result")
    bibtex_file = gr.File(label="BibTeX of the cited papers", elem_id="related-work-bibtex", interactive=False,
                          height=72, visible=False)
    latex = gr.Code(label="The draft in LaTeX (\\cite keys match the BibTeX)", language="latex",
                    elem_id="related-work-latex", interactive=False, visible=False)
    with gr.Accordion("Step trace", open=False):
        trace = gr.HTML(elem_id="related-work-trace")

    def run(reference_text, title_text, abstract_text, thoughts, request: gr.Request):
        try:
            user = user_within_rate(services, request, "a related-work draft")
            query = related.parse_query(services, reference_text, title_text, abstract_text)
            last = 0.0
            for live in stream_related_work(services, query, user=user, thoughts=thoughts):
                if time.monotonic() - last >= _STREAM_EVERY_S or live.done:
                    last = time.monotonic()
                    record = live.as_dict()
                    done = live.done
                    bibtex = write_bibtex(record["bibtex"], f"related-work-{query.paper.title or 'draft'}") \
                        if done else None
                    yield (result_html(record, "text", f"Related work: {query.paper.title or 'pasted text'}"),
                           shown_file(bibtex),
                           gr.update(value=record["latex"] if done else "", visible=done),
                           trace_html(record), gr.update(visible=not done))
        except (UserError, RateLimited) as error:
            yield (f"<p class='related-status'>⚠ {escape(error)}</p>", shown_file(None),
                   gr.update(visible=False), "", gr.update(visible=False))

    event = run_button.click(run, [reference, title, abstract, with_thoughts],
                             [result, bibtex_file, latex, trace, stop_button],
                             concurrency_limit=1 if services.settings.llm_backend == "local" else None,
                             concurrency_id="related-work")
    stop_button.click(hidden_stop, None, [stop_button], cancels=[event])


def hidden_stop() -> dict:
    return gr.update(visible=False)
