"""A paper's full text from arXiv (issue #48): its HTML page (`COPILOT_ARXIV_HTML_URL`), or its PDF
(`COPILOT_ARXIV_PDF_URL`) when arXiv has no HTML for it; and a researcher's own downloaded files.

Every request goes through the API client's guarded HTTPS session (a deadline for the whole call that a drip cannot
stretch, a size cap past which nothing is read), one at a time in the whole process with a polite gap between two,
with a User-Agent naming the app. Redirects are followed only within the host they start on, at most three. A
network or content problem is never an exception: `Fetched.status` says what happened and `message` says it in a
sentence. Reading the pages is the parsers' work (copilot.sources.fulltext_html / fulltext_pdf), passed in.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import requests
import urllib3

from copilot import __version__
from copilot.body import Parsed
from copilot.config import Settings
from copilot.records import parse_arxiv_id
from copilot.sources.arxiv_api import AnswerTooLarge, TimeoutSession

log = logging.getLogger(__name__)

USER_AGENT = f"ResearchCopilot/{__version__} (reads papers a researcher follows; one request at a time)"
STATUSES = ("ok", "no_html", "failed", "wrong_paper", "empty", "unreadable", "not_found", "too_large", "timeout",
            "unreachable", "too_costly")
FALL_BACK = ("no_html", "failed", "empty", "unreadable")   # what the HTML page may say that the PDF may still mend
MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)
_FILE_SUFFIXES = (".html", ".htm", ".xhtml", ".pdf")

HtmlParser = Callable[[bytes, str], Parsed]
PdfParser = Callable[[bytes, str], Parsed]


@dataclass(frozen=True)
class Fetched:
    """What fetching or importing one paper's full text gave."""
    paper_id: str              # base arXiv id ("" when a file is not named by one)
    status: str                # one of STATUSES
    parsed: Parsed | None = None
    source: str = ""           # "html", "pdf", "" when nothing was read
    message: str = ""          # what happened, in a sentence or two
    version: str = ""          # the version asked for or named by the file ("v2"), "" for the newest
    file: str = ""             # an imported file's name
    parse_s: float = 0.0       # of the whole call, the seconds spent reading the page or file into a body


@dataclass(frozen=True)
class _Answer:
    code: int = 0
    content: bytes = b""
    url: str = ""
    status: str = ""           # set when there is no answer: "timeout", "too_large", "unreachable"
    message: str = ""


