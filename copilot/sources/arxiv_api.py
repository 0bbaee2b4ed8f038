"""arXiv API access through the `arxiv` package: by categories and date window, by id list, by author.

`COPILOT_ARXIV_API_URL` replaces the endpoint (tests point it at a loopback server). Every request has a
timeout; the client keeps the API's politeness delay between requests and retries failed pages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone

import arxiv
import requests

from copilot.config import Settings
from copilot.records import Paper, clean_text, parse_arxiv_id

log = logging.getLogger(__name__)


class ArxivSourceError(RuntimeError):
    """arXiv could not be queried; the message says what happened."""


class _TimeoutSession(requests.Session):
    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", self.timeout)
        return super().request(*args, **kwargs)


class _StrictClient(arxiv.Client):
    """The arxiv client, but a feed that does not parse is an error instead of a silent empty page."""

    def _parse_feed(self, url: str, first_page: bool = True, _try_index: int = 0):
        feed = super()._parse_feed(url, first_page=first_page, _try_index=_try_index)
        if feed.malformed:
            raise ArxivSourceError(f"arXiv returned a malformed feed ({feed.error})")
        return feed


def paper_from_result(result: arxiv.Result) -> Paper:
    parsed = parse_arxiv_id(result.entry_id.rsplit("/abs/", 1)[-1])
    if not parsed:
        raise ArxivSourceError(f"unexpected entry id {result.entry_id!r}")
    paper_id, version = parsed
    categories = list(dict.fromkeys([result.primary_category, *result.categories]))
    return Paper(id=paper_id, title=clean_text(result.title), abstract=clean_text(result.summary),
                 authors=[clean_text(a.name) for a in result.authors], categories=[c for c in categories if c],
                 published=result.published.date(), version=version or 1,
                 updated=(result.updated or result.published).date(), comment=clean_text(result.comment))


def _window(days: int, now: datetime | None) -> str:
    end = now or datetime.now(timezone.utc)
    start = end - timedelta(days=days)
    return f"submittedDate:[{start:%Y%m%d%H%M} TO {end:%Y%m%d%H%M}]"


class ArxivSource:
    def __init__(self, settings: Settings, page_size: int = 100) -> None:
        self.client = _StrictClient(page_size=page_size, delay_seconds=settings.arxiv_delay,
                                    num_retries=settings.arxiv_retries)
        self.client._session = _TimeoutSession(settings.arxiv_timeout)
        if settings.arxiv_api_url:
            self.client.query_url_format = settings.arxiv_api_url.rstrip("?") + "?{}"
        self.endpoint = self.client.query_url_format.split("?")[0]

    def _run(self, search: arxiv.Search) -> Iterator[Paper]:
        try:
            for result in self.client.results(search):
                yield paper_from_result(result)
        except ArxivSourceError:
            raise
        except arxiv.HTTPError as error:
            raise ArxivSourceError(f"arXiv answered HTTP {error.status} (after {error.retry + 1} tries)") from None
        except arxiv.UnexpectedEmptyPageError:
            raise ArxivSourceError("arXiv returned an unexpectedly empty page; try again later") from None
        except requests.exceptions.Timeout:
            raise ArxivSourceError(f"arXiv did not answer in time ({self.endpoint})") from None
        except requests.exceptions.RequestException as error:
            raise ArxivSourceError(f"cannot reach arXiv at {self.endpoint} ({type(error).__name__})") from None
        except Exception as error:  # the feed parser's errors on a garbled body
            raise ArxivSourceError(f"arXiv response could not be read ({type(error).__name__}: {error})"[:300]) from None

    def by_ids(self, ids: Sequence[str]) -> list[Paper]:
        wanted = []
        for raw in ids:
            parsed = parse_arxiv_id(raw)
            if not parsed:
                raise ArxivSourceError(f"not an arXiv id: {raw[:60]!r}")
            wanted.append(f"{parsed[0]}v{parsed[1]}" if parsed[1] else parsed[0])
        if not wanted:
            return []
        return list(self._run(arxiv.Search(id_list=wanted, max_results=len(wanted))))

    def search(self, query: str, max_results: int = 50, newest_first: bool = True) -> Iterator[Paper]:
        sort = arxiv.SortCriterion.SubmittedDate if newest_first else arxiv.SortCriterion.Relevance
        return self._run(arxiv.Search(query=query, max_results=max_results, sort_by=sort,
                                      sort_order=arxiv.SortOrder.Descending))

    def by_author(self, author_query: str, max_results: int = 50) -> Iterator[Paper]:
        """`author_query` is an arXiv author expression, e.g. 'au:"Bengio_Y"' or 'au:"Yoshua Bengio"'."""
        return self.search(author_query, max_results=max_results)

    def by_categories(self, categories: Sequence[str], days: int, max_results: int,
                      now: datetime | None = None) -> Iterator[Paper]:
        """Newest first, papers of any of the categories submitted in the last `days` days."""
        cats = " OR ".join(f"cat:{c}" for c in categories)
        return self.search(f"({cats}) AND {_window(days, now)}", max_results=max_results)
