"""`python -m copilot bench --parts answers`: what a researcher waits for and reads when the local model answers.

20 fixed questions over 2,000 real papers, each a full chat turn through the product's own path (retrieval,
both answers, output checks), with the configured model. Thought memory is seeded first so the turns are real
comparisons: for each question one note built from the opening sentences of two papers near it (real text,
written without a model, with those papers as its lineage), so "both answers of a turn" means two answers.

Reported: retrieval time; time to the first answer token after retrieval; each answer's and each turn's time;
prompt and generation speed; and, on the raw model output and on the text shown after the checks, the share of
answers that cite a retrieved item or say they cannot answer, cite an item that was not retrieved, loop, or
echo their instructions.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

QUESTIONS = [
    "How do retrieval-augmented language models reduce hallucinations?",
    "What are the main ways to make large language model inference faster?",
    "How can reinforcement learning improve reasoning in language models?",
    "Which methods detect text written by large language models?",
    "How are vision-language models evaluated on visual question answering?",
    "What techniques compress large neural networks for edge devices?",
    "How do graph neural networks handle heterophilous graphs?",
    "What are current approaches to aligning language models with human preferences?",
    "How is in-context learning explained theoretically?",
    "Which benchmarks measure code generation by language models?",
    "How do diffusion models generate images from text?",
    "What methods protect privacy when training machine learning models?",
    "How can recommender systems use large language models?",
    "What causes catastrophic forgetting in continual learning and how is it reduced?",
    "How do multi-agent systems of language models coordinate on tasks?",
    "Which approaches improve machine translation for low-resource languages?",
    "How are large language models used for mathematical problem solving?",
    "What are the risks of jailbreak attacks on language models and the defences?",
    "How do dense retrievers compare with sparse retrieval such as BM25?",
    "How can time series forecasting benefit from foundation models?",
]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class RecordingBackend:
    """Wraps the real backend: records each call's raw output, prompt size and the timing of its pieces."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.obeys_grammar = getattr(inner, "obeys_grammar", False)
        self.calls: list[dict] = []

    def stream(self, messages, max_tokens, temperature, usage, *args, **kwargs):
        call = {"started": time.perf_counter(), "first": None, "last": None, "pieces": 0, "text": "",
                "usage": usage}
        self.calls.append(call)
        for piece in self.inner.stream(messages, max_tokens, temperature, usage, *args, **kwargs):
            now = time.perf_counter()
            call["first"] = call["first"] or now
            call["last"] = now
            call["pieces"] += 1
            call["text"] += piece
            yield piece


def seed_thoughts(services, memory, questions: list[str]) -> int:
    """One note per question from the opening sentences of the two papers nearest to it (see module doc)."""
    added = 0
    for question in questions:
        hits = services.store.search("paper", services.embedder.embed_one(question), 2)
        if len(hits) < 2:
            continue
        parts = [_SENTENCE.split(" ".join(hit.text.split()))[:2] for hit in hits]
        text = (f"Notes on {question.rstrip('?').lower()}: " + " ".join(" ".join(p) for p in parts))[:900]
        if memory.add(text, [(hit.id, "paper") for hit in hits], origin="bench", question=question,
                      check_redundant=False):
            added += 1
    return added


def _flags(text: str, allowed: set[str], instructions: list[str]) -> dict:
    from copilot.grounding import cited, cut_loop, drop_echo
    from copilot.prompts import CANNOT_ANSWER

    keys = cited(text)
    cannot = CANNOT_ANSWER.lower().rstrip(".") in " ".join(text.lower().split())
    return {"grounded": cannot or any(k in allowed for k in keys), "cannot": cannot,
            "invented": any(k not in allowed for k in keys),
            "loop": cut_loop(text)[1],
            "echo": drop_echo(text, instructions)[1]}


def _pct(values: list[Any], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 3) if values else None


# A quoted answer's stand-in for the model call it did not make.
QUOTED = {"started": 0.0, "first": None, "last": None, "pieces": 0, "text": "", "usage": None}


def _share(rows: list[dict], key: str) -> float | None:
    return round(sum(1 for r in rows if r[key]) / len(rows), 3) if rows else None