class _Turns:
    """One full-text request at a time in the whole process, `gap` seconds after the previous one ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_end = float("-inf")

    @contextmanager
    def turn(self, gap: float) -> Iterator[None]:
        with self.lock:
            wait = self.last_end + gap - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                yield
            finally:
                self.last_end = time.monotonic()


_TURNS = _Turns()


def _version(text: str | int | None) -> str:
    text = str(text or "").strip().lower().lstrip("v")
    return f"v{int(text)}" if text.isdigit() and int(text) > 0 else ""


def identify(paper_id: str, version: str | int | None = "") -> tuple[str, str] | None:
    """(base id, "vN" or "") for an arXiv id or link, the explicit `version` winning over one inside the id."""
    parsed = parse_arxiv_id(paper_id[:300])
    if parsed is None:
        return None
    return parsed[0], _version(version) or _version(parsed[1])


def id_from_file_name(name: str) -> tuple[str, str] | None:
    """`2601.22777.html`, `2601.22777v2.pdf`, `hep-th_9901001.pdf` (old ids with `_` for `/`) → (base id, version)."""
    stem = name
    for suffix in _FILE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if len(stem) > 40 or "/" in stem:
        return None
    return identify(stem.replace("_", "/", 1) if "_" in stem else stem)


def sniff(head: bytes) -> str:
    """"pdf", "html" or "" from a file's first bytes, whatever its name says."""
    if b"%PDF-" in head[:1024]:           # readers accept a header anywhere in the first KB
        return "pdf"
    start = head[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")) or (start.startswith((b"<?xml", b"<!--")) and b"<html" in start):
        return "html"
    return ""


def _parse(parser: Callable[[bytes, str], Parsed], data: bytes, paper_id: str, what: str) -> tuple[Parsed, float]:
    """The parser's reading, or "unreadable" when it gave up with an exception (a parser bug must not end a batch);
    and the seconds it took."""
    started = time.perf_counter()
    try:
        parsed = parser(data, paper_id)
    except Exception as error:  # any failure of a parser is this paper's problem only
        log.exception("reading the %s of %s failed", what, paper_id)
        parsed = Parsed("unreadable", message=f"The {what} could not be read ({type(error).__name__}).")
    if parsed.status not in STATUSES or (parsed.status == "ok") != (parsed.body is not None):
        parsed = Parsed("unreadable", message=f"The {what} could not be read (the reader said {parsed.status[:40]!r}).")
    return parsed, time.perf_counter() - started


def _default_html_parser() -> HtmlParser:
    from copilot.sources.fulltext_html import parse_html
    return parse_html


def _default_pdf_parser() -> PdfParser:
    from copilot.sources.fulltext_sandbox import read_pdf

    return read_pdf                 # in a child process with limits: a small PDF can be built to be slow


class FulltextSource:
    def __init__(self, settings: Settings, parse_html: HtmlParser | None = None,
                 parse_pdf: PdfParser | None = None) -> None:
        self.html_url = settings.arxiv_html_url.rstrip("/") + "/"
        self.pdf_url = settings.arxiv_pdf_url.rstrip("/") + "/"
        self.timeout = settings.arxiv_timeout
        self.delay = settings.fulltext_delay
        self.max_bytes = int(settings.fulltext_max_mb * 2 ** 20)
        self._parse_html = parse_html
        self._parse_pdf = parse_pdf
        self.session = TimeoutSession(self.timeout, max_bytes=self.max_bytes)
        self.session.headers["User-Agent"] = USER_AGENT

    @property
    def parse_html(self) -> HtmlParser:
        if self._parse_html is None:
            self._parse_html = _default_html_parser()
        return self._parse_html

    @property
    def parse_pdf(self) -> PdfParser:
        if self._parse_pdf is None:
            self._parse_pdf = _default_pdf_parser()
        return self._parse_pdf

    # --- the network
    def fetch(self, paper_id: str, version: str = "", skip: Mapping[str, str] | None = None) -> Fetched:
        """The paper's HTML page read, or, when arXiv has no usable HTML for it, its PDF. `skip`: routes ("html",
        "pdf") not to ask, each with why not; a skipped route's answer is "unreachable", saying why."""
        ident = identify(paper_id, version)
        if ident is None:
            return Fetched(paper_id[:60], "not_found", message=f"{paper_id[:60]!r} is not an arXiv id.")
        base, version = ident
        skip = skip or {}
        if "html" in skip:
            return Fetched(base, "unreachable", source="html", version=version,
                           message=f"The HTML page of {base}{version} was not asked for: {skip['html']}.")
        first = self._fetch_html(base, version)
        if first.status not in FALL_BACK:
            return first
        if "pdf" in skip:
            return Fetched(base, "unreachable", source="pdf", version=version,
                           message=f"{first.message} Its PDF was not asked for: {skip['pdf']}.")
        pdf = self._fetch_pdf(base, version)
        second = replace(pdf, parse_s=first.parse_s + pdf.parse_s)        # both readings' time
        if second.status == "ok":
            return replace(second, message=f"{first.message} Read from its PDF instead.")
        return replace(second, message=f"{first.message} Its PDF: {second.message}")

    def _fetch_html(self, base: str, version: str) -> Fetched:
        answer = self._get(f"{self.html_url}{base}{version}")
        done = Fetched(base, "", source="html", version=version)
        if answer.status:
            return replace(done, status=answer.status, message=f"The HTML page of {base}{version}: {answer.message}")
        if answer.code in (404, 410):
            return replace(done, status="no_html", message=f"arXiv has no HTML page for {base}{version} "
                           f"(HTTP {answer.code}).")
        if answer.code != 200:
            return replace(done, status="unreachable", message=f"arXiv answered HTTP {answer.code} for the HTML page "
                           f"of {base}{version}; try again later.")
        other = self._elsewhere(answer.url, self.html_url, base)
        if other:
            return replace(done, status="wrong_paper", message=f"Asked for the HTML page of {base}, arXiv sent the one "
                           f"of {other}; nothing from it was used.")
        parsed, parse_s = _parse(self.parse_html, answer.content, base, "HTML page")
        return replace(done, status=parsed.status, parsed=parsed, parse_s=parse_s,
                       message=parsed.message or _said(parsed.status, f"The HTML page of {base}{version}"))

    @staticmethod
    def _elsewhere(url: str, route: str, base: str) -> str:
        """The other paper a redirect ended on ('/html/hep-th/9901001v2', '/pdf/2503.17247'), or "" when it ended on
        `base` or outside `route`'s path (where no id can be read)."""
        path, under = urlsplit(url).path, urlsplit(route).path
        landed = identify(path[len(under):].strip("/").removesuffix(".pdf")) if path.startswith(under) else None
        return landed[0] if landed and landed[0] != base else ""

    def _fetch_pdf(self, base: str, version: str) -> Fetched:
        answer = self._get(f"{self.pdf_url}{base}{version}")
        done = Fetched(base, "", source="pdf", version=version)
        if answer.status:
            return replace(done, status=answer.status, message=answer.message)
        if answer.code in (404, 410):
            return replace(done, status="not_found", message=f"arXiv has no PDF for {base}{version} (HTTP "
                           f"{answer.code}).")
        if answer.code != 200:
            return replace(done, status="unreachable", message=f"arXiv answered HTTP {answer.code}; try again later.")
        other = self._elsewhere(answer.url, self.pdf_url, base)
        if other:
            return replace(done, status="wrong_paper", message=f"Asked for the PDF of {base}, arXiv sent the one of "
                           f"{other}; nothing from it was used.")
        if sniff(answer.content) != "pdf":
            return replace(done, status="unreadable", message="arXiv's answer was not a PDF.")
        parsed, parse_s = _parse(self.parse_pdf, answer.content, base, "PDF")
        return replace(done, status=parsed.status, parsed=parsed, parse_s=parse_s,
                       message=parsed.message or _said(parsed.status, f"The PDF of {base}{version}"))

    def _get(self, url: str) -> _Answer:
        """One GET (with its redirects) under the process-wide turn: the deadline counts from when the turn starts
        and covers every hop."""
        with _TURNS.turn(self.delay):
            deadline = time.monotonic() + self.timeout
            for _ in range(MAX_REDIRECTS + 1):
                left = deadline - time.monotonic()
                if left <= 0:
                    return _Answer(status="timeout", message=f"arXiv did not send it within {self.timeout:g} s.")
                self.session.timeout = left
                answer = self._get_once(url)
                if answer.status or answer.code not in _REDIRECTS:
                    return answer
                target = urljoin(url, answer.url)
                if not _same_host(url, target):
                    elsewhere = urlsplit(target).netloc[:80]
                    return _Answer(status="unreachable", message=f"arXiv sent it elsewhere ({elsewhere}); that was "
                                   "not followed.")
                url = target
            return _Answer(status="unreachable", message=f"arXiv redirected it more than {MAX_REDIRECTS} times.")

    def _get_once(self, url: str) -> _Answer:
        """The answer to one request; a redirect's `url` is its Location."""
        try:
            response = self.session.get(url, allow_redirects=False)
        except AnswerTooLarge:
            return _Answer(status="too_large", message=f"it is larger than {self.max_bytes / 2 ** 20:g} MB; it was "
                           "not read further.")
        except requests.exceptions.Timeout:
            return _Answer(status="timeout", message=f"arXiv did not send it within {self.timeout:g} s.")
        except requests.exceptions.SSLError:
            return _Answer(status="unreachable", message=f"the certificate of {urlsplit(url).netloc} could not be "
                           "verified (check the machine's CA certificates).")
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
            return _Answer(status="unreachable", message=f"arXiv could not be reached or the connection ended early "
                           f"({type(error).__name__}).")
        if response.status_code in _REDIRECTS:
            return _Answer(response.status_code, b"", response.headers.get("Location", ""))
        return _Answer(response.status_code, response.content, url)

    # --- a researcher's own files
    def import_file(self, path: Path) -> Fetched:
        """One downloaded HTML page or PDF, named by its arXiv id; which of the two it is, its content says."""
        name = path.name
        ident = id_from_file_name(name)
        if ident is None:
            return Fetched("", "unreadable", file=name, message=f"{name[:80]} is not named by an arXiv id (like "
                           "2601.22777.html or 2601.22777v2.pdf); it was skipped.")
        base, version = ident
        done = Fetched(base, "", version=version, file=name)
        try:
            if not path.is_file():
                return replace(done, status="unreadable", message=f"{name} is not a file; it was skipped.")
            if path.stat().st_size > self.max_bytes:
                return replace(done, status="too_large", message=self._file_too_large(name))
            with path.open("rb") as handle:
                data = handle.read(self.max_bytes + 1)
        except OSError as error:
            return replace(done, status="unreadable", message=f"{name} could not be read ({error.strerror}).")
        if len(data) > self.max_bytes:
            return replace(done, status="too_large", message=self._file_too_large(name))
        if not data.strip():
            return replace(done, status="empty", message=f"{name} is empty.")
        kind = sniff(data)
        if not kind:
            return replace(done, status="unreadable", message=f"{name} is neither an HTML page nor a PDF.")
        what = "HTML page" if kind == "html" else "PDF"
        parsed, parse_s = _parse(self.parse_html if kind == "html" else self.parse_pdf, data, base, what)
        return replace(done, status=parsed.status, parsed=parsed, source=kind, parse_s=parse_s,
                       message=parsed.message or _said(parsed.status, f"{name}"))

    def import_dir(self, folder: Path) -> list[Fetched]:
        """Every file in `folder` (not its subfolders' files, not hidden ones), in name order."""
        try:
            entries = sorted(folder.iterdir())
        except OSError as error:
            return [Fetched("", "not_found", file=str(folder),
                            message=f"The folder {folder} could not be read ({error.strerror}).")]
        return [self.import_file(path) for path in entries if not path.name.startswith(".")]

    def _file_too_large(self, name: str) -> str:
        return f"{name} is larger than {self.max_bytes / 2 ** 20:g} MB; it was not read."


def _same_host(origin: str, target: str) -> bool:
    """A redirect stays on the host it started on, and never goes from HTTPS to plain HTTP."""
    before, after = urlsplit(origin), urlsplit(target)
    if after.scheme not in ("http", "https") or (before.scheme == "https" and after.scheme != "https"):
        return False
    same_port = after.port == before.port or after.scheme != before.scheme     # http → https changes the port
    return (after.hostname or "").lower() == (before.hostname or "").lower() and same_port


_SAID = {"ok": "was read.", "no_html": "is arXiv's page for a paper without HTML.",
         "failed": "shows a failed conversion.", "wrong_paper": "is another paper's; nothing from it was used.",
         "empty": "holds no text.", "unreadable": "could not be read."}


def _said(status: str, subject: str) -> str:
    return f"{subject} {_SAID.get(status, 'could not be read.')}"

