"""arXiv API access through the `arxiv` package: by categories and date window, by id list, by author.

`COPILOT_ARXIV_API_URL` replaces the endpoint (tests point it at a loopback server). Every request has a
deadline for its whole answer and a cap on its size, directly and behind a proxy (HTTP(S)_PROXY); the client keeps
the API's politeness delay between requests and retries failed pages.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone

import arxiv
import requests
import urllib3
from lxml import etree

from copilot.config import Settings
from copilot.records import Paper, clean_text, parse_arxiv_id

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 16 * 2 ** 20     # one page of 100 entries is ~0.3 MB; a larger answer is refused, not read on
_ATOM = "http://www.w3.org/2005/Atom"


class ArxivSourceError(RuntimeError):
    """arXiv could not be queried; the message says what happened."""


class AnswerTooLarge(ArxivSourceError):
    """An answer over the session's size cap: refused, not read on."""


class _Watched(threading.local):
    """The connections the current thread's request is using (the pool adds each one it hands out), shared with
    that request's watchdog."""
    holder: list | None = None


_WATCHED = _Watched()


class _Watching:
    """Mixed into every pool class a request may use (a method copied from one class into another breaks its
    zero-argument `super()`: every HTTPS request failed with a TypeError, issue #38)."""

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        if _WATCHED.holder is not None:
            _WATCHED.holder.append(conn)
        return conn


_WATCHED_CLASSES: dict[type, type] = {}


def _watch(manager: urllib3.PoolManager) -> urllib3.PoolManager:
    """Make every pool `manager` hands out report its connections to the request's watchdog: the direct pools and,
    behind a proxy (HTTP(S)_PROXY), the proxy manager's own (issue #47: those were not watched, so a proxied answer
    dripped past the deadline)."""
    classes = {}
    for scheme, pool in manager.pool_classes_by_scheme.items():
        if not issubclass(pool, _Watching):
            pool = _WATCHED_CLASSES.setdefault(pool, type(f"_Watched{pool.__name__}", (_Watching, pool), {}))
        classes[scheme] = pool
    manager.pool_classes_by_scheme = classes
    return manager


