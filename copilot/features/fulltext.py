"""Reading papers' full text (issue #48): fetch a paper's arXiv HTML page (its PDF when there is none) or take a
file a researcher downloaded, parse it into a body (copilot.body), split the body into the sentences a row may
quote, embed them, and keep all of it in the full-text store, in one step that either stores the whole body or
nothing. `FulltextReader` does this in the background, one paper at a time, questions' papers before the papers
read ahead of time (votes, "More like this", Profile, feed), so no one waits for the network.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from copilot.body import Body, Parsed
from copilot.features.fulltext_pauses import Pause, Pauses
from copilot.methods import body_text
from copilot.services import Services
from copilot.sources.arxiv_fulltext import FulltextSource
from copilot.store.fulltext import StoredBody

log = logging.getLogger(__name__)

NOW, SOON, AHEAD = 0, 1, 2          # priorities: a question waiting on it, a vote or "More like this", read-ahead
WAIT_S = 10.0                       # a quoted answer waits this long for its papers' full text, then shows what it has
RETRY_AFTER_S = 6 * 3600.0          # a paper whose reading failed is not asked for again sooner (arXiv is polite)
MAX_QUEUE = 500
OFFLINE_PAUSE_S = 10 * 60.0         # once a route of arXiv could not be reached, it is not asked this long
FIRST_LOOK = 64                     # per waiting question, a paper's sentences embedded before the rest (first_look)
MAX_QUESTIONS = 3                   # the waiting questions a paper's first look is made for, the latest kept
MAX_UNSTORED = 8                    # bodies read and embedded that the store could not keep, kept to store later


@dataclass(frozen=True)
class Outcome:
    paper_id: str
    status: str                      # "ok" or why there is no body
    source: str                      # "html", "pdf", "file" or ""
    message: str
    sentences: int = 0
    parse_s: float = 0.0
    embed_s: float = 0.0
    fetch_s: float = 0.0


@dataclass
class OpenBody:
    """A parsed body on its way into the store: its quotable sentences, their texts and word stems, and the vectors
    made so far (by sentence index)."""
    body: Body
    source: str
    fetch_s: float
    parse_s: float
    sentences: list[body_text.BodySentence]
    texts: list[str]
    terms: list[list[str]]
    vectors: dict[int, np.ndarray] = field(default_factory=dict)
    embed_s: float = 0.0

    @property
    def spans(self) -> list[tuple[int, int, int, bool, bool]]:
        return [(s.start, s.end, s.passage, s.cut_before, s.cut_after) for s in self.sentences]


def open_body(services: Services, parsed: Parsed, source: str, fetch_s: float = 0.0,
              parse_s: float = 0.0) -> OpenBody | Outcome:
    """A parsed body's quotable sentences, ready to embed, or the outcome saying why there is nothing to keep."""
    body = parsed.body
    if parsed.status != "ok" or body is None:
        paper_id = body.paper_id if body is not None else ""
        return Outcome(paper_id, parsed.status, source, parsed.message, fetch_s=fetch_s, parse_s=parse_s)
    # only what a row may quote is embedded and kept (related work, acknowledgements, … never are): embedding is
    # most of a reading's time
    sentences = [s for s in body_text.body_sentences(body) if body_text.may_state_finding(body, s)]
    if not sentences:
        message = "The text holds no sentence to quote."
        services.fulltext.note(body.paper_id, "empty", source, message)
        return Outcome(body.paper_id, "empty", source, message, fetch_s=fetch_s, parse_s=parse_s)
    texts = [" ".join(body.text[s.start:s.end].split()) for s in sentences]
    return OpenBody(body, source, fetch_s, parse_s, sentences, texts, body_text.sentence_terms(texts))


def _embed(services: Services, opened: OpenBody, indices: Sequence[int]) -> None:
    started = time.perf_counter()
    vectors = services.embedder.embed([opened.texts[n] for n in indices])
    opened.embed_s += time.perf_counter() - started
    opened.vectors.update(zip(indices, vectors))


