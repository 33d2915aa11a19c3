"""A first-order projective dependency tree CRF (Eisner), single root: log Z, best tree, exact samples.

Position 0 is the artificial root, 1..n the words. A tree gives each word d one head h in 0..n, h != d, exactly one
word (the root word) has head 0, the arcs form a tree, and no two arcs cross (an arc from 0 included).
score(y) = sum over its arcs of scores[b, h, d]; q(y | x) = exp(score(y) - log Z).

Eisner's chart over the words (here 0-based, word p at position p + 1), for spans i <= j:

- C_r(i, j): a complete span headed by i covering i..j (i's rightward subtree); C_l(i, j): headed by j (j's
  leftward subtree). C_r(i, i) = C_l(i, i) = 0.
- I_r(i, j): the arc i -> j with what lies between: s(i, j) + sum_k C_r(i, k) + C_l(k + 1, j);
  I_l(i, j): the arc j -> i, the same sum plus s(j, i).
- C_r(i, j) = sum_{k > i} I_r(i, k) + C_r(k, j); C_l(i, j) = sum_{k < j} C_l(i, k) + I_l(k, j).

The single root: position 0 attaches exactly one word r, which heads C_l(0, r) and C_r(r, n - 1), so
log Z = logsumexp_r s(0, r) + C_l(0, r) + C_r(r, n - 1). (Treating 0 as an ordinary head in the chart would
allow several root words.)

Why the layout: each chart is kept indexed [width, start] or [width, end], whichever the recursions read, so that
for a width w the terms of all spans at once are slices read forwards and backwards over the width, not gathers
(as in span_crf.py). Sampling and the best tree walk the chart top down with a stack of chart items per
(sentence, sample) row, one item popped per row and step: a tree of n words pops 2 (n - 1) items (n - 1
incomplete spans, one per arc below the root, and as many complete spans of two words or more).

Hub code: imports only torch.
"""

import torch

from .crf_semirings import checked_lengths, gumbel_max_sampler, log_sum, maximum, working_scores

# chart item kinds on a sampling stack
_COMPLETE_RIGHT, _COMPLETE_LEFT, _INCOMPLETE_RIGHT, _INCOMPLETE_LEFT = 0, 1, 2, 3


# ---- inputs -------------------------------------------------------------------------------------------------------

