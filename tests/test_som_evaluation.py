"""SOM evaluation: exact perplexity and surprisals from the logits, SyntaxGym, BLiMP (the shared drivers, through
SOM's Scorer), UF1 of incremental parses."""

import math
from pathlib import Path

import pytest
import torch

from hf_slm.families.ordered_memory.data import SyntacticOrderedMemoryCollator, gold_tree, som_example
from hf_slm.evaluation.blimp import run_blimp
from hf_slm.evaluation.syntaxgym import run_syntaxgym
from hf_slm.families.ordered_memory.evaluation import som_parse_eval, som_sentence_scores, som_surprisals, word_spans
from hf_slm.tokenization.tokenization_slm import SyntacticTokenizer, SyntacticWordTokenizer

from conftest import DEPENDENCY_TREEBANK
from helpers.som_models import model_for, som_perplexity

SENTENCES = DEPENDENCY_TREEBANK["train"]
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="module")
def word_tokenizer():
    return SyntacticWordTokenizer.train([gold_tree(w, h) for w, h in SENTENCES], linearization="terminals",
                                        min_count=1)


def test_perplexity_is_exp_of_the_models_mean_token_loss(word_tokenizer, tmp_path):
    model = model_for(word_tokenizer)
    sentences = [words for words, _ in SENTENCES]
    metrics = som_perplexity(model, word_tokenizer, sentences, tmp_path)
    batch = SyntacticOrderedMemoryCollator(word_tokenizer)([som_example(word_tokenizer, w, h) for w, h in SENTENCES])
    with torch.no_grad():
        loss = model(**{k: v for k, v in batch.items() if k != "som_first_siblings"}).lm_loss
    assert metrics["perplexity"] == pytest.approx(math.exp(loss.item()), rel=1e-5)
    assert metrics["estimate"] == "exact" and not metrics["is_upper_bound"] and metrics["method"] == "exact"
    assert metrics["words"] == sum(len(s) for s in sentences)
    assert metrics["denominator"] == metrics["words"] + len(sentences) and metrics["eos_counted"]  # one </s> each


def test_word_surprisals_sum_their_pieces():
    trees = [gold_tree(w, h) for w, h in SENTENCES]
    pieces = SyntacticTokenizer.train([str(t) for t in trees] * 20, vocab_size=40, linearization="terminals")
    model = model_for(pieces)
    words = ["A", "hearing", "is", "scheduled"]
    encoded = pieces(words, is_split_into_words=True, return_word_starts=True)
    assert sum(encoded["word_starts"]) == 4 and len(encoded["input_ids"]) > 5  # some word has several pieces
    ids = torch.tensor([encoded["input_ids"]])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1).gather(-1, ids[0, 1:, None])[:, 0]
    word_of_piece = []
    for start in encoded["word_starts"][1:]:
        word_of_piece.append(word_of_piece[-1] + 1 if word_of_piece and start else (0 if start else word_of_piece[-1]))
    expected = [-sum(log_probs[i].item() for i, w in enumerate(word_of_piece) if w == k) / math.log(2)
                for k in range(4)]
    assert som_surprisals(model, pieces, [words])[0] == pytest.approx(expected, abs=1e-4)
    score = som_sentence_scores(model, pieces, [words])[0]
    assert score["log_prob"] == pytest.approx(sum(score["word_log_probs"]) + score["eos_log_prob"])


def test_uf1_is_perfect_for_the_gold_decisions_and_counts_the_right_brackets(word_tokenizer):
    assert word_spans({(0, 4), (1, 4), (1, 2), (2, 2), (2, 4), (3, 5)}, 4) == {(1, 2), (2, 4)}
    model = model_for(word_tokenizer)
    forward = model.forward

    def oracle(**inputs):  # Table 2's "predicted tree + gold tree": the memory follows the gold grid
        return forward(**inputs, gold_decisions=model.gold_grid(inputs["som_first_siblings"]))

    model.forward = oracle
    examples = [{"words": w, "heads": h} for w, h in SENTENCES]
    metrics = som_parse_eval(model, word_tokenizer, examples)
    assert metrics["uf1"] == pytest.approx(100.0)
    assert metrics["p_accuracy"] == 1.0
    model.forward = forward
    untrained = som_parse_eval(model, word_tokenizer, examples)
    assert 0 <= untrained["uf1"] <= 100 and untrained["sentences"] == len(examples)


