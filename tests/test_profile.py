"""Profile: lookup against the loopback fake arXiv (recorded real author-query responses), paging, namesake
grouping, papers by id, draft validation, save/reload, per-user isolation, CLI, and the real local model."""

from __future__ import annotations

import re
from datetime import date

import pytest

from copilot.features import profile as P
from copilot.features import profile_draft as D
from copilot.features import profile_lookup as L
from copilot.records import Paper
from copilot.services import Services
from tests.conftest import ARXIV_RESPONSES, make_settings, sample_papers
from tests.doubles import ScriptedBackend, rescript
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)
from tests.helpers import clean_env
from tests.helpers import run_cli_in_process as run_cli

DEL_MAESTRO = ARXIV_RESPONSES / "arxiv.py_2016_xml" / "search_query=au_del_maestro.xml"
DEL_MAESTRO_MORE = ARXIV_RESPONSES / "arxiv.py_2016_xml" / \
    "search_query=au_del_maestro+ANDNOT+_28ti_checkerboard+OR+ti_Pyrochlore_29.xml"
PAGE_ONE_IDS = {"1201.4869", "cond-mat/0412498", "cond-mat/0603029", "1005.5383", "1303.6954", "1312.6177",
                "1412.6529", "cond-mat/0607501", "cond-mat/0702661", "0807.2873"}


def profile_services(data_dir, arxiv_url: str, llm_backend=None) -> Services:
    # a generous LLM timeout: the machine running the tests may be busy; the tests assert no timing
    return Services(make_settings(data_dir, arxiv_api_url=arxiv_url, arxiv_timeout=2.0, llm_timeout=600.0),
                    llm_backend=llm_backend)


@pytest.fixture
def svc(tmp_path, fake_arxiv, monkeypatch):
    """Services with the real local model."""
    clean_env(monkeypatch)
    return profile_services(tmp_path / "data", fake_arxiv.url)


@pytest.fixture
def scripted_svc(tmp_path, fake_arxiv, monkeypatch):
    """Services built with a scripted model (`rescript` gives it a test's replies)."""
    clean_env(monkeypatch)
    return profile_services(tmp_path / "data", fake_arxiv.url, llm_backend=ScriptedBackend())


def author_params(query: str, start: int) -> dict:
    return {"search_query": query, "id_list": "", "sortBy": "submittedDate", "sortOrder": "descending",
            "start": start, "max_results": 100}


def feed_with(path, keep_ids: set[str], edit=None) -> str:
    """A recorded feed holding only the entries whose id is in keep_ids (optionally edited)."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split("<entry>", 1)
    entries = re.findall(r"<entry>.*?</entry>", "<entry>" + rest, re.S)
    kept = []
    for entry in entries:
        pid = re.search(r"<id>http://arxiv.org/abs/(.*?)(?:v\d+)?</id>", entry).group(1)
        if pid in keep_ids:
            kept.append(edit(pid, entry) if edit else entry)
    return head + "\n".join(kept) + "\n</feed>\n"


# --- lookup -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Adrian Del Maestro", "del maestro, adrian", "A. Del Maestro", "ADRIÁN DEL MAESTRO"])
def test_lookup_accepts_spellings_and_finds_the_recorded_papers(svc, fake_arxiv, name):
    result = L.lookup_author(svc, name, max_results=10)
    assert {c.paper.id for c in result.candidates} == PAGE_ONE_IDS
    sent = [q["search_query"] for q in fake_arxiv.queries]
    full = ['au:"adrian del maestro"'] if "A." not in name else []   # the full name first, when it is spelled out
    assert sent == full + ["au:del_maestro_a", "au:del_maestro"]     # then broader; nothing was recorded for those
    assert all(q["sortBy"] == "submittedDate" and q["sortOrder"] == "descending" for q in fake_arxiv.queries)
    assert result.query == "au:del_maestro"
    dates = [c.paper.published for c in result.candidates if c.group == 1]
    assert dates == sorted(dates, reverse=True)                      # newest first within a group
    row = result.as_dict()["candidates"][0]
    assert set(row) == {"id", "title", "date", "authors", "primary_category", "group", "found_in"}
    assert row["found_in"] == "arxiv"
    assert row["date"] == "2014-12-19" and row["primary_category"] == "cond-mat.quant-gas"


def test_lookup_of_the_surname_alone_sends_one_query(svc, fake_arxiv):
    result = L.lookup_author(svc, "Del Maestro", max_results=10)
    assert len(result.candidates) == 10
    assert [q["search_query"] for q in fake_arxiv.queries] == ["au:del_maestro"]


@pytest.mark.parametrize("name", ["", "   ", "<img src=x onerror=alert(1)>", "x" * 300, "au:bengio OR cat:cs.LG"])
def test_bad_names_send_no_query(svc, fake_arxiv, name):
    with pytest.raises(P.ProfileError):
        L.lookup_author(svc, name)
    assert fake_arxiv.requests == []


def test_no_papers_found_offers_the_other_inputs(svc, fake_arxiv):
    result = L.lookup_author(svc, "Yoshua Bengio")
    assert result.candidates == [] and "No papers found" in result.message
    assert "arXiv ids" in result.message and "paste a text" in result.message
    assert [q["search_query"] for q in fake_arxiv.queries] == ['au:"yoshua bengio"', "au:bengio_y", "au:bengio"]


def test_surname_query_drops_other_first_names(svc, fake_arxiv):
    """'Bernd Del Maestro' matches no author spelled A./Adrian: arXiv's surname hits are all dropped."""
    result = L.lookup_author(svc, "Bernd Del Maestro", max_results=10)
    assert result.candidates == [] and result.dropped == 10


