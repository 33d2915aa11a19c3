"""UAS of dependency models (paper 002, section 4; hf_slm/evaluation/attachment.py): the score on hand-computed
examples, the punctuation rules, beam UAS through the API and the CLI, reranking against the model's own
forward-pass scores, resuming from a partial journal, and clear errors."""

import json
import warnings
from pathlib import Path

import pytest
from conftest import save_tiny_checkpoint
from helpers.dependency_models import SYSTEMS, joint_log_prob, every_projective_tree, tiny

from hf_slm.cli import main
from hf_slm.evaluation import attachment
from hf_slm.evaluation.results import tidy_numbers
from hf_slm.evaluation.attachment import (
    attachment_score, dependency_log_probs, is_punctuation_word, parse_uas, proposal_blocks, rerank_uas,
    sentence_attachment,
)
from hf_slm.tokenization.dependency_trees import DependencyTree
from helpers.conllu_samples import GOLD, conllu

EWT_DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ud_english_ewt" / "en_ewt-ud-dev.conllu"

BEAM = dict(beam_size=10, word_beam_size=5)
BEAM_ARGS = ["--beam-size", "10", "--word-beam-size", "5"]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.one_thread


@pytest.fixture(scope="module")
def dtg(tmp_path_factory):
    """A tiny saved DTG checkpoint, the model, its tokenizer and a gold CoNLL-U file."""
    directory = tmp_path_factory.mktemp("uas")
    model, tokenizer = tiny("dtg")
    model.save_pretrained(directory / "model")
    tokenizer.save_pretrained(directory / "model")
    gold = directory / "gold.conllu"
    gold.write_text(conllu(GOLD))
    return directory / "model", model, tokenizer, gold


# ---- the score ------------------------------------------------------------------------------------------


def test_sentence_and_corpus_uas_by_hand():
    assert sentence_attachment([2, 0, 4, 2], [2, 0, 2, 2]) == {"correct": 3, "scored": 4, "uas": 75.0}
    assert sentence_attachment([2, 0], [0, 1], scored=[False, False])["uas"] is None
    # Micro-average: 1/1 and 1/3 correct make 2/4 = 50% (the mean of sentence scores would be 66.7%).
    gold = ["a/0", "a/0 b/1 c/1"]
    metrics = attachment_score(gold, [[0], [3, 3, 1]])
    assert (metrics["uas"], metrics["correct"], metrics["scored_tokens"]) == (50.0, 2, 4)
    assert [s["uas"] for s in metrics["per_sentence"]] == [100.0, pytest.approx(100 / 3)]
    # A left-out sentence (None) counts nowhere but sentences_left_out; an inline prediction is read too.
    metrics = attachment_score(gold, [None, "a/0 b/1 c/2"])
    assert (metrics["uas"], metrics["scored_tokens"], metrics["sentences"], metrics["sentences_left_out"]) == (
        pytest.approx(200 / 3), 3, 1, 1)
    with pytest.raises(ValueError, match="gold sentence 2: 2 predicted heads for 3 gold words"):
        attachment_score(gold, [[0], [0, 1]])
    with pytest.raises(ValueError, match="1 predicted trees for 2 gold sentences"):
        attachment_score(gold, [[0]])


def test_punctuation_is_left_out_by_upos_and_the_rule_is_named():
    gold = [{"words": ["The", "cat", "sleeps", "."], "heads": [2, 3, 0, 3], "upos": ["DET", "NOUN", "VERB", "PUNCT"]},
            {"words": ["Hi", "!"], "heads": [0, 1], "upos": ["INTJ", "PUNCT"]}]
    predicted = [[2, 3, 0, 1], [0, 1]]  # the full stop's head is wrong
    excluded = attachment_score(gold, predicted)
    assert (excluded["uas"], excluded["correct"], excluded["scored_tokens"], excluded["punctuation_excluded"]) == (
        100.0, 4, 4, 2)
    assert excluded["punctuation"]["rule"] == "upos" and excluded["punctuation"]["excluded"] is True
    assert "PUNCT" in excluded["punctuation"]["description"]
    assert (excluded["all_words"]["correct"], excluded["all_words"]["scored_tokens"]) == (5, 6)
    included = attachment_score(gold, predicted, include_punctuation=True)
    assert (included["uas"], included["scored_tokens"]) == (pytest.approx(500 / 6), 6)
    assert included["punctuation"] == {"rule": "none", "excluded": False,
                                       "description": attachment.PUNCTUATION_RULES["none"]}