def first_look(services: Services, opened: OpenBody, questions: Sequence[str]) -> StoredBody | None:
    """The sentences the waiting questions would quote, embedded before the rest of the paper: for each question
    the FIRST_LOOK holding most of its words as a row weighs them (body_text.question_bonus), as a body whose other
    sentences have no vector yet (`StoredBody.embedded`), which a table may quote while the rest is embedded. On
    the dev and held questions every sentence the whole body ranks in its top three was among a question's 32
    (docs/fulltext.md). None for a paper short enough to embed whole at once."""
    if not questions or len(opened.sentences) <= 2 * FIRST_LOOK:
        return None
    body = opened.body
    papers = services.store.get_papers([body.paper_id])
    known = f"{papers[0].title}\n{papers[0].abstract}" if papers else ""
    spans = opened.spans
    terms = [frozenset(t) for t in opened.terms]
    chosen: set[int] = set()
    for question in questions:
        bonus = body_text.question_bonus(question, body, spans, terms, known)
        chosen.update(int(n) for n in np.argsort(-bonus, kind="stable")[:FIRST_LOOK])
    first = sorted(chosen)
    _embed(services, opened, first)
    # all the sentences (a word's weight is its rarity in the whole body), vectors as the store will give them back
    # (float16): a first look's sentences score exactly as the stored body's will
    vectors = np.zeros((len(spans), len(opened.vectors[first[0]])), dtype=np.float32)
    vectors[first] = np.vstack([opened.vectors[n] for n in first]).astype(np.float16).astype(np.float32)
    embedded = np.zeros(len(spans), dtype=bool)
    embedded[first] = True
    return StoredBody(body, tuple(spans), services.embedder.name, vectors, tuple(terms), embedded)


def finish_body(services: Services, opened: OpenBody) -> Outcome:
    """Embed what is left of an opened body and store it whole, with all its sentences and vectors."""
    rest = [n for n in range(len(opened.sentences)) if n not in opened.vectors]
    if rest:
        _embed(services, opened, rest)
    body = opened.body
    vectors = np.vstack([opened.vectors[n] for n in range(len(opened.sentences))])
    if not services.fulltext.put(body, opened.spans, services.embedder.name, vectors, opened.source, opened.terms):
        # the file is derived: nothing is recorded against the paper, which is read again when next asked for
        return Outcome(body.paper_id, "not_stored", opened.source, "Read, but the full-text file could not keep it "
                       "(locked, full or unwritable; see the log); it will be read again.", len(opened.sentences),
                       opened.parse_s, opened.embed_s, opened.fetch_s)
    return Outcome(body.paper_id, "ok", opened.source,
                   f"{len(opened.sentences)} sentences from {len(body.sections)} sections.",
                   len(opened.sentences), opened.parse_s, opened.embed_s, opened.fetch_s)


def keep_parsed(services: Services, parsed: Parsed, source: str, fetch_s: float = 0.0,
                parse_s: float = 0.0) -> Outcome:
    """Store a parsed body with its sentences and their vectors (all or nothing); record why there is none."""
    opened = open_body(services, parsed, source, fetch_s, parse_s)
    return opened if isinstance(opened, Outcome) else finish_body(services, opened)


def _library_version(services: Services, paper_id: str) -> str:
    papers = services.store.get_papers([paper_id])
    return f"v{papers[0].version}" if papers and papers[0].version else ""


def fetch_paper(services: Services, paper_id: str, skip: dict[str, str] | None = None) -> OpenBody | Outcome:
    """Fetch and parse one paper's full text at the version the library holds, ready to embed; never raises for a
    network or content problem (the outcome says what happened). `skip`: routes not to ask ("html", "pdf"), each
    with why not."""
    started = time.perf_counter()
    fetched = fulltext_source(services).fetch(paper_id, _library_version(services, paper_id), skip)
    fetch_s = time.perf_counter() - started - fetched.parse_s
    if fetched.parsed is None or fetched.status != "ok":
        services.fulltext.note(paper_id, fetched.status, fetched.source, fetched.message)
        return Outcome(paper_id, fetched.status, fetched.source, fetched.message, fetch_s=fetch_s,
                       parse_s=fetched.parse_s)
    return open_body(services, fetched.parsed, fetched.source, fetch_s=fetch_s, parse_s=fetched.parse_s)


