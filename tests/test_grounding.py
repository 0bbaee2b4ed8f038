"""The output checks (copilot.grounding) as exact tests on outputs of the shapes the small model produced."""

from __future__ import annotations

from copilot.grounding import (
    check,
    cited,
    cut_loop,
    drop_echo,
    drop_invalid_citations,
    drop_unsourced_urls,
    reattribute,
)
from copilot.prompts import CANNOT_ANSWER, CHAT_ANSWER, TRENDS_PERIOD_SUMMARY

# The same paragraph seven times (a loop seen in the browser).
PARAGRAPH = ("Retrieval-augmented generation grounds the answers of a language model in documents fetched at "
             "question time [2]. ")
LOOPED_PARAGRAPH = PARAGRAPH * 7

# An invented researchgate link, repeated line after line.
INVENTED_URL = ("The method is described in detail at https://www.researchgate.net/publication/123456_Graph_RAG.\n"
                * 15)

# Trends printed its own instruction back.
ECHOED = ("In two or three short sentences, say what the field worked on in this period. "
          "Most papers study agents for code generation [2501.00001].")


def test_a_paragraph_repeated_seven_times_is_cut_to_one():
    text, cut = cut_loop(LOOPED_PARAGRAPH)
    assert cut
    assert text == PARAGRAPH.strip()


def test_a_loop_inside_one_long_sentence_is_cut_before_it_repeats():
    sentence = "The model " + "learns to rank the retrieved passages by relevance and " * 4 + "then answers."
    text, cut = cut_loop(sentence)
    assert cut
    assert text == "The model learns to rank the retrieved passages by relevance and …"


def test_distinct_sentences_are_not_a_loop():
    text = ("Dense retrieval encodes queries and passages separately [1]. Rerankers then read each pair jointly [2]. "
            "Both are trained on click logs [3].")
    assert cut_loop(text) == (text, False)


def test_an_invented_url_is_removed_and_a_sourced_one_kept():
    sources = ["Code at https://github.com/example/graphrag and data on request."]
    text = "Code: https://github.com/example/graphrag. Paper: https://www.researchgate.net/publication/1."
    cleaned, dropped = drop_unsourced_urls(text, sources)
    assert cleaned == "Code: https://github.com/example/graphrag. Paper: ."
    assert dropped == ["https://www.researchgate.net/publication/1"]


def test_the_repeated_invented_url_answer_ends_as_one_line_without_the_link():
    result = check(INVENTED_URL, allowed=["1", "2"], source_texts=["A graph method for retrieval."])
    assert result.cut_loop and result.dropped_urls
    assert "researchgate" not in result.text
    assert result.text.count("\n") == 0
    assert result.notes == ["A repeated passage was cut.", "Removed 1 link(s) found in none of the sources."]


def test_citations_of_labels_not_retrieved_are_dropped_and_kept_ones_normalised():
    text = "Graphs help [1]. Trees help [7]. Both help [1, 9]. See [Source 2]. Ranges [0, 1] stay; so does [sic]."
    cleaned, dropped = drop_invalid_citations(text, ["1", "2", "3"])
    assert cleaned == "Graphs help [1]. Trees help. Both help [1]. See [2]. Ranges [0, 1] stay; so does [sic]."
    assert dropped == ["7", "9"]


def test_arxiv_ids_old_and_new_are_recognised_as_citations():
    text = "A [2501.01234v2], B [hep-th/9901001], C [arXiv:2402.00001], D [T0123456789]."
    assert cited(text) == ["2501.01234", "hep-th/9901001", "2402.00001", "T0123456789"]
    cleaned, dropped = drop_invalid_citations(text, ["2501.01234", "hep-th/9901001"])
    assert cleaned == "A [2501.01234], B [hep-th/9901001], C, D."
    assert dropped == ["arXiv:2402.00001", "T0123456789"]


def test_an_echoed_instruction_sentence_is_removed_and_the_rest_kept():
    text, echoed = drop_echo(ECHOED, [TRENDS_PERIOD_SUMMARY.user])
    assert echoed
    assert text == "Most papers study agents for code generation [2501.00001]."


