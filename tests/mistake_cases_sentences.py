"""Issue 12, sentences that cannot be scored and the user's words in trees.

A sentence that cannot be scored (empty, or too long for the model even as its shortest tree) is left out
and named (exit status 1, hf_slm/cli/item_failures.py); the others' results are complete and equal to scoring
them alone; `--stop-on-error` (on_error=
"raise") stops before any search instead. Trees carry the given words, brackets escaped PTB-style.

The tiny checkpoint reads at most 1024 positions (config.max_sequence_length) and spells "the" in 4 pieces:
300 of them need 1204 positions even in the shortest tree.
"""

import copy
import functools
import json
import math
import warnings

import pytest

import hf_slm
from hf_slm.search.beam import SentencesLeftOut

from mistake_cases import ApiCase, CliCase

BEAM = {"beam_size": 5, "word_beam_size": 2}
BEAM_ARGS = ["--beam-size", "5", "--word-beam-size", "2"]
GOOD = ["the bird sings .", "I like it"]
LONG = " ".join(["the"] * 300)
USER_WORDS = ["naïve", "(sic)", "café"]
ESCAPED = ["naïve", "-LRB-sic-RRB-", "café"]


@functools.lru_cache(maxsize=None)
def _load(model_dir):
    from hf_slm.cli.commands import _load as load

    return load(model_dir)