class _WatchedAdapter(requests.adapters.HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        _watch(self.poolmanager)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        return _watch(super().proxy_manager_for(proxy, **proxy_kwargs))


def _cut(conn: object) -> None:
    """End a request that passed its deadline: shut its socket, so a read waiting on it returns at once."""
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class TimeoutSession(requests.Session):
    """Every request has a deadline for the whole call — connecting, the status line and headers, the body — not
    only for each read (a server sending one byte every second never trips a per-read timeout, issue #34: a status
    line and headers dripped at 1 byte/s held an action 95 s at a 10 s timeout). At the deadline a watchdog shuts the
    socket. The last response body is kept for strict checks and error messages."""

    def __init__(self, timeout: float, max_bytes: int = MAX_ANSWER_BYTES) -> None:
        super().__init__()
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.last_content: bytes = b""
        for prefix in ("http://", "https://"):
            self.mount(prefix, _WatchedAdapter())

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", self.timeout)
        kwargs["stream"] = True
        self.last_content = b""
        missed = threading.Event()
        holder: list[object] = []
        _WATCHED.holder = holder

        def watchdog() -> None:
            missed.set()
            for conn in holder:
                _cut(conn)

        timer = threading.Timer(self.timeout, watchdog)
        timer.daemon = True
        timer.start()
        try:
            return self._read_whole(args, kwargs, missed)
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
            if missed.is_set():
                raise requests.exceptions.Timeout(f"the answer took longer than {self.timeout:g} s in all") from None
            raise error
        finally:
            timer.cancel()
            _WATCHED.holder = None

    def _read_whole(self, args, kwargs, missed: threading.Event) -> requests.Response:
        response = super().request(*args, **kwargs)
        chunks, size = [], 0
        try:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > self.max_bytes:     # refused before a byte of it is read
                raise self._too_large()
            while chunk := response.raw.read1(65536, decode_content=True):   # whatever has arrived, at once
                chunks.append(chunk)
                size += len(chunk)
                if missed.is_set():
                    raise requests.exceptions.Timeout(f"the answer took longer than {self.timeout:g} s in all")
                if size > self.max_bytes:
                    raise self._too_large()
        except urllib3.exceptions.ReadTimeoutError as error:
            raise requests.exceptions.Timeout(str(error)) from None
        finally:
            response.close()
        if missed.is_set():
            raise requests.exceptions.Timeout(f"the answer took longer than {self.timeout:g} s in all")
        response._content = self.last_content = b"".join(chunks)
        return response

    def _too_large(self) -> AnswerTooLarge:
        return AnswerTooLarge(f"arXiv's answer was larger than {self.max_bytes / 2 ** 20:g} MB; "
                              "it was not read further and nothing from it was used")


def _xml_problem(content: bytes) -> str | None:
    """Why `content` is not a complete XML document, or None. The arxiv package parses with lxml's
    recover=True, which turns a truncated body into a shorter, valid-looking page; we refuse that."""
    try:
        root = etree.fromstring(content, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as error:
        return str(error)[:200] or "not XML"
    if root is None or etree.QName(root).localname != "feed":
        return "not an Atom feed"
    return None


def _error_feed_message(content: bytes) -> str | None:
    """The explanation inside arXiv's error feed (an entry titled 'Error'), if the body is one."""
    try:
        root = etree.fromstring(content, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError:
        return None
    if root is None:
        return None
    for entry in root.iterfind(f"{{{_ATOM}}}entry"):
        if (entry.findtext(f"{{{_ATOM}}}title") or "").strip().lower() == "error":
            return clean_text(entry.findtext(f"{{{_ATOM}}}summary"))[:200] or None
    return None


class _StrictClient(arxiv.Client):
    """The arxiv client, but a body that is not a complete Atom feed (garbled, truncated) is retried like a
    failed request and then an error, instead of a silent empty or shortened page."""

    def _parse_feed(self, url: str, first_page: bool = True, _try_index: int = 0):
        feed = super()._parse_feed(url, first_page=first_page, _try_index=_try_index)
        problem = "malformed feed" if feed.malformed else _xml_problem(self._session.last_content)
        if problem:
            if _try_index < self.num_retries:
                log.debug("arXiv answer unreadable (try %d): %s", _try_index, problem)
                return self._parse_feed(url, first_page=first_page, _try_index=_try_index + 1)
            raise ArxivSourceError(f"arXiv returned a truncated or garbled response ({problem}) "
                                   f"after {_try_index + 1} tries; nothing from it was used")
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
        self.client._session = TimeoutSession(settings.arxiv_timeout)
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
            detail = _error_feed_message(self.client._session.last_content)
            raise ArxivSourceError(f"arXiv answered HTTP {error.status} (after {error.retry + 1} tries)"
                                   + (f": {detail}" if detail else "")) from None
        except arxiv.UnexpectedEmptyPageError:
            raise ArxivSourceError("arXiv returned an unexpectedly empty page; try again later") from None
        except requests.exceptions.Timeout:
            raise ArxivSourceError(f"arXiv did not answer in time ({self.endpoint})") from None
        except requests.exceptions.SSLError:
            raise ArxivSourceError(f"arXiv's certificate at {self.endpoint} could not be verified: check the machine's "
                                   "CA certificates (or REQUESTS_CA_BUNDLE behind a proxy)") from None
        except requests.exceptions.RequestException as error:
            raise ArxivSourceError(f"cannot reach arXiv at {self.endpoint} ({type(error).__name__})") from None
        except Exception as error:  # the feed parser's errors on a garbled body
            message = f"arXiv response could not be read ({type(error).__name__}: {error})"
            raise ArxivSourceError(message[:300]) from None

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