def test_an_answer_that_restates_the_chat_rules_loses_that_sentence():
    output = ("Tie each statement to the source it comes from by that source's number in square brackets. "
              "Contrastive pre-training improves retrieval recall [1].")
    result = check(output, allowed=["1"], instructions=[CHAT_ANSWER.system])
    assert result.echoed
    assert result.text == "Contrastive pre-training improves retrieval recall [1]."


def test_the_cannot_answer_sentinel_passes_untouched():
    result = check(CANNOT_ANSWER, allowed=[], instructions=[CHAT_ANSWER.system])
    assert result.text == CANNOT_ANSWER and not result.changed and result.notes == []
    assert drop_echo(CANNOT_ANSWER, [CHAT_ANSWER.system]) == (CANNOT_ANSWER, False)   # the instructed reply


def test_a_clean_grounded_answer_is_unchanged():
    answer = "Sparse retrieval still beats dense retrieval on rare terms [2].\nHybrids combine both [1][2].\n"
    result = check(answer, allowed=["1", "2"], source_texts=["x"], instructions=[CHAT_ANSWER.system])
    assert result.text == answer.strip()
    assert not result.changed


# Recorded in the browser (local model, 2026-11-23): the statement is about source 6 (BigO(Bench)), cited as [1].
SOURCES = [
    "Stop Overthinking: A Survey on Efficient Reasoning for Large Language Models. Large language models (LLMs) "
    "have demonstrated remarkable capabilities in complex tasks.",
    "From Chaos to Order: The Atomic Reasoner Framework for Fine-grained Reasoning in Large Language Models.",
    "Evaluating Test-Time Scaling LLMs for Legal Reasoning: OpenAI o1, DeepSeek-R1, and Beyond.",
    "Only a Little to the Left: A Theory-grounded Measure of Political Bias in Large Language Models.",
    "CodeReviewQA: The Code Review Comprehension Assessment for Large Language Models.",
    "BigO(Bench) -- Can LLMs Generate Code with Controlled Time and Space Complexity? We introduce BigO(Bench), a "
    "novel coding benchmark designed to evaluate the capabilities of generative language models.",
]
MISCITED = ("Source [1] proposes a new approach to evaluate the performance of large language models (LLMs) based on "
            "their ability to generate code with specified time and space complexities.\n")


def test_a_statement_about_another_source_gets_that_source_s_label():
    text, moved = reattribute(MISCITED, SOURCES)
    assert text == MISCITED.replace("Source [1]", "Source [6]")
    assert moved == [("1", "6")]
    result = check(MISCITED, allowed=[str(n) for n in range(1, 7)], source_texts=SOURCES, attribute=True)
    assert result.notes == ["Citation(s) moved to the source the statement's words come from: [1] → [6]."]


def test_a_statement_that_fits_its_source_keeps_its_label():
    fitting = "Source [6] introduces a benchmark of code with controlled time and space complexity.\n"
    assert reattribute(fitting, SOURCES) == (fitting, [])
    vague = "Source [2] shows that large language models are capable.\n"      # nothing specific: left alone
    assert reattribute(vague, SOURCES) == (vague, [])


def test_one_sentence_written_again_under_another_label_is_a_loop():
    # recorded in the answers bench (local model, 2026-11-23)
    raw = ("Source [1] introduces and climate change are two of the most pressing issues that require immediate "
           "attention.\nSource [2] introduces and climate change are two of the most pressing issues that require "
           "immediate attention.\n")
    text, cut = cut_loop(raw)
    assert cut and text == raw.split("\n")[0]


def test_a_claim_written_again_for_another_source_with_a_verb_changed_is_a_loop():
    # a related-work draft read in the browser (local model, 2026-11-25): the third paragraph copies the second
    first = ("Our approach modifies the activity of neurons in language models. Zhang and Brannvall [4] show that "
             "cross-lingual activation is not only possible but also highly effective for multi-lateral models, and "
             "it has been used as an alternative to traditional methods.")
    copy = ("\n\nThis method aims to enhance multilingual capabilities. Panchendrarajan and Zubiaga [2] report that "
            "cross-lingual activation is not only possible but also highly effective for multi-lateral models, and it "
            "has been used as a replacement to traditional methods.")
    text, cut = cut_loop(first + copy)
    assert cut and text == first + "\n\nThis method aims to enhance multilingual capabilities."


