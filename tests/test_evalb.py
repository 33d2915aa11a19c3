"""EVALB bracketing scores (COLLINS.prm rules) on hand-computed cases, and the rerank / parse evaluations."""

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import hf_slm
from hf_slm.evaluation.evalb import bracket_scores, corpus_f1, evalb_label
from hf_slm.evaluation.parsing import (
    debinarize,
    parse_eval,
    read_gold_trees,
    read_proposals,
    rerank,
    write_proposals,
)
from hf_slm.families import config_for_grammar
from hf_slm.families import causal_lm_for_config
from hf_slm.search.scoring import joint_log_probs
from hf_slm.tokenization.trees import normalize_tree, parse_tree, parse_trees

PTB_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb_sample"


def scores(gold, test, **options):
    return bracket_scores(parse_tree(gold), parse_tree(test), **options)


def counts(result):
    return result["matched"], result["gold"], result["test"]


# --- hand-computed cases --------------------------------------------------------------------------------


def test_identical_trees():
    # Brackets S(0,3) NP(0,2) VP(2,3); POS preterminals are not brackets: 3 of 3, P = R = F1 = 100.
    tree = "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))"
    result = scores(tree, tree)
    assert counts(result) == (3, 3, 3)
    assert (result["precision"], result["recall"], result["f1"], result["exact"]) == (100, 100, 100, True)


def test_one_wrong_bracket():
    gold = "(S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings) (ADVP (RB loudly))))"
    # gold: S(0,5) NP(0,3) VP(3,5) ADVP(4,5).
    # test: S(0,5) NP(0,2) VP(3,5) ADVP(4,5): NP(0,2) is wrong, 3 matched of 4 and 4: P = R = F1 = 75.
    result = scores(gold, "(S (NP the blue) bird (VP sings (ADVP loudly)))", test_pos=False)
    assert counts(result) == (3, 4, 4)
    assert result["precision"] == result["recall"] == result["f1"] == 75
    assert not result["exact"]
    # A wrong label is a wrong bracket too: PP(4,5) instead of ADVP(4,5), again 3 of 4.
    assert counts(scores(gold, "(S (NP the blue bird) (VP sings (PP loudly)))", test_pos=False)) == (3, 4, 4)
    # One extra bracket NP(0,2) inside NP(0,3): 4 matched, 4 gold, 5 test: P = 80, R = 100,
    # F1 = 2 * 80 * 100 / 180 = 88.888...; NP(0,2) does not cross any gold bracket (it nests in NP(0,3)).
    result = scores(gold, "(S (NP (NP the blue) bird) (VP sings (ADVP loudly)))", test_pos=False)
    assert counts(result) == (4, 4, 5)
    assert (result["precision"], result["recall"]) == (80, 100)
    assert result["f1"] == pytest.approx(800 / 9)
    assert result["crossing"] == 0
    # A crossing bracket: VP(2,5) "bird sings loudly" crosses gold NP(0,3) (0 < 2 < 3 < 5).
    result = scores(gold, "(S (NP the blue) (VP bird sings (ADVP loudly)))", test_pos=False)
    assert counts(result) == (2, 4, 4)  # S and ADVP
    assert result["crossing"] == 1