def _alone(model_dir, sentence):
    """What hf_slm.score gives for one sentence scored by itself."""
    model, tokenizer = _load(model_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hf_slm.score(model, tokenizer, [sentence], progress=False, **BEAM)[0]


def _remember_model(tmp, model):
    (tmp / "model_dir").write_text(str(model))


def _model_dir(tmp):
    return (tmp / "model_dir").read_text()


def _score_lines(bad_at):
    """A `score` check: one JSON line per sentence, an "error" on the left-out one, the others as scored alone."""

    def check(result, tmp):
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert len(lines) == 3, result.stdout
        assert set(lines[bad_at]) == {"words", "error"}
        good = [line for k, line in enumerate(lines) if k != bad_at]
        for line, sentence in zip(good, GOOD):
            assert line["words"] == sentence.split()
            assert line["log_prob"] == pytest.approx(_alone(_model_dir(tmp), sentence)["log_prob"], rel=1e-5)

    return check


def _parse_lines(bad_at):
    """A `parse` check: one line per sentence, empty for the left-out one, the others' trees as parsed alone."""

    def check(result, tmp):
        lines = result.stdout.split("\n")[:-1]
        assert len(lines) == 3, result.stdout
        assert lines[bad_at] == ""
        good = [line for k, line in enumerate(lines) if k != bad_at]
        assert good == [_alone(_model_dir(tmp), sentence)["tree"] for sentence in GOOD]

    return check


def _nothing_printed(result, tmp):
    assert result.stdout == ""


def _leaves_are_user_words(result, tmp):
    assert hf_slm.parse_tree(result.stdout.strip()).leaves() == ESCAPED


def _score_keeps_user_words(result, tmp):
    line = json.loads(result.stdout)
    assert line["words"] == USER_WORDS
    assert hf_slm.parse_tree(line["tree"]).leaves() == ESCAPED


def _write_lines(lines, name="data.txt"):
    def prepare(tmp, model):
        _remember_model(tmp, model)
        (tmp / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    return prepare


def _ppl_check(bad_at):
    """The per-sentence file has one line per data line, an "error" on the left-out one, and the others'
    log p(x) as hf_slm.score gives them alone; the metrics count and name the left-out one."""

    def check(result, tmp):
        assert "1 sentence(s) left out" in result.stdout
        records = [json.loads(line) for line in next((tmp / "out").glob("*_sentences.jsonl")).read_text().splitlines()]
        assert [record["index"] for record in records] == [0, 1, 2]
        assert "error" in records[bad_at] and "log_prob" not in records[bad_at]
        good = [record for k, record in enumerate(records) if k != bad_at]
        for record, sentence in zip(good, GOOD):
            assert record["log_prob"] == pytest.approx(_alone(_model_dir(tmp), sentence)["log_prob"], rel=1e-5)
        metrics = json.loads(next(p for p in (tmp / "out").glob("ppl-*.json") if "journal" not in p.name).read_text())
        found = metrics.get("metrics", metrics)
        assert found["sentences_left_out"] == 1 and found["sentences"] == 2
        assert found["left_out"][0]["index"] == bad_at

    return check


def _score_api(on_error, sentences):
    def call(model, tokenizer, tmp, model_dir):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = hf_slm.score(model, tokenizer, sentences, progress=False, on_error=on_error, **BEAM)
        return results, [w for w in caught if issubclass(w.category, SentencesLeftOut)]

    return call


def _long_left_out(returned):
    results, said = returned
    assert [entry["index"] for entry in results.left_out] == [1]
    assert results[1]["error"].startswith("sentence 2 is too long for the model: its shortest tree takes 1204 positions")
    assert math.isfinite(results[0]["log_prob"]) and math.isfinite(results[2]["log_prob"])
    assert len(said) == 1 and "left out 1 of 3 sentences" in str(said[0].message)


def _parse_empty_left_out(returned):
    assert list(returned)[0] is None and returned[1] is not None
    assert returned.left_out[0]["error"] == "sentence 1 is empty; expected at least one word"


def _small_model_search(model, tokenizer, tmp, model_dir):
    """A model of 22 positions: "the bird sings ." fits as its shortest tree (19 positions), with room for little
    more; the search keeps every hypothesis able to close within them (it used to outgrow them and leave the
    sentence out), so both sentences are scored."""
    small = copy.deepcopy(model)
    small.config.max_sequence_length = 22
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hf_slm.score(small, tokenizer, ["the bird sings .", "I"], progress=False, **BEAM)


def _search_stays_inside_the_positions(results):
    assert not results.left_out
    assert all(math.isfinite(result["log_prob"]) for result in results)


def _ppl_api(model, tokenizer, tmp, model_dir):
    from hf_slm.evaluation.perplexity import word_perplexity

    (tmp / "data.txt").write_text("\n".join([GOOD[0], LONG, GOOD[1]]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return word_perplexity(model, tokenizer, tmp / "data.txt", beam_options=BEAM, progress=False)


def _ppl_api_left_out(metrics):
    assert metrics["sentences_left_out"] == 1 and metrics["sentences"] == 2
    assert metrics["left_out"][0]["source"].endswith("data.txt:2")
    assert "left out" in metrics["summary"]


CASES = [
    CliCase("score leaves out an over-long sentence and scores the others", ["score", "--model", "{model}", *BEAM_ARGS,
            GOOD[0], LONG, GOOD[1]], exit_code=1, prepare=_remember_model, check=_score_lines(1),
            message=r"hf-slm score: warning: left out 1 of 3 sentences .*sentence 2 is too long for the model: its "
                    r"shortest tree takes 1204 positions .*maximum of 1024 \(config.max_sequence_length\)"),
    CliCase("score leaves out an empty sentence", ["score", "--model", "{model}", *BEAM_ARGS, "", *GOOD], exit_code=1,
            prepare=_remember_model, check=_score_lines(0),
            message=r"hf-slm score: warning: left out 1 of 3 sentences .*sentence 1 is empty"),
    CliCase("score --stop-on-error stops at an over-long sentence", ["score", "--model", "{model}", *BEAM_ARGS,
            "--stop-on-error", GOOD[0], LONG], check=_nothing_printed,
            message=r"hf-slm score: error: sentence 2 is too long for the model.*stopped before any search"),
    CliCase("parse leaves out an over-long sentence and parses the others", ["parse", "--model", "{model}", *BEAM_ARGS,
            GOOD[0], LONG, GOOD[1]], exit_code=1, prepare=_remember_model, check=_parse_lines(1),
            message=r"hf-slm parse: warning: left out 1 of 3 sentences .*sentence 2 is too long"),
    CliCase("parse leaves out an empty sentence", ["parse", "--model", "{model}", *BEAM_ARGS, GOOD[0], GOOD[1], "  "],
            exit_code=1, prepare=_remember_model, check=_parse_lines(2),
            message=r"hf-slm parse: warning: left out 1 of 3 sentences .*sentence 3 is empty"),
    CliCase("parse --stop-on-error stops at an empty sentence", ["parse", "--model", "{model}", *BEAM_ARGS,
            "--stop-on-error", "", GOOD[0]], check=_nothing_printed,
            message=r"hf-slm parse: error: sentence 1 is empty; expected at least one word; stopped before any search"),
    CliCase("parse keeps the user's words, brackets escaped", ["parse", "--model", "{model}", *BEAM_ARGS,
            " ".join(USER_WORDS)], exit_code=0, message=r"naïve\)* -LRB-sic-RRB-\)* café", check=_leaves_are_user_words),
    CliCase("score keeps the user's words in its tree", ["score", "--model", "{model}", *BEAM_ARGS, " ".join(USER_WORDS)],
            exit_code=0, message="-LRB-sic-RRB-", check=_score_keeps_user_words),
    CliCase("eval ppl leaves out an over-long line and names it", ["eval", "ppl", "--model", "{model}", "--data",
            "{tmp}/data.txt", "--output", "{tmp}/out", *BEAM_ARGS], exit_code=1,
            prepare=_write_lines([GOOD[0], LONG, GOOD[1]]), check=_ppl_check(1),
            message=r"hf-slm eval ppl: warning: left out 1 of 3 sentences .*data.txt:2 is too long for the model"),
    CliCase("eval ppl names an over-long tree of a tree file", ["eval", "ppl", "--model", "{model}", "--data",
            "{tmp}/data.mrg", "--output", "{tmp}/out", *BEAM_ARGS], exit_code=1,
            prepare=_write_lines(["(S (NP the bird) (VP sings) .)", "(S " + LONG + ")", "(S (NP I) (VP like (NP it)))"],
                                 "data.mrg"), check=_ppl_check(1),
            message=r"hf-slm eval ppl: warning: left out 1 of 3 sentences .*data.mrg, tree 1 is too long"),
    CliCase("eval ppl --stop-on-error stops at an over-long line", ["eval", "ppl", "--model", "{model}", "--data",
            "{tmp}/data.txt", "--output", "{tmp}/out", "--stop-on-error", *BEAM_ARGS],
            prepare=_write_lines([GOOD[0], LONG, GOOD[1]]),
            message=r"hf-slm eval ppl: error: .*data.txt:2 is too long for the model.*stopped before any search"),
    CliCase("eval parse leaves out an over-long gold tree", ["eval", "parse", "--model", "{model}", "--gold",
            "{tmp}/gold.mrg", "--output", "{tmp}/out", *BEAM_ARGS], exit_code=1,
            prepare=_write_lines(["(S (NP (DT the) (NN bird)) (VP (VBZ sings)) (. .))",
                                  "(S " + " ".join(["(DT the)"] * 300) + ")"], "gold.mrg"),
            message=r"hf-slm eval parse: warning: left out 1 of 2 sentences .*gold.mrg, tree 1"),
    ApiCase("hf_slm.score leaves out an over-long sentence (on_error='skip')", _score_api("skip", [GOOD[0], LONG, GOOD[1]]),
            None, check=_long_left_out),
    ApiCase("hf_slm.score on_error='raise' stops at an over-long sentence", _score_api("raise", [GOOD[0], LONG]),
            ValueError, r"sentence 2 is too long for the model: its shortest tree takes 1204 positions"),
    ApiCase("hf_slm.parse leaves out an empty sentence", lambda model, tokenizer, tmp, directory:
            hf_slm.parse(model, tokenizer, [[], GOOD[0]], progress=False, **BEAM), None, check=_parse_empty_left_out),
    ApiCase("hf_slm.parse on_error='raise' names an empty sentence by its source", lambda model, tokenizer, tmp, directory:
            hf_slm.parse(model, tokenizer, [GOOD[0], ""], sources=["a.txt:1", "a.txt:2"], on_error="raise", progress=False,
                         **BEAM), ValueError, r"^a.txt:2 is empty; expected at least one word"),
    ApiCase("hf_slm.parse keeps the given words, brackets escaped", lambda model, tokenizer, tmp, directory:
            hf_slm.parse(model, tokenizer, [USER_WORDS], progress=False, **BEAM), None,
            check=lambda trees: hf_slm.parse_tree(trees[0]).leaves() == ESCAPED or pytest.fail(trees[0])),
    ApiCase("generate_trees keeps the prompt's words", lambda model, tokenizer, tmp, directory:
            hf_slm.generate_trees(model, tokenizer, "naïve (sic)", num_beams=2, max_new_words=2), None,
            check=lambda trees: hf_slm.parse_tree(trees[0]).leaves()[:2] == ESCAPED[:2] or pytest.fail(trees[0])),
    ApiCase("a search near the model's positions stays inside them", _small_model_search, None,
            check=_search_stays_inside_the_positions),
    ApiCase("word_perplexity counts and names the sentences left out", _ppl_api, None, check=_ppl_api_left_out),
]