def read_paper(services: Services, paper_id: str) -> Outcome:
    """Fetch, parse and keep one paper's full text (`fetch_paper`, then `finish_body`); a failure of the embedder or
    a bug is this paper's outcome ("error"), never the end of a batch."""
    try:
        opened = fetch_paper(services, paper_id)
        return opened if isinstance(opened, Outcome) else finish_body(services, opened)
    except Exception as error:
        return _failed(services, paper_id, "", error)


def _failed(services: Services, paper_id: str, source: str, error: Exception) -> Outcome:
    log.exception("full text of %s not read", paper_id)
    outcome = Outcome(paper_id, "error", source, f"Reading failed: {type(error).__name__}.")
    services.fulltext.note(paper_id, "error", source, outcome.message)
    return outcome


def fulltext_source(services: Services) -> FulltextSource:
    """The full-text client of these services (one request at a time process-wide, politely spaced)."""
    with _LOCK:
        client = _SOURCES.get(services)
        if client is None:
            client = _SOURCES[services] = FulltextSource(services.settings)
        return client


_LOCK = threading.Lock()
# per Services object, gone with it (a Services made later never inherits another's reader or settings)
_SOURCES: weakref.WeakKeyDictionary[Services, FulltextSource] = weakref.WeakKeyDictionary()


def import_files(services: Services, folder: Path) -> list[Outcome]:
    """`fulltext import DIR`: HTML or PDF files named by arXiv id (a researcher's own downloads)."""
    return import_paths(services, sorted(p for p in folder.iterdir() if p.is_file()))


def import_paths(services: Services, paths: Sequence[Path]) -> list[Outcome]:
    """Read these files (named by arXiv id) into the full-text store; a paper the library does not hold is
    reported, not stored (its rows could never show)."""
    client = fulltext_source(services)
    outcomes = []
    for path in paths:
        fetched = client.import_file(path)
        parse_s = fetched.parse_s
        if fetched.parsed is None or fetched.status != "ok":
            if fetched.paper_id:
                services.fulltext.note(fetched.paper_id, fetched.status, "file", fetched.message)
            outcomes.append(Outcome(fetched.paper_id, fetched.status, "file", fetched.message, parse_s=parse_s))
        elif not services.store.get_papers([fetched.paper_id]):
            outcomes.append(Outcome(fetched.paper_id, "not_in_library", "file",
                                    "The library does not hold this paper; import or ingest it first."))
        else:
            try:
                outcomes.append(keep_parsed(services, fetched.parsed, "file", parse_s=parse_s))
            except Exception as error:
                outcomes.append(_failed(services, fetched.paper_id, "file", error))
    return outcomes


def papers_read(services: Services, paper_ids: Iterable[str]) -> frozenset[str]:
    """Which of these papers the library holds the full text of (Search and Related cards say so)."""
    return frozenset(services.fulltext.with_text(paper_ids))


def wanted(services: Services, paper_ids: Iterable[str], now: float | None = None) -> list[str]:
    """Of these papers, those worth reading: no body stored, and no failed reading in the last RETRY_AFTER_S (in
    the last OFFLINE_PAUSE_S when arXiv could not be reached: that was no fault of the paper's)."""
    ids = list(dict.fromkeys(paper_ids))
    have = services.fulltext.with_text(ids)
    readings = services.fulltext.readings(ids)
    now = time.time() if now is None else now

    def tried_lately(pid: str) -> bool:
        reading = readings.get(pid)
        wait = OFFLINE_PAUSE_S if reading is not None and reading.status == "unreachable" else RETRY_AFTER_S
        return reading is not None and now - reading.tried_at < wait

    return [pid for pid in ids if pid not in have and not tried_lately(pid)]


