"""ROUGE of generated summaries (issue 15; hf_slm/evaluation/rouge.py): hand-computed F-measures, stemming,
words taken out of trees (never their labels), lead-1, deterministic bootstrap intervals, the result files
named by their data, runs refused or resumed by the journal, clear errors, and the XSum sample's LEAD."""

import json
from pathlib import Path

import numpy as np
import pytest
from nltk import Tree

from hf_slm.evaluation.results import tidy_numbers
from hf_slm.evaluation.rouge import RougeScorer, bootstrap_intervals, evaluate_rouge, read_rows, summary_words

XSUM_SAMPLE = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "xsum_sample"
               / "xsum_humaneval_50.derived.jsonl")
WORDS = ["the", "cat", "lay", "on", "a", "mat"]


def test_f_measures_by_hand():
    # reference: the cat sat on the mat; candidate: the cat lay on a mat (6 words each)
    # ROUGE-1: the, cat, on, mat match: P = R = 4/6. ROUGE-2: only "the cat" of 5 bigrams each: 1/5.
    # ROUGE-L: the longest common subsequence "the cat on mat": 4/6.
    scores = RougeScorer()("the cat sat on the mat".split(), WORDS)
    assert scores == pytest.approx({"rouge1": 2 / 3, "rouge2": 1 / 5, "rougeL": 2 / 3})
    # Unequal lengths: reference "a b c d" (4), candidate "a b x" (3): ROUGE-1 P = 2/3, R = 2/4, F = 4/7.
    assert RougeScorer()("a b c d".split(), "a b x".split())["rouge1"] == pytest.approx(4 / 7)


def test_stemming_is_on_and_identical_summaries_score_one():
    scorer = RougeScorer()
    assert scorer(["cats", "sitting"], ["cat", "sits"]) == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    assert scorer(WORDS, list(WORDS)) == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    assert scorer(WORDS, []) == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}


@pytest.mark.parametrize("summary", [
    "the cat lay on a mat",
    "(S (NP the cat) (VP lay (PP on (NP a mat))))",  # a model's tree, no POS tags
    "(ROOT (S (NP (DT the) (NN cat)) (VP (VBD lay) (PP (IN on) (NP (DT a) (NN mat))))))",  # with POS tags
    "(S (NP the cat NP) (VP lay (PP on (NP a mat NP) PP) VP) S)",  # top-down actions
    ["(S", "(NP", "the", "cat", "NP)", "(VP", "lay", "(PP", "on", "(NP", "a", "mat", "NP)", "PP)", "VP)", "S)"],
    ["(S (NP the cat) (VP lay))", "(S (PP on (NP a mat)))"],  # one tree per sentence
    "(S (NP the cat NP) (VP lay VP) S) (S (PP on (NP a mat NP) PP) S)",
    "the/2 cat/3 lay/0 on/3 a/6 mat/4",  # an inline dependency tree
    "( ( the cat ) ( lay ( on ( a mat ) ) ) )",  # paper 003's unlabeled tree: no word is taken for a label
    Tree.fromstring("(S (NP the cat) (VP lay (PP on (NP a mat))))"),
])
def test_words_come_out_of_trees_and_labels_are_never_scored(summary):
    assert summary_words(summary) == WORDS


def test_cut_short_trees_and_escaped_brackets():
    assert summary_words("(S (NP the cat) (VP lay (PP on") == ["the", "cat", "lay", "on"]
    assert summary_words("(S (NP the cat NP) (VP lay") == ["the", "cat", "lay"]
    assert summary_words("( ( the cat ) ( lay ( on") == ["the", "cat", "lay", "on"]
    assert summary_words("(S (NP -LRB- it -RRB-) -lrb- x -rrb-)") == ["(", "it", ")", "(", "x", ")"]
    assert summary_words("") == [] and summary_words("  ") == []
    # "(NP" scored as a word would add "np": a tree scores as its words do.
    rows = [("d1", "A document.", "the cat sat on the mat", "(NP (NP the cat) (VP lay (PP on (NP a mat))))")]
    assert evaluate_rouge(rows, bootstrap_samples=10)["rouge1"]["f_measure"] == pytest.approx(2 / 3)


