"""For you: the papers new since your last visit (or since a chosen day), ranked for you, with "more like this" and
"not interested" that change the next ranking; the same list as a private Atom feed.

Ranking, as Trends ranks a period for a profile: each query ranks the candidates by cosine and Reciprocal Rank
Fusion merges the lists. The queries are your profile's text and papers, every paper you marked "more like this",
and one Rocchio query — the profile's centroid, plus 0.75 × the mean of the liked papers, minus 0.5 × the mean of
the papers you marked "not interested" — which carries the negative feedback into the order; a paper marked "not
interested" is also never listed again. Candidates are the library's papers stored since your previous visit (a
visit is opening the feed more than an hour after the last time); on the first visit, and in the Atom feed, the
newest week of papers by arXiv date; with a chosen day, the papers dated from that day on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from xml.etree import ElementTree

import numpy as np

from copilot.errors import UserError
from copilot.features.profile import BrokenProfile, load_profile
from copilot.features.search import parse_day
from copilot.methods.fusion import reciprocal_rank_fusion
from copilot.records import Paper, date_number, number_to_date, parse_arxiv_id
from copilot.services import Services
from copilot.store.feed import MORE, NOT_INTERESTED

FEED_LIMIT = 30
MAX_CANDIDATES = 3000      # the newest ones, when more arrived (a first bulk import)
FIRST_VISIT_DAYS = 7
# A paper is "close" to a query (a profile paper, the profile's text, a liked paper) at this cosine of their packaged
# MiniLM vectors or more; only a close paper carries a reason, and the default list holds close papers only. Chosen
# from data (issue #59 item 9; docs/tabs.md): a random pair of the corpus's first 2,000 papers is at 0.60 or more
# under 1 % of the time (p99 0.586), while 79 % of CSFCube's pairs judged relevant (2–3) are; a profile of a real
# author's 4–10 papers (61 of them) finds a median 4 % of the field at 0.60 or more, ~6 papers of a 150-paper week.
# At 0.55 a random pair clears it ~2–3 % of the time and Qi Zhang's 8 papers found 30 of the newest week's 107.
CLOSE_FLOOR = 0.60
MIN_CLOSE = 5              # a default window with fewer close papers is doubled (2, 4, 8 … weeks) until it holds them
LIKED_WEIGHT, DISLIKED_WEIGHT = 0.75, 0.5
ATOM = "http://www.w3.org/2005/Atom"


@dataclass
class FeedItem:
    paper: Paper
    score: float
    ranks: dict[str, int] = field(default_factory=dict)    # best rank by: profile, liked, rocchio
    reason: str = ""      # the card's label: the query it is closest to, in words, if close (no rank: issue #49)
    closeness: float = 0.0    # its cosine to that query; a reason is given only at CLOSE_FLOOR or more

    def as_dict(self) -> dict:
        p = self.paper
        return {"id": p.id, "version": p.version, "title": p.title, "authors": p.authors,
                "date": p.published.isoformat(), "categories": p.categories, "abs_url": p.abs_url,
                "score": round(self.score, 6), "ranks": self.ranks, "reason": self.reason,
                "closeness": round(self.closeness, 4)}


@dataclass
class Feed:
    user: str
    since: str                  # what "new" means here, in words
    items: list[FeedItem]
    candidates: int             # new papers before the cut
    hidden: int                 # of them, marked "not interested"
    liked: int                  # papers marked "more like this" (all time)
    personalized: bool          # False: no profile and no feedback yet, listed newest first
    message: str = ""
    close: int | None = None    # of the candidates, those close to the profile or feedback (the default list)

    def as_dict(self) -> dict:
        return {"user": self.user, "since": self.since, "candidates": self.candidates, "hidden": self.hidden,
                "liked": self.liked, "personalized": self.personalized, "message": self.message, "close": self.close,
                "papers": [item.as_dict() for item in self.items]}


FEED_READ_AHEAD = 5           # papers at the top of a personalised feed whose full text is read ahead


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _candidates(services: Services, user: str, since: date | None, visit: bool) -> tuple[list[str], str]:
    rows = services.catalog.rows()
    if not rows:
        return [], "the library is empty"
    if since is not None:
        low = date_number(since)
        chosen, words = [r for r in rows if r.date >= low], f"papers dated {since.isoformat()} or later"
    else:
        visits = services.feed.record_visit(user) if visit else services.feed.visits(user)
        if visits.previous is not None:
            chosen = [r for r in rows if r.ingested > visits.previous]
            words = f"papers added since your previous visit ({_when(visits.previous)})"
        else:
            newest = number_to_date(max(r.date for r in rows))
            low = date_number(newest - timedelta(days=FIRST_VISIT_DAYS - 1))
            chosen = [r for r in rows if r.date >= low]
            words = f"the newest week of papers ({number_to_date(low).isoformat()} to {newest.isoformat()})"
    chosen.sort(key=lambda r: (r.date, r.ingested), reverse=True)
    return [r.id for r in chosen[:MAX_CANDIDATES]], words


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def feed_for(services: Services, user: str, since: date | str | None = None, limit: int = FEED_LIMIT,
             visit: bool = True, close_only: bool | None = None) -> Feed:
    """The user's feed. `visit` records this as a visit (the page and the CLI do; the Atom feed does not). By
    default (no day chosen) a ranked feed lists the close papers only, of a window widened until it holds
    MIN_CLOSE of them (`_close_window`); with a chosen day, every paper from that day, a reason only where close.
    `close_only` says which of the two, whatever the day (the Atom feed: the newest week's close papers)."""
    if isinstance(since, str):
        since = parse_day(since, "since")
    feedback = services.feed.feedback(user)
    liked = [pid for pid, verdict in feedback.items() if verdict == MORE]
    disliked = {pid for pid, verdict in feedback.items() if verdict == NOT_INTERESTED}
    try:
        profile = load_profile(services, user)
    except BrokenProfile:
        profile = None
    own = set(profile.paper_ids) if profile else set()
    ids, words = _candidates(services, user, since, visit)
    hidden = sum(1 for pid in ids if pid in disliked)
    ids = [pid for pid in ids if pid not in disliked and pid not in own]
    base = Feed(user, words, [], len(ids), hidden, len(liked), False)
    if not ids:
        base.message = f"Nothing new: no {words}." if "empty" not in words else "The library is empty."
        return base
    own_vectors = services.store.paper_embeddings(list(profile.paper_ids)) if profile else {}
    queries = {f"profile:{pid}": vector for pid, vector in own_vectors.items()}
    if profile and profile.text.strip():
        queries["profile:text"] = services.embedder.embed_one(profile.text)
    liked_by_id = services.store.paper_embeddings(liked) if liked else {}
    queries.update({f"liked:{pid}": vector for pid, vector in liked_by_id.items()})
    if not queries:
        papers = services.store.get_papers(ids[:limit])
        base.items = [FeedItem(p, 0.0) for p in papers]
        base.message = ("Listed newest first: save a profile (Profile tab) or mark papers \"more like this\" to have "
                        "the feed ranked for you.")
        return base
    if since is None if close_only is None else close_only:
        ids, base.since, base.message = _close_window(services, ids, words, queries, disliked | own)
        base.candidates, base.close = len(ids), len(ids)
    vectors = services.store.paper_embeddings(ids)
    ids = [pid for pid in ids if pid in vectors]
    if not ids:
        return base
    matrix = _unit(np.stack([vectors[pid] for pid in ids]))
    disliked_vectors = list(services.store.paper_embeddings(sorted(disliked)).values()) if disliked else []
    lists = {name: _ranked(ids, matrix, query) for name, query in queries.items()}
    # before any feedback the Rocchio query is the profile's centroid (issue #38)
    profile_queries = [v for name, v in queries.items() if name.startswith("profile:")]
    rocchio = "rocchio" if liked_by_id or disliked_vectors else "profile:centroid"
    lists[rocchio] = _ranked(ids, matrix, _rocchio(profile_queries, list(liked_by_id.values()), disliked_vectors))
    fused = reciprocal_rank_fusion(lists)[:limit]
    by_id = {p.id: p for p in services.store.get_papers([pid for pid, _, _ in fused])}
    titles = {p.id: p.title for p in services.store.get_papers([*own_vectors, *liked_by_id])}
    nearest = _nearest_query(ids, matrix, queries)
    base.items = [FeedItem(by_id[pid], score, _best_ranks(ranks), *reason_of(nearest[pid], titles))
                  for pid, score, ranks in fused if pid in by_id]
    base.personalized = True
    if visit:                                    # the top of a researcher's feed, read ahead at low priority
        from copilot.features.fulltext import AHEAD, read_soon

        read_soon(services, [item.paper.id for item in base.items[:FEED_READ_AHEAD]], AHEAD)
    return base


def _nearest_query(ids: list[str], matrix: np.ndarray, queries: dict[str, np.ndarray]
                   ) -> dict[str, tuple[str, float]]:
    """Each paper's nearest query (name, cosine); the first query on a tie."""
    names = list(queries)
    cosines = matrix @ _unit(np.stack([np.asarray(queries[n], dtype=np.float32) for n in names])).T
    best = np.argmax(cosines, axis=1)
    return {pid: (names[int(best[i])], float(cosines[i, best[i]])) for i, pid in enumerate(ids)}


def _close_ids(services: Services, ids: list[str], queries: dict[str, np.ndarray]) -> list[str]:
    vectors = services.store.paper_embeddings(ids)
    kept = [pid for pid in ids if pid in vectors]
    if not kept:
        return []
    nearest = _nearest_query(kept, _unit(np.stack([vectors[pid] for pid in kept])), queries)
    return [pid for pid in kept if nearest[pid][1] >= CLOSE_FLOOR]


def _close_window(services: Services, ids: list[str], words: str, queries: dict[str, np.ndarray],
                  left_out: set[str]) -> tuple[list[str], str, str]:
    """(the close papers, what window they come from in words, a note): the new papers' close ones when they hold
    MIN_CLOSE; otherwise the newest 2, 4, 8 … weeks by arXiv date, the first window holding MIN_CLOSE close papers
    (or the whole library). Issue #59: "the newest week (2 papers)", both unrelated, each labelled "close to your
    paper …"."""
    close = _close_ids(services, ids, queries)
    if len(close) >= MIN_CLOSE:
        return close, words, ""
    rows = [r for r in services.catalog.rows() if r.id not in left_out]
    newest, oldest = number_to_date(max(r.date for r in rows)), number_to_date(min(r.date for r in rows))
    weeks = 2
    while True:
        low = max(newest - timedelta(days=7 * weeks - 1), oldest)
        window = sorted((r for r in rows if r.date >= date_number(low)), key=lambda r: (r.date, r.ingested),
                        reverse=True)
        wider = _close_ids(services, [r.id for r in window[:MAX_CANDIDATES]], queries)
        if len(wider) >= MIN_CLOSE or low == oldest or len(window) >= MAX_CANDIDATES:
            break
        weeks *= 2
    span = "the whole library" if low == oldest else f"the newest {weeks} weeks"
    chosen = f"{span} ({low.isoformat()} to {newest.isoformat()})"
    note = (f"{words[0].upper()}{words[1:]} held {len(close)} paper{'' if len(close) == 1 else 's'} close to your "
            f"profile, so the list looks further back: {chosen}.")
    if not wider:
        note = f"No paper of {chosen} is close to your profile or feedback."
    return wider, chosen, note


def _title(text: str, most: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0] + "…"


def reason_of(nearest: tuple[str, float], titles: dict[str, str]) -> tuple[str, float]:
    """(why a card is listed, in words; its closeness): the query it is nearest to, said only when the paper is
    close to it (CLOSE_FLOOR). No rank is said (issue #49); no reason under an unrelated paper (issue #59)."""
    name, closeness = nearest
    if closeness < CLOSE_FLOOR:
        return "", closeness
    kind, _, source = name.partition(":")
    if kind == "liked":
        return f"like “{_title(titles.get(source, source))}”, which you asked more of", closeness
    if source == "text":
        return "close to your profile's text", closeness
    return f"close to your paper “{_title(titles.get(source, source))}”", closeness


def _ranked(ids: list[str], matrix: np.ndarray, query: np.ndarray) -> list[str]:
    scores = matrix @ _unit(np.asarray(query, dtype=np.float32))
    return [ids[i] for i in np.argsort(-scores, kind="stable")]


def _rocchio(profile: list[np.ndarray], liked: list[np.ndarray], disliked: list[np.ndarray]) -> np.ndarray:
    query = np.mean(_unit(np.stack(profile)), axis=0) if profile else np.zeros_like(liked[0])
    if liked:
        query = query + LIKED_WEIGHT * np.mean(_unit(np.stack(liked)), axis=0)
    if disliked:
        query = query - DISLIKED_WEIGHT * np.mean(_unit(np.stack(disliked)), axis=0)
    return query


def _best_ranks(ranks: dict[str, int]) -> dict[str, int]:
    best: dict[str, int] = {}
    for name, rank in ranks.items():
        kind = name.split(":")[0]
        best[kind] = min(rank, best.get(kind, rank))
    return best


def give_feedback(services: Services, user: str, paper_id: str, verdict: str) -> str:
    """Record "more like this" (MORE) or "not interested" (NOT_INTERESTED) on a library paper; returns its id."""
    parsed = parse_arxiv_id(str(paper_id or ""))
    if parsed is None:
        raise UserError("choose a paper of the feed first")
    if verdict not in (MORE, NOT_INTERESTED):
        raise UserError("the feedback is either 'more like this' or 'not interested'")
    if not services.store.get_papers([parsed[0]]):
        raise UserError(f"{parsed[0]} is not in the library")
    services.feed.set_feedback(user, parsed[0], verdict)
    if verdict == MORE:
        from copilot.features.fulltext import SOON, read_soon

        read_soon(services, [parsed[0]], SOON)
    return parsed[0]


def undo_feedback(services: Services, user: str, paper_id: str) -> None:
    parsed = parse_arxiv_id(str(paper_id or ""))
    if parsed:
        services.feed.clear_feedback(user, parsed[0])


def feed_token(services: Services, user: str, renew: bool = False) -> str:
    return services.feed.token(user, renew=renew)


def atom_for_token(services: Services, token: str, base_url: str = "") -> bytes | None:
    """The Atom XML of the user the token belongs to (None: no such token): the newest week's papers close to their
    profile (or a longer window's, as For you widens it), ranked for them; the newest week, ranked, before a profile
    or feedback."""
    user = services.feed.user_of_token(token)
    if user is None:
        return None
    rows = services.catalog.rows()
    since = (number_to_date(max(r.date for r in rows)) - timedelta(days=FIRST_VISIT_DAYS - 1)) if rows else None
    feed = feed_for(services, user, since=since, visit=False, close_only=True)
    return atom_xml(feed, f"{base_url.rstrip('/')}/feed/{token}.atom")


def atom_xml(feed: Feed, self_url: str) -> bytes:
    ElementTree.register_namespace("", ATOM)

    def add(parent, tag: str, text: str | None = None, **attrs) -> ElementTree.Element:
        element = ElementTree.SubElement(parent, f"{{{ATOM}}}{tag}", attrs)
        if text is not None:
            element.text = text
        return element

    root = ElementTree.Element(f"{{{ATOM}}}feed")
    add(root, "id", f"urn:research-copilot:feed:{hashlib.sha256(self_url.encode()).hexdigest()[:20]}")
    add(root, "title", "Research Copilot: new papers for you")
    add(root, "subtitle", f"{feed.since}, ranked by your profile and feedback")
    add(root, "updated", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    add(root, "link", href=self_url, rel="self")
    add(add(root, "author"), "name", "Research Copilot")
    for item in feed.items:
        p = item.paper
        entry = add(root, "entry")
        add(entry, "id", f"{p.abs_url}v{p.version}")
        add(entry, "title", p.title)
        day = datetime.combine(p.updated or p.published, datetime.min.time(), timezone.utc).isoformat()
        add(entry, "updated", day)
        add(entry, "published", datetime.combine(p.published, datetime.min.time(), timezone.utc).isoformat())
        add(entry, "link", href=p.abs_url, rel="alternate")
        add(entry, "link", href=p.pdf_url, rel="related", type="application/pdf")
        for name in p.authors:
            add(add(entry, "author"), "name", name)
        for category in p.categories:
            add(entry, "category", term=category)
        add(entry, "summary", p.abstract)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def feedback_of(services: Services, user: str) -> dict[str, str]:
    """The user's feedback: paper id → MORE or NOT_INTERESTED."""
    return services.feed.feedback(user)
