"""The Profile tab: find your arXiv papers, drop namesakes, generate a draft profile, edit it, save it.

Callbacks only parse input, call copilot.features.profile, and format output. The user is always
`current_user(request)`: a user sees and saves only their own profile.
"""

from __future__ import annotations

from datetime import datetime, timezone

import gradio as gr

from copilot.errors import UserError
from copilot.features import profile as feature
from copilot.features import profile_draft, profile_lookup
from copilot.features.bibtex import arxiv_ids_from_bibtex_file
from copilot.features.limits import RateLimited
from copilot.readable import readable
from copilot.records import Paper
from copilot.services import Services
from copilot.ui.common import arxiv_link, current_user, escape, escape_markdown, user_within_rate

PASTED_GROUP = 0      # papers given as ids form their own group


FOUND_IN = {"library": "in your library", "both": "in your library and on arXiv", "arxiv": ""}


def _paper_label(paper: Paper, group: int, found_in: str = "") -> str:
    others = ", ".join(paper.authors[:4]) + (" …" if len(paper.authors) > 4 else "")
    tag = f"G{group} · " if group else ""
    where = f" [{FOUND_IN[found_in]}]" if FOUND_IN.get(found_in) else ""
    return (f"{tag}{paper.published} · {paper.primary_category} · {paper.id} · {readable(paper.title)} — "
            f"{others}{where}")


def _candidates_state(papers: list[Paper], group_of: dict[str, int], group_labels: dict[int, str],
                      found_in: dict[str, str] | None = None, checked: list[int] | None = None) -> dict:
    """The listed papers and their groups; `checked`: the groups checked at first (every group when None)."""
    return {"papers": {p.id: p for p in papers}, "group_of": group_of, "groups": group_labels,
            "checked_groups": sorted(group_labels if checked is None else checked), "found_in": found_in or {}}


def _choices(state: dict) -> list[tuple[str, str]]:
    return [(_paper_label(p, state["group_of"].get(pid, 0), state.get("found_in", {}).get(pid, "")), pid)
            for pid, p in state["papers"].items()] + [(f"{pid} · saved, not in your library yet", pid)
                                                      for pid in state.get("unstored", [])]


def _all_ids(state: dict) -> list[str]:
    """Every paper id the list shows: the papers found, then saved ids the library does not hold yet."""
    return list(state.get("papers", {})) + list(state.get("unstored", []))


def _group_choices(state: dict) -> list[tuple[str, int]]:
    return [(label, number) for number, label in sorted(state["groups"].items())]


def _cleared():
    """(groups update, papers update, state) of a lookup that found nothing."""
    return (gr.update(choices=[], value=[], visible=False), gr.update(choices=[], value=[]),
            _candidates_state([], {}, {}))


def lookup_view(services: Services, name: str, progress=None):
    """→ (message markdown, groups update, papers update, state)."""

    def report(count: int) -> None:
        if progress is not None:
            progress(None, desc=f"Searching your library, then arXiv: {count} papers from arXiv so far")

    try:
        result = profile_lookup.lookup_author(services, name, progress=report)
    except feature.ProfileError as error:     # the previous lookup's papers must not stay listed and checked
        return f"**{escape(error)}**", *_cleared()
    if not result.candidates:
        return escape(result.message), *_cleared()
    state = _candidates_state([c.paper for c in result.candidates], {c.paper.id: c.group for c in result.candidates},
                              {g.number: g.label() for g in result.groups},
                              {c.paper.id: c.found_in for c in result.candidates}, result.checked)
    message = escape(result.message) + (f" <small>(arXiv searched for {escape(result.searched)})</small>"
                                        if result.searched else "")
    checked = [pid for pid in state["papers"] if state["group_of"].get(pid) in result.checked]
    return (message,
            gr.update(choices=_group_choices(state), value=state["checked_groups"], visible=len(result.groups) > 1),
            gr.update(choices=_choices(state), value=checked), state)


def ids_view(services: Services, text: str):
    try:
        papers, note = feature.papers_from_ids(services, text)
    except feature.ProfileError as error:
        return f"**{escape(error)}**", gr.update(), gr.update(), gr.update()
    state = _candidates_state(papers, {p.id: PASTED_GROUP for p in papers}, {})
    message = f"{len(papers)} paper(s) from your ids." + (f" {escape(note)}" if note else "")
    return (message, gr.update(choices=[], value=[], visible=False),
            gr.update(choices=_choices(state), value=list(state["papers"])), state)