def test_without_upos_punctuation_is_words_of_punctuation_characters():
    for word in (".", ",", "--", "...", "«", "?!", "(", "\u2019", "%", "#", ":-)"):  # EWT tags :-) SYM
        assert is_punctuation_word(word), word
    for word in ("$", "+", "``", "a.", "3", ""):
        assert not is_punctuation_word(word), word
    # "--" and "!" are punctuation, "$" (a currency symbol, category Sc) is scored.
    metrics = attachment_score(["It/2 costs/0 $/2 5/3 --/2 !/2"], [[2, 0, 2, 3, 1, 1]])
    assert metrics["punctuation"]["rule"] == "characters"
    assert (metrics["correct"], metrics["scored_tokens"], metrics["uas"]) == (4, 4, 100.0)
    # One sentence without UPOS decides the corpus: "auto" falls back to the characters rule.
    mixed = [{"words": ["Hi", "!"], "heads": [0, 1], "upos": ["INTJ", "PUNCT"]},
             {"words": ["Hi", "!"], "heads": [0, 1], "upos": ["_", "_"]}]
    assert attachment_score(mixed, [[0, 1], [0, 1]])["punctuation"]["rule"] == "characters"
    with pytest.raises(ValueError, match="gold sentence 2: punctuation_rule 'upos' needs a UPOS"):
        attachment_score(mixed, [[0, 1], [0, 1]], punctuation_rule="upos")


def test_proposal_files_group_analyses_by_sent_id_or_words(tmp_path):
    analyses = [("x", ["a", "b"], [0, 1], ["X", "X"]), ("x", ["a", "b"], [2, 0], ["X", "X"]),
                ("y", ["a", "b"], [0, 1], ["X", "X"])]
    path = tmp_path / "p.conllu"
    path.write_text(conllu(analyses))
    blocks = list(proposal_blocks(path))
    assert [(len(trees), sent_id) for trees, _, sent_id in blocks] == [(2, "x"), (1, "y")]
    path.write_text(conllu([(None, *rest) for _, *rest in analyses]))  # no sent_id: the same words make one block
    assert [len(trees) for trees, _, _ in proposal_blocks(path)] == [3]
    inline = tmp_path / "p.txt"
    inline.write_text("a/0 b/1\na/2 b/0\n\n\na/0 b/1\n")
    blocks = list(proposal_blocks(inline))
    assert [[t.to_inline() for t in trees] for trees, _, _ in blocks] == [["a/0 b/1", "a/2 b/0"], ["a/0 b/1"]]
    assert blocks[1][1] == [f"{inline}, line 5"]


@pytest.mark.skipif(not EWT_DEV.exists(), reason="../shared/data/ud_english_ewt is not here")
def test_ewt_dev_gold_against_itself_scores_every_word_that_is_not_punct():
    # UD English EWT dev: 25,147 words, 3,075 of them PUNCT (counted with a plain reader of the file).
    words = punct = 0
    for line in EWT_DEV.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) == 10 and fields[0].isdigit():
            words += 1
            punct += fields[3] == "PUNCT"
    gold = attachment.gold_sentences(EWT_DEV)
    metrics = attachment_score(gold, [s["heads"] for s in gold])
    assert (words, punct) == (25147, 3075)
    assert (metrics["uas"], metrics["scored_tokens"], metrics["tokens"]) == (100.0, words - punct, words)
    assert metrics["punctuation"]["rule"] == "upos"


# ---- beam, reranking, resuming -------------------------------------------------------------------------