def test_punctuation_is_deleted_before_matching():
    gold = "(S (NP (NNP John)) (, ,) (NP (PRP he)) (VP (VBD left) (`` ``) (ADVP (RB early)) ('' '')) (. .))"
    # Words without punctuation: John he left early (0..3). gold: S(0,4) NP(0,1) NP(1,2) VP(2,4) ADVP(3,4).
    # The test attaches "." inside VP and the comma inside the first NP: spans over non-punctuation words
    # are unchanged, so 5 of 5 match. X holds only "," and disappears.
    test = "(S (NP John ,) (NP he) (VP left `` (ADVP early) '' .))"
    assert counts(scores(gold, test, test_pos=False)) == (5, 5, 5)
    test = "(S (NP John) (X ,) (NP he) (VP left `` (ADVP early) '') .)"
    assert counts(scores(gold, test, test_pos=False)) == (5, 5, 5)
    # EVALB's length counts punctuation (only traces are left out): 8 words.
    assert scores(gold, gold)["length"] == 8
    # Only the five COLLINS.prm tags are punctuation: -LRB- / -RRB- / HYPH words count.
    gold = "(NP (NP (NN L2)) (PRN (-LRB- -LRB-) (NN grammar) (-RRB- -RRB-)))"
    # gold: NP(0,4) NP(0,1) PRN(1,4); a test PRN over "grammar" only, PRN(2,3), does not match.
    assert counts(scores(gold, "(NP (NP L2) -LRB- (PRN grammar) -RRB-)", test_pos=False)) == (2, 3, 3)


def test_punctuation_positions_come_from_the_gold_tags():
    # The test tree tags "." as NN, the gold as ".": the gold decides, so the word is deleted in both trees
    # and VP(1,2) "left" matches although the test VP also covers the period.
    gold = "(S (NP (NNP John)) (VP (VBD left)) (. .))"
    assert counts(scores(gold, "(S (NP (NNP John)) (VP (VBD left) (NN .)))")) == (3, 3, 3)
    # A gold tree without POS tags: punctuation decided by word form, and reported.
    result = scores("(S (NP John) (VP left) .)", "(S (NP John) (VP left .))", gold_pos=False, test_pos=False)
    assert counts(result) == (3, 3, 3) and result["punctuation_from_words"]
    with pytest.raises(ValueError, match="needs POS tags in the gold tree"):
        scores("(S (NP John) (VP left) .)", "(S (NP John) (VP left .))", gold_pos=False, punctuation="tags")
    # punctuation="none" keeps every word: VP(1,2) vs VP(1,3) no longer match.
    assert counts(scores(gold, "(S (NP John) (VP left .))", test_pos=False, punctuation="none")) == (2, 3, 3)


def test_root_wrapper_is_ignored_but_the_sentence_bracket_counts():
    test = "(S (NP I) (VP like (NP it)))"
    # S(0,3) NP(0,1) VP(1,3) NP(2,3) in every spelling of the wrapper: 4 of 4 (the wrapper is no bracket,
    # the S under it is one).
    for gold in ("(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it)))))",
                 "( (S (NP (PRP I)) (VP (VBP like) (NP (PRP it)))) )",
                 "(TOP (S (NP (PRP I)) (VP (VBP like) (NP (PRP it)))))",
                 "(S (NP (PRP I)) (VP (VBP like) (NP (PRP it))))"):
        assert counts(scores(gold, test, test_pos=False)) == (4, 4, 4), gold
        assert counts(scores(gold, "(ROOT " + test + ")", test_pos=False)) == (4, 4, 4), gold
    # A test tree without S: 3 matched, 4 gold, 3 test (P = 100, R = 75).
    assert counts(scores("(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it)))))",
                         "(ROOT (NP I) (VP like (NP it)))", test_pos=False)) == (3, 4, 3)
    # DELETE_LABEL TOP: a TOP bracket below the root is dropped too (its children stay).
    # gold: S(0,3) NP(0,1) NP(2,3), TOP(1,3) dropped; test: S NP VP(1,3) NP(2,3): 3 matched, 3 gold, 4 test.
    assert counts(scores("(S (NP (PRP I)) (TOP (VBP like) (NP (PRP it))))", test, test_pos=False)) == (3, 3, 4)


def test_advp_and_prt_are_equivalent():
    gold = "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))"
    # S(0,3) NP(0,1) VP(1,3) PRT=ADVP(2,3): 4 of 4; with PP(2,3) instead, 3 of 4.
    assert counts(scores(gold, "(S (NP He) (VP gave (ADVP up)))", test_pos=False)) == (4, 4, 4)
    assert counts(scores(gold, "(S (NP He) (VP gave (PRT up)))", test_pos=False)) == (4, 4, 4)
    assert counts(scores(gold, "(S (NP He) (VP gave (PP up)))", test_pos=False)) == (3, 4, 4)
    assert evalb_label("PRT") == evalb_label("ADVP") == "ADVP"