def bibtex_view(services: Services, path: str | None):
    """A BibTeX file's arXiv entries as the candidate papers (like pasted ids)."""
    if not path:
        return gr.update(), gr.update(), gr.update(), gr.update()
    try:
        ids, others = arxiv_ids_from_bibtex_file(path)
        papers, note = feature.papers_from_ids(services, ",".join(ids))
    except (UserError, feature.ProfileError) as error:
        return f"**{escape(error)}**", gr.update(), gr.update(), gr.update()
    state = _candidates_state(papers, {p.id: PASTED_GROUP for p in papers}, {})
    message = (f"{len(papers)} paper(s) from the arXiv entries of your BibTeX file"
               + (f"; {others} other entries skipped" if others else "") + "." + (f" {escape(note)}" if note else ""))
    return (message, gr.update(choices=[], value=[], visible=False),
            gr.update(choices=_choices(state), value=list(state["papers"])), state)


def groups_view(state: dict, checked_groups: list[int], checked_papers: list[str]):
    """Unchecking a group unchecks its papers; checking it checks them again. → (papers update, state)."""
    if not state:
        return gr.update(), state
    before, after = set(state.get("checked_groups", [])), set(checked_groups or [])
    group_of = state["group_of"]
    selected = {pid for pid in checked_papers or [] if group_of.get(pid) not in before - after}
    selected |= {pid for pid, group in group_of.items() if group in after - before}
    state = dict(state, checked_groups=sorted(after))
    return gr.update(value=[pid for pid in _all_ids(state) if pid in selected]), state


def _selected(state: dict, checked: list[str]) -> list[Paper]:
    papers = (state or {}).get("papers", {})
    return [papers[pid] for pid in checked or [] if pid in papers]


def _sources_line(papers: list[Paper]) -> str:
    return "Sources: " + ", ".join(arxiv_link(p.id, p.id) for p in papers) if papers else ""


def generate_view(services: Services, state: dict, checked: list[str], pasted: str):
    """Stream (notice, text, keywords): the model's words as they come, then the validated draft."""
    papers = _selected(state, checked)
    if not papers and not (pasted or "").strip():
        yield ("**Check at least one paper, or paste a text about your research.** "
               + escape(feature.NOT_FOUND_HINT)), gr.update(), gr.update()
        return
    yield f"Writing a draft from {len(papers)} paper(s)…", "", gr.update()
    try:
        for item in profile_draft.stream_draft(services, papers, pasted or ""):
            if isinstance(item, profile_draft.Draft):
                notes = "".join(f"\n- {escape(n)}" for n in item.notes)
                notice = (f"**{escape(item.notice)}** ({item.words} words)"
                          + (f"\n\nChecks applied:{notes}" if notes else "") + "\n\n" + _sources_line(papers))
                yield notice, item.text, ", ".join(item.keywords)
            else:
                yield f"Writing a draft from {len(papers)} paper(s)… ({len(item.split())} words so far)", item, \
                    gr.update()
    except feature.ProfileError as error:
        yield f"**{escape(error)}**", gr.update(), gr.update()