def test_beam_uas_of_the_api_and_the_cli_agree(dtg, tmp_path, capsys):
    import hf_slm

    directory, model, tokenizer, gold = dtg
    metrics = parse_uas(model, tokenizer, gold, progress=False, **BEAM)
    trees = hf_slm.parse(model, tokenizer, [words for _, words, _, _ in GOLD], progress=False, **BEAM)
    expected = attachment_score([{"words": w, "heads": h, "upos": u} for _, w, h, u in GOLD], trees)
    assert (metrics["uas"], metrics["correct"], metrics["scored_tokens"]) == (
        expected["uas"], expected["correct"], expected["scored_tokens"])
    assert metrics["scored_tokens"] == 13 and metrics["punctuation"]["rule"] == "upos"

    results = tmp_path / "results"
    assert main(["eval", "uas", "--model", str(directory), "--data", str(gold), "--output", str(results),
                 *BEAM_ARGS]) == 0
    printed = json.loads(capsys.readouterr().out)
    # printed and saved as computed, to the results' 12 significant digits (evaluation/results.py: tidy_numbers)
    assert (printed["uas"], printed["correct"], printed["scored_tokens"]) == (
        tidy_numbers(metrics["uas"]), metrics["correct"], metrics["scored_tokens"])
    record = json.loads((results / "uas-gold.json").read_text())
    saved = record["metrics"]
    assert saved["uas"] == tidy_numbers(metrics["uas"]) and saved["units"] == "percent"
    assert saved["parses"].startswith("beam search") and saved["beam"]["beam_size"] == 10
    assert saved["punctuation"]["rule"] == "upos" and record["options"]["beam"]["word_beam_size"] == 5
    lines = [json.loads(line) for line in (results / "uas-gold_sentences.jsonl").read_text().splitlines()]
    assert [line["predicted_heads"] for line in lines] == [list(DependencyTree.from_inline(t).heads) for t in trees]
    assert [line["sent_id"] for line in lines] == ["s1", "s2", "s3", "s4"]
    assert lines[1]["excluded_as_punctuation"] == [4]

    assert main(["eval", "uas", "--model", str(directory), "--data", str(gold), "--output", str(results),
                 "--include-punctuation", "--overwrite", *BEAM_ARGS]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["scored_tokens"] == 14 and printed["punctuation"]["rule"] == "none"


def test_reranking_picks_the_proposal_the_model_scores_highest(dtg, tmp_path, capsys):
    directory, model, tokenizer, gold = dtg
    # Every projective tree of each sentence, and for the first a non-projective one the model cannot build.
    blocks = [[t.to_inline() for t in every_projective_tree(words)] for _, words, _, _ in GOLD]
    blocks[0].append("There/3 is/4 a/0 difference/3")
    analyses = [(sent_id, list(DependencyTree.from_inline(tree).words), list(DependencyTree.from_inline(tree).heads),
                 upos) for (sent_id, _, _, upos), block in zip(GOLD, blocks) for tree in block]
    proposals = tmp_path / "proposals.conllu"
    proposals.write_text(conllu(analyses))
    results = tmp_path / "results"
    assert main(["eval", "uas", "--model", str(directory), "--data", str(gold), "--proposals", str(proposals),
                 "--output", str(results)]) == 0
    printed = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in (results / "uas-rerank-gold_sentences.jsonl").read_text().splitlines()]
    for line, block in zip(lines, blocks):
        # The model's own scores through another path: a plain forward pass over each tokenized tree.
        forward = [joint_log_prob(model, tokenizer, tree) if DependencyTree.from_inline(tree).is_projective()
                   else float("-inf") for tree in block]
        best = max(range(len(block)), key=lambda j: forward[j])
        assert line["chosen"] == best
        assert line["chosen_log_prob"] == pytest.approx(forward[best], abs=1e-4)
        assert line["predicted_heads"] == list(DependencyTree.from_inline(block[best]).heads)
    assert lines[0]["log_probs"][-1] is None and "not projective" in lines[0]["not_scored"][str(len(blocks[0]) - 1)]
    saved = json.loads((results / "uas-rerank-gold.json").read_text())["metrics"]
    assert saved["proposals"] == sum(map(len, blocks)) and saved["proposals_not_scored"] == 1
    assert saved["oracle"]["uas"] == 100.0 and printed["uas"] == saved["uas"]
    chosen = [line["predicted_heads"] for line in lines]
    assert saved["uas"] == tidy_numbers(attachment_score(attachment.gold_sentences(gold), chosen)["uas"])
    # dependency_log_probs is the one scoring path; it agrees with the forward pass.
    assert dependency_log_probs(model, tokenizer, blocks[2]) == pytest.approx(
        [joint_log_prob(model, tokenizer, tree) for tree in blocks[2]], abs=1e-4)


@pytest.mark.parametrize("grammar", sorted(SYSTEMS))
def test_every_dependency_grammar_scores_given_trees_as_its_forward_pass(grammar):
    model, tokenizer = tiny(grammar)
    trees = [t.to_inline() for t in every_projective_tree(["a", "b", "c"])]
    assert dependency_log_probs(model, tokenizer, trees, batch_size=3) == pytest.approx(
        [joint_log_prob(model, tokenizer, tree) for tree in trees], abs=1e-4)


def test_trees_the_model_cannot_build_get_a_reason_not_a_number():
    model, tokenizer = tiny("dtg_swift")  # max_k 2: RA[4] cannot be spelled
    found = dependency_log_probs(model, tokenizer, ["a/0 b/1 c/2 d/3 e/1", "a/0 b/3 c/1 d/2", "a/0 b/1 c/1"])
    assert "needs k <= 2" in found[0] and "not projective" in found[1]
    assert found[2] == pytest.approx(joint_log_prob(model, tokenizer, "a/0 b/1 c/1"), abs=1e-4)


def test_the_model_card_reports_uas(dtg, tmp_path, capsys):
    from hf_slm.publishing.model_card import build_model_card

    _, model, tokenizer, gold = dtg
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    assert main(["eval", "uas", "--model", str(tmp_path / "model"), "--data", str(gold), *BEAM_ARGS]) == 0
    uas = json.loads(capsys.readouterr().out)["uas"]
    text = build_model_card(tmp_path / "model", repo_id="org/tiny").text
    row = next(line for line in text.splitlines() if "UAS, beam-search parses" in line)
    assert f"{uas:.2f}" in row and "beam 10, word beam 5" in row and "punctuation excluded (upos rule)" in row