def test_paging_follows_pages_up_to_the_limit(svc, fake_arxiv):
    # page two: the two recorded Del Maestro papers that page one lacks (1101.2206, 1111.2011)
    fake_arxiv.add_response(author_params("au:del_maestro", 10),
                            feed_with(DEL_MAESTRO_MORE, {"1101.2206", "1111.2011"}))
    result = L.lookup_author(svc, "del maestro", max_results=12)
    assert {c.paper.id for c in result.candidates} == PAGE_ONE_IDS | {"1101.2206", "1111.2011"}
    assert [q["start"] for q in fake_arxiv.queries] == ["0", "10"]
    assert "Showing the newest 12" in result.message

    fake_arxiv.reset()
    fake_arxiv.add_response(author_params("au:del_maestro", 10),
                            feed_with(DEL_MAESTRO_MORE, {"1101.2206", "1111.2011"}))
    assert len(L.lookup_author(svc, "del maestro", max_results=11).candidates) == 11


def test_a_page_failing_midway_keeps_the_pages_already_fetched(svc, fake_arxiv):
    # the recorded feed claims 31 results; the page at start=10 was never recorded (empty)
    progress = []
    result = L.lookup_author(svc, "del maestro", max_results=50, progress=progress.append)
    assert len(result.candidates) == 10 and "arXiv stopped answering after 10 papers" in result.message
    assert progress == list(range(1, 11))


def test_arxiv_down_or_slow_gives_a_clear_message(svc, fake_arxiv):
    fake_arxiv.fail_next(10, status=503)
    with pytest.raises(P.ProfileError, match="arXiv could not be searched.*HTTP 503.*saved profile is unchanged"):
        L.lookup_author(svc, "del maestro", max_results=10)
    fake_arxiv.reset()
    fake_arxiv.hang_next(10, seconds=10)
    with pytest.raises(P.ProfileError, match="did not answer in time"):
        L.lookup_author(svc, "del maestro", max_results=10)


def test_lookup_groups_a_namesake_apart(svc, fake_arxiv):
    """The precise query returns the recorded page with two papers re-authored by an 'Alice Del Maestro' in
    cs.CL with other co-authors: they form their own group, the physicist's ten papers stay together."""
    def namesake(pid, entry):
        if pid not in {"1412.6529", "1312.6177"}:
            return entry
        entry = re.sub(r"<author>.*</author>", "<author><name>Alice Del Maestro</name></author>"
                       "<author><name>John Q. Public</name></author>", entry, flags=re.S)
        return re.sub(r'term="[a-z\-]+(\.[A-Za-z\-]+)?"', 'term="cs.CL"', entry)

    fake_arxiv.add_response(author_params("au:del_maestro_a", 0), feed_with(DEL_MAESTRO, PAGE_ONE_IDS, namesake))
    result = L.lookup_author(svc, "A. Del Maestro", max_results=10)
    assert [q["search_query"] for q in fake_arxiv.queries] == ["au:del_maestro_a"]
    alice = next(g for g in result.groups if "1412.6529" in g.paper_ids)
    assert set(alice.paper_ids) == {"1412.6529", "1312.6177"}
    assert alice.spellings == ["Alice Del Maestro"] and alice.categories == ["cs.CL"]
    assert "as Alice Del Maestro" in alice.label() and "with John Q. Public" in alice.label()
    assert all("Alice Del Maestro" not in g.spellings for g in result.groups if g is not alice)
    assert [c.group for c in result.candidates] == sorted(c.group for c in result.candidates)
    assert "different people" in result.message


