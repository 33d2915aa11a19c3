"""Word perplexity (exact / upper bound, proposal files, document level) and BLiMP accuracy.

Expected numbers are computed here, not by the library: log p of an action sequence by one forward call of the
model and a sum of log_softmax entries (`_hand_log_prob`), perplexities as exp(-sum / N_w) written out, BLiMP
outcomes from scores fixed by construction.
"""

import itertools
import json
import math
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import hf_slm
from hf_slm.evaluation import blimp
from hf_slm.evaluation.blimp import FIELDS, blimp_accuracy, ptb_words, read_blimp, run_blimp
from hf_slm.evaluation.perplexity import (
    document_log_probs,
    read_proposals,
    word_perplexity,
)
from hf_slm.families import config_for_grammar
from hf_slm.families import causal_lm_for_config

BLIMP_FIXTURE = Path(__file__).parent / "fixtures" / "blimp"
SHARED_BLIMP = Path(__file__).resolve().parents[2] / "shared" / "data" / "blimp" / "data"

TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .)))",
]


def _fixture_sentences():
    for file in sorted(BLIMP_FIXTURE.glob("*.jsonl")):
        for line in file.read_text().splitlines():
            record = json.loads(line)
            yield record["sentence_good"]
            yield record["sentence_bad"]


def _training_trees():
    # Flat trees over the fixture's words, so that the tokenizer spells every BLiMP word without <unk>.
    return TREES + ["(S " + " ".join(ptb_words(s)) + ")" for s in _fixture_sentences()]


def _model(tokenizer, grammar):
    config = config_for_grammar(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32, grammar=grammar,
                                      **tokenizer.action_layout)
    torch.manual_seed(0)
    return causal_lm_for_config(config).eval()


@pytest.fixture(scope="module")
def tg():
    tokenizer = hf_slm.SyntacticTokenizer.train(_training_trees(), vocab_size=120)
    return _model(tokenizer, "tg"), tokenizer


@pytest.fixture(scope="module")
def terminals():
    tokenizer = hf_slm.SyntacticTokenizer.train(_training_trees(), vocab_size=120, linearization="terminals")
    return _model(tokenizer, "terminals"), tokenizer


def all_trees(words, labels, max_nonterminals):
    """Every tree over `words` (brackets, no POS tags) with at most `max_nonterminals` constituents, each
    constituent non-empty: the space an exhaustive beam with the same n_c explores."""

    def spans(start, stop, budget):
        # (subtree strings, constituents used) for the word sequence words[start:stop] as a list of children.
        if start == stop:
            yield [], 0
            return
        # First child: a word, or a constituent over words[start:end].
        for rest, used in spans(start + 1, stop, budget):
            yield [words[start]] + rest, used
        for end in range(start + 1, stop + 1):
            for inner, used_inner in constituents(start, end, budget):
                for rest, used_rest in spans(end, stop, budget - used_inner):
                    yield [inner] + rest, used_inner + used_rest

    def constituents(start, stop, budget):
        if budget < 1:
            return
        for children, used in spans(start, stop, budget - 1):
            if used + 1 <= budget:
                for label in labels:
                    yield f"({label} {' '.join(children)})", used + 1

    return sorted({tree for tree, _ in constituents(0, len(words), max_nonterminals)})


def _logsumexp(values):
    return float(torch.logsumexp(torch.tensor(values, dtype=torch.float64), 0))


def _hand_log_prob(model, ids):
    """log p of one action sequence (`<s>` first), without the library's scoring or collator.

    One forward call on the action ids (the model expands them into the grammar's positions itself and
    returns one row of logits per action, row t predicting action t + 1), then the sum over t of
    log_softmax(logits[t])[ids[t + 1]].
    """
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    assert logits.shape[0] == len(ids), "expected one row of logits per action"
    log_probs = torch.log_softmax(logits, dim=-1)
    return math.fsum(float(log_probs[t, ids[t + 1]]) for t in range(len(ids) - 1))


def _hand_log_probs(model, sequences):
    return [_hand_log_prob(model, ids) for ids in sequences]


# ---- perplexity ---------------------------------------------------------------------------------------


def test_enumeration_counts():
    labels = ["NP", "S"]
    assert len(all_trees(["a"], labels, 1)) == 2
    assert len(all_trees(["a"], labels, 2)) == 2 + 4  # (L a), (L1 (L2 a))
    # (L a b); (L1 (L2 a) b), (L1 a (L2 b)), (L1 (L2 a b))
    assert len(all_trees(["a", "b"], labels, 2)) == 2 + 3 * 4


