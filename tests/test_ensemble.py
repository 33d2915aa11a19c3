"""Ensembles (paper 000, section 3.7): the uniform mixture of the members' next-action distributions, in scoring, in
the word-synchronous beam search (every member's cache in step) and from the command line."""

import json
import math
import warnings

import numpy as np
import pytest
import torch

import hf_slm
from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch
from hf_slm.families import causal_lm_for_config, config_for_grammar, grammar_class
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.search.ensemble import UniformMixture, check_member_tokenizers
from hf_slm.search.scoring import action_log_probs, joint_log_probs
from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer
from hf_slm.tokenization.tokenization_slm import SyntacticTokenizer

from conftest import save_tiny_checkpoint

TREES = ["(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "(S (NP (DT a) (NN dog)) (VP (VBZ barks)))"]
# Words "a" and "c" are one piece each, "b" two (b1 b2): an exhaustive beam over two words stays small.
VOCAB = ActionVocabulary(["a", "b1", "b2", "c"], ["S", "NP"])
SENTENCE = [[VOCAB.ids["a"]], [VOCAB.ids["b1"], VOCAB.ids["b2"]]]
SEQUENCES = [[VOCAB.layout.bos_token_id, VOCAB.ids["(S"], VOCAB.ids["a"], VOCAB.ids["(NP"], VOCAB.ids["b1"],
              VOCAB.ids["b2"], VOCAB.ids["NP)"], VOCAB.ids["S)"]]]


def tiny_model(grammar, seed):
    config = config_for_grammar(
        vocab_size=len(VOCAB.tokens), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        grammar=grammar, **VOCAB.layout.to_dict(), word_start_ranges=[[VOCAB.layout.unk_token_id + 1,
                                                                        VOCAB.layout.open_nt_start]])
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


@pytest.fixture(scope="module")
def members():
    """Two TGs and a TXL (CC) over one vocabulary: a homogeneous and a heterogeneous pair."""
    return {"tg": tiny_model("tg", 0), "tg2": tiny_model("tg", 1), "cc": tiny_model("choe_charniak", 2)}


def test_an_ensemble_of_one_is_its_member_exactly(members, one_thread):
    member = members["tg"]
    alone = UniformMixture([member])
    assert all(np.array_equal(x, y) for x, y in zip(action_log_probs(alone, SEQUENCES),
                                                    action_log_probs(member, SEQUENCES)))
    with torch.no_grad():  # the mixture's logits are its log-probabilities
        assert torch.equal(alone(input_ids=torch.tensor(SEQUENCES)).logits,
                           torch.log_softmax(member(input_ids=torch.tensor(SEQUENCES)).logits, -1))
    options = BeamSearchOptions(beam_size=20, word_beam_size=5, num_trees=5)
    found = WordSynchronousBeamSearch(alone, options).search([SENTENCE, SENTENCE[::-1]])
    expected = WordSynchronousBeamSearch(member, options).search([SENTENCE, SENTENCE[::-1]])
    for ours, theirs in zip(found, expected):
        assert (ours.trees, ours.surprisals, ours.end_surprisal, ours.log_prob) == \
               (theirs.trees, theirs.surprisals, theirs.end_surprisal, theirs.log_prob)


@pytest.mark.parametrize("pair", [("tg", "tg2"), ("tg", "cc")])
def test_two_members_mix_their_next_action_probabilities(members, pair, one_thread):
    """log p_ens(a_t | a_<t) = logsumexp_k log p_k(a_t | a_<t) - log 2, per action (section 3.7's equation)."""
    first, second = members[pair[0]], members[pair[1]]
    mixture = UniformMixture([first, second])
    by_hand = np.logaddexp(action_log_probs(first, SEQUENCES)[0], action_log_probs(second, SEQUENCES)[0]) - math.log(2)
    mixed = action_log_probs(mixture, SEQUENCES)[0]
    assert mixed == pytest.approx(by_hand, abs=1e-12)
    assert joint_log_probs(mixture, SEQUENCES)[0] == pytest.approx(float(by_hand.sum()), abs=1e-9)
    # not the mixture of whole sequences: per action, as the section's equation says
    whole = np.logaddexp(joint_log_probs(first, SEQUENCES)[0], joint_log_probs(second, SEQUENCES)[0]) - math.log(2)
    assert abs(float(by_hand.sum()) - whole) > 1e-3
    # the HF contract: the mixture's forward gives the same numbers (each member expands the ids itself)
    with torch.no_grad():
        logits = mixture(input_ids=torch.tensor(SEQUENCES)).logits[0, :-1]
    picked = logits.gather(1, torch.tensor(SEQUENCES[0][1:])[:, None])[:, 0]
    assert picked.numpy() == pytest.approx(by_hand, abs=1e-5)


@pytest.mark.parametrize("pair, use_cache", [(("tg", "tg2"), True), (("tg", "cc"), True), (("cc", "tg"), False)])
def test_an_exhaustive_ensemble_beam_is_the_brute_force_over_every_tree(members, pair, use_cache, one_thread):
    """Every tree of two words with at most 3 nonterminals (a member's exhaustive beam lists them all: tests/
    test_beam_search.py holds it to a brute force), scored with the ensemble: the ensemble's exhaustive beam finds the
    best ones with their scores, and its mass is their logsumexp. Members of two grammars (TG and TXL (CC)) either
    way round: the lead's grammar steps the search, the other member's its own positions."""
    exhaustive = BeamSearchOptions(beam_size=5000, word_beam_size=5000, fast_track=5, max_nonterminals=3,
                                   num_trees=5000, use_cache=use_cache)
    every_tree = [ids for ids, _ in WordSynchronousBeamSearch(members["tg"], exhaustive).search([SENTENCE])[0].trees]
    assert len(every_tree) > 30
    mixture = UniformMixture([members[name] for name in pair])
    joint = joint_log_probs(mixture, every_tree)
    result = WordSynchronousBeamSearch(mixture, exhaustive).search([SENTENCE])[0]
    assert result.log_prob == pytest.approx(float(torch.logsumexp(torch.tensor(joint), 0)), abs=1e-5)
    order = np.argsort(joint)[::-1]
    assert [ids for ids, _ in result.trees[:5]] == [every_tree[i] for i in order[:5]]
    assert [lp for _, lp in result.trees[:5]] == pytest.approx([joint[i] for i in order[:5]], abs=1e-5)


def test_a_narrow_ensemble_beam_scores_its_trees_as_the_ensemble_does(members, one_thread):
    mixture = UniformMixture([members["tg"], members["cc"], members["tg2"]])
    options = BeamSearchOptions(beam_size=8, word_beam_size=3, num_trees=3)
    sentences = [SENTENCE + SENTENCE, SENTENCE[::-1]]
    for result in WordSynchronousBeamSearch(mixture, options).search(sentences):
        trees = [ids for ids, _ in result.trees]
        assert [lp for _, lp in result.trees] == pytest.approx(joint_log_probs(mixture, trees), abs=1e-4)
    # the search of three members advances them together: one call of each per round
    search = WordSynchronousBeamSearch(mixture, options)
    search.search(sentences)
    assert [decoder.forward_calls for decoder in search.decoder.decoders] == [search.forward_calls] * 3


def test_an_nb_up_ensemble_mixes_the_start_pointers(one_thread):
    """Paper 003's Nb-Up `)` comes with a start: the ensemble scores (`)`, s) as log of the mean of p_k(`)`) p_k(s |
    `)`), in the search as in scoring given trees."""
    grammar = "nb-up-in-m"
    tokenizer = CompositionalTokenizer.train(TREES, vocab_size=30, linearization=grammar_class(grammar).linearization)
    models = []
    for seed in (0, 1):
        config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout)
        torch.manual_seed(seed)
        models.append(causal_lm_for_config(config).eval())
    mixture = UniformMixture(models)
    words = [tokenizer(word, is_split_into_words=True, add_special_tokens=False)["input_ids"]
             for word in ["the", "dog", "sings"]]
    result = WordSynchronousBeamSearch(mixture, BeamSearchOptions(beam_size=20, word_beam_size=5, num_trees=4)).search(
        [words])[0]
    start_input = mixture.members[0].model.grammar.start_input
    trees = [{"input_ids": list(ids), start_input: ids.starts} for ids, _ in result.trees]
    assert len(trees) == 4 and all(any(s >= 0 for s in tree[start_input]) for tree in trees)
    assert [lp for _, lp in result.trees] == pytest.approx(joint_log_probs(mixture, trees), abs=1e-4)
    by_hand = [np.logaddexp(*values) - math.log(2) for values in zip(*(action_log_probs(m, trees) for m in models))]
    assert [float(v.sum()) for v in by_hand] == pytest.approx(joint_log_probs(mixture, trees), abs=1e-9)


