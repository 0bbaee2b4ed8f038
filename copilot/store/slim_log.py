"""SlimPLM's decision log, in SQLite beside `llm_calls`: one row per answered question (skipped or not, why),
with its claims, the items retrieved and the cost of each role. A question is stored whole, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass, fields

from copilot.store.db import Database


@dataclass(frozen=True)
class SlimClaimRecord:
    claim: str
    query: str
    verdict: str               # known | unknown | unclear | "" (not judged: the proxy failed first)
    judge_output: str


@dataclass(frozen=True)
class SlimItemRecord:
    item_id: str
    kind: str
    title: str
    score: float
    query: str                 # the query that found it


@dataclass(frozen=True)
class SlimRoleRecord:
    role: str                  # proxy | rewrite | judge | main
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float


@dataclass(frozen=True)
class SlimQuestionRecord:
    user: str
    asked_at: float
    question: str
    retrieved: bool
    decided_by: str            # judge | forced | proxy failure
    reason: str
    forced_rule: str
    heuristic_answer: str
    judge_output: str
    verdict: str
    decomposition: str
    proxy_error: str
    answer: str
    proxy_model: str
    main_model: str
    claims: tuple[SlimClaimRecord, ...] = ()
    items: tuple[SlimItemRecord, ...] = ()
    roles: tuple[SlimRoleRecord, ...] = ()
    id: int | None = None

    @property
    def main_calls(self) -> int:
        return sum(role.calls for role in self.roles if role.role == "main")


_SCALARS = [f.name for f in fields(SlimQuestionRecord) if f.name not in ("claims", "items", "roles", "id")]


class SlimLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, record: SlimQuestionRecord) -> int:
        """Store a question with its claims, items and role costs; returns its id."""
        with self.db.transaction() as tx:
            values = [getattr(record, name) for name in _SCALARS]
            question_id = tx.execute(f"INSERT INTO slim_questions ({', '.join(_SCALARS)}) VALUES "
                                     f"({', '.join('?' for _ in _SCALARS)})", values).lastrowid or 0
            tx.executemany("INSERT INTO slim_claims VALUES (?,?,?,?,?,?)",
                           [(question_id, n, c.claim, c.query, c.verdict, c.judge_output)
                            for n, c in enumerate(record.claims)])
            tx.executemany("INSERT INTO slim_items VALUES (?,?,?,?,?,?,?)",
                           [(question_id, n, i.item_id, i.kind, i.title, i.score, i.query)
                            for n, i in enumerate(record.items)])
            tx.executemany("INSERT INTO slim_roles VALUES (?,?,?,?,?,?)",
                           [(question_id, r.role, r.calls, r.prompt_tokens, r.completion_tokens, r.seconds)
                            for r in record.roles])
        return int(question_id)

    def get(self, question_id: int) -> SlimQuestionRecord | None:
        row = self.db.query_one("SELECT * FROM slim_questions WHERE id = ?", (question_id,))
        return self._record(row) if row else None

    def recent(self, user: str | None = None, limit: int = 20) -> list[SlimQuestionRecord]:
        """Newest first; all users when `user` is None."""
        where, params = ("WHERE user = ?", (user, limit)) if user is not None else ("", (limit,))
        rows = self.db.query(f"SELECT * FROM slim_questions {where} ORDER BY asked_at DESC, id DESC LIMIT ?", params)
        return [self._record(row) for row in rows]

    def _record(self, row: dict) -> SlimQuestionRecord:
        question_id = row["id"]
        claims = self.db.query("SELECT claim, query, verdict, judge_output FROM slim_claims WHERE question_id = ? "
                               "ORDER BY position", (question_id,))
        items = self.db.query("SELECT item_id, kind, title, score, query FROM slim_items WHERE question_id = ? "
                              "ORDER BY position", (question_id,))
        roles = self.db.query("SELECT role, calls, prompt_tokens, completion_tokens, seconds FROM slim_roles "
                              "WHERE question_id = ? ORDER BY role", (question_id,))
        return SlimQuestionRecord(**{name: row[name] for name in _SCALARS if name != "retrieved"},
                                  retrieved=bool(row["retrieved"]),
                                  claims=tuple(SlimClaimRecord(**c) for c in claims),
                                  items=tuple(SlimItemRecord(**i) for i in items),
                                  roles=tuple(SlimRoleRecord(**r) for r in roles), id=question_id)
