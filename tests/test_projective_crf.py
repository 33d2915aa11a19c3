"""The projective dependency CRF (modeling/projective_crf.py) against brute-force enumeration.

Every single-root projective tree of a short sentence is found here from the definition, independently of Eisner's
chart: every head assignment, kept when it has one root word, no cycle and no two crossing arcs (the root's arc
included). log Z is the logsumexp of their scores, the best tree their argmax, the arc marginals (log Z's gradient)
their q-weighted counts, and the samples' frequencies must match q by a chi-square test. All in float64.
"""

import functools
import itertools
import math

import pytest
import torch
from helpers.chi_square import chi_square_passes
from hf_slm.modeling.projective_crf import (
    best_trees,
    log_partition,
    sample_trees,
    tree_log_probs,
    tree_scores,
)

# small tensors gain nothing from intra-op threads, and two threads waiting on a core another process holds
# made the sampling tests 10x slower (conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")



def is_single_root_projective_tree(heads):
    """heads[d - 1] the head of word d (0 the root): one root word, every word reaches 0, no two arcs cross."""
    n = len(heads)
    if any(h == d for d, h in enumerate(heads, 1)) or heads.count(0) != 1:
        return False
    for d in range(1, n + 1):
        seen, node = set(), d
        while node != 0:
            if node in seen:
                return False
            seen.add(node)
            node = heads[node - 1]
    arcs = [(min(h, d), max(h, d)) for d, h in enumerate(heads, 1)]
    return not any(a < c < b < e for (a, b), (c, e) in itertools.permutations(arcs, 2))


@functools.cache
def trees_of(n):
    """Every single-root projective tree of n words, as tuples of heads."""
    return [heads for heads in itertools.product(range(n + 1), repeat=n) if is_single_root_projective_tree(list(heads))]


def enumerate_q(scores_b, n):
    """{heads: log q} and log Z by enumeration, for one sentence's scores [N+1, N+1]."""
    table = scores_b.tolist()
    trees = trees_of(n)
    totals = torch.tensor([sum(table[h][d] for d, h in enumerate(heads, 1)) for heads in trees], dtype=torch.float64)
    log_z = float(torch.logsumexp(totals, 0))
    return {heads: total - log_z for heads, total in zip(trees, totals.tolist())}, log_z


def padded_scores(lengths, n_max, seed):
    """Random float64 scores [B, N+1, N+1], every cell with a position past n_b set to a huge random value (the
    self-loops and the arcs into the root too: no tree uses them)."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(len(lengths), n_max + 1, n_max + 1, generator=generator, dtype=torch.float64)
    position = torch.arange(n_max + 1)
    real = position[None, :] <= torch.tensor(lengths)[:, None]
    real = real[:, :, None] & real[:, None, :] & (position[:, None] != position[None, :]) & (position[None, :] > 0)
    return torch.where(real, scores, 1e6 * torch.rand(scores.shape, generator=generator, dtype=torch.float64))


def heads_tensor(trees, n_max):
    """[T, N] heads, -1 past each tree's words."""
    heads = torch.full((len(trees), n_max), -1, dtype=torch.long)
    for t, tree in enumerate(trees):
        heads[t, :len(tree)] = torch.tensor(tree)
    return heads


def test_the_enumeration_counts_single_root_projective_trees():
    # 1, 2, 7, 30, 143, 728 (OEIS A006013): n = 3 by hand: 3 with root word 1, 3 with root word 3, 1 with 2
    assert [len(trees_of(n)) for n in range(1, 7)] == [1, 2, 7, 30, 143, 728]
    assert not is_single_root_projective_tree([2, 0, 1])  # 0 -> 2 crosses 1 -> 3
    assert not is_single_root_projective_tree([0, 3, 2])  # a cycle
    assert not is_single_root_projective_tree([0, 0, 2])  # two root words


def test_log_partition_and_best_tree_match_enumeration_in_a_padded_batch():
    lengths = [3, 1, 6, 2, 5, 4]
    scores = padded_scores(lengths, 7, seed=1)
    log_z = log_partition(scores, torch.tensor(lengths))
    best = best_trees(scores, torch.tensor(lengths))
    assert log_z.dtype == torch.float64
    for b, n in enumerate(lengths):
        log_q, expected_log_z = enumerate_q(scores[b], n)
        assert float(log_z[b]) == pytest.approx(expected_log_z, abs=1e-9)
        argmax = max(log_q, key=log_q.get)
        heads, score = best[b]
        assert tuple(heads) == argmax
        assert score == pytest.approx(log_q[argmax] + expected_log_z, abs=1e-9)
        assert all(type(h) is int for h in heads)