class FulltextReader:
    """One background thread reading papers' full text, most urgent first, each paper once; `wait` lets a caller
    (the CLI, a test, Chat's "answer from full text") wait for some papers with a deadline.

    A paper a question waits on is read in two steps: fetched, parsed and given a first look (`first_look`: the
    sentences the question would quote, embedded first), then, after every waiting question's first looks (the
    rest of a paper is read at SOON), the rest embedded and the whole body stored. Between the two, `looks` has
    the first look, which a table may quote; nothing is stored until the whole body is."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._queue: list[tuple[int, int, str]] = []
        self._queued: dict[str, int] = {}
        self._done: dict[str, Outcome] = {}
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        settings = services.settings
        self.pauses = Pauses(settings.arxiv_html_url, settings.arxiv_pdf_url, OFFLINE_PAUSE_S)
        self._questions: dict[str, list[str]] = {}     # paper → the questions waiting on it (MAX_QUESTIONS latest)
        self._open: dict[str, OpenBody] = {}            # paper → its body between the first look and the store
        self._looks: dict[str, StoredBody] = {}         # paper → its first look, until the whole body is stored
        # paper → its body read and embedded whole that the store could not keep (locked, full): stored when the
        # paper is asked for again, without fetching or embedding it again (the MAX_UNSTORED latest)
        self._unstored: OrderedDict[str, OpenBody] = OrderedDict()

    def paused(self, priority: int = NOW) -> Pause | None:
        """The pause of arXiv's HTML pages that holds readings of `priority` (OFFLINE_PAUSE_S after they could not be
        reached at that priority or a more urgent one): a question then neither queues its papers nor waits for them
        (on a machine that cannot reach arXiv, every answer would wait WAIT_S). A pause of the PDFs alone stops no
        paper: its HTML page is still read."""
        return next((p for p in self.pauses.holding(priority) if p.route == "html"), None)

    def request(self, paper_ids: Sequence[str], priority: int = AHEAD, question: str = "") -> list[str]:
        """Queue the papers that are worth reading (`wanted`); returns those queued or already queued. `question`:
        the question waiting on them, whose sentences are embedded first."""
        queued: list[str] = []
        if self.paused(priority):
            return queued
        with self._cond:
            for pid in wanted(self.services, paper_ids):
                if pid in self._queued and self._queued[pid] <= priority:
                    queued.append(pid)
                elif len(self._queue) >= MAX_QUEUE:
                    break
                else:
                    self._queued[pid] = priority
                    self._done.pop(pid, None)
                    heapq.heappush(self._queue, (priority, next(self._order), pid))
                    queued.append(pid)
                if question.strip():
                    waiting = self._questions.setdefault(pid, [])
                    if question not in waiting:
                        waiting[:] = [*waiting, question][-MAX_QUESTIONS:]
            if queued and (self._thread is None or not self._thread.is_alive()):    # `_next` decides an exit
                self._thread = threading.Thread(target=self._run, name="fulltext-reader", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return queued

    def wait(self, paper_ids: Sequence[str], timeout: float, at_least: int | None = None) -> dict[str, Outcome]:
        """The outcomes of these papers' readings that end within `timeout` seconds (a deadline for the whole
        wait); `at_least`: return as soon as that many of them have ended (default: all)."""
        deadline = time.monotonic() + timeout
        wanted_count = len(paper_ids) if at_least is None else min(at_least, len(paper_ids))
        with self._cond:
            while sum(pid in self._done for pid in paper_ids) < wanted_count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return {pid: self._done[pid] for pid in paper_ids if pid in self._done}

    def _progress(self, paper_ids: Sequence[str]) -> int:
        return sum(2 if pid in self._done else 1 if pid in self._looks else 0 for pid in paper_ids)

    def wait_progress(self, paper_ids: Sequence[str], timeout: float, beyond: int) -> int:
        """Wait (`timeout` seconds at most in all) until these papers have gone further than `beyond`, counting a
        point for a first look and two for an ended reading; returns how far they have gone."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._progress(paper_ids) <= beyond and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            return self._progress(paper_ids)

    def looks(self, paper_ids: Sequence[str]) -> dict[str, StoredBody]:
        """The first looks of these papers whose whole body is still being embedded."""
        with self._cond:
            return {pid: self._looks[pid] for pid in paper_ids if pid in self._looks}

    def _next(self) -> tuple[str, int] | None:
        """The next paper to read and its priority; None when there is none, and then this thread ends: the exit is
        decided here under the lock (`_thread` cleared), so a request coming after it starts a new thread."""
        with self._cond:
            while self._queue:
                priority, _, pid = heapq.heappop(self._queue)
                if self._queued.get(pid) == priority:
                    return pid, priority
            if self._thread is threading.current_thread():
                self._thread = None
            return None

    def _run(self) -> None:
        while (item := self._next()) is not None:
            pid, priority = item
            try:
                outcome = self._step(pid, priority)
            except Exception as error:          # a bug must not end the reader: the paper is reported, not lost
                outcome = _failed(self.services, pid, "", error)
            if outcome is None:                 # a first look: the rest of the paper is queued
                continue
            with self._cond:
                self._queued.pop(pid, None)
                opened = self._open.pop(pid, None)
                if outcome.status == "not_stored" and opened is not None:
                    self._keep_unstored(pid, opened)
                self._looks.pop(pid, None)
                self._questions.pop(pid, None)
                self._done[pid] = outcome
                if outcome.status == "unreachable" and outcome.source not in self.pauses.routes(priority):
                    self._pause(outcome.source or "html", priority)
                self._cond.notify_all()

    def _step(self, pid: str, priority: int) -> Outcome | None:
        """Read a paper, or (a question waits on it) its first look, queueing the rest after the papers already
        queued as urgently: None then."""
        with self._cond:
            opened = self._open.get(pid) or self._unstored.pop(pid, None)
            questions = list(self._questions.get(pid, ()))
            if opened is not None:
                self._open[pid] = opened
        if opened is not None:
            return finish_body(self.services, opened)
        skip = {p.route: f"{p.said()} could not be reached a moment ago" for p in self.pauses.holding(priority)}
        fetched = fetch_paper(self.services, pid, skip)
        if isinstance(fetched, Outcome):
            return fetched
        look = first_look(self.services, fetched, questions)
        if look is None:
            with self._cond:
                self._open[pid] = fetched
            return finish_body(self.services, fetched)
        with self._cond:           # the rest waits for every question's first looks, not for read-ahead
            self._open[pid] = fetched
            self._looks[pid] = look
            rest = max(self._queued.get(pid, NOW), SOON)
            self._queued[pid] = rest
            heapq.heappush(self._queue, (rest, next(self._order), pid))
            self._cond.notify_all()
        return None

    def _keep_unstored(self, pid: str, opened: OpenBody) -> None:
        """Under the lock: keep a body the store refused, the MAX_UNSTORED latest."""
        self._unstored[pid] = opened
        self._unstored.move_to_end(pid)
        while len(self._unstored) > MAX_UNSTORED:
            self._unstored.popitem(last=False)

    def _pause(self, route: str, priority: int) -> None:
        """Under the lock: stop asking `route` for OFFLINE_PAUSE_S, for readings of `priority` or less urgent. When
        the HTML pages (where every paper starts) are paused, the papers still queued that the pause holds end as
        unreachable now (not stored as failed readings, so they are asked for again once arXiv answers)."""
        pause = self.pauses.add(route, priority)
        if route != "html":
            return
        kept = [e for e in self._queue if e[2] in self._open or e[0] < pause.priority]   # fetched, or more urgent
        for _, _, pid in self._queue:
            if pid not in self._open and self._queued.get(pid, NOW) >= pause.priority:
                self._done[pid] = Outcome(pid, "unreachable", "", f"Not tried: {pause.said()} could not be reached a "
                                          "moment ago.")
                self._queued.pop(pid, None)
                self._questions.pop(pid, None)
        self._queue[:] = kept
        heapq.heapify(self._queue)