def _count_calls(monkeypatch, name):
    calls = []
    original = getattr(attachment, name)
    monkeypatch.setattr(attachment, name, lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    return calls


def _keep_journal_lines(path, count):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:count]))


def test_a_resumed_run_gives_the_numbers_of_an_uninterrupted_one(dtg, tmp_path, monkeypatch, capsys):
    _, model, tokenizer, gold = dtg
    results = tmp_path / "results"
    first = parse_uas(model, tokenizer, gold, batch_size=1, output_dir=results, progress=False, **BEAM)
    sentences_file = (results / "uas-gold_sentences.jsonl").read_text()
    _keep_journal_lines(results / "uas-gold.journal.jsonl", 1 + 2)  # the header and two sentences
    calls = _count_calls(monkeypatch, "beam_score")
    capsys.readouterr()
    again = parse_uas(model, tokenizer, gold, batch_size=1, output_dir=results, progress=False, **BEAM)
    assert "resuming uas-gold.journal.jsonl: 2 of 4 sentences already finished" in capsys.readouterr().err
    assert len(calls) == 2  # one chunk per sentence left
    assert {k: v for k, v in again.items() if k != "files"} == {k: v for k, v in first.items() if k != "files"}
    assert (results / "uas-gold_sentences.jsonl").read_text() == sentences_file

    # Per sentence the gold tree and a flat one (every word on the first).
    proposals = [[DependencyTree(w, h).to_inline(), DependencyTree(w, [0] + [1] * (len(w) - 1)).to_inline()]
                 for _, w, h, _ in GOLD]
    first = rerank_uas(model, tokenizer, gold, proposals, chunk_size=2, output_dir=results, progress=False)
    _keep_journal_lines(results / "uas-rerank-gold.journal.jsonl", 1 + 2)
    calls = _count_calls(monkeypatch, "dependency_log_probs")
    again = rerank_uas(model, tokenizer, gold, proposals, chunk_size=2, output_dir=results, progress=False)
    assert len(calls) == 2 and again["uas"] == first["uas"] and again["correct"] == first["correct"]
    assert "resuming uas-rerank-gold.journal.jsonl: 2 of 4 sentences" in capsys.readouterr().err


# ---- errors --------------------------------------------------------------------------------------------


def test_clear_errors_for_a_constituency_model_and_a_file_without_heads(dtg, tmp_path, capsys):
    directory, model, tokenizer, gold = dtg
    no_heads = tmp_path / "words.conllu"
    no_heads.write_text(conllu(GOLD[:1]).replace("\t2\tdep", "\t_\tdep"))
    with pytest.raises(ValueError, match=r"has HEAD None; expected an integer; UAS needs gold file with heads"):
        parse_uas(model, tokenizer, no_heads, progress=False, **BEAM)
    assert main(["eval", "uas", "--model", str(directory), "--data", str(no_heads), "--output",
                 str(tmp_path / "r")]) == 2
    assert "hf-slm eval uas: error:" in capsys.readouterr().err and not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match=r"proposals.conllu.*UAS needs proposal file with heads"):
        rerank_uas(model, tokenizer, gold, _write(tmp_path / "proposals.conllu", no_heads.read_text()), progress=False)
    with pytest.raises(ValueError, match=r"analysis 1 \(s1\): the proposal's words 'a b c' are not those of"):
        rerank_uas(model, tokenizer, gold, _write(tmp_path / "other.conllu", conllu([("s1", *GOLD[3][1:])])),
                   progress=False)
    with pytest.raises(ValueError, match="1 proposal blocks for 4 gold sentences"):
        rerank_uas(model, tokenizer, gold, [["There/2 is/0 a/4 difference/2"]], progress=False)

    tg_trees = ["(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "(S (NP (DT a) (NN dog)) (VP (VBZ barks)))"]
    checkpoint, tg_model, tg_tokenizer = save_tiny_checkpoint(tmp_path / "tg", tg_trees)
    with pytest.raises(ValueError, match=r"UAS needs a model of dependency trees; a Transformer Grammar \(TG\) model writes bracketed trees"):
        parse_uas(tg_model, tg_tokenizer, gold, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["eval", "uas", "--model", str(checkpoint), "--data", str(gold), "--proposals", str(gold),
                     "--output", str(tmp_path / "r")]) == 2
    # the model's family record says which evaluations it supports (Family.evaluations)
    assert ("hf-slm eval uas: a Transformer Grammar (TG) model does not support it (its family, transformer_grammar, "
            "supports eval ppl, sg, blimp, parse, rerank)") in capsys.readouterr().err


def _write(path, text):
    path.write_text(text)
    return path
