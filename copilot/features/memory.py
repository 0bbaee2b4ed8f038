"""The thought memory as users see it: list, search, delete, with direct and root sources resolved to titles."""

from __future__ import annotations

from typing import Any

from copilot.features.chat import SWEEP_AFTER_S, chat_for, resume_jobs
from copilot.features.chat_view import TurnView
from copilot.methods.thought_retriever import THOUGHT_ID_PREFIX
from copilot.records import storable_text
from copilot.services import Services

# Every way a thought is made (features/chat.py, deep.py, trends.py), as the page tells it. Each is stored only after
# the confidence check and the merge test; each card says which origin it has.
THOUGHT_SOURCES = (
    "Thoughts are notes the assistant keeps from its own outputs, each checked before it is stored: in Chat, the "
    "answer you vote for; when you do not vote, the thought-augmented answer once you ask your next question (or "
    f"after {SWEEP_AFTER_S // 60} minutes); an answer shown alone (memory had nothing new for the question) at once; "
    "and, with a model that writes, a finished Deep answer and the topic summaries, period summary and ideas of a "
    "Trends report. With the default small model a Chat thought is the evidence table itself: each paper's title and "
    "the sentences it quoted; when a later question finds the thought, those papers compete for the table's rows "
    "like any other paper. With that model, Trends summaries are quotes of the period's papers, which a question's own "
    "search finds anyway, so they are not kept.")


def memory_view(services: Services, query: str = "", limit: int = 30, user: str | None = None) -> list[dict]:
    """Newest thoughts, or the thoughts nearest in meaning to `query` (an exact thought id finds that thought)."""
    memory = chat_for(services).memory
    query = storable_text(query).strip()[: services.settings.max_input_chars]
    named = memory.get(query, user) if query.startswith(THOUGHT_ID_PREFIX) and " " not in query else None
    if named:
        thoughts = [named]
    elif query:
        thoughts = memory.search(query, limit, user)
    else:
        thoughts = memory.list(limit, user=user)
    paper_ids = {s["id"] for t in thoughts for s in t["sources"] if s["kind"] == "paper"}
    paper_ids |= {pid for t in thoughts for pid in t["root_sources"]}
    titles = {p.id: p.title for p in services.store.get_papers(sorted(paper_ids))}
    for thought in thoughts:
        thought["own"] = user is None or thought["user"] == user
        if not thought["own"]:          # shared for retrieval, but another user's question stays theirs
            thought["question"] = ""
        for source in thought["sources"]:
            source["title"] = titles.get(source["id"], "") if source["kind"] == "paper" else ""
        thought["root_papers"] = [{"id": pid, "title": titles.get(pid, "")} for pid in thought["root_sources"]]
    return thoughts


def delete_thought(services: Services, thought_id: str, user: str | None = None) -> bool:
    """Delete a thought made from `user`'s own question; an admin (COPILOT_ADMINS) or None (the CLI) may delete
    any thought."""
    if user in services.settings.admins:
        user = None
    return chat_for(services).memory.delete(storable_text(thought_id).strip(), user)


def memory_count(services: Services) -> int:
    return chat_for(services).memory.count()


def doctor(services: Services, repair: bool = False, wait_s: float = 600) -> dict:
    """Where SQLite and Chroma disagree about thoughts, thought jobs a stopped process left behind, and whether the
    lexical index holds exactly the stored papers. With `repair`: fix all three (`chat.resume_jobs`, a rebuilt
    index), wait for the resumed jobs, and check again."""
    chat = chat_for(services)
    found = chat.memory.check()
    stale = chat.stale_jobs()
    lexical = services.lexical.check()
    report: dict[str, Any] = {"papers": _lineage_papers(services), "thoughts": found.as_dict(), "stale_jobs": stale,
              "lexical_index": lexical.as_dict(), "cpu_kernels": services.cpu_kernels(),
              "mismatches": found.mismatches + len(stale) + (0 if lexical.in_step else 1)}
    if repair:
        report["repair"] = resume_jobs(services)
        if not lexical.in_step:
            report["repair"]["lexical_index_rebuilt"] = services.lexical.rebuild()
        chat.wait_for_all(timeout=wait_s)
        after = chat.memory.check()
        left = chat.stale_jobs()
        lexical_after = services.lexical.check()
        report["after_repair"] = {"thoughts": after.as_dict(), "stale_jobs": left,
                                  "lexical_index": lexical_after.as_dict(),
                                  "mismatches": after.mismatches + len(left) + (0 if lexical_after.in_step else 1)}
    return report


def _lineage_papers(services: Services) -> dict:
    """Papers in Chroma, and the papers thoughts were made from that are not there (not repairable here:
    import them again)."""
    cited = services.thoughts.source_papers()
    present = services.store.existing_papers(cited)
    return {"stored": services.store.count("paper"), "sources_of_thoughts": len(cited),
            "missing_sources": sorted(set(cited) - present)}


def thought_lineage(services: Services, view: TurnView, user: str) -> dict[str, list[dict]]:
    """Root papers ({id, title}) of each thought a revealed turn used, for the reveal; none before it (they would
    tell the sides apart). A thought no longer in memory is left out."""
    if not view.revealed:
        return {}
    lineage = {}
    for thought_id in view.thought_ids:
        found = memory_view(services, thought_id, limit=1, user=user)
        if found and found[0]["id"] == thought_id:
            lineage[thought_id] = found[0]["root_papers"]
    return lineage
