"""Trends: what moved in the user's field over a time range — topics, summaries with citations, grounded ideas.

Stages (each timed, each yielding a partial report so the page and the CLI can show progress):
select (the field: the whole range sampled evenly; or "for me": ranked by the profile with RRF; capped) → topics
(k-means, c-TF-IDF, counts, rising vs the previous window) → summaries (LLM, per topic and overall; citations
checked) → ideas (RAT, retrieval from papers and thoughts) → store (summaries and ideas become thoughts with
lineage; report cached).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, timedelta
from typing import Any

import numpy as np

from copilot.errors import UserError, failure_sentence
from copilot.features.profile import profile_for_personalizing
from copilot.features.trends_ideas import (  # noqa: F401
    IDEA_SUPPORT,
    NO_IDEA_PASSED,
    Idea,
    generate_ideas,
    grounded_idea,
    ideas_from_rat,
    ideas_task,
    retriever,
)
from copilot.features.trends_summaries import (  # noqa: F401
    MIN_PROSE_WORDS,
    PERIOD_STATEMENTS,
    TOPIC_STATEMENTS,
    TooLittleLeft,
    cite_or_credit,
    period_label,
    quote_period,
    quote_topic,
    summarize_period,
    summarize_topic,
)
from copilot.llm import LLMError
from copilot.methods import quotes
from copilot.methods.fusion import RRF_K, reciprocal_rank_fusion
from copilot.methods.topics import MIN_PREVIOUS_PAPERS, Topic, build_topics, previous_window
from copilot.model_profile import Generation
from copilot.prompts import TRENDS_IDEAS_TASK
from copilot.records import Paper, date_number, number_to_date
from copilot.services import Services
from copilot.store.caches import CachedReport

log = logging.getLogger(__name__)

PRESETS = {"day": 1, "week": 7, "month": 30}


def default_ideas(services: Services) -> int:
    """Research ideas: none with a model that does not write (see IDEAS_OFF_NOTICE), the plan's number otherwise."""
    return services.generation.ideas if services.model_profile.writes else 0


IDEAS_OFF_NOTICE = ("No research ideas with a tiny local model: its ideas were rarely grounded in the papers (most "
                    "failed the checks, the rest were vague), and on it the product writes no text of its own. "
                    "Configure a larger local model (COPILOT_LOCAL_MODEL) or an OpenAI-compatible endpoint for "
                    "ideas.")


class TrendsError(UserError, ValueError):
    """Input or data the user can act on (bad range, empty range, empty library)."""


