"""Gold structure of Syntactic Ordered Memory: Figure 4's conversion, Figure 2's grid, Algorithm 1."""

import random

import pytest
from nltk import Tree

from hf_slm.modeling.som_structure import adaptive_grid_labels, grid_columns, parse_spans
from hf_slm.tokenization.dependency_trees import lift_to_projective
from hf_slm.tokenization.som_trees import (
    constituent_spans, dependency_to_constituency, left_binarize, left_branching_tree, piece_first_siblings,
    token_first_siblings, word_first_siblings,
)

# Figure 4's kind of sentence: "The cat sat on the mat ." (UD: det, nsubj, root, case, det, obl, punct)
WORDS = ["The", "cat", "sat", "on", "the", "mat", "."]
HEADS = [2, 3, 0, 6, 6, 3, 3]


def test_figure_4_head_and_dependents_form_one_constituent():
    gamma = dependency_to_constituency(WORDS, HEADS)
    assert gamma == Tree.fromstring("(X (X The cat) sat (X on the mat) .)")


def test_figure_4_left_branching_binarization():
    gamma = left_binarize(dependency_to_constituency(WORDS, HEADS))
    assert gamma == Tree.fromstring("(X (X (X (X The cat) sat) (X (X on the) mat)) .)")
    assert left_branching_tree(["a", "b", "c"]) == Tree.fromstring("(X (X a b) c)")


def test_single_word_sentence_and_non_projective_input():
    assert dependency_to_constituency(["Hi"], [0]) == Tree("X", ["Hi"])
    words, heads = ["A", "hearing", "is", "scheduled", "on", "the", "issue", "today"], [2, 4, 4, 0, 2, 7, 5, 4]
    with pytest.raises(ValueError, match="not projective"):
        dependency_to_constituency(words, heads)
    lifted, _ = lift_to_projective(heads)
    assert dependency_to_constituency(words, lifted).leaves() == words


def test_first_siblings_of_figure_4():
    gamma = dependency_to_constituency(WORDS, HEADS)
    # cat, sat, on and "." are non-first members of constituents starting at "The"; "the", "mat" of "on the mat"
    assert word_first_siblings(gamma) == [None, 0, 0, 0, 3, 3, 0]
    assert word_first_siblings(left_binarize(gamma)) == word_first_siblings(gamma)
    assert token_first_siblings(gamma, eos=True) == [None, 0, 1, 1, 1, 4, 4, 1, 0]


def test_gold_grid_of_figure_4_rebuilds_the_binary_tree():
    gamma = left_binarize(dependency_to_constituency(WORDS, HEADS))
    first_siblings = token_first_siblings(gamma)
    labels = adaptive_grid_labels(first_siblings, num_slots=6)
    #           <s> The cat sat on the mat .
    assert labels == [6, 5, 4, 4, 4, 3, 3, 4]
    expected = constituent_spans(gamma, offset=1) | {(0, 0), (0, len(WORDS))}  # (<s> Gamma)
    assert parse_spans(labels, 6) == expected


def test_figure_2_grid():
    """Figure 2's example as the text states it: c is written into slot 2, then d and e into slot 1."""
    tree = Tree.fromstring("(X (X a b) (X (X c d) e))")
    labels = adaptive_grid_labels(token_first_siblings(tree, bos=False), num_slots=4)
    assert labels == [4, 3, 3, 2, 2]
    assert [label - 1 for label in labels] == [3, 2, 2, 1, 1]  # the slot each token is written into
    columns = grid_columns(labels, 4)
    a, b, c, d, e = range(5)
    # step of c: (a b) was copied into memory slot 3, c is the new candidate in slot 2, composed upwards
    assert columns[c]["memory"][3] == (a, b)
    assert columns[c]["candidates"] == {2: (c, c), 3: (a, c), 4: (-1, c)}
    # step of e: (c d) is the left sibling of e in slot 2
    assert columns[e]["memory"][2] == (c, d)
    assert columns[e]["candidates"] == {1: (e, e), 2: (c, e), 3: (a, e), 4: (-1, e)}
    assert parse_spans(labels, 4) == constituent_spans(tree)