@pytest.mark.skipif(not (SHARED / "syntaxgym").is_dir(), reason="../shared/data/syntaxgym is absent")
def test_two_syntaxgym_suites(word_tokenizer):
    model = model_for(word_tokenizer)
    suites = [SHARED / "syntaxgym" / "test_suites" / "json" / name for name in ("number_prep.json", "cleft.json")]
    metrics = run_syntaxgym(model, word_tokenizer, suites, limit=3, progress=False)
    assert set(metrics["suites"]) == {"number_prep", "cleft"}
    for suite in metrics["suites"].values():
        assert 0.0 <= suite["accuracy"] <= 1.0 and suite["items"] == 3


@pytest.mark.skipif(not (SHARED / "blimp").is_dir(), reason="../shared/data/blimp is absent")
def test_blimp_with_exact_log_probs(word_tokenizer):
    model = model_for(word_tokenizer)
    metrics = run_blimp(model, word_tokenizer, SHARED / "blimp" / "data", limit=1, progress=False)
    assert metrics["log_prob"] == "exact" and "exact" in metrics["summary"]
    assert 0.0 <= metrics["accuracy"] <= 1.0


def test_cli_eval_commands_use_the_som_path(word_tokenizer, tmp_path, capsys):
    import json

    from conftest import write_conllu_treebank

    from hf_slm.cli import main

    model = model_for(word_tokenizer)
    model.save_pretrained(tmp_path / "som")
    word_tokenizer.save_pretrained(tmp_path / "som")
    text = tmp_path / "dev.txt"
    text.write_text("\n".join(" ".join(words) for words, _ in SENTENCES) + "\n")
    assert main(["eval", "ppl", "--model", str(tmp_path / "som"), "--data", str(text)]) == 0
    expected = som_perplexity(model, word_tokenizer, [words for words, _ in SENTENCES], tmp_path)["perplexity"]
    assert f"word perplexity {expected:.3f} (exact" in capsys.readouterr().out
    treebank = write_conllu_treebank(tmp_path / "ud")
    assert main(["eval", "parse", "--model", str(tmp_path / "som"), "--gold",
                 str(treebank / "en_mini-ud-train.conllu")]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["sentences"] == 4 and 0 <= metrics["uf1"] <= 100
    assert main(["eval", "parse", "--model", str(tmp_path / "som"), "--gold", str(text)]) != 0
    assert "gold dependency trees (a .conllu file) or constituency trees" in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED / "syntaxgym").is_dir(), reason="../shared/data/syntaxgym is absent")
def test_issue_done_when_train_save_load_generate_and_score_two_suites(word_tokenizer, tmp_path, capsys):
    """The issue's end-to-end check: Trainer trains a few steps, and `hf-slm eval sg` scores two suites with the
    saved checkpoint (it loads without hf_slm with the same logits and generates: test_som_model, test_families)."""
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from hf_slm.cli import main

    model = model_for(word_tokenizer).train()
    dataset = Dataset.from_list([som_example(word_tokenizer, w, h) for w, h in SENTENCES])
    arguments = TrainingArguments(output_dir=str(tmp_path / "run"), per_device_train_batch_size=2, max_steps=3,
                                  learning_rate=1e-2, report_to=[], remove_unused_columns=False, use_cpu=True,
                                  save_strategy="no")
    Trainer(model=model, args=arguments, train_dataset=dataset,
            data_collator=SyntacticOrderedMemoryCollator(word_tokenizer)).train()
    model.eval()
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    word_tokenizer.save_pretrained(checkpoint)
    suites = SHARED / "syntaxgym" / "test_suites" / "json"
    for name in ("number_prep", "cleft"):
        assert main(["eval", "sg", "--model", str(checkpoint), "--suites", str(suites / f"{name}.json"),
                     "--limit", "2"]) == 0
        assert name in capsys.readouterr().out


