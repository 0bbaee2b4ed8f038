"""Groups of an evidence table's rows (issue #39): rows that fall into two clearly separate kinds of work are
split in two, each group headed by a phrase that occurs verbatim in its rows' quotes and in no other group's."""

from __future__ import annotations

import re

import numpy as np

from copilot.methods import quotes

GROUP_MIN_ROWS = 4


# --- groups -----------------------------------------------------------------------------------------------------
def _two_means(vectors: np.ndarray) -> list[int]:
    """Two clusters of unit vectors: seeded by the most distant pair, a few rounds of assignment."""
    sims = vectors @ vectors.T
    a, b = np.unravel_index(int(np.argmin(sims)), sims.shape)
    centres = vectors[[a, b]]
    assign = [0] * len(vectors)
    for _ in range(5):
        assign = [int(np.argmax(centres @ v)) for v in vectors]
        for k in (0, 1):
            members = vectors[[n for n, g in enumerate(assign) if g == k]]
            if len(members):
                centre = members.mean(axis=0)
                centres[k] = centre / (np.linalg.norm(centre) or 1.0)
    return assign


_GENERIC = frozenset("""outperforms outperform existing achieves achieve achieving propose proposed proposes novel
approach approaches method methods model models framework frameworks performance results result show shows demonstrate
demonstrates based using state art baseline baselines experiments experimental significantly significant extensive
introduce introduces present presents new first work paper study our their its can also while both further
comprehensive effective efficient various different several across compared""".split())


def _phrases(text: str, question_words: set[str]) -> dict[str, str]:
    """Lower-cased 2- and 3-word runs of a quote (→ as written), each with a content word the question lacks and
    none of the generic words of an abstract ("outperforms existing" heads nothing)."""
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9\-]*", text)
    found: dict[str, str] = {}
    for size in (3, 2):
        for start in range(len(words) - size + 1):
            run = words[start:start + size]
            lower = [w.lower() for w in run]
            if lower[0] in quotes._STOP or lower[-1] in quotes._STOP:
                continue
            if any(w in _GENERIC for w in lower) or not any(
                    w not in quotes._STOP and w not in question_words and len(w) > 2 for w in lower):
                continue
            written = " ".join(run)
            if re.search(re.escape(written), text):          # the run as it stands in the quote (one space apart)
                found.setdefault(" ".join(lower), written)
    return found


def group_rows(rows: list,  # of evidence.Row
               vectors: np.ndarray | None, question: str, max_similarity: float = 0.55) -> bool:
    """Split the rows into two groups when they fall apart clearly: each group at least two rows, the groups'
    centres less similar than `max_similarity`, and each group sharing a phrase (in at least two of its rows,
    in none of the other group's). Sets each row's `group` to that phrase; False (rows unchanged) otherwise."""
    if vectors is None or len(rows) < GROUP_MIN_ROWS:
        return False
    assign = _two_means(vectors)
    members = [[n for n, g in enumerate(assign) if g == k] for k in (0, 1)]
    if min(len(m) for m in members) < 2:
        return False
    centres = [vectors[m].mean(axis=0) for m in members]
    centres = [c / (np.linalg.norm(c) or 1.0) for c in centres]
    if float(centres[0] @ centres[1]) >= max_similarity:
        return False
    asked = quotes._content(question)
    found = [_phrases(row.quote, asked) for row in rows]
    heads = []
    for k in (0, 1):
        other = set().union(*(found[n] for n in members[1 - k]))
        counts: dict[str, int] = {}
        for n in members[k]:
            for key in found[n]:
                if key not in other:
                    counts[key] = counts.get(key, 0) + 1
        shared = [key for key, c in counts.items() if c >= 2]
        if not shared:
            return False
        key = max(shared, key=lambda p: (counts[p], len(p.split()), p))
        heads.append(next(found[n][key] for n in members[k] if key in found[n]))
    for k in (0, 1):
        for n in members[k]:
            rows[n].group = heads[k]
    first = rows[0].group
    rows.sort(key=lambda r: r.group != first)     # the best row's group first; ranks kept within each
    return True