def test_algorithm_1_recovers_after_an_early_error():
    # <s> ((w1 w2) (w3 w4)); the model attaches w2 too high (slot 4 instead of 3)
    first_siblings = token_first_siblings(Tree.fromstring("(X (X w1 w2) (X w3 w4))"))
    assert first_siblings == [None, 0, 1, 1, 3]
    assert adaptive_grid_labels(first_siblings, 5) == [5, 4, 3, 3, 2]
    decisions = [5, 4, 4, 4, 3]
    labels = adaptive_grid_labels(first_siblings, 5, decisions)
    # w2 still gets its gold label; w3 must join the slot w2 was merged into (mu = 4); w4 stays w3's sibling
    assert labels == [5, 4, 3, 4, 3]
    assert (3, 4) in parse_spans(labels, 5)


def test_algorithm_1_never_asks_for_a_slot_below_the_models_last_candidate():
    # <s> (w1 (w2 w3)): gold is one slot lower per word; the model put w2 one slot too high
    first_siblings = token_first_siblings(Tree.fromstring("(X w1 (X w2 w3))"))
    assert adaptive_grid_labels(first_siblings, 5) == [5, 4, 3, 2]
    labels = adaptive_grid_labels(first_siblings, 5, decisions=[5, 4, 4, 3])
    assert labels == [5, 4, 3, 3]  # xi_3 - 1 = 2 is empty after theta_2 = 4: w2 and w3 become siblings
    grid_columns([5, 4, 4, labels[3]], 5)  # reachable from the model's own state


def test_deep_trees_are_flattened_at_the_bottom_of_the_grid():
    tree = Tree.fromstring("(X a (X b (X c (X d e))))")
    labels = adaptive_grid_labels(token_first_siblings(tree), num_slots=4)
    assert labels == [4, 3, 2, 2, 2, 2]
    grid_columns(labels, 4)


def test_subword_pieces_form_left_branching_constituents():
    tokens = token_first_siblings(Tree.fromstring("(X a (X b c))"))  # [None, 0, 1, 2]
    pieces = piece_first_siblings(tokens, [1, 2, 1, 3])  # <s> a1 a2 b c1 c2 c3
    assert pieces == [None, 0, 1, 1, 3, 4, 4]
    labels = adaptive_grid_labels(pieces, 6)
    assert {(1, 2), (4, 6), (4, 5), (3, 6), (1, 6)} <= parse_spans(labels, 6)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"first_siblings\[2\] is 2"):
        adaptive_grid_labels([None, 0, 2], 4)
    with pytest.raises(ValueError, match="3 decisions for 2 tokens"):
        adaptive_grid_labels([None, 0], 4, [4, 3, 3])
    with pytest.raises(ValueError, match="picks an empty candidate slot"):
        grid_columns([4, 2], 4)  # after x_0 in slot 3, slot 2 holds nothing
    with pytest.raises(ValueError, match="expected a slot number from 2 to 4"):
        grid_columns([4, 1], 4)


def random_projective_heads(rng, length):
    """A random projective tree: each span picks a head, its left and right parts hang from it recursively."""
    heads = [0] * length

    def build(first, last, parent):
        if first > last:
            return
        head = rng.randint(first, last)
        heads[head] = parent
        build(first, head - 1, head + 1)
        build(head + 1, last, head + 1)

    build(0, length - 1, 0)
    return heads


def depth_in_slots(tree):
    """Right edges on the deepest root-to-leaf path (what the grid has to hold)."""
    if not isinstance(tree, Tree):
        return 0
    return max(depth_in_slots(tree[0]), *(1 + depth_in_slots(child) for child in tree[1:])) if len(tree) > 1 else 0


def test_random_dependency_trees_round_trip_through_the_grid():
    rng = random.Random(0)
    for _ in range(300):
        length = rng.randint(1, 12)
        words = [f"w{i}" for i in range(length)]
        gamma = left_binarize(dependency_to_constituency(words, random_projective_heads(rng, length)))
        first_siblings = token_first_siblings(gamma)
        num_slots = depth_in_slots(gamma) + 3  # the context slot, <s>'s node and the sentence
        labels = adaptive_grid_labels(first_siblings, num_slots)
        assert parse_spans(labels, num_slots) == constituent_spans(gamma, offset=1) | {(0, 0), (0, length)}
        # labels follow their own decisions unchanged, and stay reachable from any valid decisions
        assert adaptive_grid_labels(first_siblings, num_slots, labels) == labels
        decisions = [num_slots]
        for _ in range(length):
            decisions.append(rng.randint(max(2, decisions[-1] - 1), num_slots))
        adaptive = adaptive_grid_labels(first_siblings, num_slots, decisions)
        for step in range(1, length + 1):
            assert max(2, decisions[step - 1] - 1) <= adaptive[step] <= num_slots