def _write_proposals(path, blocks):
    path.write_text("\n\n".join("\n".join(block) for block in blocks) + "\n")
    return path


def test_proposal_perplexity_is_the_hand_computed_bound_and_matches_an_exhaustive_beam(tg, tmp_path):
    model, tokenizer = tg
    sentences = [["the", "bird"], ["sings"]]
    data = tmp_path / "data.txt"
    data.write_text("the bird\n\nsings\n")  # blank lines between sentences are fine at sentence level
    enumerated = [all_trees(words, tokenizer.nonterminals, 2) for words in sentences]
    assert [len(t) for t in enumerated] == [4 + 3 * 16, 4 + 16]
    # Proposal blocks as a parser writes them: POS tags, duplicates (also duplicates up to POS tags).
    blocks = []
    for words, trees in zip(sentences, enumerated):
        tagged = [_tag(t, words) for t in trees]
        blocks.append(tagged + tagged[:3] + [t.replace("(X ", "(Y ") for t in tagged[:2]])
    proposals = _write_proposals(tmp_path / "proposals.txt", blocks)

    # nltk Trees are encoded as they are (a bracketed string would be normalized: "(S (NP sings))" would lose NP).
    # log p(x) >= logsumexp over the distinct trees of log p(x, y), each y scored by hand; N_w = 2 + 1 words.
    expected_log_probs = [_logsumexp(_hand_log_probs(model, _ids(tokenizer, trees))) for trees in enumerated]
    expected = math.exp(-(expected_log_probs[0] + expected_log_probs[1]) / 3)
    metrics = word_perplexity(model, tokenizer, data, proposals=proposals, progress=False, batch_size=16)
    assert metrics["perplexity"] == pytest.approx(expected, rel=1e-5)
    assert metrics["log_prob_total"] == pytest.approx(sum(expected_log_probs), abs=1e-4)
    assert (metrics["words"], metrics["sentences"], metrics["denominator"]) == (3, 2, 3)
    assert metrics["is_upper_bound"] is True and metrics["method"] == "proposals"
    assert metrics["estimate"] == "upper bound" and "upper bound" in metrics["summary"]
    assert metrics["proposals_per_sentence"] == {"min": 20, "max": 52, "mean": 36.0}

    # The proposals are every tree with n_c = 2, so an exhaustive beam with n_c = 2 finds the same p(x).
    beam = word_perplexity(model, tokenizer, data, progress=False,
                           beam_options=dict(beam_size=2000, word_beam_size=2000, fast_track=5, max_nonterminals=2))
    assert beam["method"] == "beam" and beam["is_upper_bound"] is True and "upper bound" in beam["summary"]
    assert beam["perplexity"] == pytest.approx(expected, rel=1e-5)

    # A tree file gives the same words; --limit keeps the first sentences (and proposal blocks).
    trees_file = tmp_path / "gold.mrg"
    trees_file.write_text("(ROOT (S (NP (DT the) (NN bird))))\n(ROOT (S (VP (VBZ sings))))\n")
    again = word_perplexity(model, tokenizer, trees_file, proposals=proposals, progress=False)
    assert again["perplexity"] == pytest.approx(expected, rel=1e-5)
    first = word_perplexity(model, tokenizer, trees_file, proposals=proposals, limit=1, max_proposals=10,
                            progress=False)
    assert first["sentences"] == 1 and first["proposals_per_sentence"]["max"] == 10
    # The first ten distinct proposals of "the bird" (file order; duplicates come after them), N_w = 2.
    top10 = _hand_log_probs(model, _ids(tokenizer, enumerated[0][:10]))
    assert first["perplexity"] == pytest.approx(math.exp(-_logsumexp(top10) / 2), rel=1e-5)


def _tag(tree, words):
    """Wrap every word of a bracketed tree (no POS tags) in an (X word) preterminal."""
    tokens = re.findall(r"\(|\)|[^\s()]+", tree)
    out = []
    for index, token in enumerate(tokens):
        is_label = index > 0 and tokens[index - 1] == "("
        out.append(f"(X {token})" if token not in "()" and not is_label else token)
    return " ".join(out).replace("( ", "(").replace(" )", ")")


def _ids(tokenizer, trees):
    return tokenizer([hf_slm.parse_tree(t) for t in trees])["input_ids"]


