"""The labelled binary-bracketing CRF (modeling/span_crf.py) against brute-force enumeration.

Every labelled binary tree of a short sentence is listed by a plain recursive generator written here from the
definition (kinds, the dummy on left children only), independent of the chart code: log Z is the logsumexp of their
scores, the best tree their argmax, the span-label marginals (log Z's gradient) their q-weighted counts, and the
samples' frequencies must match q by a chi-square test. All in float64.
"""

import math

import pytest
import torch
from helpers.chi_square import chi_square_passes
from hf_slm.modeling.span_crf import (
    INNER,
    ONE_WORD,
    SENTENCE,
    best_trees,
    log_partition,
    sample_trees,
    tree_log_probs,
    tree_scores,
)

# small tensors gain nothing from intra-op threads, and two threads waiting on a core another process holds
# made the sampling tests 10x slower (conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")

# labels of the labelled case: EMPTY only on one-word spans, DUMMY (binarization) only on inner left children,
# X and Y restricted by kind
EMPTY, DUMMY, X, Y = 0, 1, 2, 3
LABELLED = torch.tensor([[True, False, False, True],    # ONE_WORD: EMPTY, Y
                         [False, True, True, False],    # INNER: DUMMY, X
                         [False, False, True, True]])   # SENTENCE: X, Y
UNLABELLED = torch.ones(3, 1, dtype=torch.bool)


def trees_of(n, allowed, dummy):
    """Every allowed labelled binary tree of n words, each a tuple of (i, j, label) sorted by (i, -j)."""
    num_labels = allowed.shape[1]

    def subtrees(i, j, role):
        kind = SENTENCE if (i, j) == (0, n) else ONE_WORD if j - i == 1 else INNER
        labels = [label for label in range(num_labels)
                  if allowed[kind, label] and not (label == dummy and role != "left")]
        for label in labels:
            if j - i == 1:
                yield [(i, j, label)]
                continue
            for k in range(i + 1, j):
                for left in subtrees(i, k, "left"):
                    for right in subtrees(k, j, "right"):
                        yield [(i, j, label)] + left + right

    return [tuple(sorted(tree, key=lambda span: (span[0], -span[1]))) for tree in subtrees(0, n, "root")]


def score_of(tree, table):
    """score(y) from a sentence's nested-list scores table[i][j][label]."""
    return sum(table[i][j][label] for i, j, label in tree)


def enumerate_q(scores_b, n, allowed, dummy):
    """{tree: log q(tree)} and log Z by enumeration, for one sentence's scores [N+1, N+1, L]."""
    table = scores_b.tolist()
    trees = trees_of(n, allowed, dummy)
    totals = torch.tensor([score_of(tree, table) for tree in trees], dtype=torch.float64)
    log_z = float(torch.logsumexp(totals, 0))
    return {tree: total - log_z for tree, total in zip(trees, totals.tolist())}, log_z