def test_library_paper_whose_author_string_holds_a_semicolon_is_not_a_candidate(svc, fake_arxiv):
    """The catalog splits stored authors at every ';', the stored paper at '; ': a snapshot author written
    'Al Smith;Bert Jones' is found by the catalog under Bert Jones but does not name him; it used to become a
    candidate written as None."""
    joined, plain = sample_papers(2)
    joined.authors, plain.authors = ["Al Smith;Bert Jones"], ["Bert Jones"]
    svc.store.upsert_papers([joined, plain], svc.embedder.embed([joined.document, plain.document]))
    fake_arxiv.fail_next(10, status=503)
    result = L.lookup_author(svc, "Bert Jones", max_results=10)
    assert [(c.paper.id, c.written_as) for c in result.candidates] == [(plain.id, "Bert Jones")]


# --- papers by id -----------------------------------------------------------------------------------------------
def test_papers_from_ids_and_links(svc, fake_arxiv):
    papers, note = P.papers_from_ids(svc, "0808.05394, https://arxiv.org/abs/1707.08567\nnot-an-id")
    assert [p.id for p in papers] == ["1707.08567"]
    assert "not found on arXiv: 0808.05394" in note and "not-an-id" in note
    with pytest.raises(P.ProfileError, match="no arXiv id"):
        P.papers_from_ids(svc, "hello world")
    with pytest.raises(P.ProfileError, match="none of these ids was found"):
        P.papers_from_ids(svc, "0000.0000")


def test_papers_from_ids_reads_the_store_first(svc, fake_arxiv):
    stored = sample_papers(2)
    svc.store.upsert_papers(stored, svc.embedder.embed([p.document for p in stored]))
    papers, note = P.papers_from_ids(svc, f"{stored[0].id} arXiv:{stored[1].id}v1")
    assert [p.id for p in papers] == [p.id for p in stored] and note == ""
    assert fake_arxiv.requests == []


# --- draft validation (scripted model) ----------------------------------------------------------------------------
def paper(pid: str, title: str, abstract: str) -> Paper:
    return Paper(id=pid, title=title, abstract=abstract, authors=["Ann Lee"], categories=["cs.CL"],
                 published=date(2025, 1, 2))


PAPERS = [
    paper("2501.00001", "Sparse retrieval for long documents",
          "We study sparse retrieval of long scientific documents with learned term weights and query expansion."),
    paper("2501.00002", "Query expansion with language models",
          "Language models expand queries for sparse retrieval; expansion improves recall on scientific search."),
]


def test_finalize_keeps_only_selected_citations_and_grounded_keywords():
    raw = ("I study sparse retrieval of long documents [2501.00001]. I also showed that query expansion helps "
           "[2501.00002, 9999.99999] and (arXiv:1234.56789) matters, see 1111.22222. My tools [1] are simple.\n"
           "Keywords: sparse retrieval, query expansion, quantum gravity, scientific search, language models, "
           "recall, <b>bold</b>")
    draft = D.finalize_draft(raw, PAPERS)
    cited = set(re.findall(r"\d{4}\.\d{5}", draft.text))
    assert cited <= {"2501.00001", "2501.00002"} and cited == {"2501.00001", "2501.00002"}
    assert "9999.99999" not in draft.text and "1234.56789" not in draft.text and "[1]" not in draft.text
    assert "[2501.00002]" in draft.text and "Keywords" not in draft.text
    assert draft.keywords == ["sparse retrieval", "query expansion", "scientific search", "language models",
                              "recall"]                              # 'quantum gravity' is not in the papers
    assert any("removed 4 citation" in n for n in draft.notes) and any("short" in n for n in draft.notes)


def test_finalize_short_unusable_output_falls_back_to_tfidf_and_titles():
    draft = D.finalize_draft("Sure! Here is a profile: The the the", PAPERS)
    assert len(draft.keywords) >= D.MIN_KEYWORDS
    assert all(k.lower() in (PAPERS[0].document + PAPERS[1].document).lower() for k in draft.keywords)
    assert "In [2501.00001] I worked on Sparse retrieval for long documents." in draft.text
    assert any("TF-IDF" in n for n in draft.notes) and any("short" in n for n in draft.notes)