def _strip(tagged):
    return hf_slm.tree_to_string(hf_slm.normalize_tree(hf_slm.parse_tree(tagged)))


def test_tagging_helper_round_trips():
    tree = "(S (NP the bird) sings)"
    tagged = _tag(tree, ["the", "bird", "sings"])
    assert tagged == "(S (NP (X the) (X bird)) (X sings))"
    assert _strip(tagged) == tree


def test_terminals_perplexity_is_exact_and_counts_eos(terminals, tmp_path):
    model, tokenizer = terminals
    data = tmp_path / "gold.mrg"
    data.write_text("\n".join(TREES) + "\n")
    # The terminals tokenizer encodes a tree as <s> words </s>: score those sequences by hand.
    sequences = tokenizer(TREES)["input_ids"]
    assert all(ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id for ids in sequences)
    joint = _hand_log_probs(model, sequences)
    # 5 + 6 + 4 words ("the blue bird sings .", "a dog barks at the moon", "I like it ."), plus one </s> each.
    words, sentences = 15, 3
    metrics = word_perplexity(model, tokenizer, data, progress=False, output_dir=tmp_path / "out")
    assert (metrics["words"], metrics["sentences"], metrics["denominator"]) == (words, sentences, words + sentences)
    assert metrics["perplexity"] == pytest.approx(math.exp(-(joint[0] + joint[1] + joint[2]) / 18), rel=1e-5)
    assert metrics["perplexity_words_only_count"] == pytest.approx(math.exp(-math.fsum(joint) / 15), rel=1e-5)
    assert metrics["is_upper_bound"] is False and metrics["method"] == "exact" and metrics["eos_counted"] is True
    assert metrics["estimate"] == "exact"
    summary = metrics["summary"]
    assert "exact" in summary and "bound" not in summary and "approximation" not in summary
    record = json.loads((tmp_path / "out" / "ppl-gold.json").read_text())  # named by the data, gold.mrg
    assert record["evaluation"] == "ppl" and record["grammar"] == "terminals"
    assert record["metrics"]["perplexity"] == pytest.approx(metrics["perplexity"])
    lines = [json.loads(line) for line in (tmp_path / "out" / "ppl-gold_sentences.jsonl").read_text().splitlines()]
    assert [line["log_prob"] for line in lines] == pytest.approx(joint, abs=1e-4)
    assert [line["words"] for line in lines] == [5, 6, 4] and {line["units"] for line in lines} == {"nats"}
    # The plain-text form of the same sentences gives the same number; proposals are ignored, with a warning.
    text = tmp_path / "words.txt"
    text.write_text("\n".join(" ".join(hf_slm.parse_tree(t).leaves()) for t in TREES) + "\n")
    proposals = _write_proposals(tmp_path / "p.txt", [[t] for t in TREES])
    with pytest.warns(UserWarning, match="exact"):
        again = word_perplexity(model, tokenizer, text, proposals=proposals, progress=False)
    assert again["perplexity"] == pytest.approx(math.exp(-math.fsum(joint) / 18), rel=1e-5)


def test_syntactic_results_file_says_upper_bound(tg, tmp_path):
    model, tokenizer = tg
    data = tmp_path / "gold.mrg"
    data.write_text("\n".join(TREES) + "\n")
    word_perplexity(model, tokenizer, data, progress=False, output_dir=tmp_path / "out",
                    beam_options=dict(beam_size=10, word_beam_size=5))
    record = json.loads((tmp_path / "out" / "ppl-gold.json").read_text())
    assert record["metrics"]["is_upper_bound"] is True and record["metrics"]["estimate"] == "upper bound"
    assert "upper bound" in record["metrics"]["summary"] and "approximation" not in record["metrics"]["summary"]
    assert record["options"]["beam_options"] == {"beam_size": 10, "word_beam_size": 5}


def test_proposal_errors_name_the_sentence(tg, tmp_path):
    model, tokenizer = tg
    data = tmp_path / "data.txt"
    data.write_text("the bird\nsings\n")
    wrong = _write_proposals(tmp_path / "wrong.txt", [["(S (NP the bird))"], ["(S sings)", "(S (NP the) sings)"]])
    with pytest.raises(ValueError, match=r"sentence 2, proposal 2 has the words 'the sings'"):
        word_perplexity(model, tokenizer, data, proposals=wrong, progress=False)
    short = _write_proposals(tmp_path / "short.txt", [["(S (NP the bird))"]])
    with pytest.raises(ValueError, match=r"1 block\(s\) of proposal trees for 2 sentence"):
        word_perplexity(model, tokenizer, data, proposals=short, progress=False)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("(S (NP the bird))\nthe bird\n")
    with pytest.raises(ValueError, match="line 2.*one bracketed tree per line"):
        read_proposals(garbage)