def answers_bench(services, questions: list[str] = QUESTIONS, papers: list | None = None) -> dict:
    """Run `questions` as chat turns over `papers` (already imported when None) and measure them."""
    from copilot import prompts
    from copilot.eval.answer_figures import label_sources, row_papers, supported_share, verbatim_quotes
    from copilot.features.answers import full_texts
    from copilot.features.chat import Chat
    from copilot.llm import LLM, Usage

    if papers:
        from copilot.features.library import ingestor

        ingestor(services).run("bench", papers)
    recorder = RecordingBackend(services.llm.backend)
    services.llm = LLM(recorder, services.db, retries=0, grammars=services.generation.grammars)
    memory = services.thought_memory
    seeded = seed_thoughts(services, memory, questions)
    chat = Chat(services)
    instructions = [prompts.CHAT_ANSWER.system]
    answers: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for question in questions:
        turn = chat.prepare(question, "bench")
        before = len(recorder.calls)
        started = time.perf_counter()
        for _ in chat.stream(turn):
            pass
        turn_s = time.perf_counter() - started
        calls = recorder.calls[before:before + len(turn.answers)]
        # a researcher reads before asking again: thought jobs finish before the next turn shares the model
        chat.wait_for_all()
        first_token = calls[0]["first"] - started if calls and calls[0]["first"] else None
        turns.append({"question": question, "comparison": turn.comparison, "retrieval_s": turn.retrieval_s,
                      "answers_s": turn_s, "first_token_s": first_token})
        calls += [QUOTED] * (len(turn.answers) - len(calls))   # quoted answers (the tiny profile) call no model
        for answer, call in zip(turn.answers, calls):
            allowed = {str(n) for n in range(1, len(answer.sources) + 1)} | {s.id for s in answer.sources}
            usage = call["usage"] or Usage()
            evaluated = (usage.prompt_tokens or 0) - getattr(usage, "cached_tokens", 0)
            prompt_s = (call["first"] or call["started"]) - call["started"]
            gen_s = (call["last"] - call["first"]) if call["first"] and call["pieces"] > 1 else None
            sources = label_sources(full_texts(services, answer.sources)) | row_papers(services, answer.table)
            checked = verbatim_quotes(services, answer.table)
            answers.append({
                "supported": supported_share(answer.text, sources, answer.table),
                "quotes": [{"paper": pid, "quote": quote, "verbatim": ok} for pid, quote, ok in checked],
                "rows": len(checked),
                "question": question, "label": answer.label, "kind": answer.kind, "error": answer.error,
                "seconds": answer.seconds, "prompt_tokens": usage.prompt_tokens, "evaluated_tokens": evaluated,
                "prompt_tok_s": evaluated / prompt_s if prompt_s > 0 and evaluated > 0 else None,
                "gen_tok_s": (call["pieces"] - 1) / gen_s if gen_s else None,
                "raw": call["text"] or answer.text, "shown": answer.text, "notes": list(getattr(answer, "notes", [])),
                "raw_flags": _flags(call["text"] or answer.text, allowed, instructions),
                "shown_flags": _flags(answer.text, allowed, instructions)})
    firsts = [t["first_token_s"] for t in turns if t["first_token_s"] is not None]
    compared = [t["answers_s"] for t in turns if len([a for a in answers if a["question"] == t["question"]]) == 2]
    ok = [a for a in answers if not a["error"]]
    summary = {
        "questions": len(questions), "papers": services.store.count("paper"), "thoughts_seeded": seeded,
        "comparisons": sum(1 for t in turns if t["comparison"] == "yes"), "answers": len(answers),
        "failed_answers": len(answers) - len(ok),
        "retrieval_ms_p50": _pct([t["retrieval_s"] * 1000 for t in turns], 50),
        "retrieval_ms_p95": _pct([t["retrieval_s"] * 1000 for t in turns], 95),
        "first_token_s_p50": _pct(firsts, 50), "first_token_s_p95": _pct(firsts, 95),
        "answer_s_p50": _pct([a["seconds"] for a in answers if a["seconds"]], 50),
        "answer_s_p95": _pct([a["seconds"] for a in answers if a["seconds"]], 95),
        "turn_both_answers_s_p50": _pct(compared, 50), "turn_both_answers_s_p95": _pct(compared, 95),
        "prompt_tokens_p50": _pct([a["prompt_tokens"] for a in answers if a["prompt_tokens"]], 50),
        "prompt_tok_s_p50": _pct([a["prompt_tok_s"] for a in answers if a["prompt_tok_s"]], 50),
        "gen_tok_s_p50": _pct([a["gen_tok_s"] for a in answers if a["gen_tok_s"]], 50),
        "model_profile": services.model_profile.name,
        "shown_supported": _mean([a["supported"] for a in ok]),
        "table_rows_p50": _pct([a["rows"] for a in ok if a["rows"]], 50),
        "quotes_checked": sum(len(a["quotes"]) for a in ok),
        "quotes_verbatim_share": _mean([q["verbatim"] for a in ok for q in a["quotes"]]),
    }
    for view in ("raw", "shown"):
        flags = [a[f"{view}_flags"] for a in ok]
        for key in ("grounded", "cannot", "invented", "loop", "echo"):
            summary[f"{view}_{key}_share"] = _share(flags, key)
    return {"summary": summary, "turns": turns, "answers": answers, "load_avg": list(os.getloadavg())}


