"""Constituency trees as the span CRF parsers read and write them (tokenization/parser_trees.py, issue 38).

A treebank tree becomes a labelled binary bracketing (POS tags off, unary chains collapsed into "+" labels, left
binarization's nodes `<binarized>`, words that are no constituent `<word>`) and must come back exactly: every tree
of the shipped GUM sample, of the PTB sample in ../shared/data (skipped when absent) and of the hand-written fixtures,
labelled and unlabelled. One tree is worked out by hand, span by span. On small sentences the bracketings that
check_spans accepts under the CRF's kind rules are compared with an enumeration of the n-ary trees written here
(tests/helpers/parser_models.py): the map is one to one and onto, which is what makes q(y | x) a distribution over
n-ary trees.
"""

import itertools
import re
from pathlib import Path

import pytest
from helpers.parser_models import GUM, SPLITS, nary_trees
from hf_slm.tokenization.parser_trees import (
    BINARIZED,
    NO_CONSTITUENT,
    UNLABELLED,
    check_spans,
    span_kind,
    spans_to_tree,
    split_tags,
    tree_to_spans,
    unlabelled_string,
)
from hf_slm.tokenization.tokenization_compositional import unlabeled_string
from hf_slm.tokenization.tokenization_parser import ProposalParserTokenizer
from hf_slm.tokenization.tree_type import Tree
from hf_slm.tokenization.trees import (
    drop_wrapper_root,
    normalize_tree,
    parse_tree,
    read_tree_file,
    remove_unary_chains,
    tree_to_string,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "data"
# The PTB sample's .mrg files (PROVENANCE.md: 199 files, 3,914 trees; LDC copyright, read in place, never copied).
PTB_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb_sample" / "treebank" / "combined"
PTB_SAMPLE_TREES = 3914
W, B = NO_CONSTITUENT, BINARIZED

# A tagless reader with the default normalization (`read_tree` needs no vocabulary).
READER = ProposalParserTokenizer(words=[], chars=[], labels=[])


def raw_trees(files):
    """(where, tree as written) of tree files, not normalized."""
    return [(f"{file.name}, tree {index + 1}", tree) for file in files
            for index, tree in enumerate(read_tree_file(file, strip_traces=False, preterminals=False,
                                                        drop_root=False))]


def is_preterminal(node):
    return isinstance(node, Tree) and len(node) == 1 and isinstance(node[0], str)


def tagged_tree(raw):
    """The tree `read_tree` reads of `raw` (traces stripped, a wrapper root dropped), its POS tags kept."""
    tree = normalize_tree(raw, strip_traces=True, preterminals=False, drop_root=False)
    # read_tree drops the wrapper of the tagless tree: a wrapper over a lone preterminal wraps a word there, and stays
    if len(tree) == 1 and is_preterminal(tree[0]):
        return tree
    return drop_wrapper_root(tree)


def unlabelled(tree):
    """`tree` with every constituent labelled UNLABELLED."""
    if isinstance(tree, str):
        return tree
    return Tree(UNLABELLED, [unlabelled(child) for child in tree])


def round_trip_failures(trees):
    """The trees (where, problem) that do not come back from their bracketings, labelled or unlabelled."""
    failures = []
    for where, raw in trees:
        tree, tags = READER.read_tree(raw, where)
        words, spans = tree_to_spans(tree)
        if words != list(tree.leaves()) or len(spans) != 2 * len(words) - 1:
            failures.append((where, f"{len(words)} words, {len(spans)} spans"))
            continue
        back = spans_to_tree(words, spans, tags)
        if back != tagged_tree(raw):
            failures.append((where, f"labelled: {tree_to_string(back)} != {tree_to_string(tagged_tree(raw))}"))
        plain = spans_to_tree(words, spans)
        if plain != tree:
            failures.append((where, f"without tags: {tree_to_string(plain)}"))
        words, spans = tree_to_spans(tree, labelled=False)
        back = spans_to_tree(words, spans)
        expected = remove_unary_chains(tree)
        if back != unlabelled(expected) or unlabelled_string(back) != unlabeled_string(expected):
            failures.append((where, f"unlabelled: {unlabelled_string(back)} != {unlabeled_string(expected)}"))
    return failures


def test_every_gum_sample_tree_comes_back_from_its_bracketing():
    trees = raw_trees([GUM / f"{split}.txt" for split in SPLITS])
    assert len(trees) == 1800  # 1,500 + 150 + 150 (hf_slm/sample_data/gum/README.md)
    failures = round_trip_failures(trees)
    assert not failures, failures[:5]


def test_every_ptb_sample_tree_comes_back_from_its_bracketing():
    if not PTB_SAMPLE.is_dir():
        pytest.skip(f"the PTB sample is not at {PTB_SAMPLE} (../shared/data/ptb_sample)")
    trees = raw_trees(sorted(PTB_SAMPLE.glob("wsj_*.mrg")))
    assert len(trees) == PTB_SAMPLE_TREES
    failures = round_trip_failures(trees)
    assert not failures, failures[:5]


def test_every_fixture_tree_comes_back_from_its_bracketing():
    files = sorted(FIXTURES.glob("wsj/*/*.mrg")) + sorted(FIXTURES.glob("ptb_lines/*.txt")) \
        + sorted(FIXTURES.glob("bllip/*.txt")) + sorted(FIXTURES.glob("bllip_boundaries/trees/*.txt"))
    trees = raw_trees(files)
    assert len(files) == 18 and len(trees) > 30
    failures = round_trip_failures(trees)
    assert not failures, failures[:5]


# A unary chain (S over VP over four words, and a root chain is the same code), a one-word constituent (NP Kim), a
# node of four children (the NP) and of three (the root), bare words; worked out by hand from the module docstring
# of parser_trees.py: left binarization adds (0, 7) to the root and (3, 6), (3, 5) to the NP, in pre-order.
GOLDEN_TREE = "(S (NP Kim) (VP helped (S (VP walk (NP the big red dog)))) .)"
GOLDEN_WORDS = ["Kim", "helped", "walk", "the", "big", "red", "dog", "."]
GOLDEN_SPANS = [(0, 8, "S"), (0, 7, B), (0, 1, "NP"), (1, 7, "VP"), (1, 2, W), (2, 7, "S+VP"), (2, 3, W),
                (3, 7, "NP"), (3, 6, B), (3, 5, B), (3, 4, W), (4, 5, W), (5, 6, W), (6, 7, W), (7, 8, W)]
# unlabelled: the chain is gone (S+VP is one constituent) and so is the one-word constituent (Kim is a bare word)
C = UNLABELLED
GOLDEN_UNLABELLED_SPANS = [(0, 8, C), (0, 7, B), (0, 1, W), (1, 7, C), (1, 2, W), (2, 7, C), (2, 3, W), (3, 7, C),
                           (3, 6, B), (3, 5, B), (3, 4, W), (4, 5, W), (5, 6, W), (6, 7, W), (7, 8, W)]
GOLDEN_UNLABELLED_STRING = "( Kim ( helped ( walk ( the big red dog ) ) ) . )"


def test_a_tree_worked_out_by_hand_has_exactly_these_spans():
    tree = parse_tree(GOLDEN_TREE)
    assert tree_to_spans(tree) == (GOLDEN_WORDS, GOLDEN_SPANS)
    assert tree_to_string(spans_to_tree(GOLDEN_WORDS, GOLDEN_SPANS)) == GOLDEN_TREE
    assert tree_to_spans(tree, labelled=False) == (GOLDEN_WORDS, GOLDEN_UNLABELLED_SPANS)
    assert unlabelled_string(spans_to_tree(GOLDEN_WORDS, GOLDEN_UNLABELLED_SPANS)) == GOLDEN_UNLABELLED_STRING
    # the spans may come in any order; POS tags go back over the words
    tags = ["NNP", "VBD", "VB", "DT", "JJ", "JJ", "NN", "."]
    tagged = spans_to_tree(GOLDEN_WORDS, list(reversed(GOLDEN_SPANS)), tags)
    assert split_tags(tagged) == (tree, tags)
    assert tree_to_string(tagged).startswith("(S (NP (NNP Kim)) (VP (VBD helped) (S (VP (VB walk) (NP (DT the)")


def test_a_one_word_sentence_and_a_root_chain():
    assert tree_to_spans(parse_tree("(FRAG (NP (NP it)))")) == (["it"], [(0, 1, "FRAG+NP+NP")])
    assert tree_to_spans(parse_tree("(FRAG (NP (NP it)))"), labelled=False) == (["it"], [(0, 1, C)])
    assert tree_to_string(spans_to_tree(["it"], [(0, 1, "FRAG+NP")], ["PRP"])) == "(FRAG (NP (PRP it)))"
    spans = [(0, 3, "S"), (0, 2, "S"), (0, 1, "NP"), (1, 2, W), (2, 3, W)]  # an S inside an S is no chain
    assert tree_to_spans(parse_tree("(S (S (NP a) b) c)")) == (["a", "b", "c"], spans)


def test_the_image_of_a_right_child_binarization_is_refused():
    # (X a b c) is ((a b) c) with (a b) <binarized>; its mirror (a (b c)) would be a second bracketing of that tree
    assert tree_to_spans(parse_tree("(X a b c)"))[1] == [(0, 3, "X"), (0, 2, B), (0, 1, W), (1, 2, W), (2, 3, W)]
    mirror = [(0, 3, "X"), (0, 1, W), (1, 3, B), (1, 2, W), (2, 3, W)]
    with pytest.raises(ValueError, match=r"<binarized> on the right child \(1, 3\)"):
        check_spans(mirror, 3)
    with pytest.raises(ValueError, match="right child"):
        spans_to_tree(["a", "b", "c"], mirror)


@pytest.mark.parametrize("spans, length, problem", [
    ([(0, 2, "X"), (0, 1, W)], 2, "2 spans; expected the 3 spans"),
    ([(0, 2, "X"), (0, 1, W), (0, 1, W)], 2, r"\(0, 1\) is outside 0..2 or given twice"),
    ([(0, 2, "X"), (0, 1, W), (1, 3, W)], 2, r"\(1, 3\) is outside"),
    ([(0, 3, "X"), (0, 2, "Y"), (1, 3, "Z"), (0, 1, W), (1, 2, W)], 3, "no two child spans"),
    ([(0, 3, "X"), (0, 2, W), (0, 1, W), (1, 2, W), (2, 3, W)], 3, r"<word> on \(0, 2\), a span of several words"),
    ([(0, 2, B), (0, 1, W), (1, 2, W)], 2, "the whole sentence is labelled <binarized>"),
    ([(0, 1, W)], 1, "the whole sentence is labelled <word>"),
])
def test_check_spans_refuses_what_is_no_bracketing_naming_the_problem(spans, length, problem):
    with pytest.raises(ValueError, match=problem):
        check_spans(spans, length)


@pytest.mark.parametrize("tree, label", [("(S (NP a) (X+Y b))", "'X+Y'"), ("(S (<word> a) b)", "'<word>'"),
                                         ("(S (<binarized> a b) c)", "'<binarized>'")])
def test_a_tree_whose_label_the_bracketings_reserve_is_refused_naming_it(tree, label):
    with pytest.raises(ValueError, match=re.escape(f"my tree: label {label} cannot be read")):
        tree_to_spans(parse_tree(tree), where="my tree")


def test_a_word_is_no_tree():
    with pytest.raises(ValueError, match="is a word, not a tree"):
        tree_to_spans("word")


def binary_bracketings(start, end):
    """Every binary tree over the words start..end as a list of its (start, end) spans, pre-order."""
    if end - start == 1:
        yield [(start, end)]
        return
    for split in range(start + 1, end):
        for left in binary_bracketings(start, split):
            for right in binary_bracketings(split, end):
                yield [(start, end)] + left + right


# The labels each kind of span may carry (modeling_crf_parser.label_kinds for a labelled parser with one label X).
KIND_LABELS = {0: ("X", W), 1: ("X", B), 2: ("X",)}  # ONE_WORD, INNER, SENTENCE
# Little Schröder numbers: the ordered trees over n leaves whose nodes have two children or more.
SCHROEDER = {1: 1, 2: 1, 3: 3, 4: 11, 5: 45}


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_accepted_bracketings_and_n_ary_trees_correspond_one_to_one(length):
    words = list("abcde"[:length])
    accepted, images = 0, set()
    for shape in binary_bracketings(0, length):
        choices = [KIND_LABELS[span_kind(start, end, length)] for start, end in shape]
        for labels in itertools.product(*choices):
            spans = [(start, end, label) for (start, end), label in zip(shape, labels)]
            try:
                check_spans(spans, length)
            except ValueError:  # refused only for a <binarized> right child
                assert any(label == B and (start, end) in right_children(shape) for start, end, label in spans)
                continue
            accepted += 1
            tree = spans_to_tree(words, spans)
            images.add(tree_to_string(tree))
            assert tree_to_spans(tree) == (words, spans)  # and back: the bracketing of its own tree
    expected = set(nary_trees(words, ["X"]))
    # n-ary trees: a Schröder shape, each word bare or a constituent of its own (a one-word sentence must be one)
    assert len(expected) == (1 if length == 1 else SCHROEDER[length] * 2 ** length)
    assert accepted == len(images) == len(expected)
    assert images == expected


def right_children(shape):
    """The spans of a binary tree (its spans) that are their parents' right children."""
    return {(start, end) for start, end in shape
            if any(i < start and j == end for i, j in shape)}