def test_document_level_is_refused_by_sentence_level_models(tg, terminals, tmp_path):
    data = tmp_path / "docs.txt"
    data.write_text("the bird\nsings\n\nthe bird\n")
    for model, tokenizer in (tg, terminals):
        with pytest.raises(ValueError, match="needs a document-level model"):
            word_perplexity(model, tokenizer, data, document_level=True, progress=False)


def _bigram_scorer(seed=0, size=64):
    table = np.random.default_rng(seed).normal(size=(size, size)) - 2.0

    def score(sequences):
        return [float(sum(table[a, b] for a, b in zip(s[:-1], s[1:]))) for s in sequences]

    return score


def test_document_log_probs_use_the_greedy_best_prefix():
    score = _bigram_scorer()
    bos = 1
    documents = [
        [[[10, 11], [12, 11], [10, 13]], [[20], [21, 22]], [[30, 31]]],
        [[[40, 41], [42]]],
    ]
    result = document_log_probs(score, documents, bos)
    assert [len(r) for r in result] == [3, 1]
    # Hand-unrolled for document 0.
    first = score([[bos] + c for c in documents[0][0]])
    best1 = [bos] + documents[0][0][int(np.argmax(first))]
    assert result[0][0] == pytest.approx(_logsumexp(first))
    second = score([best1 + c for c in documents[0][1]])
    prefix1 = score([best1])[0]
    assert result[0][1] == pytest.approx(_logsumexp(second) - prefix1)
    best2 = best1 + documents[0][1][int(np.argmax(second))]
    third = score([best2 + c for c in documents[0][2]])
    assert result[0][2] == pytest.approx(_logsumexp(third) - score([best2])[0])
    assert result[1][0] == pytest.approx(_logsumexp(score([[bos] + c for c in documents[1][0]])))


# ---- BLiMP --------------------------------------------------------------------------------------------


def test_ptb_words():
    assert ptb_words("Katherine can't help herself.") == ["Katherine", "ca", "n't", "help", "herself", "."]
    assert ptb_words("Who won't the guests' friends see?") == ["Who", "wo", "n't", "the", "guests", "'", "friends",
                                                               "see", "?"]
    assert ptb_words("I'm sure, they'd say it's John's ex-wife.") == [
        "I", "'m", "sure", ",", "they", "'d", "say", "it", "'s", "John", "'s", "ex-wife", "."]
    assert ptb_words("This cannot be.") == ["This", "can", "not", "be", "."]
    assert blimp.split_words("It isn't.", "whitespace") == ["It", "isn't."]


def test_read_blimp_normalizes_the_field_and_limits_pairs_per_paradigm():
    pairs = read_blimp(BLIMP_FIXTURE)
    assert len(pairs) == 16
    fields = {p["UID"]: p["field"] for p in pairs}
    assert fields == {"anaphor_gender_agreement": "morphology", "npi_present_1": "semantics",
                      "principle_A_case_2": "syntax_semantics", "wh_island": "syntax"}
    raw = json.loads((BLIMP_FIXTURE / "principle_A_case_2.jsonl").read_text().splitlines()[0])["field"]
    assert raw == "syntax/semantics"
    limited = read_blimp(BLIMP_FIXTURE, limit=2)
    assert len(limited) == 8 and {p["pairID"] for p in limited} == {"0", "1"}
    with pytest.raises(ValueError, match="does not exist"):
        read_blimp(BLIMP_FIXTURE / "missing")


def test_read_blimp_names_the_file_and_line_of_a_bad_record(tmp_path):
    good = (BLIMP_FIXTURE / "wh_island.jsonl").read_text().splitlines()[0]
    for bad, message in (("{not json", "not a JSON object"), ("[1, 2]", "expected a JSON object, found list"),
                         ('{"sentence_good": "A b ."}', "missing field")):
        (tmp_path / "p.jsonl").write_text(good + "\n\n" + bad + "\n")
        with pytest.raises(ValueError, match=rf"p\.jsonl, line 3: {message}"):
            read_blimp(tmp_path / "p.jsonl")