def test_function_tags_and_coindices_are_stripped():
    gold = "(S (NP-SBJ-1 (PRP He)) (VP (VBD left) (NP-TMP (NN today)) (PP-LOC=2 (IN at) (NP (NN noon)))))"
    # S(0,5) NP(0,1) VP(1,5) NP(2,3) PP(3,5) NP(4,5): 6 of 6.
    test = "(S (NP He) (VP left (NP today) (PP at (NP noon))))"
    assert counts(scores(gold, test, test_pos=False)) == (6, 6, 6)
    assert [evalb_label(x) for x in ("NP-SBJ-1", "NP=2", "PP-LOC-PRD", "ADVP-TMP", "PRT|ADVP", "-NONE-")] == [
        "NP", "NP", "PP", "ADVP", "PRT|ADVP", "-NONE-"]


def test_unary_chains_count_as_a_multiset():
    gold = "(S (NP (NP (DT the) (NN man))) (VP (VBD left)))"
    # gold: S(0,3), NP(0,2) twice, VP(2,3) = 4 brackets.
    # test with one NP: 3 brackets, min(2, 1) = 1 NP matches: 3 matched; P = 100, R = 75,
    # F1 = 2 * 100 * 75 / 175 = 85.714...
    result = scores(gold, "(S (NP the man) (VP left))", test_pos=False)
    assert counts(result) == (3, 4, 3)
    assert (result["precision"], result["recall"]) == (100, 75)
    assert result["f1"] == pytest.approx(15000 / 175)
    # test with three NPs: 5 brackets, min(2, 3) = 2 NPs match: 4 matched; P = 80, R = 100 (EVALB [7].5).
    result = scores(gold, "(S (NP (NP (NP the man))) (VP left))", test_pos=False)
    assert counts(result) == (4, 4, 5)
    assert (result["precision"], result["recall"]) == (80, 100)


def test_predicted_tree_without_pos_against_gold_with_pos():
    gold = "(S (NP (PRP it)) (VP (VBZ sings)))"
    # gold: S(0,2) NP(0,1) VP(1,2). The POS-free test tree has the same three brackets: 3 of 3.
    assert counts(scores(gold, "(S (NP it) (VP sings))", test_pos=False)) == (3, 3, 3)
    # "auto" cannot tell (NP it) from a preterminal (every word is an only child), so it reads NP and VP as
    # POS tags: 1 test bracket, S: P = 100, R = 33.3. That is why model output is scored with test_pos=False.
    result = scores(gold, "(S (NP it) (VP sings))")
    assert counts(result) == (1, 3, 1)
    # With any branching phrase, "auto" sees a POS-free tree: S(0,3) NP(0,2) VP(2,3), 3 of 3.
    gold = "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))"
    assert counts(scores(gold, "(S (NP the bird) (VP sings))")) == (3, 3, 3)


def test_traces_are_deleted_with_the_constituents_they_leave_empty():
    # EVALB README [6].3: (SBAR (-NONE- 0) (S (-NONE- *T*-1))) disappears. Words: John reported . (length 3,
    # traces not counted); brackets: S(0,2) NP(0,1) VP(1,2).
    gold = "( (S (NP-SBJ (NNP John)) (VP (VBD reported) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) (. .)) )"
    result = scores(gold, "(S (NP John) (VP reported) .)", test_pos=False)
    assert counts(result) == (3, 3, 3) and result["length"] == 3
    # max_length uses that length: the sentence is skipped at 2 and scored at 3.
    assert corpus_f1([gold], ["(S (NP John) (VP reported) .)"], test_pos=False, max_length=2)["sentences"] == 0
    assert corpus_f1([gold], ["(S (NP John) (VP reported) .)"], test_pos=False, max_length=3)["sentences"] == 1