def padded_scores(lengths, n_max, num_labels, seed):
    """Random float64 scores [B, N+1, N+1, L], every cell outside 0 <= i < j <= n_b set to a huge random value."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(len(lengths), n_max + 1, n_max + 1, num_labels, generator=generator, dtype=torch.float64)
    fence = torch.arange(n_max + 1)
    real = (fence[None, :] > fence[:, None])[None] & (fence[None, None, :] <= torch.tensor(lengths)[:, None, None])
    junk = 1e6 * torch.rand(scores.shape, generator=generator, dtype=torch.float64)
    return torch.where(real[..., None], scores, junk)


def gold_chart(trees, n_max):
    """[T, N+1, N+1] label charts (-1 off the tree) of trees given as span tuples."""
    gold = torch.full((len(trees), n_max + 1, n_max + 1), -1, dtype=torch.long)
    for t, tree in enumerate(trees):
        for i, j, label in tree:
            gold[t, i, j] = label
    return gold


# ---- the enumeration itself ---------------------------------------------------------------------------------------

def test_the_enumeration_counts_catalan_bracketings_and_respects_the_rules():
    # unlabelled: C(n - 1) bracketings
    assert [len(trees_of(n, UNLABELLED, None)) for n in range(1, 7)] == [1, 1, 2, 5, 14, 42]
    for tree in trees_of(4, LABELLED, DUMMY):
        assert len(tree) == 7
        right_children = {(k, j) for i, j, _ in tree for k, j2, _ in tree if j2 == j and k > i}
        for i, j, label in tree:
            assert label != DUMMY or ((i, j) not in right_children and (i, j) != (0, 4))
            assert label != EMPTY or j - i == 1


# ---- log Z, best tree, tree probabilities -------------------------------------------------------------------------

@pytest.mark.parametrize("allowed, dummy", [(LABELLED, DUMMY), (UNLABELLED, None)], ids=["labelled", "unlabelled"])
def test_log_partition_and_best_tree_match_enumeration_in_a_padded_batch(allowed, dummy):
    lengths = [3, 1, 5, 2, 4]
    scores = padded_scores(lengths, 6, allowed.shape[1], seed=1)
    log_z = log_partition(scores, torch.tensor(lengths), allowed, dummy)
    best = best_trees(scores, torch.tensor(lengths), allowed, dummy)
    assert log_z.dtype == torch.float64
    for b, n in enumerate(lengths):
        log_q, expected_log_z = enumerate_q(scores[b], n, allowed, dummy)
        assert float(log_z[b]) == pytest.approx(expected_log_z, abs=1e-9)
        argmax = max(log_q, key=log_q.get)
        spans, score = best[b]
        assert tuple(spans) == argmax
        assert score == pytest.approx(log_q[argmax] + expected_log_z, abs=1e-9)
        assert all(type(x) is int for span in spans for x in span)


def test_a_kind_that_allows_only_the_dummy_leaves_left_branching_trees():
    # INNER allows only the dummy (label 1), so no inner span can be a right child; the log 0 of the other labels
    # must not turn into NaN gradients
    allowed = torch.tensor([[True, False, True], [False, True, False], [True, False, True]])
    lengths = [4, 3]
    scores = padded_scores(lengths, 4, 3, seed=2).requires_grad_()
    log_z = log_partition(scores, torch.tensor(lengths), allowed, 1)
    for b, n in enumerate(lengths):
        trees = trees_of(n, allowed, 1)
        assert len(trees) == 2 ** n * 2  # two labels for each word and for the sentence
        assert all(i == 0 or j - i == 1 for tree in trees for i, j, _ in tree)
        assert float(log_z[b].detach()) == pytest.approx(enumerate_q(scores[b].detach(), n, allowed, 1)[1], abs=1e-9)
        assert tuple(best_trees(scores.detach(), torch.tensor(lengths), allowed, 1)[b][0]) in trees
    log_z.sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_tree_log_probs_of_every_tree_sum_to_one():
    n = 5
    scores = padded_scores([n], n, 4, seed=3)
    log_q, _ = enumerate_q(scores[0], n, LABELLED, DUMMY)
    trees = list(log_q)
    gold = gold_chart(trees, n)
    expanded = scores.expand(len(trees), -1, -1, -1)
    lengths = torch.full((len(trees),), n)
    log_probs = tree_log_probs(expanded, lengths, LABELLED, gold, DUMMY)
    assert float(torch.logsumexp(log_probs, 0)) == pytest.approx(0.0, abs=1e-9)
    assert log_probs.tolist() == pytest.approx([log_q[tree] for tree in trees], abs=1e-9)
    assert tree_scores(expanded, gold).tolist() == pytest.approx(
        [score_of(tree, scores[0].tolist()) for tree in trees], abs=1e-9)


def test_the_gradient_of_log_z_is_the_span_label_marginals():
    lengths = [4, 2]
    scores = padded_scores(lengths, 5, 4, seed=4).requires_grad_()
    log_partition(scores, torch.tensor(lengths), LABELLED, DUMMY).sum().backward()
    for b, n in enumerate(lengths):
        log_q, _ = enumerate_q(scores[b].detach(), n, LABELLED, DUMMY)
        marginals = torch.zeros(6, 6, 4, dtype=torch.float64)
        for tree, value in log_q.items():
            for i, j, label in tree:
                marginals[i, j, label] += math.exp(value)
        torch.testing.assert_close(scores.grad[b], marginals, atol=1e-10, rtol=1e-8)  # zero on padding too


# ---- sampling -----------------------------------------------------------------------------------------------------

def test_samples_follow_q_and_carry_their_log_q():
    lengths = [3, 4]
    scores = padded_scores(lengths, 4, 4, seed=5)
    num_samples = 20_000
    drawn = sample_trees(scores, torch.tensor(lengths), LABELLED, DUMMY, num_samples,
                         torch.Generator().manual_seed(0))
    assert [len(samples) for samples in drawn] == [num_samples] * 2
    for b, n in enumerate(lengths):
        log_q, _ = enumerate_q(scores[b], n, LABELLED, DUMMY)
        counts = dict.fromkeys(log_q, 0)
        for spans, sample_log_q in drawn[b]:
            tree = tuple(spans)
            assert tree in counts, f"sampled a tree that is not allowed: {tree}"
            counts[tree] += 1
            assert sample_log_q == pytest.approx(log_q[tree], abs=1e-9)
        trees = list(log_q)
        statistic, critical, df = chi_square_passes([counts[t] for t in trees],
                                                    [num_samples * math.exp(log_q[t]) for t in trees])
        assert df >= 10, "too few categories for the test to mean much"
        assert statistic < critical, f"n = {n}: chi-square {statistic:.1f} >= {critical:.1f} (df {df})"


def test_sampling_is_reproducible_with_a_generator_and_handles_one_word_sentences():
    lengths = torch.tensor([1, 3])
    scores = padded_scores([1, 3], 3, 4, seed=6)
    first = sample_trees(scores, lengths, LABELLED, DUMMY, 50, torch.Generator().manual_seed(7))
    again = sample_trees(scores, lengths, LABELLED, DUMMY, 50, torch.Generator().manual_seed(7))
    assert first == again
    assert {spans[0][:2] for spans, _ in first[0]} == {(0, 1)}
    assert {spans[0][2] for spans, _ in first[0]} <= {X, Y}  # the SENTENCE kind, not ONE_WORD's


# ---- bad inputs ---------------------------------------------------------------------------------------------------

def test_bad_inputs_are_refused_naming_the_problem():
    scores = padded_scores([3], 3, 4, seed=8)
    lengths = torch.tensor([3])
    on_sentence = LABELLED.clone()
    on_sentence[SENTENCE, DUMMY] = True
    with pytest.raises(ValueError, match=r"allowed\[SENTENCE, dummy = 1\]"):
        log_partition(scores, lengths, on_sentence, DUMMY)
    on_word = LABELLED.clone()
    on_word[ONE_WORD, DUMMY] = True
    with pytest.raises(ValueError, match=r"allowed\[ONE_WORD, dummy = 1\]"):
        sample_trees(scores, lengths, on_word, DUMMY)
    empty_kind = LABELLED.clone()
    empty_kind[INNER] = False
    with pytest.raises(ValueError, match=r"allowed\[INNER\] allows no label"):
        best_trees(scores, lengths, empty_kind, DUMMY)
    for bad in (0, 4):
        with pytest.raises(ValueError, match=rf"lengths\[0\] = {bad}: each sentence needs 1 <= length <= N = 3"):
            log_partition(scores, torch.tensor([bad]), LABELLED, DUMMY)
    with pytest.raises(ValueError, match="dummy = 7 is not a label id"):
        log_partition(scores, lengths, LABELLED, 7)


@pytest.mark.parametrize("tree, problem", [
    ([(0, 3, X), (0, 1, EMPTY), (1, 3, DUMMY), (1, 2, Y), (2, 3, EMPTY)], "the dummy label on a right child"),
    ([(0, 3, X), (0, 2, X), (0, 1, EMPTY), (1, 2, X), (2, 3, Y)], "a label its span's kind does not allow"),
    ([(0, 3, X), (0, 2, X), (0, 1, EMPTY), (1, 2, Y)], "not 2 \\* length - 1 spans"),
    ([(0, 3, X), (0, 2, X), (1, 3, X), (0, 1, EMPTY), (1, 2, Y), (2, 3, Y)], "not 2 \\* length - 1 spans"),
], ids=["dummy-right", "kind", "missing", "extra"])
def test_tree_log_probs_refuses_a_tree_that_is_not_allowed(tree, problem):
    scores = padded_scores([3], 3, 4, seed=9)
    with pytest.raises(ValueError, match=f"gold tree 0 \\(length 3\\): {problem}"):
        tree_log_probs(scores, torch.tensor([3]), LABELLED, gold_chart([tree], 3), DUMMY)


def test_tree_log_probs_refuses_crossing_brackets():
    # 2n - 1 spans, the leaves and the root among them, but (0, 2) and (1, 3) cross
    tree = [(0, 4, X), (0, 2, X), (1, 3, X), (0, 1, EMPTY), (1, 2, Y), (2, 3, Y), (3, 4, Y)]
    scores = padded_scores([4], 4, 4, seed=10)
    with pytest.raises(ValueError, match="two spans cross"):
        tree_log_probs(scores, torch.tensor([4]), LABELLED, gold_chart([tree], 4), DUMMY)