MARKDOWN_ROWS = [
    ("retrieval ms p50 / p95", "retrieval_ms_p50", "retrieval_ms_p95"),
    ("first answer token after retrieval, s p50 / p95", "first_token_s_p50", "first_token_s_p95"),
    ("one answer, s p50 / p95", "answer_s_p50", "answer_s_p95"),
    ("both answers of a turn, s p50 / p95", "turn_both_answers_s_p50", "turn_both_answers_s_p95"),
    ("prompt tokens per answer p50", "prompt_tokens_p50", None),
    ("prompt tok/s p50 (tokens not reused from the cache)", "prompt_tok_s_p50", None),
    ("generation tok/s p50", "gen_tok_s_p50", None),
    ("cites a retrieved item or says it cannot answer (raw / shown)", "raw_grounded_share", "shown_grounded_share"),
    ("of which: says it cannot answer (raw / shown)", "raw_cannot_share", "shown_cannot_share"),
    ("cites an item that was not retrieved (raw / shown)", "raw_invented_share", "shown_invented_share"),
    ("repetition loop (raw / shown)", "raw_loop_share", "shown_loop_share"),
    ("echoes its instructions (raw / shown)", "raw_echo_share", "shown_echo_share"),
    ("supported: share of shown sentences whose words all are in the source they cite", "shown_supported", None),
    ("evidence table rows per answer p50", "table_rows_p50", None),
    ("quotes checked / share verbatim in the one paper they name", "quotes_checked", "quotes_verbatim_share"),
    ("model profile (tiny: evidence tables)", "model_profile", None),
]


def to_markdown(result: dict, title: str = "answers") -> str:
    s = result["summary"]
    lines = [f"| {title} | value |", "|---|---|",
             f"| turns / comparisons / answers / failed | {s['questions']} / {s['comparisons']} / {s['answers']} / "
             f"{s['failed_answers']} |"]
    for label, first, second in MARKDOWN_ROWS:
        value = f"{s.get(first)}" + (f" / {s.get(second)}" if second else "")
        lines.append(f"| {label} | {value} |")
    lines.append(f"| load average (1, 5, 15 min) at the end | {', '.join(f'{x:.2f}' for x in result['load_avg'])} |")
    return "\n".join(lines) + "\n"


def standalone(data_dir: Path, papers_path: Path, count: int = 2000, questions: int = len(QUESTIONS)) -> dict:
    """The whole bench in a fresh data dir (used by `bench --parts answers` and to measure an older checkout)."""
    import json

    from copilot.config import load_settings
    from copilot.services import Services
    from copilot.sources.snapshot import paper_from_row

    services = Services(load_settings(data_dir=data_dir, scheduler=False))
    with papers_path.open(encoding="utf-8") as rows:
        papers = [paper_from_row(json.loads(line)) for _, line in zip(range(count), rows)]
    result = answers_bench(services, QUESTIONS[:questions], papers)
    result["settings"] = {k: str(v) for k, v in services.settings.model_dump().items()
                          if k.startswith(("local", "context", "answer", "source", "top_k"))}
    return result


if __name__ == "__main__":   # python -m copilot.eval.bench_answers OUT_DIR PAPERS_JSONL [QUESTIONS]
    import json
    import sys

    out = Path(sys.argv[1])
    outcome = standalone(out / "data", Path(sys.argv[2]), questions=int(sys.argv[3]) if len(sys.argv) > 3 else 20)
    (out / "answers.json").write_text(json.dumps(outcome, indent=1, default=str))
    (out / "answers.md").write_text(to_markdown(outcome))
    print(to_markdown(outcome))
