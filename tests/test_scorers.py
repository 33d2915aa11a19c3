"""The scorer interface (hf_slm/search/scorers.py) over every registered family's tiny model: what the commands and the
evaluation drivers ask of a model holds whatever its family (word surprisals that add up to log p(x), one number
per sentence in input order, left-out sentences named, trees over the given words, generated text), and a
scorer without a search refuses search options by name."""

import math

import pytest
import torch

from hf_slm.search.beam import SentenceResults
from hf_slm.families import config_for_grammar, family_for_config, grammar_class, registered_families
from hf_slm.families import causal_lm_for_config
from hf_slm.families.tree_formats import tree_format
from hf_slm.search.scorers import Scorer, scorer_class_for, scorer_for
from hf_slm.tokenization.trees import parse_tree

from conftest import DEPENDENCY_TREEBANK
from helpers.family_sizes import tiny_sizes

PTB_TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .)))",
]
INLINE_TREES = ["There/2 is/0 a/4 difference/2", "The/2 cat/3 sleeps/0 ./3", "a/0 b/1 c/1", "Dogs/2 bark/0 loudly/2"]
SENTENCES = {"words": ["the blue bird sings .", "I like it", "a dog barks"],
             "dependency": ["There is a difference", "The cat sleeps ."]}
SMALL_BEAM = {"beam_size": 12, "word_beam_size": 4}


def grammar_model(variant, family):
    """A tiny model of a grammar variant and its family's tokenizer, trained on trees of the variant's format."""
    linearization = grammar_class(variant.name).linearization
    if variant.tree_format == "dependency":
        tokenizer = family.default_tokenizer.train(INLINE_TREES, vocab_size=30, transition_system=linearization)
    else:
        tokenizer = family.default_tokenizer.train(PTB_TREES, vocab_size=40, linearization=linearization)
    config = config_for_grammar(variant.name, vocab_size=len(tokenizer), **tiny_sizes(variant.name),
                                **tokenizer.action_layout)
    torch.manual_seed(0)
    return causal_lm_for_config(config).eval(), tokenizer


def ordered_memory_model(variant, family):
    from hf_slm.families.ordered_memory.data import gold_tree

    tokenizer = family.default_tokenizer.train([gold_tree(w, h) for w, h in DEPENDENCY_TREEBANK["train"]]
                                               + [parse_tree(tree) for tree in PTB_TREES],
                                               linearization="terminals", min_count=1)
    torch.manual_seed(0)
    config = family.config_class(vocab_size=len(tokenizer), hidden_size=8, num_slots=8, intermediate_size=12,
                                 parser_size=6, dropout=0.0, embedding_dropout=0.0, output_dropout=0.0,
                                 pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                 eos_token_id=tokenizer.eos_token_id, unk_token_id=tokenizer.unk_token_id)
    return family.causal_lm_class(config).eval(), tokenizer


# A family without grammars builds its tiny model its own way (a family added to the registry adds its builder).
OWN_BUILDERS = {"syntactic_ordered_memory": ordered_memory_model}


def _cases():
    """Per family, its default variant, and a words-only one (the exact path of a search scorer) when it has one."""
    cases = []
    for family in registered_families():
        variants = [family.variants[0]] + [v for v in family.variants[1:] if v.tree_format == "words"][:1]
        cases += [pytest.param((family.name, variant.name), id=variant.name) for variant in variants]
    return cases


@pytest.fixture(scope="module", params=_cases())
def scored(request):
    family_name, variant_name = request.param
    family = next(f for f in registered_families() if f.name == family_name)
    variant = family.variant(variant_name)
    build = grammar_model if variant.is_grammar else OWN_BUILDERS[family.name]
    model, tokenizer = build(variant, family)
    options = SMALL_BEAM if scorer_class_for(model).runs_search else {}
    sentences = SENTENCES["dependency" if variant.tree_format == "dependency" else "words"]
    return family, variant, scorer_for(model, tokenizer, **options), sentences


def test_every_family_is_covered():
    assert {f.name for f in registered_families() if not f.grammars} <= set(OWN_BUILDERS)


def test_the_scorer_is_the_one_the_family_names(scored):
    family, _, scorer, _ = scored
    assert isinstance(scorer, Scorer) and type(scorer) is family.scorer
    assert family_for_config(scorer.model.config) is family
    assert scorer.log_prob_estimate in ("exact", "lower bound")
    assert isinstance(scorer.recorded_options, dict) and isinstance(scorer.tree_settings(), dict)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_scores_add_up_and_agree_with_log_probs_and_surprisals(scored):
    _, _, scorer, sentences = scored
    results = scorer.score(sentences, progress=False)
    assert isinstance(results, SentenceResults) and results.left_out == []
    for sentence, result in zip(sentences, results):
        assert result["words"] == sentence.split() and len(result["surprisals"]) == len(result["words"])
        assert math.fsum(result["surprisals"]) + result["end_surprisal"] == pytest.approx(-result["log_prob"],
                                                                                         abs=1e-6)
    log_probs = scorer.log_probs(sentences, progress=False)
    assert log_probs == pytest.approx([result["log_prob"] for result in results], rel=1e-4, abs=1e-4)
    in_bits = scorer.surprisals(sentences, progress=False)
    for result, bits in zip(results, in_bits):
        assert bits == pytest.approx([value / math.log(2) for value in result["surprisals"]], rel=1e-4, abs=1e-4)
    # one number per sentence, in input order, whatever batches the scorer forms
    reordered = scorer.log_probs(sentences[::-1], batch_size=1, progress=False)
    assert reordered[::-1] == pytest.approx(list(log_probs), rel=1e-4, abs=1e-4)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_sentence_that_cannot_be_scored_is_left_out_or_raises(scored):
    _, _, scorer, sentences = scored
    given = [sentences[0], "", sentences[1]]
    for method in (scorer.score, scorer.log_probs, scorer.surprisals, scorer.parse):
        found = method(given, progress=False, sources=["first", "second", "third"])
        assert [entry["source"] for entry in found.left_out] == ["second"], method.__name__
        assert found[0] is not None and found[2] is not None
        assert found[1] is None or found[1]["error"].startswith("second is empty")
        with pytest.raises(ValueError, match="second is empty"):
            method(given, progress=False, sources=["first", "second", "third"], on_error="raise")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_trees_are_over_the_given_words_and_generation_gives_text(scored, capsys):
    _, variant, scorer, sentences = scored
    trees = scorer.parse(sentences, progress=False)
    written = tree_format(variant.tree_format)  # the format the family's record names reads them
    for sentence, tree in zip(sentences, trees):
        assert written.words(tree) == sentence.split()
        capsys.readouterr()
        written.draw(tree)  # `hf-slm parse --pretty`
        drawn = capsys.readouterr().out
        assert len(drawn.strip().splitlines()) >= (1 if variant.tree_format == "words" and tree == sentence else 2)
        assert all(word in drawn for word in sentence.split())
    generated = scorer.generate(sentences[0].split()[:1], num_trees=2, max_new_words=3, seed=0)
    assert len(generated) == 2 and all(isinstance(text, str) and text for text in generated)


def test_search_options_and_a_scorer_without_a_search(scored):
    family, _, scorer, _ = scored
    scorer_class = type(scorer)
    if scorer_class.runs_search:
        assert scorer.search_options == SMALL_BEAM
        return
    with pytest.raises(ValueError, match=r"search options \['beam_size'\] were given, but "):
        scorer_class(scorer.model, scorer.tokenizer, beam_size=4)
    assert scorer_class.without_search  # the commands' refusal says why in the user's words