@pytest.mark.skipif(not (SHARED / "blimp").is_dir(), reason="../shared/data/blimp is absent")
def test_cli_eval_blimp_uses_exact_log_probs(word_tokenizer, tmp_path, capsys):
    import json

    from hf_slm.cli import main

    model = model_for(word_tokenizer)
    model.save_pretrained(tmp_path / "som")
    word_tokenizer.save_pretrained(tmp_path / "som")
    assert main(["eval", "blimp", "--model", str(tmp_path / "som"), "--data", str(SHARED / "blimp" / "data"),
                 "--limit", "1"]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["log_prob"] == "exact" and metrics["pairs"] == metrics["paradigms"]


# ---- Table 8: UF1 against constituency trees (EVALB, unlabeled, punctuation and trivial spans left out) -------------
GOLD_PTB = "( (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)) )"
# The induced tree the model is made to build below: a binary tree that attaches "the" to "on".
INDUCED = "(X (X (X The cat) (X sat (X (X on the) mat))) .)"


def test_constituency_uf1_equals_the_hand_count_on_a_constructed_parse():
    """Gold brackets without the punctuation, one-word spans and the sentence span: NP (0,2), VP (2,6), PP (3,6),
    NP (4,6). The induced tree's: (0,2), (2,6), (3,6), (3,5) ("The cat sat on the mat" is the sentence once the
    period goes). 3 of 4 match on each side: UF1 = 75."""
    from hf_slm.tokenization.trees import parse_tree

    from hf_slm.families.ordered_memory.evaluation import som_constituency_uf1

    induced = parse_tree(INDUCED)
    words = induced.leaves()
    tokenizer = SyntacticWordTokenizer.train([induced], linearization="terminals", min_count=1)
    model = model_for(tokenizer, num_slots=8)
    grid = model.gold_grid(torch.tensor([som_example(tokenizer, constituency=induced)["som_first_siblings"]]))
    forward = model.forward
    model.forward = lambda **inputs: forward(**inputs, gold_decisions=grid)  # the memory builds INDUCED
    metrics = som_constituency_uf1(model, tokenizer, [parse_tree(GOLD_PTB)])
    assert metrics["trees"] == [INDUCED] and len(words) == 7
    assert (metrics["uf1"], metrics["precision"], metrics["recall"]) == pytest.approx((75.0, 75.0, 75.0))
    assert metrics["sentences"] == 1


def test_cli_eval_parse_scores_a_som_against_ptb_trees(word_tokenizer, tmp_path, capsys):
    import json

    from hf_slm.cli import main

    model = model_for(word_tokenizer)
    model.save_pretrained(tmp_path / "som")
    word_tokenizer.save_pretrained(tmp_path / "som")
    gum = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum" / "dev.txt"
    assert main(["eval", "parse", "--model", str(tmp_path / "som"), "--gold", str(gum), "--limit", "6"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["sentences"] == 6 and 0 <= printed["uf1"] <= 100 and "EVALB" in printed["brackets"]
    written = (tmp_path / "som" / "eval_results")
    trees = next(written.glob("uf1-*_trees.txt")).read_text().splitlines()
    assert len(trees) == 6 and all(tree.startswith("(X ") for tree in trees)
    assert main(["card", str(tmp_path / "som")]) == 0  # the card names the gold trees as they were
    assert "gold: PTB constituency trees (paper 001, Table 8)" in (tmp_path / "som" / "README.md").read_text()
