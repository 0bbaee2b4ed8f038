"""Search (issue #20): words and meaning fused by rank over the real stores, filters applied before the cut, sort by
date, a named arXiv id first, clear messages for bad input; the same from `python -m copilot search`."""

from __future__ import annotations

import json

import pytest

from copilot.errors import UserError
from copilot.features.search import query_words, search_papers
from copilot.ui.search import highlighted, results_html
from tests.conftest import import_papers
from tests.helpers import run_cli, subprocess_env


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from copilot.services import Services
    from tests.conftest import make_settings

    services = Services(make_settings(tmp_path_factory.mktemp("search") / "data"))
    papers = import_papers(services, 300)
    return services, papers


def test_words_and_meaning_find_a_paper_by_its_title(library):
    services, papers = library
    target = papers[17]
    result = search_papers(services, target.title)
    assert result.hits[0].paper.id == target.id
    assert set(result.hits[0].ranks) == {"meaning", "words"}      # both lists found it


def test_filters_apply_before_the_cut(library):
    services, papers = library
    category = papers[3].categories[-1]
    days = sorted(p.published for p in papers)
    start, end = days[50], days[200]
    result = search_papers(services, "language models", start.isoformat(), end.isoformat(), [category], limit=100)
    expected = {p.id for p in papers if start <= p.published <= end and category in p.categories}
    assert result.matched == len(expected) and result.hits
    assert {h.paper.id for h in result.hits} <= expected
    # every paper passing the filters is reachable, however weak its match: the lists were cut after filtering
    assert len(result.hits) == min(100, len(expected)) or len(expected) > 100


def test_author_filter_and_date_sort(library):
    services, papers = library
    author = papers[5].authors[0]
    result = search_papers(services, "", author=author, sort="date")
    assert papers[5].id in {h.paper.id for h in result.hits}
    dates = [h.paper.published for h in result.hits]
    assert dates == sorted(dates, reverse=True)
    by_date = search_papers(services, "learning", sort="date", limit=10)
    assert [h.paper.published for h in by_date.hits] == sorted((h.paper.published for h in by_date.hits),
                                                               reverse=True)


def test_sorting_by_date_orders_the_relevant_results_and_keeps_the_query(library):
    """Issue #59: "jailbreak defense" sorted by date listed the filters' newest papers, none about jailbreaks: the
    newest 20 of the 200 fused candidates, however far from the query."""
    from copilot.features.search import DATE_FLOOR, _closeness, _holds_words

    services, papers = library
    target = papers[17]
    by_date = search_papers(services, target.title, sort="date")
    ids = [h.paper.id for h in by_date.hits]
    assert target.id in ids and len(ids) < 20, len(ids)
    close = _closeness(services, target.title, ids)
    words = query_words(target.title)
    assert all(close[h.paper.id] >= DATE_FLOOR or _holds_words(h.paper, words) for h in by_date.hits)
    assert [h.paper.published for h in by_date.hits] == sorted((h.paper.published for h in by_date.hits),
                                                               reverse=True)
    assert "Newest first among the" in by_date.message and "Newest first" in results_html(by_date)
    relevance = [h.paper.id for h in search_papers(services, target.title, limit=100).hits]
    assert set(ids) <= set(relevance)


def test_a_pasted_arxiv_id_comes_first(library):
    services, papers = library
    target = papers[42]
    result = search_papers(services, f"https://arxiv.org/abs/{target.id} attention")
    assert result.hits[0].paper.id == target.id


@pytest.mark.parametrize("kwargs, message", [
    ({"text": ""}, "type words"),
    ({"text": "x", "date_from": "2025-05-01", "date_to": "2025-04-01"}, "date range is empty"),
    ({"text": "x", "date_from": "last week"}, "not a date"),
    ({"text": "x" * 600}, "at most"),
    ({"text": "x", "author": "<img src=x>"}, "author"),
])
def test_bad_input_gets_a_clear_message(library, kwargs, message):
    services, _ = library
    with pytest.raises(UserError, match=message):
        search_papers(services, **kwargs)