def test_sentences_of_one_shape_about_different_things_are_not_a_near_copy():
    raw = ("Source [1] proposes a new method for detecting breast cancer in chest X-ray images with a small "
           "convolutional network. Source [2] proposes a new method for translating speech between low-resource "
           "languages with a shared multilingual encoder.")
    assert cut_loop(raw) == (raw, False)


def test_a_sentence_announcing_the_revised_draft_is_an_echo():
    # a deep answer read in the browser (local model, 2026-11-25)
    raw = ("Revised draft with additional information about how to implement this feature in a new way. "
           "Source [6] shows that models can adapt to each language from context.")
    instructions = ["Revise the draft with the sources, one short paragraph per step. Output only the revised draft."]
    text, echoed = drop_echo(raw, instructions)
    assert echoed and text == "Source [6] shows that models can adapt to each language from context."
    assert drop_echo("Here is the revised version: the model adapts [2].", instructions) == ("", True)
    kept = ("A new version of the benchmark adds languages [2]. An updated version of the corpus is larger [1]. "
            "The revised protocol is stricter [3].")
    assert drop_echo(kept, instructions) == (kept, False)


# --- citations by arXiv id (Trends, Profile) and the output tidier ---------------------------------------------
def test_paper_citations_keep_only_given_ids_in_any_written_form():
    from copilot.grounding import keep_paper_citations

    text, cited_ids, dropped = keep_paper_citations(
        "I did [1] and [sic] things [hep-th/9901001, 2505.01234v2] (arXiv:2505.01234, 2020), not 2601.99999.",
        ["2505.01234", "hep-th/9901001"])
    assert text == "I did and [sic] things [hep-th/9901001, 2505.01234] [2505.01234], not."
    assert cited_ids == ["hep-th/9901001", "2505.01234"] and dropped == ["1", "2601.99999"]


def test_tidy_removes_markup_repeats_and_an_unfinished_sentence():
    from copilot.grounding import tidy

    # a topic summary the 135M model wrote (recorded): it ended with a stray closing tag
    raw = ("It uses vision-language models to learn 3D scenes. </pre>\n\nIt uses vision-language models to learn "
           "3D scenes.\n\nA second paragraph that stops in the mid")
    assert tidy(raw) == "It uses vision-language models to learn 3D scenes."
    assert tidy("One. <b>Two</b> three. [2503.1") == "One. Two three."
    assert tidy("First.\n\nSecond.", paragraphs=False) == "First. Second."


def test_a_short_fragment_of_the_instructions_is_an_echo():
    from copilot.grounding import drop_echo, prose_words

    # recorded: the period summary "Cite papers by [id] and [id]." whose ids were then removed
    instruction = "Cite papers by id in square brackets, e.g. [2503.13309]."
    assert drop_echo("Cite papers by [2503.13309] and [2503.13861].", [instruction]) == ("", True)
    assert drop_echo("No citation at all.", [instruction]) == ("No citation at all.", False)
    assert drop_echo("Paper [1] shows that sparse retrieval by papers helps.", [instruction])[1] is False
    assert prose_words("[2503.13309] and [2503.13861].") == 1


def test_a_statement_cut_by_the_grammar_length_cap_ends_at_its_last_clause():
    from copilot.grounding import close_cut_statements

    # recorded: the period summary's statement reached the 200-character cap inside a word
    words = ("a new approach to evaluate LLM-based judges in context by using an advanced algorithm that leverages "
             "the ability of vision-language models (VLMs) to learn from their own behavior, which is known as “S")
    assert len(words) == 200
    assert close_cut_statements(f"Paper [2503.14530] proposes {words}.\nPaper [2] studies short things.", 200) == (
        "Paper [2503.14530] proposes a new approach to evaluate LLM-based judges in context by using an advanced "
        "algorithm that leverages the ability of vision-language models (VLMs) to learn from their own behavior."
        "\nPaper [2] studies short things.")
    natural = "Source [1] shows that " + "x" * 190 + "."
    assert close_cut_statements(natural, 200) == natural


def test_a_statement_copied_under_another_label_is_seen_while_it_streams():
    from copilot.grounding import drop_unfinished_statement, repeats_a_statement

    # recorded from the 135M model: its second statement copied the first under label [2]
    first = ("Source [1] proposes that the most efficient way to make large language model inference faster is by "
             "using a combination of techniques.\n")
    assert not repeats_a_statement(first + "Source [2] proposes that the most")
    assert repeats_a_statement(first + "Source [2] proposes that the most efficient")
    assert not repeats_a_statement(first + "Source [2] shows that speculative decoding")
    assert drop_unfinished_statement(first + "Source [2] proposes that the most efficient") == first.rstrip()
    assert drop_unfinished_statement("Source [1] shows that a cut") == "Source [1] shows that a cut"


