"""The For you tab in Chromium (issue #18): new papers ranked by the saved profile; "not interested" hides a paper
and "more like this" re-ranks; the private Atom feed URL shown on the tab serves the list, a wrong token gets 404."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from xml.etree import ElementTree

import pytest
from playwright.sync_api import expect

from copilot.services import Services
from tests.conftest import make_settings, sample_papers


def card_box(page, paper_id: str):
    """The card of one paper with its own buttons."""
    return page.locator(".feed-card-box").filter(has=page.locator(f'.feed-card[data-id="{paper_id}"]'))


def test_for_you_feedback_and_the_atom_feed(app_server, preloaded, tmp_path, page):
    data_dir = tmp_path / "feed-data"
    shutil.copytree(preloaded(80), data_dir)
    mine = sample_papers(80)[:3]
    Services(make_settings(data_dir)).profiles.save("local", "I study retrieval.", ["retrieval"], [p.id for p in mine])
    url = app_server(env={"COPILOT_DATA_DIR": str(data_dir)})

    page.goto(url)
    page.get_by_role("tab", name="For you").click()
    cards = page.locator("#feed-list .feed-card")
    expect(cards.first).to_be_visible(timeout=60_000)
    first_id = cards.first.get_attribute("data-id")
    first_title = cards.first.locator("a").inner_text()
    expect(page.locator("#feed-list")).not_to_contain_text("all your feedback")    # no feedback given yet
    assert first_id not in {p.id for p in mine}

    card_box(page, first_id).locator(".feed-not").click()     # issue #38: one click on the card itself
    expect(page.locator("#feed-note")).to_contain_text("hidden", timeout=30_000)
    expect(page.locator("#feed-note")).to_contain_text(first_title[:30])
    expect(page.locator(f'#feed-list .feed-card[data-id="{first_id}"]')).to_have_count(0)
    expect(page.locator("#feed-list")).to_contain_text("1 hidden as not interesting")

    before = [cards.nth(i).get_attribute("data-id") for i in range(cards.count())]
    liked = before[-1]
    card_box(page, liked).locator(".feed-more").click()
    expect(page.locator("#feed-note")).to_contain_text(f"({liked})", timeout=30_000)
    expect(page.locator("#feed-note")).to_contain_text("More like")
    expect(page.locator(f'#feed-list .feed-card[data-id="{liked}"] .feed-liked')).to_be_visible()
    after = [cards.nth(i).get_attribute("data-id") for i in range(cards.count())]
    assert after.index(liked) < before.index(liked)

    page.get_by_text("Your private Atom feed").click()
    feed_url = page.locator("#feed-url").inner_text()
    with urllib.request.urlopen(feed_url, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("application/atom+xml")
        root = ElementTree.fromstring(response.read())
    entries = root.findall("{http://www.w3.org/2005/Atom}entry")
    assert entries and first_id not in ElementTree.tostring(root, encoding="unicode")   # hidden there too
    for wrong in (feed_url.replace(".atom", "x.atom"), url + "feed/.atom", url + "feed/" + "A" * 32 + ".atom"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(wrong, timeout=30)
        assert refused.value.code == 404
