"""What a question asks of a paper, read from cue phrases (every pattern linear: no nested repetition, bounded gaps),
and which sentences state it: an amount (`asks_how_much`), what a paper proposes (`asks_contribution`), what goes
wrong or why (`limit_cue`, `states`), a reason (`asks_reason`: a quote then brings the sentence that explains it).
The evidence table (methods.evidence) and the passages of chosen papers (methods.passages) read them."""

from __future__ import annotations

import re

_HOW_MUCH = re.compile(r"\bhow (?:much|many|well|fast|large|big|good|accurate|often|long)\b|\bby how\b"
                       r"|\bwhat (?:share|proportion|fraction|percentage)\b"
                       r"|\bwhat (?:is|are) the (?:gains?|savings?|speed-?ups?|improvements?)\b"
                       r"|\b(?:save|saving|savings|speed-?up|reduction|accuracy|gain)s?\b", re.I)
# a question about what goes wrong ("What are the limits of RAG for multi-hop QA?") or why ("Why do VLMs
# hallucinate?"), and the sentences that answer each: a limitation or failure (or its cause), a cause
_ASKS_LIMITS = re.compile(r"\b(?:limits|limitations?|challenges|drawbacks?|weakness(?:es)?|shortcomings?|pitfalls?"
                          r"|bottlenecks?|failure modes?|open (?:problems|questions|issues)"
                          r"|what (?:goes|can go) wrong)\b", re.I)
_ASKS_WHY = re.compile(r"\bwhy (?:do|does|did|is|are|can|can't|cannot|would|might)\b", re.I)
_ASKS_REASON = re.compile(r"\bwhy\b|\breasons?\b|\bwhat\s+(?:causes|caused|explains)\b", re.I)
_CAUSE = (r"due to|because|stems? from|caused by|attributed? to|attributable to|arises? from|root causes?|"
          r"originates? from|the (?:main |primary |key )?reasons?")
_STATES_LIMIT = re.compile(r"\b(?:limitations?|limited|struggles?|struggling|fail(?:s|ed|ing|ures?)?|suffers?"
                           r"|bottlenecks?|drawbacks?|shortcomings?|lacks?|lacking|insufficient|unable|cannot|"
                           r"vulnerab\w+|prone to|hinders?|degrades?|degradation|challenges|brittle|unreliable|poorly|"
                           r"inconsisten\w+|falls? short|" + _CAUSE + r")\b", re.I)
_STATES_CAUSE = re.compile(r"\b(?:" + _CAUSE + r")\b", re.I)
# a sentence about removing a limitation states none: "To address these limitations, we propose …", "… without
# performance degradation", "avoiding the inefficiency caused by …"
_REMOVES_LIMIT = re.compile(r"\b(?:to (?:address|overcome|tackle|alleviate|mitigate|solve|resolve|remedy|bridge)"
                            r"|without (?:\w+ ){0,3}(?:degradation|loss|failure|sacrific\w*)|avoid\w*|eliminat\w*)\b",
                            re.I)


def asks_how_much(question: str) -> bool:
    return bool(_HOW_MUCH.search(question or ""))


_CONTRIBUTION = re.compile(r"\b(?:propos\w*|introduc\w*|present\w*|contribut\w*|main idea|key idea|novel\w*|"
                           r"how (?:does|do) (?:it|they|the (?:paper|method|approach|model|system)) work)\b"
                           r"|\bwhat (?:does|did) (?:the paper|this paper|it|\S+) (?:do|study|address)\b", re.I)


def asks_contribution(question: str) -> bool:
    """Whether the question asks what a paper proposes or does (not what it finds)."""
    return bool(_CONTRIBUTION.search(question or ""))


def limit_cue(question: str) -> re.Pattern | None:
    """For a question about what goes wrong (limits, challenges, failures), the cue of a sentence that states one;
    for a why-question, of a sentence that states a cause; else None."""
    return _STATES_LIMIT if _ASKS_LIMITS.search(question or "") else _STATES_CAUSE if _ASKS_WHY.search(
        question or "") else None


def states(cue: re.Pattern, sentence: str) -> bool:
    """Whether a sentence states what `cue` (a `limit_cue`) looks for, not how a paper removes it."""
    return bool(cue.search(sentence)) and not _REMOVES_LIMIT.search(sentence)


def asks_reason(question: str) -> bool:
    """Whether the question asks why, or for a reason or cause."""
    return bool(_ASKS_REASON.search((question or "")[:2000]))