ROWS = [
    ("d1", "The cat sat on the mat. It was happy.", "The cat sat on the mat.", "(S (NP the cat) (VP sat))"),
    ("d2", "Rain fell in London on Monday. Roads flooded.", "Heavy rain flooded roads in London.",
     "roads in london flooded"),
    ("d3", "Prices rose. Markets fell sharply in Asia.", "Asian markets fell sharply.", "markets fell in asia"),
    ("d4", "The team won 2-0. Fans celebrated.", "The team won the match 2-0.", ""),
]


def test_lead_one_is_the_first_sentence_scored_in_the_same_call():
    metrics = evaluate_rouge(ROWS, bootstrap_samples=50)
    rows = metrics["per_document"]
    assert [row["lead1"] for row in rows] == ["The cat sat on the mat.", "Rain fell in London on Monday.",
                                             "Prices rose.", "The team won 2-0."]
    assert rows[0]["lead1_rouge"] == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    assert rows[0]["rouge"]["rouge1"] == pytest.approx(2 * (3 / 3) * (3 / 6) / (3 / 3 + 3 / 6))  # the cat sat
    assert rows[3]["rouge"] == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0} and metrics["empty_summaries"] == 1
    assert metrics["lead1"]["rouge1"]["f_measure"] == pytest.approx(np.mean([r["lead1_rouge"]["rouge1"] for r in rows]))
    assert metrics["rouge_avg"]["f_measure"] == pytest.approx(np.mean(
        [metrics[kind]["f_measure"] for kind in ("rouge1", "rouge2", "rougeL")]))
    assert [row["tree"] for row in rows] == ["(S (NP the cat) (VP sat))", None, None, None]
    assert [row["generated"] for row in rows][:2] == ["the cat sat", "roads in london flooded"]


def test_bootstrap_intervals_are_deterministic_and_hold_the_point_estimate():
    first = evaluate_rouge(ROWS)
    again = evaluate_rouge(ROWS)
    other_seed = evaluate_rouge(ROWS, seed=1)
    assert first["bootstrap"]["samples"] == 1000 and first["bootstrap"]["seed"] == 0
    for kind in ("rouge1", "rouge2", "rougeL", "rouge_avg"):
        low, high = first[kind]["confidence_interval"]
        assert low <= first[kind]["f_measure"] <= high and low < high
        assert again[kind] == first[kind]
        lead_low, lead_high = first["lead1"][kind]["confidence_interval"]
        assert lead_low <= first["lead1"][kind]["f_measure"] <= lead_high
    assert any(other_seed[k]["confidence_interval"] != first[k]["confidence_interval"] for k in ("rouge1", "rouge2"))
    # Identical summaries: every resample's mean is 1.
    identical = evaluate_rouge([(i, d, r, r) for i, d, r, _ in ROWS], bootstrap_samples=20)
    assert identical["rouge2"] == {"f_measure": 1.0, "confidence_interval": [1.0, 1.0]}
    low, high = bootstrap_intervals(np.array([[0.0], [1.0]]), samples=2000, seed=3)
    assert 0.0 <= low[0] < 0.5 < high[0] <= 1.0  # the resampled means of {0, 1} are 0, 1/2 and 1


