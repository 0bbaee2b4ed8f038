"""The papers a question names, looked up in the library, not hoped for in a ranking (issue #57).

A paper named by its arXiv id or link, its title, the coined name its title starts with, or its first author and
year (methods.paper_names) comes first in Search and heads Chat's table when the library holds exactly one such
paper; a name that fits several papers puts them first (at most MAX_NAMED in all) and says so. The name index is
built from the catalog (features and stores keep it in step with ingestion) and rebuilt when the catalog is.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from copilot.methods.paper_names import Entry, Mention, NameIndex
from copilot.services import Services
from copilot.store.catalog import CatalogRow, PaperCatalog

MAX_NAMED = 5               # papers a question's names may put first
_indexes: weakref.WeakKeyDictionary[PaperCatalog, tuple[list[CatalogRow], NameIndex]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(frozen=True)
class Naming:
    mentions: tuple[Mention, ...]
    ids: tuple[str, ...]          # the papers named, to put first, in this order
    notice: str = ""              # a name that fits several papers, or an id the library lacks: said, not hidden

    def __bool__(self) -> bool:
        return bool(self.ids)


def name_index(services: Services) -> NameIndex:
    """The library's name index, built once per state of the catalog (0.3 s at 2,000 papers)."""
    catalog = services.catalog
    rows = catalog.rows()
    with _lock:
        held = _indexes.get(catalog)
        if held is not None and held[0] is rows:
            return held[1]
    index = NameIndex(Entry(row.id, row.title, row.authors, row.date // 10000) for row in rows)
    with _lock:
        _indexes[catalog] = (rows, index)
    return index


def named_papers(services: Services, question: str, order: Sequence[str] = ()) -> Naming:
    """The papers `question` names. The papers of a name that fits several come in `order` (e.g. the question's
    fused ranking) first, then in library order."""
    if not question or not question.strip() or services.store.count("paper") == 0:
        return Naming((), ())
    mentions = tuple(name_index(services).mentions(question))
    place = {pid: n for n, pid in enumerate(order)}
    ids: list[str] = []
    for mention in (m for m in mentions if len(m.ids) == 1):
        if mention.ids[0] not in ids:
            ids.append(mention.ids[0])
    for mention in (m for m in mentions if m.ambiguous):
        ranked = sorted(mention.ids, key=lambda pid: place.get(pid, len(place)))
        ids += [pid for pid in ranked if pid not in ids]
    return Naming(mentions, tuple(ids[:MAX_NAMED]), _notice(mentions, ids[:MAX_NAMED]))


def _notice(mentions: Sequence[Mention], shown: Sequence[str]) -> str:
    said = []
    for mention in mentions:
        if mention.ambiguous:
            first = sum(pid in shown for pid in mention.ids)
            which = ("they come first" if first == len(mention.ids) else
                     f"the {first} closest to the question come first" if first else "none could be put first")
            said.append(f"“{_short(mention.text)}” fits {len(mention.ids)} papers in the library: {which}.")
        elif not mention.ids:
            said.append(f"arXiv {_short(mention.text)} is not in the library.")
    return " ".join(dict.fromkeys(said))


def _short(text: str, most: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 1] + "…"