def test_length_and_word_mismatch_name_the_sentence():
    gold = ["(S (NP (PRP I)) (VP (VBP sing)))", "(S (NP (PRP you)) (VP (VBP sing)))"]
    with pytest.raises(ValueError, match=r"sentence 2: length mismatch, the gold tree has 2 words and the test tree 3"):
        corpus_f1(gold, ["(S (NP I) (VP sing))", "(S (NP you) (VP sing loudly))"], test_pos=False)
    with pytest.raises(ValueError, match=r"sentence 2: word mismatch at word 1: gold 'you', test 'we'"):
        corpus_f1(gold, ["(S (NP I) (VP sing))", "(S (NP we) (VP sing))"], test_pos=False)
    with pytest.raises(ValueError, match="2 gold trees but 1 test trees"):
        corpus_f1(gold, ["(S (NP I) (VP sing))"])


def test_corpus_scores_sum_counts_over_sentences():
    gold = ["(S (NP (DT the) (NN man)) (VP (VBD left)))", "(S (NP (PRP I)) (VP (VBP like) (NP (PRP it))))"]
    test = ["(S (NP the man) (VP left))", "(S (NP I) (VP like it))"]
    # Sentence 0: 3/3/3. Sentence 1: gold S NP VP NP(2,3) = 4, test S NP VP = 3, matched 3.
    # Corpus: matched 6, gold 7, test 6: P = 100, R = 600/7 = 85.71, F1 = 2 * 100 * R / (100 + R) = 92.31
    # (not the mean of the sentence F1s); exact match 1 of 2 sentences = 50.
    result = corpus_f1(gold, test, test_pos=False)
    assert (result["matched_brackets"], result["gold_brackets"], result["test_brackets"]) == (6, 7, 6)
    recall = 600 / 7
    assert result["precision"] == 100 and result["recall"] == pytest.approx(recall)
    assert result["f1"] == pytest.approx(200 * recall / (100 + recall))
    assert result["exact_match"] == 50 and result["sentences"] == 2
    # Unlabeled: labels ignored, spans only; (X the man) still matches NP(0,2).
    unlabeled = corpus_f1(gold, ["(S (X the man) (Y left))", test[1]], test_pos=False, labeled=False)
    assert unlabeled["matched_brackets"] == 6


@pytest.mark.skipif(not PTB_SAMPLE.is_dir(), reason="../shared/data/ptb_sample is not available")
def test_wsj_trees_score_100_against_their_normalized_selves(tmp_path):
    combined = PTB_SAMPLE / "treebank" / "combined"
    if combined.is_dir() and any(combined.glob("*.mrg")):
        files = sorted(combined.glob("*.mrg"))[:30]
    elif (PTB_SAMPLE / "treebank.zip").is_file():
        files = []
        with zipfile.ZipFile(PTB_SAMPLE / "treebank.zip") as archive:
            for name in sorted(n for n in archive.namelist() if n.endswith(".mrg") and "/combined/" in n)[:30]:
                files.append(tmp_path / Path(name).name)
                files[-1].write_bytes(archive.read(name))
    else:
        pytest.skip("no .mrg files in ../shared/data/ptb_sample")
    gold = read_gold_trees(files)
    assert len(gold) > 100 and any("-NONE-" in str(t) for t in gold)
    # What a model sees (traces, POS tags, wrapper root and function tags removed) scores 100 against the raw
    # gold, and so does the gold itself; binarized trees after debinarize too.
    normalized = [normalize_tree(t, strip_function_tags=True) for t in gold]
    result = corpus_f1(gold, normalized, test_pos=False)
    assert result["f1"] == 100 and result["exact_match"] == 100 and result["gold_brackets"] > 1000
    assert corpus_f1(gold, gold)["f1"] == 100
    binarized = [debinarize(normalize_tree(t, binarize=True)) for t in gold]
    assert corpus_f1(gold, binarized, test_pos=False)["f1"] == 100
    # Removing unary chains loses brackets: recall drops, precision stays 100.
    no_unary = corpus_f1(gold, [normalize_tree(t, remove_unary=True) for t in gold], test_pos=False)
    assert no_unary["precision"] == 100 and no_unary["recall"] < 100


