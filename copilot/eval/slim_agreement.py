"""`eval slim-agreement`: does the weighed judge at P(unknown) = 0.5 say what the proxy writes?

For every question of a SlimPLM question set that the timeliness rule does not force (those the judge decides),
the proxy writes its draft as SlimPLM does (`slim.heuristic_answer`), then the judge's verdict on (question, draft)
is read three ways: **weighed** (`slim.judge` with threshold 0.5: the two words' log-probabilities summed over
their tokens), **greedy** (the word written at temperature 0 under the judge's grammar) and **written** (the
product's written path, `slim.judge` without a threshold: temperature 0.1, the backend's default sampling). The
report counts how often weighed agrees with each, and lists every disagreement with its P(unknown).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from copilot import prompts
from copilot.features.adaptive import proxy_llm, slim_options
from copilot.methods import slim
from copilot.services import Services

HALF = 0.5


def judge_three_ways(proxy, question: str, draft: str) -> dict:
    """The judge's verdict on (question, draft): weighed at 0.5, greedy, and written as the product writes it."""
    trace = slim.SlimTrace(question)
    weighed = slim.judge(proxy, question, draft, trace, threshold=HALF)
    prompt = prompts.SLIM_JUDGE.render(question=question, answer=draft)
    greedy = proxy.complete(prompt, max_tokens=slim.JUDGE_TOKENS, temperature=0.0,
                            grammar=prompts.slim_judge_grammar() if proxy.obeys_grammar else None)
    written = slim.judge(proxy, question, draft, trace, threshold=None)
    return {"p_unknown": weighed.p_unknown, "weighed": weighed.verdict, "greedy": slim.read_verdict(greedy),
            "written": written.verdict}


def agreement(rows: Sequence[dict]) -> dict:
    """Counts over the judged rows: verdicts per reading, and how often weighed agrees with greedy and written."""
    n = len(rows)

    def unknown(key: str) -> int:
        return sum(r[key] == slim.SLIM_UNKNOWN for r in rows)

    return {"questions": n,
            "unknown": {key: unknown(key) for key in ("weighed", "greedy", "written")},
            "weighed_agrees_with_greedy": sum(r["weighed"] == r["greedy"] for r in rows),
            "weighed_agrees_with_written": sum(r["weighed"] == r["written"] for r in rows),
            "disagreements": [r for r in rows if not r["weighed"] == r["greedy"] == r["written"]]}


def measure(services: Services, questions: Sequence[dict],
            progress: Callable[[str], None] = lambda _: None) -> dict:
    proxy, options = proxy_llm(services), slim_options(services)
    if not proxy.scores_options:
        raise ValueError("the proxy cannot weigh its words (an endpoint proxy): nothing to compare")
    rows = []
    judged = [row for row in questions if slim.timeliness(row["question"]) is None]
    for n, row in enumerate(judged, 1):
        draft = slim.heuristic_answer(proxy, row["question"], slim.SlimTrace(row["question"]), options)
        rows.append({"question": row["question"], "kind": "paper" if row.get("gold") else "general",
                     "draft": draft, **judge_three_ways(proxy, row["question"], draft)})
        progress(f"{n}/{len(judged)} P(unknown) {rows[-1]['p_unknown']:.3f} weighed {rows[-1]['weighed']} "
                 f"greedy {rows[-1]['greedy']} written {rows[-1]['written']}")
    return {"summary": agreement(rows), "rows": rows,
            "meta": {"questions_in_file": len(questions), "forced_and_left_out": len(questions) - len(judged),
                     "proxy_model": proxy.info["model"]}}


def markdown(report: dict) -> str:
    s = report["summary"]
    n = s["questions"] or 1
    return "\n".join([
        f"Judge readings over {s['questions']} unforced questions ({report['meta']['proxy_model']}):",
        "",
        "| reading | says unknown | agrees with weighed at 0.5 |",
        "|---|---|---|",
        f"| weighed, P(unknown) ≥ 0.5 | {s['unknown']['weighed']} | — |",
        f"| greedy word (temperature 0) | {s['unknown']['greedy']} | {s['weighed_agrees_with_greedy']} "
        f"({s['weighed_agrees_with_greedy'] / n:.0%}) |",
        f"| written word (product, temperature 0.1) | {s['unknown']['written']} | "
        f"{s['weighed_agrees_with_written']} ({s['weighed_agrees_with_written'] / n:.0%}) |",
    ])