def test_finalize_cuts_long_and_repetitive_output_at_a_sentence():
    # one sentence written sixty times with a changing number is a loop (issue #11): cut to its first sentence,
    # with a note, and flagged as too short rather than padded out with copies
    sentence = "I build sparse retrieval systems for scientific search number {} [2501.00001]."
    raw = " ".join(sentence.format(i) for i in range(60)) + " " + sentence.format(0) * 3 + " And then I"
    draft = D.finalize_draft(raw, PAPERS)
    assert draft.text.startswith("I build sparse retrieval systems for scientific search number 0 [2501.00001].")
    assert draft.text.count("number") == 1
    assert any("repeated passage was cut" in note for note in draft.notes)


def test_finalize_keeps_long_varied_output_within_the_word_limit():
    topics = ["query expansion", "learned sparse indexes", "citation graphs", "long documents", "term weighting"]
    methods = ["contrastive training", "distillation", "pseudo relevance feedback", "graph walks", "pruning",
               "curriculum learning", "hard negatives"]
    data = ["CSFCube", "MS MARCO", "TREC-COVID", "SciDocs", "arXiv abstracts", "patents", "BEIR", "S2ORC", "NQ"]
    raw = " ".join(f"In study {i} I examine {topics[i % 5]} using {methods[i % 7]} on {data[i % 9]} [2501.00001]."
                   for i in range(40)) + " And then I"
    draft = D.finalize_draft(raw, PAPERS)
    assert D.MIN_WORDS <= draft.words <= D.MAX_WORDS
    assert draft.text.endswith(".")


def test_finalize_flags_text_not_in_first_person():
    draft = D.finalize_draft("The author studies sparse retrieval [2501.00001]. " * 3, PAPERS)
    assert any("first person" in n for n in draft.notes)


def test_stream_draft_streams_then_validates(scripted_svc):
    backend = rescript(scripted_svc, ["I study sparse retrieval [2501.00001] and [3333.33333].\n"
                                      "Keywords: sparse retrieval, query expansion"])
    items = list(D.stream_draft(scripted_svc, PAPERS, max_tokens=80))
    assert all(isinstance(i, str) for i in items[:-1]) and len(items) > 3
    assert items[-2].endswith("query expansion") and isinstance(items[-1], D.Draft)
    assert "3333.33333" not in items[-1].text
    prompt = backend.calls[0].text
    assert '<source id="2501.00001">' in prompt and "first person" in prompt and backend.calls[0].max_tokens == 80
    assert scripted_svc.db.query_one("SELECT prompt_name FROM llm_calls")["prompt_name"] == "profile_draft"


def test_stream_draft_needs_material_and_reports_model_failure(scripted_svc):
    with pytest.raises(P.ProfileError, match="select at least one paper"):
        list(D.stream_draft(scripted_svc, [], "  "))
    from copilot.llm import LLMError

    rescript(scripted_svc, [LLMError("model crashed")])
    with pytest.raises(P.ProfileError, match="language model failed.*saved profile is unchanged"):
        list(D.stream_draft(scripted_svc, PAPERS))


def test_pasted_text_alone_gives_keywords_and_no_citations(scripted_svc):
    rescript(scripted_svc, ["I work on protein folding with graph networks [2501.00001]."])
    text = "I work on protein folding.\n\nGraph neural networks predict protein structure and folding paths."
    draft = D.generate_draft(scripted_svc, [], text)
    assert "2501.00001" not in draft.text and draft.paper_ids == []
    assert "protein" in " ".join(draft.keywords)


# --- save / reload / isolation -----------------------------------------------------------------------------------
def test_save_and_reload_versions_and_upsert(svc, fake_arxiv):
    assert P.load_profile(svc, "alice") is None
    first = P.save_profile(svc, "alice", "I study sparse retrieval.", "retrieval, Retrieval, search", PAPERS)
    assert (first.version, first.keywords, first.paper_ids) == (1, ["retrieval", "search"], [p.id for p in PAPERS])
    assert {p.id for p in svc.store.get_papers([p.id for p in PAPERS])} == {p.id for p in PAPERS}
    second = P.save_profile(svc, "alice", "I study dense retrieval now.", ["dense retrieval"], ["1707.08567v1"])
    assert second.version == 2 and second.paper_ids == ["1707.08567"]
    assert svc.store.get_papers(["1707.08567"])[0].title                     # fetched from arXiv and stored
    reloaded = P.load_profile(Services(svc.settings), "alice")              # a fresh process sees it
    assert reloaded == second
    with pytest.raises(P.ProfileError, match="empty"):
        P.save_profile(svc, "alice", "   ", [], [])
    assert P.load_profile(svc, "alice").version == 2