def test_members_that_cannot_mix_are_refused(members):
    tokenizer = SyntacticTokenizer.train(TREES, vocab_size=30)
    other = SyntacticTokenizer.train(TREES + ["(S (ADJP (JJ odd)))"], vocab_size=30)

    def member(grammar, tokenizer):
        config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout)
        return causal_lm_for_config(config).eval()

    with pytest.raises(ValueError, match="share one vocabulary and id layout; found 2 different ones"):
        UniformMixture([member("tg", tokenizer), member("tg", other)])
    with pytest.raises(ValueError, match="at least one model"):
        UniformMixture([])
    # a compositional model is scored over unlabelled trees: not with a TG
    compositional = CompositionalTokenizer.train(TREES, vocab_size=30,
                                                 linearization=grammar_class("nb-up-in-m").linearization)
    with pytest.raises(ValueError, match=r"families scored alike.*unlabelled_brackets trees"):
        UniformMixture([member("tg", tokenizer), member("nb-up-in-m", compositional)], names=["A", "B"])
    with pytest.raises(ValueError, match="B's differs from A's in its vocabulary, action layout"):
        check_member_tokenizers([tokenizer, other], ["A", "B"])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A TG and a TXL (CC) saved with one tokenizer (trained alike on the same trees)."""
    folder = tmp_path_factory.mktemp("ensemble")
    return [str(save_tiny_checkpoint(folder / "tg", TREES, num_hidden_layers=1)[0]),
            str(save_tiny_checkpoint(folder / "cc", TREES, grammar="choe_charniak", seed=1, num_hidden_layers=1)[0])]


def test_the_cli_scores_and_runs_syntaxgym_with_an_ensemble(checkpoints, tmp_path, capsys, one_thread):
    from pathlib import Path

    from hf_slm.checkpoints.loading import load_checkpoint
    from hf_slm.cli.commands import main

    suite = Path(__file__).parent / "fixtures" / "syntaxgym" / "subordination.json"
    beam = ["--beam-size", "5", "--word-beam-size", "2"]
    ensemble = ["--model", checkpoints[0], "--model", checkpoints[1]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # words through <unk>
        assert main(["score", *ensemble, *beam, "the bird sings"]) == 0
        printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        loaded = [load_checkpoint(name) for name in checkpoints]
        mixture = UniformMixture([model for model, _ in loaded])
        expected = hf_slm.score(mixture, loaded[0][1], ["the bird sings"], beam_size=5, word_beam_size=2,
                                progress=False)[0]
        assert printed["log_prob"] == pytest.approx(expected["log_prob"], abs=1e-9)
        assert printed["tree"] == expected["tree"]

        output = tmp_path / "sg"
        assert main(["eval", "sg", *ensemble, *beam, "--suites", str(suite), "--limit", "1", "--output",
                     str(output)]) == 0
    record = json.loads((output / "sg-subordination-limit1.json").read_text())
    assert record["model"] == f"{checkpoints[0]} + {checkpoints[1]}"
    assert 0 <= record["metrics"]["sg_score"] <= 1 and record["metrics"]["counts"]["items"] == 1


def test_the_cli_says_what_an_ensemble_needs(checkpoints, tmp_path, capsys):
    from hf_slm.cli.commands import main

    ensemble = ["--model", checkpoints[0], "--model", checkpoints[1]]
    assert main(["eval", "sg", *ensemble, "--suites", str(tmp_path)]) != 0
    assert "has no checkpoint folder of its own for its results: give --output" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["generate", *ensemble])
    assert "--model given twice: this command takes one model" in capsys.readouterr().err


def test_an_ensemble_of_models_without_a_grammar_mixes_their_logits(one_thread):
    """SOM scores words from its logits (its Scorer runs no search): the mixture's logits are the mixture's
    log-probabilities, so its exact log p(x) is the per-token mixture of the members'."""
    from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
    from hf_slm.modeling.modeling_som import SyntacticOrderedMemoryForCausalLM
    from hf_slm.search.scorers import scorer_for

    tokenizer = SyntacticTokenizer.train(TREES, vocab_size=30)
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        config = SyntacticOrderedMemoryConfig(vocab_size=len(tokenizer), hidden_size=8, num_slots=8,
                                              intermediate_size=12, parser_size=6, dropout=0.0, embedding_dropout=0.0,
                                              output_dropout=0.0)
        models.append(SyntacticOrderedMemoryForCausalLM(config).eval())
    ids = tokenizer(["the", "bird", "sings"], is_split_into_words=True)["input_ids"] + [tokenizer.eos_token_id]
    with torch.no_grad():
        per_token = [torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1], -1)
                     .gather(1, torch.tensor(ids[1:])[:, None])[:, 0].double().numpy() for model in models]
    by_hand = float((np.logaddexp(*per_token) - math.log(2)).sum())
    mixture = UniformMixture(models)
    assert scorer_for(mixture, tokenizer).log_probs(["the bird sings"])[0] == pytest.approx(by_hand, abs=1e-5)