def test_tree_log_probs_of_every_tree_sum_to_one():
    n = 5
    scores = padded_scores([n], 6, seed=2)
    log_q, log_z = enumerate_q(scores[0], n)
    trees = list(log_q)
    heads = heads_tensor(trees, 6)
    expanded = scores.expand(len(trees), -1, -1)
    log_probs = tree_log_probs(expanded, torch.full((len(trees),), n), heads)
    assert float(torch.logsumexp(log_probs, 0)) == pytest.approx(0.0, abs=1e-9)
    assert log_probs.tolist() == pytest.approx([log_q[tree] for tree in trees], abs=1e-9)
    assert tree_scores(expanded, heads).tolist() == pytest.approx([log_q[tree] + log_z for tree in trees], abs=1e-9)


def test_the_gradient_of_log_z_is_the_arc_marginals():
    lengths = [4, 2]
    scores = padded_scores(lengths, 5, seed=3).requires_grad_()
    log_partition(scores, torch.tensor(lengths)).sum().backward()
    for b, n in enumerate(lengths):
        log_q, _ = enumerate_q(scores[b].detach(), n)
        marginals = torch.zeros(6, 6, dtype=torch.float64)
        for heads, value in log_q.items():
            for d, h in enumerate(heads, 1):
                marginals[h, d] += math.exp(value)
        torch.testing.assert_close(scores.grad[b], marginals, atol=1e-10, rtol=1e-8)  # zero on padding too


def test_samples_follow_q_and_carry_their_log_q():
    lengths = [3, 4]
    # doubled scores spread q, so that some trees are rare and the pooling is exercised
    scores = 2 * padded_scores(lengths, 4, seed=4)
    num_samples = 20_000
    drawn = sample_trees(scores, torch.tensor(lengths), num_samples, torch.Generator().manual_seed(0))
    assert [len(samples) for samples in drawn] == [num_samples] * 2
    for b, n in enumerate(lengths):
        log_q, _ = enumerate_q(scores[b], n)
        counts = dict.fromkeys(log_q, 0)
        for heads, sample_log_q in drawn[b]:
            assert tuple(heads) in counts, f"sampled a tree that is not single-root projective: {heads}"
            counts[tuple(heads)] += 1
            assert sample_log_q == pytest.approx(log_q[tuple(heads)], abs=1e-9)
        trees = list(log_q)
        statistic, critical, df = chi_square_passes([counts[t] for t in trees],
                                                    [num_samples * math.exp(log_q[t]) for t in trees])
        assert df >= 4, "too few categories for the test to mean much"
        assert statistic < critical, f"n = {n}: chi-square {statistic:.1f} >= {critical:.1f} (df {df})"


def test_sampling_is_reproducible_with_a_generator_and_handles_one_word_sentences():
    lengths = torch.tensor([1, 4])
    scores = padded_scores([1, 4], 4, seed=5)
    first = sample_trees(scores, lengths, 50, torch.Generator().manual_seed(7))
    again = sample_trees(scores, lengths, 50, torch.Generator().manual_seed(7))
    assert first == again
    assert {tuple(heads) for heads, _ in first[0]} == {(0,)}
    assert {log_q for _, log_q in first[0]} == {0.0}


def test_bad_inputs_are_refused_naming_the_problem():
    scores = padded_scores([3], 3, seed=6)
    for bad in (0, 4):
        with pytest.raises(ValueError, match=rf"lengths\[0\] = {bad}: each sentence needs 1 <= length <= N = 3"):
            log_partition(scores, torch.tensor([bad]))
    with pytest.raises(ValueError, match=r"scores must be a float tensor \[B, N\+1, N\+1\]"):
        best_trees(scores[:, :, :3], torch.tensor([2]))
    with pytest.raises(ValueError, match="num_samples must be at least 1"):
        sample_trees(scores, torch.tensor([3]), 0)


@pytest.mark.parametrize("heads, problem", [
    ([0, 0, 2, -1], "not exactly one word headed by the root 0"),
    ([2, 0, 1, -1], "arcs that cross"),
    ([0, 3, 2, -1], "a cycle"),
    ([0, 2, 2, -1], "a word headed by itself"),
    ([0, 1, 4, -1], "a head outside 0..length"),
], ids=["two-roots", "crossing", "cycle", "self", "outside"])
def test_tree_log_probs_refuses_a_tree_that_is_not_single_root_projective(heads, problem):
    scores = padded_scores([3], 4, seed=7)
    with pytest.raises(ValueError, match=f"heads of sentence 0 \\(length 3\\): {problem}"):
        tree_log_probs(scores, torch.tensor([3]), torch.tensor([heads]))