def test_each_user_reads_and_changes_only_their_own_profile(svc):
    P.save_profile(svc, "alice", "I am Alice.", ["a"], [])
    P.save_profile(svc, "bob", "I am Bob.", ["b"], [])
    P.save_profile(svc, "bob", "I am Bob, v2.", ["b"], [])
    alice, bob = P.load_profile(svc, "alice"), P.load_profile(svc, "bob")
    assert (alice.text, alice.version) == ("I am Alice.", 1)
    assert (bob.text, bob.version) == ("I am Bob, v2.", 2)
    assert P.load_profile(svc, "carol") is None


def test_ui_callbacks_use_the_request_user(svc):
    """The tab's save/load go through current_user(request): two logged-in users never see each other's."""
    import gradio as gr

    from copilot.ui import profile as tab
    from copilot.ui.common import current_user

    def request(name):
        req = gr.Request()
        req.username = name
        return req

    state = tab._candidates_state(PAPERS, {p.id: 1 for p in PAPERS}, {1: "Group 1"})
    saved = tab.save_view(svc, current_user(request("alice")), "I am <b>Alice</b>.", "x, y", state, [PAPERS[0].id])
    assert "version <span id='profile-version'>1</span>" in saved and "<b>" not in saved
    text, words, shown, _, _ = tab.load_view(svc, current_user(request("alice")))
    assert text == "I am <b>Alice</b>." and words == "x, y" and PAPERS[0].id in shown
    assert tab.load_view(svc, current_user(request("mallory")))[:3] == ("", "", "No saved profile yet.")
    assert P.load_profile(svc, "alice").paper_ids == [PAPERS[0].id]
    assert current_user(None) == P.DEFAULT_USER


def test_saved_ids_the_library_lacks_survive_the_next_save(svc, monkeypatch):
    """Papers saved while they could not be stored are listed after a reload and saved again, not dropped."""
    from copilot.ui import profile as tab

    def arxiv_down(ids):
        raise P.ArxivSourceError("arXiv unreachable")

    P.save_profile(svc, "ann", "I study retrieval.", "retrieval", [PAPERS[0]])          # stored
    monkeypatch.setattr(svc.arxiv, "by_ids", arxiv_down)
    second = P.save_profile(svc, "ann", "I study retrieval.", "retrieval", [PAPERS[0], "2502.00009"])
    assert "stay listed" in second.notice and second.paper_ids == [PAPERS[0].id, "2502.00009"]
    assert [p.id for p in svc.store.get_papers(second.paper_ids)] == [PAPERS[0].id]
    text, words, shown, papers, state = tab.load_view(svc, "ann")
    assert state["unstored"] == ["2502.00009"] and papers["value"] == [PAPERS[0].id, "2502.00009"]
    assert "2502.00009" in [value for _, value in papers["choices"]] and "2502.00009" in shown
    saved = tab.save_view(svc, "ann", text + " Still.", words, state, papers["value"])
    assert "version <span id='profile-version'>3</span>" in saved and "stay listed" in saved
    assert P.load_profile(svc, "ann").paper_ids == [PAPERS[0].id, "2502.00009"]
    tab.save_view(svc, "ann", text, words, state, [PAPERS[0].id])            # unchecked by the user: dropped
    assert P.load_profile(svc, "ann").paper_ids == [PAPERS[0].id]


def test_a_failed_load_of_the_saved_papers_says_so_and_blocks_save(svc, monkeypatch):
    from copilot.ui import profile as tab

    P.save_profile(svc, "ann", "I study retrieval.", "retrieval", PAPERS)

    def store_down(services, profile):
        raise RuntimeError("chroma unavailable")

    monkeypatch.setattr(P, "saved_papers", store_down)
    text, words, shown, papers, state = tab.load_view(svc, "ann")
    assert text == "I study retrieval." and "could not be read" in shown and "chroma unavailable" in shown
    assert papers["value"] == [] and state["load_error"]
    refused = tab.save_view(svc, "ann", text, words, state, [])
    assert refused.startswith("**Not saved:") and "would drop them" in refused
    saved = P.load_profile(svc, "ann")
    assert saved.version == 1 and saved.paper_ids == [p.id for p in PAPERS]


def test_ui_group_toggle_unchecks_and_rechecks_its_papers():
    from copilot.ui import profile as tab

    state = tab._candidates_state(PAPERS + [paper("2501.00003", "t", "a")],
                                  {"2501.00001": 1, "2501.00002": 1, "2501.00003": 2}, {1: "G1", 2: "G2"})
    update, state = tab.groups_view(state, [2], ["2501.00002", "2501.00003"])
    assert update["value"] == ["2501.00003"]
    update, state = tab.groups_view(state, [1, 2], update["value"])
    assert update["value"] == ["2501.00001", "2501.00002", "2501.00003"]