# Per paradigm, which of its four pairs the fake scorer gets right; "tie" gives both sentences one score.
OUTCOMES = {
    "anaphor_gender_agreement": [True, True, True, True],
    "npi_present_1": [True, False, False, False],
    "principle_A_case_2": [True, "tie", True, False],
    "wh_island": [False, False, False, False],
}


def _fake_scorer():
    scores = {}
    for pair in read_blimp(BLIMP_FIXTURE):
        outcome = OUTCOMES[pair["UID"]][int(pair["pairID"])]
        good, bad = (" ".join(ptb_words(pair[k])) for k in ("sentence_good", "sentence_bad"))
        scores[good] = -10.0
        scores[bad] = -10.0 if outcome == "tie" else (-12.0 if outcome else -8.0)
    calls = []

    def scorer(sentences):
        calls.append(len(sentences))
        return [scores[" ".join(words)] for words in sentences]

    return scorer, calls


def test_blimp_accuracy_aggregates_per_paradigm_field_and_overall(tmp_path):
    scorer, calls = _fake_scorer()
    stub_model = SimpleNamespace(config=SimpleNamespace(grammar="stub"))  # only named in blimp-blimp.json
    metrics = run_blimp(stub_model, None, BLIMP_FIXTURE, scorer=scorer, output_dir=tmp_path)
    assert sum(calls) == 32 and max(calls) == 8  # every distinct sentence scored once, batch_size (8) at a time
    # Which pairs are right, pair by pair: the OUTCOMES table (a tie is wrong).
    rows = [json.loads(line) for line in (tmp_path / "blimp-blimp_pairs.jsonl").read_text().splitlines()]
    assert len(rows) == 16
    for row in rows:
        assert row["correct"] is (OUTCOMES[row["UID"]][int(row["pairID"])] is True), row
        assert row["log_prob_good"] == -10.0 and row["units"] == "nats"
    by_paradigm = {uid: entry["accuracy"] for uid, entry in metrics["by_paradigm"].items()}
    assert by_paradigm == {"anaphor_gender_agreement": 4 / 4, "npi_present_1": 1 / 4, "principle_A_case_2": 2 / 4,
                           "wh_island": 0 / 4}
    assert {uid: entry["correct"] for uid, entry in metrics["by_paradigm"].items()} == {
        "anaphor_gender_agreement": 4, "npi_present_1": 1, "principle_A_case_2": 2, "wh_island": 0}
    assert metrics["by_field"] == {"morphology": 1.0, "semantics": 0.25, "syntax": 0.0, "syntax_semantics": 0.5}
    assert metrics["by_phenomenon"] == {"anaphor_agreement": 1.0, "binding": 0.5, "island_effects": 0.0,
                                        "npi_licensing": 0.25}
    assert metrics["accuracy"] == pytest.approx((1 + 0.25 + 0.5 + 0) / 4)
    assert metrics["accuracy_pairs"] == pytest.approx(7 / 16)
    assert (metrics["pairs"], metrics["paradigms"]) == (16, 4)
    assert metrics["units"] == "fraction" and metrics["log_prob"] == "custom scorer"
    limited = run_blimp(None, None, BLIMP_FIXTURE, scorer=_fake_scorer()[0], limit=2)
    assert limited["pairs"] == 8
    assert {u: e["accuracy"] for u, e in limited["by_paradigm"].items()} == {
        "anaphor_gender_agreement": 1.0, "npi_present_1": 0.5, "principle_A_case_2": 0.5, "wh_island": 0.0}
    assert limited["accuracy"] == pytest.approx((1 + 0.5 + 0.5 + 0) / 4)


def test_blimp_accuracy_on_unequal_paradigms_is_a_mean_over_paradigms():
    pairs = [{"UID": "a", "field": "syntax", "linguistics_term": "t"}] * 3 + [
        {"UID": "b", "field": "syntax", "linguistics_term": "t"}]
    metrics = blimp_accuracy(pairs, [0, 0, 0, 0], [-1, -1, 1, 1])
    assert metrics["by_paradigm"]["a"]["accuracy"] == pytest.approx(2 / 3)
    assert metrics["accuracy"] == pytest.approx((2 / 3 + 0) / 2)
    assert metrics["accuracy_pairs"] == pytest.approx(0.5)