def _arc_scores(scores, lengths):
    """The arcs between words `words` [B, N, N] (words[b, h - 1, d - 1] = scores[b, h, d]) and from the root `root`
    [B, N] (root[b, d - 1] = scores[b, 0, d]), with the cells of positions past n_b zeroed: padding may hold anything
    finite, and a huge value would overflow the sums it never belongs to."""
    position = torch.arange(scores.shape[1], device=scores.device)
    real = position[None, :] <= lengths[:, None]  # [B, N+1]
    keep = real[:, :, None] & real[:, None, :]
    scores = torch.where(keep, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
    return scores[:, 1:, 1:], scores[:, 0, 1:]


def _inside(words, root, lengths, reduce):
    """Eisner's inside chart in the semiring of `reduce` (`log_sum`: sums; `maximum`: Viterbi).

    words: [B, N, N] word-to-word arc scores; root: [B, N] root-to-word arc scores; lengths: [B].
    Returns `chart`, a dict of [B, N, N] tensors, 0-based word positions, index [width, start] or [width, end]:
    complete_right_start[w, i] = C_r(i, i + w), complete_right_end[w, j] = C_r(j - w, j), likewise
    complete_left_start / complete_left_end, incomplete_right_start[w, i] = I_r(i, i + w),
    incomplete_left_end[w, j] = I_l(j - w, j); and `root_choices` [B, N]: s(0, r) + C_l(0, r) + C_r(r, n_b - 1)
    for each root word r, -inf for r >= n_b."""
    batch, n_max = words.shape[0], words.shape[1]
    names = ("complete_right_start", "complete_right_end", "complete_left_start", "complete_left_end",
             "incomplete_right_start", "incomplete_left_end")
    chart = {name: words.new_zeros(batch, n_max, n_max) for name in names}
    cr_start, cr_end = chart["complete_right_start"], chart["complete_right_end"]
    cl_start, cl_end = chart["complete_left_start"], chart["complete_left_end"]
    ir_start, il_end = chart["incomplete_right_start"], chart["incomplete_left_end"]
    for w in range(1, n_max):
        count = n_max - w  # spans (i, i + w): starts 0..count - 1, ends w..n_max - 1
        # C_r(i, i + t) + C_l(i + t + 1, i + w), t = 0..w - 1: [B, w, count]
        between = reduce(cr_start[:, 0:w, :count] + cl_end[:, 0:w, w:].flip(1), 1)
        ir_start[:, w, :count] = between + words.diagonal(w, 1, 2)  # arc i -> i + w
        il_end[:, w, w:] = between + words.diagonal(-w, 1, 2)  # arc i + w -> i
        # C_r(i, i + w) = sum_t I_r(i, i + t) + C_r(i + t, i + w), t = 1..w
        right = reduce(ir_start[:, 1:w + 1, :count] + cr_end[:, 0:w, w:].flip(1), 1)
        # C_l(i, i + w) = sum_t C_l(i, i + t) + I_l(i + t, i + w), t = 0..w - 1
        left = reduce(cl_start[:, 0:w, :count] + il_end[:, 1:w + 1, w:].flip(1), 1)
        cr_start[:, w, :count] = right
        cr_end[:, w, w:] = right
        cl_start[:, w, :count] = left
        cl_end[:, w, w:] = left
    batch_index = torch.arange(batch, device=words.device)[:, None]
    word = torch.arange(n_max, device=words.device)[None, :]
    last = (lengths - 1)[:, None]
    root_choices = (root + cl_start[:, :, 0]
                    + cr_end[batch_index, (last - word).clamp(min=0), last.expand(batch, n_max)])
    return chart, root_choices.masked_fill(word >= lengths[:, None], float("-inf"))


# ---- log Z and tree scores ----------------------------------------------------------------------------------------

def log_partition(scores, lengths):
    """log Z of each sentence: the logsumexp of score(y) over every single-root projective tree (differentiable; its
    gradient with respect to `scores` is the arc marginals).

    scores: [B, N+1, N+1] float, scores[b, h, d] of the arc h -> d (position 0 the root; cells of positions past n_b
    are ignored); lengths: [B] long, 1 <= n_b <= N. Returns [B] float."""
    scores = working_scores(scores, 3, "[B, N+1, N+1] (head, dependent)")
    lengths = checked_lengths(scores, lengths, "[B, N+1, N+1]")
    words, root = _arc_scores(scores, lengths)
    _, root_choices = _inside(words, root, lengths, log_sum)
    return torch.logsumexp(root_choices, -1)


def tree_scores(scores, heads, lengths=None):
    """score(y) of given trees: the sum of their arcs' scores (differentiable).

    scores: [B, N+1, N+1] float; heads: [B, N] long, heads[b, d - 1] the head (0..n_b) of word d; entries past n_b
    (when `lengths` [B] is given) or outside 0..N are padding. Returns [B] float."""
    heads = torch.as_tensor(heads, device=scores.device).long()
    batch, n_max = scores.shape[0], scores.shape[1] - 1
    if heads.shape != (batch, n_max):
        raise ValueError(f"heads must be [B, N] = [{batch}, {n_max}], got {list(heads.shape)}")
    if lengths is not None:
        lengths = torch.as_tensor(lengths, device=scores.device).long()
    return _arc_sums(scores, torch.arange(batch, device=scores.device), heads, lengths)


def _arc_sums(scores, sentence, heads, lengths=None):
    """score(y) [R] of trees given as heads [R, N] of sentences `sentence` [R] (indices into scores' batch; rows
    share a sentence's scores without copying them); heads outside 0..N, or past lengths [R] when given, ignored."""
    n_max = scores.shape[1] - 1
    used = (heads >= 0) & (heads <= n_max)
    if lengths is not None:
        used &= torch.arange(n_max, device=scores.device)[None, :] < lengths[:, None]
    dependent = torch.arange(1, n_max + 1, device=scores.device)[None, :]
    picked = scores[sentence[:, None], heads.clamp(0, n_max), dependent]
    return torch.where(used, picked, torch.zeros((), dtype=picked.dtype, device=picked.device)).sum(1)


def _check_heads(heads, lengths):
    """ValueError naming the sentence when heads [B, N] are not a single-root projective tree of its words."""
    batch, n_max = heads.shape
    word = torch.arange(1, n_max + 1, device=heads.device)[None, :]  # [1, N] positions of the words
    real = word <= lengths[:, None]

    def refuse(bad, what):
        where = torch.nonzero(bad)
        if len(where):
            b = int(where[0, 0])
            at = f" (word {int(where[0, 1]) + 1})" if where.shape[1] > 1 else ""
            raise ValueError(f"heads of sentence {b} (length {int(lengths[b])}): {what}{at}")

    refuse(real & ((heads < 0) | (heads > lengths[:, None])), "a head outside 0..length")
    refuse(real & (heads == word), "a word headed by itself")
    refuse((real & (heads == 0)).sum(1) != 1, "not exactly one word headed by the root 0")
    # acyclic: following heads from every word reaches 0 within N steps; 2^k >= N + 1 steps by squaring
    parent = torch.cat([torch.zeros(batch, 1, dtype=torch.long, device=heads.device),
                        torch.where(real, heads, 0)], 1)  # [B, N + 1]; padding and 0 point at 0
    for _ in range(max(1, (n_max + 1).bit_length())):
        parent = parent.gather(1, parent)
    refuse(real & (parent[:, 1:] != 0), "a cycle")
    low, high = torch.minimum(heads, word), torch.maximum(heads, word)
    crossing = ((low[:, :, None] < low[:, None, :]) & (low[:, None, :] < high[:, :, None])
                & (high[:, :, None] < high[:, None, :]) & real[:, :, None] & real[:, None, :])
    refuse(crossing.any(2), "arcs that cross")


def tree_log_probs(scores, lengths, heads):
    """log q(y | x) = score(y) - log Z of given trees (differentiable; the training loss is its negation).

    scores: [B, N+1, N+1] float; lengths: [B] long; heads: [B, N] long as in `tree_scores`. ValueError when a tree
    is not a single-root projective tree of its sentence. Returns [B] float."""
    scores = working_scores(scores, 3, "[B, N+1, N+1] (head, dependent)")
    lengths = checked_lengths(scores, lengths, "[B, N+1, N+1]")
    heads = torch.as_tensor(heads, device=scores.device).long()
    if heads.shape != (scores.shape[0], scores.shape[1] - 1):
        raise ValueError(f"heads must be [B, N] = {[scores.shape[0], scores.shape[1] - 1]}, got {list(heads.shape)}")
    _check_heads(heads, lengths)
    return tree_scores(scores, heads, lengths) - log_partition(scores, lengths)


# ---- top-down walks: best trees and samples -----------------------------------------------------------------------

def _top_down(chart, root_choices, lengths, per_sentence, pick):
    """Walk the chart from the root down, one tree per row (sentence b's rows are b * per_sentence ...).

    chart, root_choices: from `_inside`; pick: logits [R, K] -> chosen index [R] (argmax for the best tree,
    Gumbel-max for a sample). Returns heads [B * per_sentence, N] long (1-based heads, 0 for the root word, -1 past
    a row's n_b words)."""
    batch, n_max = root_choices.shape
    device = root_choices.device
    sentence = torch.arange(batch, device=device).repeat_interleave(per_sentence)  # [R]
    n = lengths[sentence]
    num_rows = len(sentence)
    rows = torch.arange(num_rows, device=device)
    heads = torch.full((num_rows, n_max), -1, dtype=torch.long, device=device)
    root_word = pick(root_choices[sentence])
    heads[rows, root_word] = 0
    # the stack of chart items still to split (width >= 1); their word ranges are disjoint but for shared ends, so
    # fewer than N are ever open
    kinds = torch.zeros(num_rows, n_max + 1, dtype=torch.long, device=device)
    starts = torch.zeros_like(kinds)
    ends = torch.zeros_like(kinds)
    depth = torch.zeros(num_rows, dtype=torch.long, device=device)

    def push(condition, kind, start, end):
        nonlocal depth
        kinds[rows, depth] = torch.where(condition, kind, kinds[rows, depth])
        starts[rows, depth] = torch.where(condition, start, starts[rows, depth])
        ends[rows, depth] = torch.where(condition, end, ends[rows, depth])
        depth = depth + condition.long()

    push(root_word > 0, torch.full_like(n, _COMPLETE_LEFT), torch.zeros_like(n), root_word)
    push(root_word < n - 1, torch.full_like(n, _COMPLETE_RIGHT), root_word, n - 1)
    cr_start, cr_end = chart["complete_right_start"], chart["complete_right_end"]
    cl_start, cl_end = chart["complete_left_start"], chart["complete_left_end"]
    ir_start, il_end = chart["incomplete_right_start"], chart["incomplete_left_end"]
    offsets = torch.arange(n_max, device=device)[None, :]  # split offset t: [1, N]
    for _ in range(2 * (n_max - 1)):
        active = depth > 0
        top = (depth - 1).clamp(min=0)
        kind = kinds[rows, top]
        i = torch.where(active, starts[rows, top], 0)
        j = torch.where(active, ends[rows, top], 0)  # an idle row reads the harmless item (0, 0)
        depth = depth - active.long()
        w = (j - i)[:, None]
        s, i_, j_ = sentence[:, None], i[:, None], j[:, None]
        # C_r(i, j): I_r(i, i + t) + C_r(i + t, j), 1 <= t <= w
        complete_right = ir_start[s, offsets, i_] + cr_end[s, (w - offsets).clamp(min=0), j_]
        complete_right = complete_right.masked_fill((offsets < 1) | (offsets > w), float("-inf"))
        # C_l(i, j): C_l(i, i + t) + I_l(i + t, j), 0 <= t < w
        complete_left = cl_start[s, offsets, i_] + il_end[s, (w - offsets).clamp(min=0), j_]
        complete_left = complete_left.masked_fill(offsets >= w, float("-inf"))
        # I(i, j), either direction: C_r(i, i + t) + C_l(i + t + 1, j), 0 <= t < w
        incomplete = cr_start[s, offsets, i_] + cl_end[s, (w - 1 - offsets).clamp(min=0), j_]
        incomplete = incomplete.masked_fill(offsets >= w, float("-inf"))
        choices = torch.where((kind == _COMPLETE_RIGHT)[:, None], complete_right,
                              torch.where((kind == _COMPLETE_LEFT)[:, None], complete_left, incomplete))
        k = i + pick(choices)
        is_cr, is_cl = active & (kind == _COMPLETE_RIGHT), active & (kind == _COMPLETE_LEFT)
        is_ir, is_il = active & (kind == _INCOMPLETE_RIGHT), active & (kind == _INCOMPLETE_LEFT)
        # an incomplete span holds an arc: i -> j or j -> i (heads are 1-based positions)
        dependent = torch.where(is_ir, j, i)
        head = torch.where(is_ir, i + 1, j + 1)
        heads[rows, dependent] = torch.where(is_ir | is_il, head, heads[rows, dependent])
        push(is_cr, torch.full_like(k, _INCOMPLETE_RIGHT), i, k)
        push(is_cr & (j > k), torch.full_like(k, _COMPLETE_RIGHT), k, j)
        push(is_cl & (k > i), torch.full_like(k, _COMPLETE_LEFT), i, k)
        push(is_cl, torch.full_like(k, _INCOMPLETE_LEFT), k, j)
        push((is_ir | is_il) & (k > i), torch.full_like(k, _COMPLETE_RIGHT), i, k)
        push((is_ir | is_il) & (j > k + 1), torch.full_like(k, _COMPLETE_LEFT), k + 1, j)
    return heads


def _as_lists(heads, lengths_of_rows):
    return [row[:n] for row, n in zip(heads.tolist(), lengths_of_rows.tolist())]


def best_trees(scores, lengths):
    """The highest-scoring single-root projective tree of each sentence (Eisner's Viterbi).

    scores: [B, N+1, N+1] float; lengths: [B] long. Returns a list over b of (heads, score): heads a list of n_b
    python ints (heads[d - 1] the head of word d, 0 for the root word), score a float."""
    scores = working_scores(scores, 3, "[B, N+1, N+1] (head, dependent)")
    lengths = checked_lengths(scores, lengths, "[B, N+1, N+1]")
    with torch.no_grad():
        words, root = _arc_scores(scores, lengths)
        chart, root_choices = _inside(words, root, lengths, maximum)
        heads = _top_down(chart, root_choices, lengths, 1, lambda logits: logits.argmax(-1))
        totals = tree_scores(scores, heads, lengths)
    return list(zip(_as_lists(heads, lengths), totals.tolist()))


def sample_trees(scores, lengths, num_samples=1, generator=None):
    """Exact independent samples from q(y | x), by backward (top-down) sampling through Eisner's inside chart.

    scores: [B, N+1, N+1] float; lengths: [B] long; num_samples: samples per sentence; generator: a torch.Generator
    for reproducible draws. Returns a list over b of a list of num_samples (heads, log_q): heads as in
    `best_trees`, log_q = score(y) - log Z a float."""
    if int(num_samples) < 1:
        raise ValueError(f"num_samples must be at least 1, got {num_samples}")
    num_samples = int(num_samples)
    scores = working_scores(scores, 3, "[B, N+1, N+1] (head, dependent)")
    lengths = checked_lengths(scores, lengths, "[B, N+1, N+1]")
    with torch.no_grad():
        words, root = _arc_scores(scores, lengths)
        chart, root_choices = _inside(words, root, lengths, log_sum)
        log_z = torch.logsumexp(root_choices, -1)
        heads = _top_down(chart, root_choices, lengths, num_samples, gumbel_max_sampler(generator))
        sentence = torch.arange(len(lengths), device=scores.device).repeat_interleave(num_samples)
        log_q = _arc_sums(scores, sentence, heads, lengths[sentence]) - log_z[sentence]
    trees = list(zip(_as_lists(heads, lengths[sentence]), log_q.tolist()))
    return [trees[b * num_samples:(b + 1) * num_samples] for b in range(len(lengths))]


__all__ = ["best_trees", "log_partition", "sample_trees", "tree_log_probs", "tree_scores"]