def test_copied_source_tags_are_removed():
    # seen through an endpoint serving the 135M model: the answer copied the prompt's quoting tags
    from copilot.grounding import check

    shown = check('<source id="3">Dense retrieval ranks passages [1].</source>', allowed=["1"]).text
    assert shown == "Dense retrieval ranks passages [1]."


# --- the named checks, one per kind of output: each equals the path its callers assembled by hand
_GIVEN = ["2501.00001", "2501.00002"]
_TEXTS = ["Sparse attention cuts the memory of long-context transformers.",
          "Retrieval augmented generation grounds answers in retrieved passages."]


def test_the_chat_answer_check_is_thought_retrievers():
    from copilot.grounding import check_chat_answer
    from copilot.methods.thought_retriever import check_answer
    from copilot.records import Evidence

    items = [Evidence(pid, "paper", "t", text, 0.9) for pid, text in zip(_GIVEN, _TEXTS)]
    for text in ("Source [1] shows that retrieval grounds answers in retrieved passages. Source [2] shows th",
                 "Retrieval grounds answers [2501.00002]. See [9] and https://invented.example.org.",
                 CANNOT_ANSWER):
        expected = check_answer(text, items)
        got = check_chat_answer(text, _GIVEN, _TEXTS, [CHAT_ANSWER.system])
        assert (got.text, got.notes) == (expected.text, expected.notes)
    assert check_chat_answer("Sparse attention [2501.00001] helps.", _GIVEN, _TEXTS, []).text == \
        "Sparse attention [1] helps."


def test_the_summary_check_is_trends_citation_step():
    from copilot.features.trends import cite_or_credit
    from copilot.grounding import check_summary

    text = ("Retrieval augmented generation grounds answers in retrieved passages [2501.00001]. "
            "Sparse attention cuts memory [2501.09999] (see https://invented.example.org).")
    expected = cite_or_credit(text, _GIVEN, TRENDS_PERIOD_SUMMARY, _TEXTS)
    got = check_summary(text, _GIVEN, _TEXTS, [TRENDS_PERIOD_SUMMARY.system, TRENDS_PERIOD_SUMMARY.user])
    assert (got.text, got.cited) == expected
    assert got.cited == ["2501.00002"] and got.dropped == ["2501.09999"] and "invented" not in got.text


def test_an_idea_whose_proposal_the_checks_remove_or_that_its_papers_do_not_support_is_none():
    from copilot.grounding import check_idea

    supported = ("Idea: sparse attention for long-context retrieval memory. Support: [2501.00001] shows that sparse "
                 "attention cuts the memory of long-context transformers.")
    kept = check_idea(supported, _GIVEN, _TEXTS, [])
    assert kept is not None and kept.cited == ["2501.00001"]
    assert check_idea("Idea: adapt to the new way of thinking. Support: [2501.00001] shows bread rises.",
                      _GIVEN, _TEXTS, []) is None
    assert check_idea("Idea: adapt to the new way of thinking about everything.", _GIVEN, _TEXTS,
                      ["Idea: adapt to the new way of thinking about everything."]) is None


def test_the_profile_draft_check_keeps_citations_of_the_selected_papers_only():
    from copilot.grounding import check_profile_draft

    got = check_profile_draft("I study sparse attention [2501.00001] and bread [2409.12345]. I also cite "
                              "https://invented.example.org.", set(_GIVEN), _TEXTS, [])
    assert got.cited == ["2501.00001"] and got.dropped == ["2409.12345"] and "invented" not in got.text
    assert any("link" in note for note in got.notes)


def test_the_thought_check_is_stricter_than_an_answers():
    from copilot.grounding import check_thought, is_loop

    looping = ("Sparse attention saves memory in long inputs. It saves memory in long inputs, and saves memory in "
               "long inputs.")
    assert check_thought(looping) == "repeats itself (a loop)" and not is_loop(looping)
    assert check_thought("Sparse attention cuts the memory that long-context transformers need.") is None