def _expected_blimp(pairs, log_prob_of):
    """Per paradigm (correct, pairs) and the per-pair outcomes, from log p(x) computed by `log_prob_of(words)`."""
    outcomes, by_paradigm = {}, {}
    for pair in pairs:
        good = log_prob_of(ptb_words(pair["sentence_good"]))
        bad = log_prob_of(ptb_words(pair["sentence_bad"]))
        outcomes[pair["UID"], pair["pairID"]] = (good, bad, good > bad)
        correct, total = by_paradigm.get(pair["UID"], (0, 0))
        by_paradigm[pair["UID"]] = (correct + (good > bad), total + 1)
    return outcomes, by_paradigm


def _check_blimp_against(metrics, directory, outcomes, by_paradigm, abs_tolerance):
    assert (metrics["pairs"], metrics["paradigms"]) == (len(outcomes), len(by_paradigm))
    for uid, (correct, total) in by_paradigm.items():
        assert (metrics["by_paradigm"][uid]["correct"], metrics["by_paradigm"][uid]["pairs"]) == (correct, total), uid
    assert metrics["accuracy"] == pytest.approx(sum(c / t for c, t in by_paradigm.values()) / len(by_paradigm))
    rows = [json.loads(line) for line in Path(metrics["files"]["pairs"]).read_text().splitlines()]
    assert len(rows) == len(outcomes)
    for row in rows:
        good, bad, correct = outcomes[row["UID"], row["pairID"]]
        assert row["log_prob_good"] == pytest.approx(good, abs=abs_tolerance)
        assert row["log_prob_bad"] == pytest.approx(bad, abs=abs_tolerance)
        assert row["correct"] is correct


def test_blimp_of_a_terminals_model_against_log_probs_computed_by_hand(terminals, tmp_path):
    model, tokenizer = terminals
    pairs = read_blimp(BLIMP_FIXTURE, limit=2)

    def log_prob_of(words):  # exact: log p(<s> pieces </s>)
        pieces = tokenizer(words, is_split_into_words=True)["input_ids"]
        return _hand_log_prob(model, pieces + [tokenizer.eos_token_id])

    outcomes, by_paradigm = _expected_blimp(pairs, log_prob_of)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every fixture word is spelled without <unk>
        metrics = run_blimp(model, tokenizer, BLIMP_FIXTURE, limit=2, output_dir=tmp_path, progress=False)
    assert metrics["log_prob"] == "exact" and metrics["log_prob_units"] == "nats"
    _check_blimp_against(metrics, tmp_path, outcomes, by_paradigm, abs_tolerance=1e-4)
    record = json.loads((tmp_path / "blimp-blimp-limit2.json").read_text())
    assert record["evaluation"] == "blimp" and record["options"]["limit"] == 2


def test_blimp_of_a_tg_model_against_every_tree_scored_by_hand(tg, tmp_path):
    # With at most one nonterminal (n_c = 1) a sentence has one tree per label, (L w1 ... wn), and a beam wide
    # enough to keep them all has log p(x) = logsumexp over the labels of log p(x, (L words)).
    model, tokenizer = tg
    pairs = read_blimp(BLIMP_FIXTURE, limit=2)
    labels = tokenizer.nonterminals
    beam = dict(beam_size=4 * len(labels), word_beam_size=4 * len(labels), fast_track=len(labels), max_nonterminals=1)

    def log_prob_of(words):
        flat_trees = [f"({label} {' '.join(words)})" for label in labels]
        return _logsumexp(_hand_log_probs(model, _ids(tokenizer, flat_trees)))

    outcomes, by_paradigm = _expected_blimp(pairs, log_prob_of)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = run_blimp(model, tokenizer, BLIMP_FIXTURE, limit=2, output_dir=tmp_path, progress=False, **beam)
    assert "beam" in metrics["log_prob"]
    _check_blimp_against(metrics, tmp_path, outcomes, by_paradigm, abs_tolerance=1e-4)


@pytest.mark.skipif(not SHARED_BLIMP.is_dir(), reason="../shared/data/blimp is absent")
def test_full_blimp_reads_with_four_fields():
    pairs = read_blimp(SHARED_BLIMP)
    assert len(pairs) == 67_000
    assert {p["field"] for p in pairs} == set(FIELDS)
    assert len({p["UID"] for p in pairs}) == 67
    first = read_blimp(SHARED_BLIMP, limit=1)
    metrics = run_blimp(None, None, SHARED_BLIMP, limit=1, scorer=lambda sentences: [-len(s) for s in sentences])
    assert len(first) == 67 and metrics["paradigms"] == 67
    for pair in itertools.islice(pairs, 0, None, 997):
        words = ptb_words(pair["sentence_good"])
        assert words[-1] in (".", "?") and all(words)