_READERS: weakref.WeakKeyDictionary[Services, FulltextReader] = weakref.WeakKeyDictionary()


def reader_for(services: Services) -> FulltextReader:
    """The background reader of these services."""
    with _LOCK:
        reader = _READERS.get(services)
        if reader is None:
            reader = _READERS[services] = FulltextReader(services)
        return reader


def read_soon(services: Services, paper_ids: Sequence[str], priority: int = NOW, question: str = "") -> list[str]:
    """Queue these papers' full text for reading in the background (when the settings allow); returns the papers
    queued. `question`: the question waiting on them (its sentences are embedded first). Never waits and never
    raises: an answer does not depend on it."""
    if not services.settings.fulltext_reading or not paper_ids:
        return []
    try:
        return reader_for(services).request(list(paper_ids), priority, question)
    except Exception:          # the store or a thread could not start: reading is an extra, never the answer's fault
        log.exception("full text reading not queued")
        return []


def reading_line(services: Services, count: int, paper_ids: Sequence[str] = ()) -> str:
    """What the page says while `count` papers of an answer are being read; none, while reading is paused and some
    of `paper_ids` (the answer's) have no full text."""
    if not count:
        pause = reader_for(services).paused() if services.settings.fulltext_reading else None
        if pause is not None and services.fulltext.with_text(paper_ids) != set(paper_ids):
            return (f"Full text not read: {pause.said()} could not be reached a few minutes ago, so these rows "
                    "quote abstracts.")
        return ""
    papers = "paper" if count == 1 else "papers"
    return f"Reading the full text of {count} {papers} in these answers (arXiv's HTML page)…"


