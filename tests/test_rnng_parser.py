"""The discriminative RNNG proposal parser (hf_slm/families/recurrent_grammars/modeling_rnng_parser.py): every
training tree comes back from its actions, q(y | x) sums to one over every tree of a short sentence, its samples
follow q, and its loss is the gold trees' -log q. (Batches against sentences alone, samples' log q, seeds, proposal
files and loading without hf-slm are test_proposal_parsers.py's, over every parser kind.)"""

import numpy as np
import pytest
import torch

from hf_slm.families.recurrent_grammars.modeling_rnng_parser import REDUCE, SHIFT, bracketing, gold_actions
from hf_slm.parsers.data import ParserCollator
from hf_slm.tokenization.tokenization_parser import ProposalParserTokenizer
from hf_slm.tokenization.trees import parse_tree

from helpers.chi_square import chi_square_passes
from helpers.parser_models import encode, gum_trees, tiny_parser

KIND = "rnng-discriminative"


def chart_of(spans, length):
    chart = np.full((length + 1, length + 1), -1, dtype=np.int64)
    for start, end, label in spans:
        chart[start, end] = label
    return chart


def test_every_gum_tree_comes_back_from_its_actions():
    """A training tree's bracketing -> the actions that build it -> the bracketing they build: the same spans, for
    every tree of the GUM sample (n-ary constituents, unary chains as one label, one-word constituents)."""
    tokenizer = ProposalParserTokenizer.train(gum_trees(), tree_kind="constituency", labelled=True)
    reserved = tokenizer.label_kinds()
    dummy, word = reserved["dummy"], reserved["no_constituent"]
    for index, tree in enumerate(gum_trees()):
        spans = [tuple(span) for span in tokenizer.encode_target(tree)["spans"]]
        length = max(end for _, end, _ in spans)
        actions = gold_actions(chart_of(spans, length), length, {dummy, word})
        assert actions.count(SHIFT) == length and actions.count(REDUCE) == len(actions) - length - actions.count(REDUCE)
        assert bracketing(actions, length, dummy, word) == sorted(spans), index


def every_tree(words, depth):
    """Every tree over `words` (label S) with one root, at most `depth` constituents open at once, no empty
    constituent and no constituent whose only child is a constituent (a unary chain, one label in the bracketing),
    as bracketed strings: written from that definition."""
    def sequences(items, inner_depth):
        # the ways to cover `items` by a sequence of children: a bare word, or (S ...) over one word or more, whose
        # own constituents may nest `inner_depth` - 1 deep
        if not items:
            yield []
            return
        for size in range(1, len(items) + 1):
            heads = [items[0]] if size == 1 else []
            if inner_depth > 0:
                heads += [f"(S {inside})" for inside in insides(items[:size], inner_depth - 1)]
            for head in heads:
                for rest in sequences(items[size:], inner_depth):
                    yield [head] + rest

    def insides(items, inner_depth):
        for children in sequences(items, inner_depth):
            if not (len(children) == 1 and children[0].startswith("(")):
                yield " ".join(children)

    return [f"(S {inside})" for inside in insides(list(words), depth - 1)]


@pytest.fixture(scope="module")
def small_parser():
    """A random parser over one label (S) and at most 2 constituents open: few enough trees to list them all."""
    # trees without POS tags, read as such (a tree whose every word is alone under an S would read as tagged)
    tokenizer = ProposalParserTokenizer.train(["(S (S a b) c)", "(S a (S b))"], tree_kind="constituency",
                                              labelled=True, min_count=1, preterminals=False)
    model, tokenizer = tiny_parser(KIND, tokenizer=tokenizer, seed=3)
    model.config.max_open_nonterminals = 2
    return model, tokenizer


def structures_of(tokenizer, trees):
    return [{"spans": [tuple(span) for span in tokenizer.encode_target(parse_tree(tree))["spans"]]} for tree in trees]


def test_q_sums_to_one_over_every_tree_and_samples_follow_it(small_parser):
    model, tokenizer = small_parser
    words = ["a", "b", "c"]
    trees = every_tree(words, depth=2)
    # the root over: 3 words, each bare or (S w), 8 ways; one (S) over two words and a word (bare or not), 2 x 2
    assert len(trees) == len(set(trees)) == 12
    structures = structures_of(tokenizer, trees)
    inputs = encode(tokenizer, [words] * len(trees))
    log_q = model.structure_log_probs(structures, **inputs)
    assert float(torch.logsumexp(log_q.double(), 0)) == pytest.approx(0.0, abs=1e-5)
    # 3,000 draws against q (Pearson's chi-square at significance 0.001)
    drawn = model.sample_structures(3000, generator=torch.Generator().manual_seed(0), **encode(tokenizer, [words]))[0]
    index = {tuple(sorted(structure["spans"])): k for k, structure in enumerate(structures)}
    counts = np.zeros(len(trees))
    for sample in drawn:
        counts[index[tuple(sorted(sample["spans"]))]] += 1  # every sample is one of the listed trees
    statistic, critical, _ = chi_square_passes(counts, (3000 * log_q.double().exp()).tolist())
    assert statistic < critical


def test_the_loss_is_the_gold_trees_minus_log_q_plus_tagging():
    trees = gum_trees()[:4]
    model, tokenizer = tiny_parser(KIND, gum_trees())
    model.config.max_open_nonterminals = 100  # the GUM trees nest deeper than the tiny parsers' 3
    batch = ParserCollator(tokenizer)([tokenizer.encode_target(tree) for tree in trees])
    words = [tokenizer.read_tree(tree)[0].leaves() for tree in trees]
    structures = [{"spans": tokenizer.encode_target(tree)["spans"]} for tree in trees]
    model.train()
    torch.manual_seed(0)  # dropout off below: the same numbers in both calls
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    output = model(**batch)
    log_q = model.structure_log_probs(structures, **encode(tokenizer, words))
    tags = torch.nn.functional.cross_entropy(output.label_logits.flatten(0, 1), batch["tags"].flatten(),
                                             ignore_index=-100, reduction="none").view(batch["tags"].shape)
    assert float(output.loss) == pytest.approx(float(-log_q.mean() + tags.sum(-1).mean()), abs=1e-4)
    output.loss.backward()
    untouched = [name for name, parameter in model.named_parameters()
                 if parameter.grad is None or not parameter.grad.abs().sum()]
    assert untouched == []


def test_a_tree_the_parser_cannot_build_is_named():
    with pytest.raises(ValueError, match="whole sentence is no constituent"):
        gold_actions(chart_of([(0, 1, 2), (1, 2, 2), (0, 2, 0)], 2), 2, {0, 1})


def test_its_card_describes_the_rnng_not_a_crf(tmp_path):
    """The parser card asks the kind what its model is (issue 40: it said 'biaffine spans' and 'exact under q (CKY)'
    for every constituency parser)."""
    from hf_slm.parsers.card import build_parser_card

    model, tokenizer = tiny_parser(KIND, gum_trees())
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    text = " ".join(build_parser_card(tmp_path).text.split())
    assert "its best tree is its greedy parse" in text and "| stack LSTM | 1 layers of 8" in text
    assert "@inproceedings{dyer-etal-2016-recurrent," in text
    assert "tree CRF" not in text and "biaffine spans" not in text and "CKY" not in text
