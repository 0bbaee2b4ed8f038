"""The real `arxiv` client through ArxivSource against the loopback fake arXiv (verbatim recorded answers)."""

from __future__ import annotations

import json
import re
import time
from datetime import date

import arxiv
import pytest

from copilot.features.library import ingest_history, ingestor
from copilot.services import Services
from copilot.sources.arxiv_api import ArxivSource, ArxivSourceError
from tests.conftest import ARXIV_RESPONSES, make_settings
from tests.fake_arxiv import fake_arxiv  # noqa: F401 (fixture)

RECORDED = ARXIV_RESPONSES / "arxiv.py_2026_recorded"


def recorded_ids(name: str) -> list[str]:
    """Entry ids (without version) of a recorded answer, read straight from the file."""
    body = json.loads((RECORDED / name).read_text())["body"]
    return [re.sub(r"v\d+$", "", m) for m in re.findall(r"<id>https?://arxiv\.org/abs/([^<]+)</id>", body)]


def source(fake, tmp_path, page_size: int = 100, **overrides) -> ArxivSource:
    return ArxivSource(make_settings(tmp_path / "data", arxiv_api_url=fake.url, **overrides), page_size=page_size)


def test_id_lookup_new_old_and_versioned_ids(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path)
    [paper] = src.by_ids(["1605.08386"])
    assert paper.id == "1605.08386"
    assert paper.title == "Heat-bath random walks with Markov bases"
    assert paper.authors[:2] == ["Caprice Stanley", "Tobias Windisch"]
    assert paper.published == date(2016, 5, 26)
    assert paper.abstract and "\n" not in paper.abstract

    [old] = src.by_ids(["https://arxiv.org/abs/astro-ph/0601001"])
    assert old.id == "astro-ph/0601001" and old.title.startswith("Frequency of Hot Jupiters")
    [versioned] = src.by_ids(["quant-ph/0201082v1"])
    assert (versioned.id, versioned.version) == ("quant-ph/0201082", 1)
    # one of two ids does not exist: arXiv answers with the other one only
    assert [p.id for p in src.by_ids(["0808.05394", "1707.08567"])] == ["1707.08567"]
    assert all("/api/query?" in r for r in fake_arxiv.requests)
    assert fake_arxiv.queries[0]["id_list"] == "1605.08386"


def test_empty_result_and_unknown_query(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path)
    assert src.by_ids(["0000.0000"]) == []
    assert list(src.search("ti:nothing-recorded-for-this", max_results=5)) == []
    assert len(fake_arxiv.requests) == 2


def test_paging_through_recorded_pages(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path, page_size=10)
    papers = list(src.search("testing", max_results=30, newest_first=False))
    expected = (recorded_ids("q_testing_s0_m10_bc5a6c384fe9.json") + recorded_ids("q_testing_s10_m10_34e56e15aaac.json")
                + recorded_ids("q_testing_s20_m10_348a237fecab.json"))
    assert len(expected) == 30
    assert [p.id for p in papers] == expected
    assert [q["start"] for q in fake_arxiv.queries] == ["0", "10", "20"]
    assert all(p.title and p.abstract and p.authors and p.categories for p in papers)


def test_author_query_and_old_feed_format(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path, page_size=10)
    papers = list(src.by_author("au:del_maestro", max_results=10))
    assert len(papers) == 10
    assert all(any("Maestro" in a for a in p.authors) for p in papers)
    # the 2017 "deep dream" page (orijtech recording)
    dream = list(src.search("deep dream", max_results=10, newest_first=False))
    assert len({p.id for p in dream}) == 10 and all(p.published.year <= 2017 for p in dream)


def test_invalid_id_is_refused_before_any_request(fake_arxiv, tmp_path):
    with pytest.raises(ArxivSourceError, match="not an arXiv id"):
        source(fake_arxiv, tmp_path).by_ids(["abc"])
    assert fake_arxiv.requests == []


def test_http_400_error_feed_gives_clear_error(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path)
    with pytest.raises(ArxivSourceError) as caught:
        list(src._run(arxiv.Search(id_list=["abc"])))  # the recorded request arXiv answered with HTTP 400
    message = str(caught.value)
    assert "HTTP 400" in message and "incorrect id format for abc" in message


