"""Profile tab in Chromium: look up an author on the fake arXiv, uncheck a paper, generate a draft with the real
local model, edit it, save, reload the page and find the saved profile."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from copilot.features.bibtex import bibtex_text
from tests.conftest import sample_papers
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)

DROPPED = "1201.4869"
KEYWORDS = "helium, superfluids, <i>quantum</i> Monte Carlo, Luttinger liquids, entanglement"


def test_lookup_uncheck_generate_edit_save_reload(app_server, page, fake_arxiv):
    url = app_server(env={"COPILOT_ARXIV_API_URL": fake_arxiv.url, "COPILOT_ARXIV_DELAY": "0",
                          "COPILOT_PROFILE_MAX_PAPERS": "10", "COPILOT_PROFILE_MAX_TOKENS": "32",
                          "COPILOT_PROFILE_PROMPT_PAPERS": "1",
                          "COPILOT_LLM_TIMEOUT": "900"})
    page.goto(url)
    expect(page.locator("#profile-saved")).to_contain_text("No saved profile yet", timeout=60_000)

    page.locator("#profile-name textarea, #profile-name input").first.fill("Del Maestro, Adrian")
    page.locator("#profile-find").click()
    expect(page.locator("#profile-status")).to_contain_text("10 papers found for Adrian Del Maestro",
                                                           timeout=60_000)
    boxes = page.locator("#profile-papers input[type=checkbox]")
    expect(boxes).to_have_count(10)
    # only the largest group written as typed ("Adrian Del Maestro") is checked at first (issue #59); the researcher
    # checks the other groups that are theirs (the "A. Del Maestro" papers here), and their papers follow
    groups = page.locator("#profile-groups input[type=checkbox]")
    expect(page.locator("#profile-groups input[type=checkbox]:checked")).to_have_count(1)
    checked = page.locator("#profile-papers input[type=checkbox]:checked")
    assert checked.count() < 10
    for n in range(groups.count()):
        if not groups.nth(n).is_checked():
            before = checked.count()
            groups.nth(n).check()
            expect(checked).not_to_have_count(before)         # this group's papers followed: then the next one
    expect(page.locator("#profile-papers input[type=checkbox]:checked")).to_have_count(10)
    page.locator("#profile-papers label").filter(has_text=DROPPED).locator("input").uncheck()
    expect(page.locator("#profile-papers input[type=checkbox]:checked")).to_have_count(9)
    assert [q["search_query"] for q in fake_arxiv.queries] == ['au:"adrian del maestro"', "au:del_maestro_a",
                                                              "au:del_maestro"]

    page.locator("#profile-generate").click()
    expect(page.locator("#profile-save")).to_be_disabled(timeout=10_000)   # no saving a half-written draft
    notice = page.locator("#profile-notice")
    expect(notice).to_contain_text("This draft quotes your papers", timeout=900_000)   # tiny default: no model words
    expect(page.locator("#profile-save")).to_be_enabled(timeout=30_000)
    text_box = page.locator("#profile-text textarea")
    draft = text_box.input_value()
    assert draft.strip() and DROPPED not in draft
    assert DROPPED not in notice.inner_text()            # the unchecked paper is not among the sources
    keywords = page.locator("#profile-keywords textarea, #profile-keywords input").first
    assert len([k for k in keywords.input_value().split(",") if k.strip()]) >= 5
    page.screenshot(path="/tmp/profile-draft.png", full_page=True)

    edited = draft + "\n\nEdited by me: <b>not bold</b>."
    text_box.fill(edited)
    keywords.fill(KEYWORDS)
    page.locator("#profile-save").click()
    saved = page.locator("#profile-saved")
    expect(saved).to_contain_text("version 1", timeout=180_000)    # first save loads the embedder
    expect(saved).to_contain_text("<i>quantum</i> Monte Carlo")     # shown as text, not rendered
    assert saved.locator("i").count() == 0

    page.reload()
    expect(page.locator("#profile-saved")).to_contain_text("version 1", timeout=60_000)
    expect(page.locator("#profile-text textarea")).to_have_value(edited)
    expect(page.locator("#profile-keywords textarea, #profile-keywords input").first).to_have_value(KEYWORDS)
    links = page.locator("#profile-saved a")
    expect(links).to_have_count(9)
    hrefs = [links.nth(i).get_attribute("href") for i in range(9)]
    assert not any(href.endswith(DROPPED) for href in hrefs)
    assert all(re.match(r"https://arxiv.org/abs/", href) for href in hrefs)
    page.screenshot(path="/tmp/profile-saved.png", full_page=True)


def test_lookup_by_name_offline_finds_the_library_papers(app_server, page, tmp_path):
    """arXiv unreachable: the name is looked up in the library, said so, and the other inputs are in view; a BibTeX
    file's arXiv entries become the candidate papers."""
    url = app_server(preload=60, env={"COPILOT_ARXIV_API_URL": "http://127.0.0.1:9/api/query",
                                      "COPILOT_ARXIV_RETRIES": "0", "COPILOT_ARXIV_TIMEOUT": "2"})
    author = sample_papers(60)[11].authors[0]
    page.goto(url)
    expect(page.locator("#profile-ids textarea")).to_be_visible(timeout=60_000)     # not folded away
    expect(page.locator("#profile-pasted textarea")).to_be_visible()
    page.locator("#profile-name textarea, #profile-name input").first.fill(author)
    page.locator("#profile-find").click()
    status = page.locator("#profile-status")
    expect(status).to_contain_text("arXiv could not be searched", timeout=60_000)
    expect(status).to_contain_text("in this library")
    labels = page.locator("#profile-papers label")
    expect(labels.first).to_contain_text("in your library")
    expect(labels.filter(has_text=sample_papers(60)[11].id)).to_have_count(1)

    # a BibTeX file's arXiv entries become the candidate papers (here, two papers of the library)
    chosen = sample_papers(60)[3:5]
    bib = tmp_path / "mine.bib"
    bib.write_text(bibtex_text(chosen) + "@article{x, title={Not arXiv}, journal={Nature}}\n", encoding="utf-8")
    page.locator("#profile-bibtex input[type=file]").set_input_files(str(bib))
    expect(status).to_contain_text("2 paper(s) from the arXiv entries of your BibTeX file; 1 other entries skipped",
                                   timeout=60_000)
    expect(page.locator("#profile-papers input[type=checkbox]:checked")).to_have_count(2)
