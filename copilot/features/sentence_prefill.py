"""Sentence vectors made in advance: the quotable sentences of every paper (methods.evidence.candidate_spans),
embedded and kept in store.sentence_vectors, so the evidence table of an answer looks them up instead of embedding
them while the user waits (issue #41 item 7).

The app starts `python -m copilot sentences --background` as a separate process at start and after each of its
ingestion runs: it runs at the lowest CPU priority (nice 19), so it takes only what asks and pages leave; one runs
per data dir at a time (a file lock; one started meanwhile flags the running one to look again before it ends, see
`run`); an answer that needs a sentence not yet done embeds and keeps it itself.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from copilot.methods.evidence import candidate_spans
from copilot.services import Services
from copilot.store.sentence_vectors import FILLER_BUSY_S

log = logging.getLogger(__name__)
PAPERS_PER_BATCH = 16      # the app's filler checks between batches whether the app is still there
LOCK_FILE = "sentence-prefill.lock"
DUE_FILE = "sentence-prefill.due"      # set by a filler that found another running: look again before ending


@dataclass
class Filled:
    papers: int = 0          # papers in the library
    already: int = 0         # of them, done before this run
    filled: int = 0          # done by this run
    sentences: int = 0       # sentences this run looked up or embedded
    seconds: float = 0.0
    failed: str | None = None    # why the run stopped early: the sentence file failed (answers embed on the fly)

    def as_dict(self) -> dict:
        return asdict(self)


def fill(services: Services, progress: Callable[[Filled], None] | None = None,
         stop: Callable[[], bool] | None = None) -> Filled:
    """Store the vectors of every paper's quotable sentences that are not stored yet; `stop` is asked before each
    batch (the app's filler ends with the app). A paper is marked done only once its vectors are kept; when the
    file fails (locked past FILLER_BUSY_S, corrupt twice, unwritable, a full disk) the run stops and says why."""
    started = time.monotonic()
    model = services.embedder.name
    store = services.sentence_store(FILLER_BUSY_S)
    ids = [row.id for row in services.catalog.rows()]
    counts = Filled(papers=len(ids))
    stopped = False
    for start in range(0, len(ids), PAPERS_PER_BATCH):
        if stop and stop():
            stopped = True
            break
        papers = services.store.get_papers(ids[start:start + PAPERS_PER_BATCH])
        # a paper is done for its very candidate sentences: a changed abstract or a changed choice of spans (a new
        # version of this code) makes it due again
        spans = {p.id: [span.text for span, _, _ in candidate_spans(p.abstract)] for p in papers}
        keys = [(p.id, "\n".join(spans[p.id])) for p in papers]
        done = store.papers_done(model, keys)
        todo = [key for key in keys if key[0] not in done]
        counts.already += len(papers) - len(todo)
        texts = list(dict.fromkeys(text for paper_id, _ in todo for text in spans[paper_id]))
        known = store.get(model, texts) if texts else {}
        missing = [text for text in texts if text not in known]
        kept = store.put(model, missing, services.embedder.embed(missing)) if missing else True
        if not (kept and store.mark_done(model, todo)):
            counts.failed = store.last_failure
            break
        counts.filled += len(todo)
        counts.sentences += len(texts)
        if progress:
            progress(counts)
    if not (stopped or counts.failed) and not store.mark_filled(model):    # the Library's status reads it
        counts.failed = store.last_failure
    counts.seconds = round(time.monotonic() - started, 2)
    return counts


def run(services: Services, stop: Callable[[], bool] | None = None) -> Filled | None:
    """`fill` as one process of the data dir at a time, which also fills what was ingested while it ran: None when
    another process fills now. That one is told (the DUE_FILE flag) and looks again before it ends, so the papers of
    an ingestion that started a filler while another ran are filled too."""
    due = services.settings.data_dir / DUE_FILE
    _flag(due)
    total: Filled | None = None
    while True:
        with only_one(services) as alone:
            if not alone:      # the holder took the lock after our flag, or sees the flag when it releases it
                return total
            due.unlink(missing_ok=True)
            counts = fill(services, stop=stop)
        if total is None:
            total = counts
        else:
            total.papers, total.failed = counts.papers, counts.failed
            total.filled += counts.filled
            total.sentences += counts.sentences
            total.seconds = round(total.seconds + counts.seconds, 2)
        if counts.failed or (stop and stop()) or not due.exists():
            return total


def _flag(path: Path) -> None:
    try:
        path.touch()
    except OSError as error:         # a read-only data dir: the running filler is not told
        log.warning("could not flag the sentence vectors as due: %s", error)


@contextmanager
def only_one(services: Services) -> Iterator[bool]:
    """True inside when no other process fills this data dir's sentence vectors now."""
    with open(services.settings.data_dir / LOCK_FILE, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def start_in_background(services: Services) -> subprocess.Popen | None:
    """Start the filling process (lowest priority) unless the settings turn it off; the app does not wait for it,
    a thread does (so the ended process is reaped, not left a zombie)."""
    if not services.settings.sentence_prefill:
        return None
    env = {**os.environ, "COPILOT_DATA_DIR": str(services.settings.data_dir)}
    try:
        # not a new session: with the kernel's autogroups a new session would get its own equal share of the CPU,
        # and nice 19 would only rank it within that group (measured: asks waited longer than with no filler)
        process = subprocess.Popen([sys.executable, "-m", "copilot", "sentences", "--background",
                                    "--parent", str(os.getpid())], env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    except OSError as error:      # answers still work: they embed what they need
        log.warning("sentence vectors not prefilled: %s", error)
        return None
    threading.Thread(target=process.wait, name=f"reap-filler-{process.pid}", daemon=True).start()
    return process