WHY_NOT_READ = {"no_html": "no HTML page", "failed": "conversion failed", "not_found": "not found",
                "too_large": "too large", "timeout": "arXiv too slow", "unreachable": "arXiv unreachable",
                "unreadable": "unreadable", "empty": "no text", "wrong_paper": "another paper's page",
                "error": "reading failed", "too_costly": "too costly to read",
                "not_stored": "not stored"}


def read_line(outcomes: dict[str, Outcome], asked: int, waiting: bool = False, looked: int = 0) -> str:
    """What the page says once the wait for an answer's papers is over (or, `waiting`, while it goes on): what was
    read, what could not be and why, what is still being read (`looked` of those: their rows may quote the sentences
    of a first look)."""
    read = sum(1 for o in outcomes.values() if o.status == "ok")
    failed: dict[str, int] = {}
    for outcome in outcomes.values():
        if outcome.status != "ok":
            why = WHY_NOT_READ.get(outcome.status, outcome.status.replace("_", " "))
            failed[why] = failed.get(why, 0) + 1
    pending = asked - len(outcomes)
    parts = []
    if read:
        parts.append(f"Read the full text of {read} paper{'' if read == 1 else 's'} in these answers: their rows "
                     "quote the body where it answers, with the section.")
    if failed:
        parts.append(f"Not read: {', '.join(f'{n} ({why})' for why, n in failed.items())}; those rows quote the "
                     "abstract.")
    if pending and waiting:
        parts.append(f"Reading {pending} more\u2026")
    elif pending and looked:
        parts.append(f"{pending} paper{'' if pending == 1 else 's'} still being read: "
                     f"{'its row quotes' if pending == 1 else 'their rows quote'} the sentences read first, those "
                     "with the question's words; ask again later for the whole text.")
    elif pending:
        parts.append(f"{pending} paper{'' if pending == 1 else 's'} still being read: ask again later to quote "
                     f"{'it' if pending == 1 else 'them'}.")
    return " ".join(parts)