# --- proposal files, reranking and parsing on a tiny model ------------------------------------------------

TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .)))",
]
# Each block: distractors (same words, other brackets, POS-free or tagged) and the gold tree, not first.
PROPOSALS = [
    ["(S (NP the blue) (VP bird sings) .)", "(S (NP the) (VP blue bird sings) .)", TREES[0],
     "(S (VP the blue bird sings .))"],
    ["(S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at)) (NP (DT the) (NN moon))))", TREES[1],
     "(S (NP a dog barks) (PP at (NP the moon)))"],
    ["(S (NP I like) (VP it) .)", TREES[2]],
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tokenizer = hf_slm.SyntacticTokenizer.train(TREES, vocab_size=30)
    config = config_for_grammar(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout)
    torch.manual_seed(0)
    model = causal_lm_for_config(config).eval()
    return model, tokenizer


def test_proposal_file_round_trip_and_errors(tmp_path):
    path = write_proposals(tmp_path / "proposals.txt", PROPOSALS)
    blocks = read_proposals(path)
    assert [len(b) for b in blocks] == [4, 3, 2]
    assert blocks[0][2] == parse_tree(TREES[0])
    assert len(read_proposals(path, limit=2)) == 2
    # Several blank lines separate blocks like one; a malformed line is named by its number.
    path.write_text("(S (NP a) b)\n\n\n(S c)\n(S (NP d)\n")
    with pytest.raises(ValueError, match=r"proposals.txt, line 5: unbalanced brackets"):
        read_proposals(path)
    path.write_text("(S (NP a) b)\n\n\n(S c)\n(S d) (S e)\n")
    with pytest.raises(ValueError, match=r"line 5: 2 trees on one line"):
        read_proposals(path)


def test_rerank_picks_the_highest_joint_probability(tiny, tmp_path):
    model, tokenizer = tiny
    path = write_proposals(tmp_path / "proposals.txt", PROPOSALS)
    metrics = rerank(model, tokenizer, TREES, path, batch_size=4, progress=False, output_dir=tmp_path / "out")
    # The choice is the argmax of log p(x, y) of each block's normalized proposals.
    expected_choice, chosen_trees = [], []
    for block in PROPOSALS:
        trees = [normalize_tree(parse_tree(t), **tokenizer.normalization) for t in block]
        log_probs = joint_log_probs(model, tokenizer(trees)["input_ids"])
        expected_choice.append(int(np.argmax(log_probs)))
        chosen_trees.append(block[expected_choice[-1]])
        assert metrics["chosen_log_probs"][len(expected_choice) - 1] == pytest.approx(max(log_probs), abs=1e-5)
    assert metrics["chosen"] == expected_choice
    direct = corpus_f1(TREES, chosen_trees)
    assert metrics["f1"] == pytest.approx(direct["f1"])
    assert metrics["matched_brackets"] == direct["matched_brackets"]
    # The gold tree is among the proposals: the oracle is exact; the first proposals are all wrong.
    assert metrics["oracle"]["f1"] == 100 and metrics["oracle"]["exact_match"] == 100
    assert metrics["first_proposal"]["f1"] == pytest.approx(corpus_f1(TREES, [b[0] for b in PROPOSALS])["f1"])
    assert metrics["proposals"] == 9
    record = json.loads((tmp_path / "out" / "rerank-in-memory.json").read_text())  # gold trees given in memory
    assert record["evaluation"] == "rerank" and record["metrics"]["f1"] == pytest.approx(metrics["f1"])
    assert record["data"]["sentences"] == 3 and record["data"]["proposal_trees"] == 9
    written = parse_trees((tmp_path / "out" / "rerank-in-memory_trees.txt").read_text())
    assert written == [parse_tree(t) for t in chosen_trees]
    # In-memory proposals, limit and max_proposals.
    limited = rerank(model, tokenizer, TREES, PROPOSALS, limit=2, max_proposals=2, progress=False)
    assert limited["sentences"] == 2 and limited["proposals"] == 4


def test_rerank_errors_name_the_proposal(tiny, tmp_path):
    model, tokenizer = tiny
    bad = [PROPOSALS[0], PROPOSALS[1], ["(S (NP I like) (VP it))"]]  # the period is missing
    path = write_proposals(tmp_path / "bad.txt", bad)
    with pytest.raises(ValueError, match=r"bad.txt, line 10: sentence 3: length mismatch"):
        rerank(model, tokenizer, TREES, path, progress=False)
    with pytest.raises(ValueError, match="2 proposal blocks for 3 gold trees"):
        rerank(model, tokenizer, TREES, PROPOSALS[:2], progress=False)
    with pytest.raises(ValueError, match=r"sentence 1, proposal 1: .*FOO"):
        rerank(model, tokenizer, TREES[:1], [["(FOO the blue bird sings .)"]], progress=False)


def test_parse_eval_scores_the_beam_search_trees(tiny, tmp_path):
    model, tokenizer = tiny
    # Short sentences and a small beam keep this quick; words the tokenizer cannot spell ("Zed") come back.
    gold = [TREES[2], "(ROOT (S (NP (NNP Zed)) (VP (VBZ sings))))"]
    with pytest.warns(UserWarning, match="Zed"):
        metrics = parse_eval(model, tokenizer, gold, beam_size=10, word_beam_size=3, max_nonterminals=3,
                             progress=False, output_dir=tmp_path)
    predicted = parse_trees((tmp_path / "parse-in-memory_trees.txt").read_text())
    assert [t.leaves() for t in predicted] == [["I", "like", "it", "."], ["Zed", "sings"]]
    direct = corpus_f1(gold, predicted, test_pos=False)
    assert metrics["f1"] == pytest.approx(direct["f1"]) and metrics["sentences"] == 2
    assert metrics["matched_brackets"] == direct["matched_brackets"]
    record = json.loads((tmp_path / "parse-in-memory.json").read_text())
    assert record["evaluation"] == "parse" and record["options"]["beam"]["beam_size"] == 10
    assert parse_eval(model, tokenizer, gold, limit=1, beam_size=10, word_beam_size=3, max_nonterminals=3,
                      progress=False)["sentences"] == 1


def test_parsing_and_reranking_name_why_an_unlabeled_model_is_not_scored():
    """Paper 003's models predict unlabeled trees: eval parse / rerank (labeled EVALB) refuse them saying so, not
    with the words-only message of a terminals model."""
    from hf_slm.evaluation.parsing import parse_eval, rerank
    from hf_slm.families import preset_config
    from hf_slm.families import causal_lm_for_config
    from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer

    tokenizer = CompositionalTokenizer.train(["(S (NP the bird) (VP sings loudly))"], vocab_size=20)
    model = causal_lm_for_config(preset_config("nb-dn-in-m-tiny", vocab_size=len(tokenizer), **tokenizer.action_layout))
    gold = ["(S (NP (DT the) (NN bird)) (VP (VBZ sings) (ADVP (RB loudly))))"]
    with pytest.raises(ValueError, match="a Nb-Dn-In-M model writes unlabelled brackets, which EVALB does not score"):
        parse_eval(model, tokenizer, gold, progress=False)
    with pytest.raises(ValueError, match="reranking scores labelled trees"):
        rerank(model, tokenizer, gold, [["(S (NP the bird) (VP sings loudly))"]], progress=False)