def test_results_are_named_by_the_data_and_the_journal_guards_them(tmp_path):
    metrics = evaluate_rouge(ROWS, data="xsum-test", output_dir=tmp_path, bootstrap_samples=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rouge-xsum-test.journal.jsonl", "rouge-xsum-test.json", "rouge-xsum-test_documents.jsonl"]
    saved = json.loads((tmp_path / "rouge-xsum-test.json").read_text())
    assert saved["evaluation"] == "rouge" and saved["model"] == "" and "per_document" not in saved["metrics"]
    # as computed, to the results' 12 significant digits (evaluation/results.py: tidy_numbers)
    assert saved["metrics"]["rouge1"] == tidy_numbers(metrics["rouge1"]) and saved["metrics"]["units"] == "fraction"
    documents = [json.loads(line) for line in (tmp_path / "rouge-xsum-test_documents.jsonl").read_text().splitlines()]
    assert [row["id"] for row in documents] == ["d1", "d2", "d3", "d4"]
    assert set(documents[0]) >= {"id", "reference", "generated", "tree", "lead1", "rouge", "lead1_rouge"}
    # The same run again gives the same numbers; other summaries into the same files are refused.
    again = evaluate_rouge(ROWS, data="xsum-test", output_dir=tmp_path, bootstrap_samples=100)
    assert again["rouge1"] == metrics["rouge1"]
    changed = [(i, d, r, "something else") for i, d, r, _ in ROWS]
    with pytest.raises(ValueError, match="belongs to another run"):
        evaluate_rouge(changed, data="xsum-test", output_dir=tmp_path, bootstrap_samples=100)
    assert evaluate_rouge(changed, data="xsum-test", output_dir=tmp_path, bootstrap_samples=100, overwrite=True)[
        "rouge1"]["f_measure"] < metrics["rouge1"]["f_measure"]


@pytest.mark.parametrize("rows, message", [
    ([{"id": "a", "document": "x", "summary": "y"}], r"row 0: missing field\(s\) \['generated'\]"),
    ([("a", "x", "y", "z"), ("a", "x", "y", "z")], "row 1 .document a.: the document id also names row 0"),
    ([("a", "x", "  ", "z")], "row 0 .document a.: the reference summary is empty"),
    ([("a", None, "y", "z")], "row 0 .document a.: the document is a NoneType"),
    ([("a", "x", "y", None)], "row 0 .document a.: no generated summary"),
    ([("a", "x", "y", 3)], "row 0 .document a.: a summary is a string, an nltk.Tree or a list of them, not int"),
    ([("a", "x")], "row 0 is a tuple; expected a dict or a tuple"),
    ([], "no rows to score"),
])
def test_clear_errors(rows, message):
    with pytest.raises(ValueError, match=message):
        evaluate_rouge(rows)


def test_xsum_rows_take_summary_as_the_reference():
    [row] = read_rows([{"id": 7, "document": "d", "summary": "s", "generated": "g"}])
    assert row == {"id": "7", "document": "d", "reference": "s", "generated": "g", "tree": None}


def test_the_xsum_samples_lead_system_scores_as_our_lead_one():
    if not XSUM_SAMPLE.is_file():
        pytest.skip(f"{XSUM_SAMPLE} is absent (the shared data folder)")
    sample = [json.loads(line) for line in XSUM_SAMPLE.read_text(encoding="utf-8").splitlines()]
    rows = [(r["id"], r["document"], r["summary"], r["system_outputs"]["LEAD"]) for r in sample]
    metrics = evaluate_rouge(rows, bootstrap_samples=100)
    assert all(row["rouge"] == row["lead1_rouge"] for row in metrics["per_document"])
    # Narayan et al. (2018) report LEAD at 16.30 / 1.60 / 11.95 on the whole test set; these 50 are close.
    assert 0.14 < metrics["rouge1"]["f_measure"] < 0.19 and metrics["rouge2"]["f_measure"] < 0.03


def test_a_model_card_reports_the_rouge_results(tmp_path):
    from hf_slm.publishing.model_card import read_eval_results, report_evaluations

    evaluate_rouge(ROWS, data="xsum-test", output_dir=tmp_path / "eval_results", bootstrap_samples=100)
    [entry] = report_evaluations(read_eval_results(tmp_path), "tg", tmp_path)
    assert [row.evaluation for row in entry.rows] == ["ROUGE-1 (summaries)", "ROUGE-2 (summaries)",
                                                      "ROUGE-L (summaries)"]
    assert entry.rows[0].data == "xsum-test (4 documents)"
    assert "95% bootstrap interval (100 resamples)" in entry.rows[0].options
    assert "lead-1" in entry.rows[0].options and entry.rows[0].source == "eval_results/rouge-xsum-test.json"
    assert entry.eval_result.task_type == "summarization" and entry.metric == "rougeL"