def test_no_hits_and_html_in_the_query_are_shown_as_text(library):
    services, _ = library
    result = search_papers(services, "<script>alert(1)</script>", date_from="1990-01-01", date_to="1990-12-31")
    assert result.hits == [] and "No paper" in result.message
    html = results_html(result)
    assert "<script>" not in html
    marked = highlighted("A & B <i>retrieval</i> Retrieval", ["retrieval", "amp"])
    assert marked == "A &amp; B &lt;i&gt;<mark>retrieval</mark>&lt;/i&gt; <mark>Retrieval</mark>"


def test_the_command_line_prints_json(library):
    services, papers = library
    env = subprocess_env(services.settings.data_dir)
    category = papers[0].categories[0]
    done = run_cli(["search", papers[9].title, "--category", category, "--limit", "5", "--json"], env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert len(result["hits"]) <= 5 and all(category in hit["categories"] for hit in result["hits"])
    assert {"id", "title", "authors", "date", "abs_url", "pdf_url", "score"} <= set(result["hits"][0])
    bad = run_cli(["search", "x", "--from", "2025-05-01", "--to", "2025-01-01", "--json"], env)
    assert bad.returncode == 2 and "date range is empty" in bad.stderr


def test_bibtex_export_of_library_papers_and_a_profile_built_from_a_bibtex_file(library, tmp_path):
    """`export bibtex` prints the papers' BibTeX; the same file given to `profile build --bibtex` makes those papers
    the profile's (issue #18)."""
    services, papers = library
    env = subprocess_env(services.settings.data_dir)
    ids = [papers[2].id, papers[3].id]
    done = run_cli(["export", "bibtex", "--ids", ",".join(ids)], env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("@misc{") == 2 and f"eprint = {{{ids[0]}}}" in done.stdout
    bib = tmp_path / "mine.bib"
    bib.write_text(done.stdout + "\n@article{other, title={Not arXiv}, journal={Nature}}\n", encoding="utf-8")
    built = run_cli(["profile", "build", "--bibtex", str(bib), "--user", "bibber", "--max-tokens", "24", "--json"],
                    env)
    assert built.returncode == 0, built.stderr[-2000:]
    assert json.loads(built.stdout)["paper_ids"] == ids and "1 other entries skipped" in built.stderr
    unknown = run_cli(["export", "bibtex", "--ids", f"{ids[0]},2999.00001"], env)
    assert unknown.returncode == 2 and "not in the library: 2999.00001" in unknown.stderr
    empty = tmp_path / "empty.bib"
    empty.write_text("@article{x, title={A}, journal={B}}", encoding="utf-8")
    refused = run_cli(["profile", "build", "--bibtex", str(empty), "--user", "bibber", "--json"], env)
    assert refused.returncode == 2 and "none of the 1 entries" in refused.stderr
    shown = run_cli(["profile", "show", "--user", "bibber", "--json"], env)
    assert json.loads(shown.stdout)["version"] == 1                   # the refused file saved nothing


def test_warming_up_at_start_loads_what_the_first_question_needs_and_writes_nothing(library, tmp_path):
    """app.py warms up in the background at start: a fresh process's first question paid ~10 s of loading (the
    embedding model, the store, the word index, the catalog, the model profile) before it; after, ~0.2 s."""
    from copilot.features.search import warm_up
    from copilot.services import Services
    from tests.conftest import make_settings

    services, papers = library
    fresh = Services(services.settings)       # nothing loaded yet: its cached parts are made on first use
    warm_up(fresh)
    assert {"store", "lexical", "catalog", "model_profile"} <= set(vars(fresh))
    assert fresh.store.count("paper") == len(papers)
    assert sum(fresh.chat_log.turn_counts().values()) == 0      # no turn recorded: a search, not a question

    empty = Services(make_settings(tmp_path / "empty"))
    warm_up(empty)                            # an empty library: the model only, and no error
    assert empty.store.count("paper") == 0 and "model_profile" in vars(empty)