@dataclass
class TrendsOptions:
    cap: int = 300                   # most papers analysed
    summarized_topics: int = 5       # topics that get an LLM summary (largest first)
    summary_tokens: int = 96
    papers_per_summary: int = 3
    quote_chars: int = 200           # characters of each abstract quoted (prompt tokens cost time locally)
    ideas: int = 3                   # = RAT steps (one idea per step)
    retrieve_k: int = 3              # items retrieved per RAT step (papers and thoughts together)
    draft_tokens: int = 160
    revise_tokens: int = 192
    query_tokens: int = 24
    store_thoughts: bool | None = None   # None: as the model profile decides (`keeps_thoughts`)
    use_cache: bool = True
    for_me: bool = False             # rank the range's papers by the user's profile; else the field, sampled evenly

    @classmethod
    def for_writer(cls, plan: Generation, **overrides) -> TrendsOptions:
        """Token budgets of the generation plan, bounded by its answer length (COPILOT_ANSWER_MAX_TOKENS)."""
        most, summary = plan.answer_tokens, plan.summary_tokens
        values: dict[str, Any] = dict(summary_tokens=min(summary, most), draft_tokens=min(summary * 5 // 3, 2 * most),
                      revise_tokens=min(summary * 2, 2 * most))
        values.update(overrides)
        return cls(**values)


@dataclass
class TrendsReport:
    start: date
    end: date
    categories: list[str]
    user: str
    selection: str = "all"                       # "profile" (RRF-ranked) or "all"
    profile_version: int | None = None
    in_range: int = 0                            # papers of the range (before the cap)
    cap: int = 300
    previous: tuple[date, date] | None = None
    previous_papers: int = 0
    topics: list[Topic] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)   # id → title, for every paper shown
    summary: str = ""
    summary_ids: list[str] = field(default_factory=list)
    ideas: list[Idea] = field(default_factory=list)
    ideas_error: str | None = None
    ideas_trace: list[dict] = field(default_factory=list)   # the RAT steps, also when no idea passed the checks
    failures: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    thought_ids: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    writer: str = ""                             # the model that wrote summaries and ideas
    small_writer: bool = False                   # a small local model under grammars: the page cautions
    stage: str = "starting"
    done: bool = False
    cached: bool = False

    @property
    def papers(self) -> int:
        return sum(t.size for t in self.topics)

    @property
    def capped(self) -> bool:
        return self.in_range > self.papers

    def as_json(self) -> dict:
        """The CLI's JSON shape (issue #5)."""
        return {"papers": self.papers,
                "topics": [{"label": t.label, "terms": t.terms, "paper_ids": t.paper_ids, "counts": t.counts,
                            "rising": t.rising, "summary": t.summary} for t in self.topics],
                "summary": self.summary,
                "ideas": [idea.as_json() for idea in self.ideas]}

    def to_record(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_record(cls, text: str) -> TrendsReport:
        data = json.loads(text)
        data["start"], data["end"] = date.fromisoformat(data["start"]), date.fromisoformat(data["end"])
        if data.get("previous"):
            data["previous"] = tuple(date.fromisoformat(d) for d in data["previous"])
        data["topics"] = [Topic(**t) for t in data["topics"]]
        data["ideas"] = [Idea(**i) for i in data["ideas"]]
        return cls(**data)


# --- range ---------------------------------------------------------------------------------------------------
def parse_day(text: str, what: str) -> date:
    try:
        return date.fromisoformat(str(text).strip())
    except ValueError:
        raise TrendsError(f"{what} date {text!r} is not a date like 2026-06-01") from None


def corpus_span(services: Services) -> tuple[date, date]:
    span = services.store.date_range()
    if not span:
        raise TrendsError("the library has no papers yet: import a snapshot or run an ingestion (Library tab)")
    # a row dated in the future (stored before imports were checked, issue #34) must not move every range off today
    today = date.today() + timedelta(days=1)
    return min(number_to_date(span[0]), today), min(number_to_date(span[1]), today)


def resolve_range(services: Services, preset: str | None = None, start: str | date | None = None,
                  end: str | date | None = None) -> tuple[date, date]:
    """A preset ('day', 'week', 'month': the last one of the corpus, ending at its newest paper) or custom dates,
    narrowed to the span the corpus covers."""
    first, last = corpus_span(services)
    if preset and preset != "custom":
        if preset not in PRESETS:
            raise TrendsError(f"unknown range {preset!r}: use day, week, month or custom dates")
        return last - timedelta(days=PRESETS[preset] - 1), last
    if not start or not end:
        raise TrendsError("give both a start and an end date (YYYY-MM-DD), or pick day, week or month")
    start = start if isinstance(start, date) else parse_day(start, "start")
    end = end if isinstance(end, date) else parse_day(end, "end")
    if start > end:
        raise TrendsError(f"the start {start} is after the end {end}")
    if end < first or start > last:
        raise TrendsError(f"{start} … {end} lies outside the corpus, which spans {first} … {last}")
    return max(start, first), min(end, last)   # the part the corpus covers (0001-01-01 … 9999-12-31 included)


# --- selection -----------------------------------------------------------------------------------------------
def rank_by_profile(ids: Sequence[str], vectors: np.ndarray, queries: Sequence[np.ndarray],
                    k: int = RRF_K) -> list[str]:
    """Each query ranks the papers by cosine; the rankings are fused by Reciprocal Rank Fusion."""
    lists = [[ids[i] for i in np.argsort(-(vectors @ q), kind="stable")] for q in queries]
    return [item for item, _, _ in reciprocal_rank_fusion(lists, k=k)]


def even_sample(papers: Sequence[Paper], cap: int) -> list[Paper]:
    """At most `cap` papers spread evenly over the date-sorted list (keeps the range's time profile)."""
    ordered = sorted(papers, key=lambda p: (p.published, p.id))
    if len(ordered) <= cap:
        return ordered
    picks = np.linspace(0, len(ordered) - 1, cap).round().astype(int)
    return [ordered[i] for i in picks]


def select_papers(services: Services, start: date, end: date, categories: Sequence[str] | None, profile,
                  cap: int) -> tuple[list[Paper], np.ndarray, int]:
    """(selected papers, their embeddings, papers in the range before the cap)."""
    papers = services.store.papers_between(date_number(start), date_number(end), categories or None)
    if not papers:
        return [], np.zeros((0, 0), np.float32), 0
    vectors = services.store.paper_embeddings([p.id for p in papers])
    papers = [p for p in papers if p.id in vectors]
    if profile is not None:
        queries = [services.embedder.embed_one(profile.text)]
        queries += list(services.store.paper_embeddings(list(profile.paper_ids)).values())
        matrix = np.stack([vectors[p.id] for p in papers])
        ranked = rank_by_profile([p.id for p in papers], matrix, queries)[:cap]
        by_id = {p.id: p for p in papers}
        chosen = [by_id[i] for i in ranked]
    else:
        chosen = even_sample(papers, cap)
    return chosen, np.stack([vectors[p.id] for p in chosen]), len(papers)


# --- citations -----------------------------------------------------------------------------------------------
# --- thoughts and cache --------------------------------------------------------------------------------------
def _memory(services: Services):
    return services.thought_memory


def corpus_version(services: Services) -> str:
    return f"{services.store.count('paper')}:{services.runs.latest_id()}"


# Part of every cache key: bump it when what a report says for the same inputs changes (prompts, grammars,
# checks), so a report written by older code is not shown as current.
REPORT_FORMAT = 3


def cache_key(user: str, profile_version: int | None, start: date, end: date, categories: Sequence[str],
              corpus: str, opts: TrendsOptions, writer: str = "") -> str:
    return json.dumps([user, profile_version, str(start), str(end), sorted(categories), corpus, opts.cap,
                       opts.ideas, opts.summarized_topics, writer, REPORT_FORMAT, opts.for_me])


def cached_report(services: Services, key: str) -> TrendsReport | None:
    record = services.trends_cache.get(key)
    if record is None:
        return None
    try:
        report = TrendsReport.from_record(record)
    except (TypeError, ValueError, KeyError) as error:
        log.warning("unreadable cached trends report ignored: %s", error)
        return None
    report.cached = True
    return report


def save_report(services: Services, key: str, report: TrendsReport, corpus: str) -> None:
    services.trends_cache.put(CachedReport(
        key=key, user=report.user, profile_version=report.profile_version, start=str(report.start),
        end=str(report.end), categories=",".join(report.categories), corpus_version=corpus,
        report=report.to_record()))


# --- the whole run -------------------------------------------------------------------------------------------
def iter_trends(services: Services, start: date, end: date, categories: Sequence[str] | None = None,
                user: str = "local", opts: TrendsOptions | None = None, refresh: bool = False
                ) -> Iterator[TrendsReport]:
    """Run every stage, yielding the growing report after each step (the last one has done=True).

    Raises TrendsError before the first yield when the range holds no papers."""
    opts = opts or TrendsOptions.for_writer(services.generation)
    if not services.model_profile.writes:
        opts = replace(opts, ideas=0)
    categories = list(categories or [])
    profile, profile_notice = profile_for_personalizing(services, user)   # an unreadable one is told and counted
    ranking = profile if opts.for_me else None     # the field is the whole range, not the user's own interests
    corpus = corpus_version(services)
    key = cache_key(user, ranking.version if ranking else None, start, end, categories, corpus, opts,
                    f"{services.llm.info['model']}:{services.model_profile.name}")
    if opts.use_cache and not refresh:
        hit = cached_report(services, key)
        if hit is not None:
            yield hit
            return
    report = TrendsReport(start=start, end=end, categories=categories, user=user, cap=opts.cap,
                          selection="profile" if ranking else "all",
                          profile_version=ranking.version if ranking else None,
                          writer=services.llm.info["model"],
                          small_writer=services.llm.obeys_grammar and not services.model_profile.tiny)
    if profile_notice and opts.for_me:
        report.notices.append(profile_notice)
    elif opts.for_me and profile is None:
        report.notices.append("You have no saved profile yet, so this is the field, sampled evenly: save one on the "
                              "Profile tab to rank the papers by it.")
    if not services.model_profile.writes:
        report.notices.append(IDEAS_OFF_NOTICE)
    papers = _select_and_cluster(services, report, ranking, opts)
    yield report
    lineage: list[tuple[str, list[tuple[str, str]], str]] = []   # (text, sources, question)
    clock = time.perf_counter()
    llm_failed = yield from _summaries(services, report, papers, opts, lineage)
    report.timings["summaries"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if opts.ideas > 0:
        report.stage = "drafting and revising ideas (RAT)"
        yield report
        llm_failed = _ideas(services, report, papers, profile, opts, lineage) or llm_failed
    report.timings["ideas"] = time.perf_counter() - clock
    clock = time.perf_counter()
    report.stage = "storing thoughts"
    if keeps_thoughts(services, opts):
        _store_thoughts(services, report, lineage, user)
    _fill_titles(services, report)
    report.timings["store"] = time.perf_counter() - clock
    report.stage, report.done = "done", True
    if opts.use_cache and not llm_failed:
        save_report(services, key, report, corpus)
    yield report


def _select_and_cluster(services: Services, report: TrendsReport, profile, opts: TrendsOptions) -> dict[str, Paper]:
    """The select and topics stages: the papers analysed (by id), the topics built on them."""
    start, end, categories = report.start, report.end, report.categories
    clock = time.perf_counter()
    chosen, vectors, report.in_range = select_papers(services, start, end, categories, profile, opts.cap)
    if not chosen:
        where = f" in {', '.join(categories)}" if categories else ""
        raise TrendsError(f"no papers between {start} and {end}{where}; pick another range")
    report.previous = previous_window(start, end)
    before, before_vectors, _ = select_papers(services, *report.previous, categories, profile, opts.cap)
    report.previous_papers = len(before)
    report.timings["select"] = time.perf_counter() - clock
    if report.in_range > len(chosen):
        how = "ranked by your profile" if profile else "spread evenly over the range"
        report.notices.append(f"{report.in_range} papers in the range; the {len(chosen)} analysed are capped at "
                              f"{opts.cap}, {how}.")
    if not before:
        report.notices.append("No papers in the previous window of equal length: rising topics are unknown.")
    elif len(before) < MIN_PREVIOUS_PAPERS:
        report.notices.append(
            f"The previous window of equal length ({report.previous[0]} … {report.previous[1]}) holds only "
            f"{len(before)} paper{'s' if len(before) != 1 else ''}, too few to compare with: no topic is marked "
            "rising or falling.")
    clock = time.perf_counter()
    report.stage = "clustering topics"
    report.topics = build_topics(chosen, vectors, start, end, before_vectors if len(before) else None)
    report.titles = {p.id: p.title for p in chosen}
    report.timings["topics"] = time.perf_counter() - clock
    return {p.id: p for p in chosen}


def _summaries(services: Services, report: TrendsReport, papers: dict[str, Paper], opts: TrendsOptions,
               lineage: list) -> Generator[TrendsReport, None, bool]:
    """The summaries stage (yields the report per step; returns whether a model call failed)."""
    failed = False
    shown = min(opts.summarized_topics, len(report.topics))
    for n, topic in enumerate(report.topics[:opts.summarized_topics], start=1):
        report.stage = f"summarizing topic {n} of {shown}"
        yield report
        try:
            ids = summarize_topic(services, topic, papers, opts)
            made_from = ids + [i for i in topic.paper_ids[:opts.papers_per_summary] if i not in ids]
            lineage.append((topic.summary, [(i, "paper") for i in made_from],
                            f"Trend {period_label(report)}: {topic.label}"))
        except LLMError as error:
            topic.summary = failure_sentence("The model could not summarize this topic", error,
                                             "Its papers are listed below.")
            report.failures.append(f"topic {topic.label}: {error}")
            failed = True
    report.stage = "summarizing the period"
    yield report
    try:
        given = summarize_period(services, report, papers, opts)
        made_from = report.summary_ids + [i for i in given if i not in report.summary_ids]
        lineage.append((report.summary, [(i, "paper") for i in made_from], f"Trends of {period_label(report)}"))
    except LLMError as error:
        report.summary = failure_sentence("The model could not summarize the period", error,
                                          "The topics and their papers are listed below.")
        report.failures.append(f"period summary: {error}")
        failed = True
    return failed


def _ideas(services: Services, report: TrendsReport, papers: dict[str, Paper], profile, opts: TrendsOptions,
           lineage: list) -> bool:
    """The ideas stage; returns whether a model call failed."""
    try:
        for idea, sources in generate_ideas(services, report, papers, profile, opts):
            report.ideas.append(idea)
            for pid in idea.paper_ids:
                report.titles.setdefault(pid, "")
            lineage.append((idea.text, sources, f"Research idea from trends {period_label(report)}"))
        if not report.ideas:
            report.ideas_error = NO_IDEA_PASSED
    except LLMError as error:
        report.ideas_error = failure_sentence("The model could not propose ideas", error,
                                              "The topics and summaries stand.")
        report.failures.append(f"ideas: {error}")
        return True
    return False


def keeps_thoughts(services: Services, opts: TrendsOptions) -> bool:
    """Whether a run keeps its summaries and ideas as thoughts: when the model writes them. On the tiny profile a
    summary is quotes of the period's papers, which a later question's own retrieval finds as well: kept (16 from the
    dev library's three months), they reached 16 of the 28 dev questions, 14 of those answers came out the same as
    papers alone, and the two that differed gained no relevant paper (issue #40, docs/thoughts-eval.md).
    `opts.store_thoughts` overrides (`eval thoughts-dev --trends` does)."""
    return services.model_profile.writes if opts.store_thoughts is None else opts.store_thoughts


def _store_thoughts(services: Services, report: TrendsReport, lineage, user: str) -> None:
    try:
        memory = _memory(services)
    except ImportError:
        report.notices.append("Thought memory is not available in this build; summaries were not stored.")
        return
    from copilot.methods.thought_retriever import instruction_text, passage_problem
    from copilot.prompts import PROMPTS

    # what the prompts that wrote these texts say: a text repeating them is an echo, not a finding
    instructions = [instruction_text(PROMPTS[name]) for name in (
        "trends_topic_summary", "trends_period_summary", "rat_draft", "rat_query", "rat_revise")]
    instructions.append(instruction_text(TRENDS_IDEAS_TASK))
    for text, sources, question in lineage:
        shown, text = text, quotes.drop_ids(text)    # a thought keeps no raw ids: its lineage holds them
        problem = passage_problem(text, instructions)   # the chat thought's confidence check, on the text itself
        if problem:
            log.info("trend text not stored as a thought (%s): %.80s", problem, text)   # the log's note, not the page's
            continue
        try:
            thought_id = memory.add(text, sources, origin="trends", question=question, user=user)
        except Exception as error:  # storing is a bonus; the report stands without it
            log.warning("trend thought not stored: %s", error)
            report.notices.append(failure_sentence("This report could not be kept in memory", error,
                                                   "The report itself is complete."))
            continue
        if thought_id:
            report.thought_ids.append(thought_id)
            for idea in report.ideas:
                if idea.text == shown:
                    idea.thought_id = thought_id


def _fill_titles(services: Services, report: TrendsReport) -> None:
    missing = [pid for pid, title in report.titles.items() if not title]
    for paper in services.store.get_papers(missing):
        report.titles[paper.id] = paper.title


def run_trends(services: Services, start: date, end: date, categories: Sequence[str] | None = None,
               user: str = "local", opts: TrendsOptions | None = None, refresh: bool = False,
               on_stage: Callable[[TrendsReport], None] | None = None) -> TrendsReport:
    report = None
    for report in iter_trends(services, start, end, categories, user, opts, refresh):
        if on_stage:
            on_stage(report)
    assert report is not None           # iter_trends yields at least once or raises
    return report