def test_503_then_success_is_retried(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path, arxiv_retries=1)
    fake_arxiv.fail_next(1, status=503)
    [paper] = src.by_ids(["1605.08386"])
    assert paper.id == "1605.08386"
    assert len(fake_arxiv.requests) == 2 and fake_arxiv.requests[0] == fake_arxiv.requests[1]


def test_503_every_time_gives_clear_error(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path, arxiv_retries=1)
    fake_arxiv.fail_next(5, status=503)
    with pytest.raises(ArxivSourceError, match=r"HTTP 503 \(after 2 tries\)"):
        src.by_ids(["1605.08386"])


def test_timeout_gives_clear_error(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path, arxiv_timeout=0.5)
    fake_arxiv.hang_next(1, seconds=20)
    with pytest.raises(ArxivSourceError, match="did not answer in time"):
        src.by_ids(["1605.08386"])


def test_a_drip_of_bytes_meets_the_whole_call_deadline(fake_arxiv, tmp_path):
    # issue #19: one byte every 2 s against a 5 s timeout hung ingestion until it was killed at 120 s
    src = source(fake_arxiv, tmp_path, arxiv_timeout=1.5, arxiv_retries=1)
    fake_arxiv.drip_next(2, interval=0.5)       # a per-read timeout of 1.5 s never fires on this
    started = time.monotonic()
    with pytest.raises(ArxivSourceError, match="did not answer in time"):
        src.by_ids(["1605.08386"])
    assert time.monotonic() - started < 2 * 1.5 + 3      # two tries at most, each within its deadline


def test_a_drip_of_the_status_line_and_headers_meets_the_deadline(fake_arxiv, tmp_path):
    # issue #34: the status line and headers at one byte a second held each action 95 s at a 10 s timeout
    src = source(fake_arxiv, tmp_path, arxiv_timeout=1.5, arxiv_retries=2)
    fake_arxiv.drip_headers_next(3, interval=0.2)      # each byte well within a per-read timeout
    started = time.monotonic()
    with pytest.raises(ArxivSourceError, match="did not answer in time"):
        src.by_ids(["1605.08386"])
    assert time.monotonic() - started < 1.5 + 1.0      # one deadline, not retried into a longer one


@pytest.mark.parametrize("mode", ["truncate", "garbage"])
def test_garbled_body_gives_clear_error(fake_arxiv, tmp_path, mode):
    src = source(fake_arxiv, tmp_path, arxiv_retries=1)
    fake_arxiv.garble_next(2, mode=mode)  # the first try and its retry
    with pytest.raises(ArxivSourceError, match="truncated or garbled"):
        src.by_ids(["1707.08567"])


def test_garbled_body_once_is_retried(fake_arxiv, tmp_path):
    src = source(fake_arxiv, tmp_path, arxiv_retries=1)
    fake_arxiv.garble_next(1, mode="truncate")
    assert [p.id for p in src.by_ids(["1707.08567"])] == ["1707.08567"]


def test_truncated_page_during_ingestion_stores_nothing(fake_arxiv, tmp_path):
    services = Services(make_settings(tmp_path / "data", arxiv_api_url=fake_arxiv.url, arxiv_retries=1))
    fake_arxiv.garble_next(2, mode="truncate")
    with pytest.raises(ArxivSourceError):
        ingestor(services).run("arxiv:test", services.arxiv.search("testing", max_results=10, newest_first=False))
    assert services.store.count("paper") == 0
    [run] = ingest_history(services)
    assert run["status"] == "failed" and "truncated or garbled" in run["error"]

    # the same ingestion with a healthy server stores the ten papers
    counts = ingestor(services).run("arxiv:test", services.arxiv.search("testing", max_results=10, newest_first=False))
    assert counts.added == 10 and services.store.count("paper") == 10
    assert sorted(p.id for p in services.store.get_papers(recorded_ids("q_testing_s0_m100_cfe7536492ca.json")[:10])) \
        == sorted(recorded_ids("q_testing_s0_m100_cfe7536492ca.json")[:10])