# --- CLI ----------------------------------------------------------------------------------------------------------
def test_cli_lookup_build_show(svc, fake_arxiv, capsys, monkeypatch):
    monkeypatch.setenv("COPILOT_DATA_DIR", str(svc.settings.data_dir))
    monkeypatch.setenv("COPILOT_ARXIV_API_URL", fake_arxiv.url)
    monkeypatch.setenv("COPILOT_ARXIV_DELAY", "0")
    monkeypatch.setenv("COPILOT_ARXIV_RETRIES", "0")
    code, out, _ = run_cli(capsys, "profile", "lookup", "Del Maestro, Adrian", "--max", "10", "--json")
    assert code == 0 and {c["id"] for c in out["candidates"]} == PAGE_ONE_IDS
    assert all(set(c) == {"id", "title", "date", "authors", "primary_category", "group", "found_in"}
               for c in out["candidates"])

    code, out, err = run_cli(capsys, "profile", "lookup", "<script>", "--json")
    assert code == 2 and out is None and "no HTML" in err

    code, out, err = run_cli(capsys, "profile", "show", "--user", "zoe", "--json")
    assert code == 2 and "no saved profile" in err

    code, out, err = run_cli(capsys, "profile", "build", "--user", "zoe", "--json")
    assert code == 2 and "--ids" in err


def test_draft_keywords_name_the_topics_not_latex_or_words_every_abstract_uses():
    """A user saw "I work on textbf, data, models, model, visual, large, lmms and performance." from three real
    abstracts: a LaTeX command, a singular beside its plural, and words of any ML abstract."""
    docs = ["Large vision-language models (LVLMs) suffer from long-tail data. We study tail concepts in LVLMs.",
            r"We propose \textbf{MetaLadder}, a model that recalls meta-problems for math reasoning in large models.",
            "An early-fusion multimodal model with visual tokens; the model improves performance on visual tasks."]
    terms = D.keyword_terms(docs, D.TARGET_KEYWORDS)
    assert terms and "textbf" not in terms
    assert not {"model", "models", "data", "large", "performance"} & set(terms), terms
    assert not any(D._same_word(a, b) for n, a in enumerate(terms) for b in terms[n + 1:]), terms
    assert {"metaladder", "visual"} <= set(terms), terms


def test_draft_keywords_name_a_researchers_topics_against_the_field():
    """Issue #49: from Mohit Bansal's papers in a 2,000-paper library the draft read "I work on noise, object,
    preference, generation, requires, target, multiple and language": words of one paper, or of every abstract. The
    field's other papers say which words are common, and the packaged embedder which are nearest the papers."""
    from copilot.embed import Embedder

    papers = sample_papers(2000)
    his = [p.document for p in papers if "Mohit Bansal" in p.authors]
    field = [p.document for p in papers if "Mohit Bansal" not in p.authors][::2]
    terms = D.keyword_terms(his, D.TARGET_KEYWORDS, field, Embedder().embed)
    assert len(terms) == D.TARGET_KEYWORDS, terms
    assert not {"noise", "object", "requires", "target", "multiple", "language"} & set(terms), terms
    assert any("video" in term for term in terms) and "multi-agent" in terms, terms


def is_slice(phrase: str, texts) -> bool:
    """A phrase is a slice of one of the texts (a Title-Cased word may be lowered: "Object" → "object")."""
    return any(phrase.lower() in " ".join(text.split()).lower() for text in texts)


@pytest.mark.parametrize("name", ["Qi Zhang", "Mohit Bansal"])
def test_the_draft_names_a_researcher_by_phrases_cut_from_their_titles(name):
    """Issue #59 item 9: Qi Zhang's tiny-profile draft opened "I work on embeddings manipulation, reward, ideas,
    points, mllms, rrl, capability and dimension-wise": single frequent words, and a bigram ("embeddings
    manipulation") that no text holds once its "for" is put back. The draft's phrases are noun phrases a researcher
    would write: two words or more, each a slice of one of their papers' titles or abstracts, mostly titles."""
    from copilot.embed import Embedder
    from copilot.methods import phrases

    papers = sample_papers(2014)                       # the library of the walk-through
    his = [p for p in papers if name in p.authors]
    field = [p.document for p in papers if name not in p.authors][::2]
    found = phrases.research_phrases([p.title for p in his], [f"{p.title}. {p.abstract}" for p in his], field,
                                     Embedder().embed, D.TARGET_KEYWORDS)
    assert len(found) == D.TARGET_KEYWORDS, found
    assert all(len(phrase.split()) >= 2 for phrase in found), found
    assert all(is_slice(phrase, [p.title for p in his] + [p.abstract for p in his]) for phrase in found), found
    assert sum(is_slice(phrase, [p.title for p in his]) for phrase in found) >= D.SENTENCE_PHRASES, found
    assert not {"rrl", "ideas", "points", "reward", "supervised", "videos", "generates"} & set(found), found