def saved_markdown(profile: feature.Profile | None, papers: list[Paper] | None = None) -> str:
    if profile is None:
        return "No saved profile yet."
    when = datetime.fromtimestamp(profile.saved_at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    titles = {p.id: p.title for p in papers or []}
    links = ", ".join(arxiv_link(pid, titles.get(pid) or pid) for pid in profile.paper_ids) or "none"
    return (f"**Saved profile** · version <span id='profile-version'>{profile.version}</span> · {when} · "
            f"keywords: {escape_markdown(', '.join(profile.keywords))}\n\nPapers: {links}")


def save_view(services: Services, user: str, text: str, keywords: str, state: dict, checked: list[str]):
    """→ saved markdown. The selected papers go with the profile (and into the paper store), saved ids the library
    does not hold yet among them; refused while the saved papers could not be read (it would drop them)."""
    if (state or {}).get("load_error"):
        return f"**Not saved: {escape(state['load_error'])}**"
    papers = _selected(state, checked)
    unstored = [pid for pid in checked or [] if pid in (state or {}).get("unstored", [])]
    try:
        profile = feature.save_profile(services, user, text, keywords, [*papers, *unstored])
    except feature.ProfileError as error:
        return f"**Not saved: {escape(error)}**"
    notice = f"**{escape(profile.notice)}**\n\n" if profile.notice else ""
    return notice + saved_markdown(profile, papers)


def load_view(services: Services, user: str):
    """On page load: (text, keywords, saved markdown, papers update, state) of the user's saved profile."""
    try:
        profile = feature.load_profile(services, user)
    except feature.BrokenProfile as error:
        return "", "", f"**Your saved profile could not be read ({escape(error)}). Write and save it again.**", \
            gr.update(), gr.update()
    if profile is None:
        return "", "", saved_markdown(None), gr.update(), gr.update()
    try:
        papers = feature.saved_papers(services, profile)
    except Exception as error:  # the saved text still shows; Save is refused, so the papers are not dropped
        why = (f"your saved papers could not be read from the library ({type(error).__name__}: {error}); "
               "saving now would drop them. Reload the page to try again.")
        return (profile.text, ", ".join(profile.keywords), f"**{escape(why[0].upper() + why[1:])}**\n\n"
                + saved_markdown(profile), gr.update(choices=[], value=[]), {"load_error": why})
    state = _candidates_state(papers, {p.id: PASTED_GROUP for p in papers}, {})
    state["unstored"] = [pid for pid in profile.paper_ids if pid not in state["papers"]]
    return (profile.text, ", ".join(profile.keywords), saved_markdown(profile, papers),
            gr.update(choices=_choices(state), value=_all_ids(state)), state)


def _events(services: Services):
    """The tab's callbacks over `services` (Gradio passes the request only to a function that names it)."""
    def on_lookup(name_text, progress=gr.Progress()):
        return lookup_view(services, name_text, progress)

    def on_ids(text_ids):
        return ids_view(services, text_ids)

    def on_generate(current, checked, pasted_text, request: gr.Request):
        try:
            user_within_rate(services, request, "generating a profile")
        except RateLimited as error:
            yield f"**{escape(error)}**", gr.update(), gr.update()
            return
        yield from generate_view(services, current, checked, pasted_text)

    def on_save(profile_text, words, current, checked, request: gr.Request):
        return save_view(services, current_user(request), profile_text, words, current, checked)

    def on_load(request: gr.Request):
        return load_view(services, current_user(request))
    return on_lookup, on_ids, on_generate, on_save, on_load


def build(services: Services) -> None:
    gr.Markdown("Tell the copilot who you are: find your arXiv papers, keep the ones that are yours, generate a "
                "draft profile, edit it and save it. Trends and Chat personalize with your saved profile.")
    with gr.Row():
        name = gr.Textbox(label="Your name as on arXiv", placeholder="Yoshua Bengio · Bengio, Yoshua · Y. Bengio",
                          max_lines=1, scale=4, elem_id="profile-name")
        find = gr.Button("Find my papers", variant="primary", scale=1, elem_id="profile-find")
    with gr.Row(equal_height=False):      # the other inputs, in view: not everyone's papers are found by name
        with gr.Column():
            ids = gr.Textbox(label="…or your arXiv ids or links (comma or line separated)", lines=2,
                             elem_id="profile-ids")
            use_ids = gr.Button("Use these papers", elem_id="profile-use-ids")
        bib = gr.File(label="…or a BibTeX file (e.g. a Zotero export): its arXiv entries",
                      file_types=[".bib", ".txt"], elem_id="profile-bibtex")
        pasted = gr.Textbox(label="…or a text about your research (used by Generate, with any checked papers)",
                            lines=4, elem_id="profile-pasted")
    status = gr.Markdown(elem_id="profile-status")
    groups = gr.CheckboxGroup(label="Groups: papers by likely identity (uncheck a group that is not you)",
                              visible=False, elem_id="profile-groups")
    papers = gr.CheckboxGroup(label="Papers (only checked papers are used)", elem_id="profile-papers")
    generate = gr.Button("Generate profile draft", elem_id="profile-generate")
    notice = gr.Markdown(elem_id="profile-notice")
    text = gr.Textbox(label="Your profile (first person, edit freely)", lines=10, max_lines=30,
                      elem_id="profile-text")
    keywords = gr.Textbox(label="Keywords (comma-separated)", max_lines=2, elem_id="profile-keywords")
    save = gr.Button("Save profile", variant="primary", elem_id="profile-save")
    saved = gr.Markdown(elem_id="profile-saved")
    state = gr.State({})

    on_lookup, on_ids, on_generate, on_save, on_load = _events(services)

    lookup_outputs = [status, groups, papers, state]
    gr.on([find.click, name.submit], on_lookup, inputs=name, outputs=lookup_outputs, concurrency_limit=2,
          concurrency_id="profile-lookup")      # arXiv calls: never in the light events' group
    use_ids.click(on_ids, inputs=ids, outputs=lookup_outputs)
    bib.upload(lambda path: bibtex_view(services, path), inputs=bib, outputs=lookup_outputs)
    groups.input(groups_view, inputs=[state, groups, papers], outputs=[papers, state], show_progress="hidden")
    # Save is off while a draft is being written: a click mid-stream saved a 6-word fragment as version 1
    (generate.click(lambda: gr.update(interactive=False), None, save, show_progress="hidden")
     .then(on_generate, inputs=[state, papers, pasted], outputs=[notice, text, keywords], concurrency_limit=2,
           concurrency_id="profile-generate")
     .then(lambda: gr.update(interactive=True), None, save, show_progress="hidden"))
    save.click(on_save, inputs=[text, keywords, state, papers], outputs=saved)
    root = gr.context.Context.root_block
    if root is not None:
        root.load(on_load, outputs=[text, keywords, saved, papers, state])