# --- the real local model ----------------------------------------------------------------------------------------
def test_the_tiny_profile_drafts_by_quoting_each_papers_key_sentence(svc, fake_arxiv):
    from copilot.methods.quotes import CLOSE_QUOTE, OPEN_QUOTE

    papers = [c.paper for c in L.lookup_author(svc, "Adrian Del Maestro", max_results=10).candidates[:3]]
    assert svc.model_profile.tiny
    draft = D.generate_draft(svc, papers)
    assert draft.quoted and draft.notice == D.QUOTED_NOTICE and draft.text.startswith("I work on ")
    opening = draft.text.split("\n")[0][len("I work on "):].rstrip(".")
    named = re.split(r", | and (?=[^,]*$)", opening)
    assert len(named) >= 3 and all(len(phrase.split()) >= 2 for phrase in named), opening     # issue #59 item 9
    assert all(is_slice(phrase, [p.title for p in papers] + [p.abstract for p in papers]) for phrase in named), named
    quoted = re.findall(rf"In \[([^\]]+)\] we wrote: {OPEN_QUOTE}([^{CLOSE_QUOTE}]+){CLOSE_QUOTE}", draft.text)
    assert [pid for pid, _ in quoted] == [p.id for p in papers]
    for (_pid, sentence), paper in zip(quoted, papers):
        assert sentence in " ".join(paper.abstract.split())
    assert D.MIN_KEYWORDS <= len(draft.keywords) <= P.MAX_KEYWORDS
    assert svc.db.query_one("SELECT COUNT(*) AS n FROM llm_calls")["n"] == 0


def test_generation_with_the_real_local_model(svc, fake_arxiv):
    """The writing path (COPILOT_MODEL_PROFILE=capable) on the packaged model."""
    from copilot.model_profile import CAPABLE, ModelProfile

    svc.model_profile = ModelProfile(CAPABLE, "test: the writing path", small=True)   # the 135M let write
    papers = [c.paper for c in L.lookup_author(svc, "Adrian Del Maestro", max_results=10).candidates[:2]]
    draft = D.generate_draft(svc, papers, max_tokens=48)
    allowed = {p.id for p in papers}
    assert draft.raw.startswith(f"In [{papers[0].id}] I ")    # the local model writes under profile_grammar
    from copilot.records import ARXIV_ID
    cited = {m.group("base") for m in ARXIV_ID.finditer(draft.text)}
    assert cited and cited <= allowed
    assert D.MIN_KEYWORDS <= len(draft.keywords) <= P.MAX_KEYWORDS
    call = svc.db.query_one("SELECT backend, prompt_name, output, error FROM llm_calls")
    assert (call["backend"], call["prompt_name"], call["error"]) == ("local", "profile_draft", None)
    profile = P.save_profile(svc, P.DEFAULT_USER, draft.text, draft.keywords, papers)
    assert P.load_profile(svc, P.DEFAULT_USER).text == draft.text and profile.paper_ids == [p.id for p in papers]


def test_cli_build_then_show(scripted_svc, fake_arxiv, capsys, monkeypatch):
    """`profile build` runs the same generation and validation (scripted model here; the real model is
    exercised above) and saves; `profile show` reads it back."""
    import copilot.cli.profile

    backend = rescript(scripted_svc, ["I study quantum field theory [1707.08567] and [2222.22222].\n"
                                      "Keywords: gravity, black holes"])
    monkeypatch.setattr(copilot.cli.profile, "Services", lambda: scripted_svc)
    code, out, err = run_cli(capsys, "profile", "build", "--ids", "1707.08567", "--user", "zoe",
                             "--max-tokens", "32", "--json")
    assert code == 0 and set(out) == {"user", "text", "keywords", "paper_ids", "version"}
    assert (out["user"], out["paper_ids"], out["version"]) == ("zoe", ["1707.08567"], 1)
    assert "[1707.08567]" in out["text"] and "2222.22222" not in out["text"] and "note:" in err
    assert backend.calls[0].max_tokens == 32 and '<source id="1707.08567">' in backend.calls[0].text
    code, shown, _ = run_cli(capsys, "profile", "show", "--user", "zoe", "--json")
    assert code == 0 and shown["text"] == out["text"] and shown["version"] == 1
    code, _, err = run_cli(capsys, "profile", "show", "--json")
    assert code == 2 and "no saved profile for user 'local'" in err


# --- common surnames and the local library (issue #18, #20) ----------------------------------------------------
TEMPLATE_FEED = DEL_MAESTRO.read_text(encoding="utf-8")


def synthetic_feed(entries: list[tuple[str, str, list[str]]]) -> str:
    """A feed in the recorded format whose entries are (id, YYYY-MM-DD, authors), built from a recorded entry."""
    head, rest = TEMPLATE_FEED.split("<entry>", 1)
    head = re.sub(r"(<opensearch:totalResults[^>]*>)\d+", rf"\g<1>{len(entries)}", head)
    template = re.search(r"<entry>.*?</entry>", "<entry>" + rest, re.S).group(0)
    out = []
    for pid, day, authors in entries:
        entry = template.replace("1201.4869", pid).replace("2012-01-23", day)
        entry = re.sub(r"<title>.*?</title>", f"<title>Study {pid} of graph reasoning</title>", entry)
        names = "".join(f"<author><name>{a}</name></author>" for a in authors)
        out.append(re.sub(r"<author>.*</author>", names, entry, flags=re.S))
    return head + "\n".join(out) + "\n</feed>\n"


def test_a_common_surname_does_not_crowd_out_the_persons_papers(svc, fake_arxiv):
    """'chen, muhao' found 5 of 10 papers: the initial's query was cut at the newest 50, most of them other
    M. Chens. The full name is asked first and read to the end."""
    own = [(f"2401.{n:05d}", f"2024-01-{n + 1:02d}", ["Muhao Chen", "Dan Roth"]) for n in range(10)]
    others = [(f"2501.{n:05d}", f"2025-0{n % 9 + 1}-10", [name, "Someone Else"])
              for n, name in enumerate(["Ming Chen", "Mei Chen", "M. Chen"] * 20)]
    fake_arxiv.add_response(author_params('au:"muhao chen"', 0), synthetic_feed(own))
    fake_arxiv.add_response(author_params("au:chen_m", 0), synthetic_feed(others + own))
    result = L.lookup_author(svc, "chen, muhao", max_results=50)
    assert {c.paper.id for c in result.candidates} == {pid for pid, _, _ in own}
    assert [q["search_query"] for q in fake_arxiv.queries] == ['au:"muhao chen"']   # no broadening needed
    assert result.query == 'au:"muhao chen"'


def test_a_rare_name_found_offline_in_the_library_is_one_group(tmp_path, monkeypatch):
    """Issue #49: Mohit Bansal's seven papers among the corpus's first 2,000 were shown in groups, CoKe as a
    namesake's. A library of 150 papers plus his: the field's names say his full name is rare, so one group."""
    clean_env(monkeypatch)
    offline = profile_services(tmp_path / "off", "http://127.0.0.1:9/api/query")
    papers = sample_papers(2000)
    his = [p for p in papers if "Mohit Bansal" in p.authors]
    from copilot.features.library import ingestor

    ingestor(offline).run("test", [p for p in papers[:150] if p not in his] + his)
    result = L.lookup_author(offline, "Mohit Bansal")
    assert len(his) == 7 and {c.paper.id for c in result.candidates} == {p.id for p in his}
    assert len(result.groups) == 1, [g.label() for g in result.groups]
    assert "different people" not in result.message


def test_lookup_works_offline_from_the_library_and_merges_with_arxiv(tmp_path, fake_arxiv, monkeypatch):
    clean_env(monkeypatch)
    offline = profile_services(tmp_path / "off", "http://127.0.0.1:9/api/query")
    papers = sample_papers(120)
    from copilot.features.library import ingestor

    ingestor(offline).run("test", papers)
    author = papers[7].authors[0]
    expected = {p.id for p in papers if any(L.matching_author(L.parse_name(author), [a]) for a in p.authors)}
    result = L.lookup_author(offline, author)
    assert {c.paper.id for c in result.candidates} == expected
    assert all(c.found_in == "library" for c in result.candidates)
    assert "arXiv could not be searched" in result.message and "in this library" in result.message
    with pytest.raises(P.ProfileError, match="arXiv could not be searched"):
        L.lookup_author(offline, "Zebulon Quasimodo")           # nobody of that name here, and arXiv is down

    online = profile_services(tmp_path / "on", fake_arxiv.url)
    ingestor(online).run("test", papers[:20])
    result = L.lookup_author(online, "Adrian Del Maestro", max_results=10)   # arXiv only: the library has none
    assert {c.found_in for c in result.candidates} == {"arxiv"}
