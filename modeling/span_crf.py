"""A labelled binary-bracketing tree CRF (constituency; after Zhang, Zhou and Li 2020): log Z, best tree, exact samples.

A tree of a sentence of n words is a full binary bracketing, every node a span (i, j) of fenceposts 0 <= i < j <= n
(the n one-word spans, the whole sentence and n - 2 others), each carrying one label. Which labels a span may carry
depends on its kind (`allowed[kind, label]`):

- `ONE_WORD`: a span of one word that is not the whole sentence,
- `INNER`: a span of two or more words that is not the whole sentence,
- `SENTENCE`: the whole sentence (for a sentence of one word, its one-word span).

The `dummy` label (the nodes that left binarization adds) may label only the LEFT child of a node: never a right
child, never the whole sentence (nor a one-word span, which as a leaf of a binarized tree is never a binarization
node). score(y) = sum over the spans of y of scores[b, i, j, label]; q(y | x) = exp(score(y) - log Z).

Why the labels cost nothing in the chart: given that a span is in the tree, and whether it is a left or a right
child, its label is chosen independently of everything else. So each span enters the inside algorithm through two
label-summed values, `any label allowed by its kind` (as a left child) and `the same, the dummy excluded` (as a
right child), and the chart is the unlabelled O(N^3) one, vectorized over the batch and over all spans of a width.

Chart layout: for a width w, the split points of all spans (i, i + w) are slices, not gathers, when the left-child
chart is indexed [width, start] and the right-child chart [width, end]: the left child (i, i + t) is
left[t, i] and the right child (i + t, i + w) is right[w - t, i + w], so for all i at once these are
left[1:w, :N + 1 - w] and right[1:w, w:] read backwards over the width.

Sampling and the best tree walk the chart top down, one open span per (sentence, sample) row and step: the root's
label, then for each open span its split point and its children's labels. A tree has n - 1 inner nodes, so a batch
takes max n - 1 steps, each a handful of tensor operations over all rows.

Hub code: imports only torch.
"""

import torch

from .crf_semirings import checked_lengths, gumbel_max_sampler, log_sum, maximum, working_scores

ONE_WORD, INNER, SENTENCE = 0, 1, 2
KIND_NAMES = ("ONE_WORD", "INNER", "SENTENCE")

# log 0 for a label a span may not carry. Finite, not -inf: a span of a kind whose only allowed label is the dummy
# can never be a right child, and a logsumexp over nothing but -inf has a NaN gradient.
_IMPOSSIBLE = -1e30


# ---- inputs -------------------------------------------------------------------------------------------------------

def _check_inputs(scores, lengths, allowed, dummy):
    """The lengths as a long tensor [B] and `allowed` as a bool tensor [3, L], on scores' device; ValueError naming
    what is wrong otherwise."""
    num_labels = scores.shape[3]
    lengths = checked_lengths(scores, lengths, "[B, N+1, N+1, L]")
    allowed = torch.as_tensor(allowed, device=scores.device)
    if allowed.shape != (3, num_labels) or allowed.dtype != torch.bool:
        raise ValueError(f"allowed must be a bool tensor [3, L] = [3, {num_labels}] (kinds ONE_WORD, INNER, "
                         f"SENTENCE), got {tuple(allowed.shape)} {allowed.dtype}")
    for kind, name in enumerate(KIND_NAMES):
        if not bool(allowed[kind].any()):
            raise ValueError(f"allowed[{name}] allows no label: every kind of span needs at least one")
    if dummy is not None:
        if not 0 <= int(dummy) < num_labels:
            raise ValueError(f"dummy = {dummy} is not a label id (0 <= dummy < L = {num_labels})")
        if bool(allowed[SENTENCE, dummy]):
            raise ValueError(f"allowed[SENTENCE, dummy = {dummy}] is True: the dummy (left binarization's node) "
                             "never labels the whole sentence")
        if bool(allowed[ONE_WORD, dummy]):
            raise ValueError(f"allowed[ONE_WORD, dummy = {dummy}] is True: the dummy (left binarization's node) "
                             "never labels a one-word span")
    return lengths, allowed


def _label_scores(scores, lengths, allowed, dummy):
    """The span-label scores each role may use, the disallowed ones set to log 0.

    Returns `as_left` [B, N+1, N+1, L] (a span that is not the whole sentence, as a left child: its kind's labels),
    `as_right` [B, N+1, N+1, L] (the same without the dummy) and `as_root` [B, L] (the whole sentence (0, n_b):
    the SENTENCE kind's labels). Cells outside 0 <= i < j <= n_b are zeroed first: padding may hold anything finite,
    and a huge value would overflow the sums it never belongs to."""
    batch, size = scores.shape[0], scores.shape[1]
    fence = torch.arange(size, device=scores.device)
    width = fence[None, :] - fence[:, None]  # [N+1, N+1]: j - i
    real = (width > 0)[None] & (fence[None, None, :] <= lengths[:, None, None])  # [B, N+1, N+1]
    scores = torch.where(real[..., None], scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
    # a child is never the whole sentence, so its kind follows from its width alone
    child_allowed = allowed[torch.where(width == 1, ONE_WORD, INNER)]  # [N+1, N+1, L]
    as_left = scores.masked_fill(~child_allowed, _IMPOSSIBLE)
    right_allowed = child_allowed.clone()
    if dummy is not None:
        right_allowed[..., dummy] = False
    as_right = scores.masked_fill(~right_allowed, _IMPOSSIBLE)
    as_root = scores[torch.arange(batch, device=scores.device), 0, lengths].masked_fill(~allowed[SENTENCE],
                                                                                          _IMPOSSIBLE)
    return as_left, as_right, as_root


def _inside(as_left, as_right, lengths, reduce):
    """The inside chart, in the semiring of `reduce` (`log_sum`: sums; `maximum`: Viterbi).

    as_left, as_right: [B, N+1, N+1] label-reduced scores of each span as a left / right child.
    Returns `left` [B, N+1, N+1] (left[b, w, i]: the inside score of span (i, i + w) as a left child, its subtree
    and its label included), `right` [B, N+1, N+1] (right[b, w, j]: the same for span (j - w, j) as a right child)
    and `below_root` [B] (the inside score of (0, n_b) without its own label)."""
    batch, size = as_left.shape[0], as_left.shape[1]
    n_max = size - 1
    left = as_left.new_zeros(batch, size, size)
    right = as_left.new_zeros(batch, size, size)
    left[:, 1, :n_max] = as_left.diagonal(1, 1, 2)
    right[:, 1, 1:] = as_right.diagonal(1, 1, 2)
    below_whole = [as_left.new_zeros(batch)]  # below_whole[w - 1]: inside of (0, w) without its label
    for w in range(2, size):
        # [B, w - 1 split offsets t, N + 1 - w starts i]: left child (i, i + t) + right child (i + t, i + w)
        splits = left[:, 1:w, :size - w] + right[:, 1:w, w:].flip(1)
        below = reduce(splits, 1)  # [B, N + 1 - w]
        below_whole.append(below[:, 0])
        if w < n_max:  # the whole chart width is only ever a root
            left[:, w, :size - w] = below + as_left.diagonal(w, 1, 2)
            right[:, w, w:] = below + as_right.diagonal(w, 1, 2)
    below_root = torch.stack(below_whole, 1).gather(1, (lengths - 1)[:, None]).squeeze(1)
    return left, right, below_root


# ---- log Z and tree scores ----------------------------------------------------------------------------------------

def log_partition(scores, lengths, allowed, dummy=None):
    """log Z of each sentence: the logsumexp of score(y) over every allowed tree y (differentiable; its gradient
    with respect to `scores` is the span-label marginals).

    scores: [B, N+1, N+1, L] float, scores[b, i, j, l] of span (i, j) with label l (cells outside
        0 <= i < j <= n_b are ignored); lengths: [B] long, 1 <= n_b <= N; allowed: [3, L] bool (kinds ONE_WORD,
        INNER, SENTENCE); dummy: the label id of binarization nodes (left children only), or None.
    Returns [B] float."""
    scores = working_scores(scores, 4, "[B, N+1, N+1, L]")
    lengths, allowed = _check_inputs(scores, lengths, allowed, dummy)
    as_left, as_right, as_root = _label_scores(scores, lengths, allowed, dummy)
    _, _, below_root = _inside(torch.logsumexp(as_left, -1), torch.logsumexp(as_right, -1), lengths, log_sum)
    return below_root + torch.logsumexp(as_root, -1)


def tree_scores(scores, gold):
    """score(y) of given trees: the sum of the scores of their spans (differentiable).

    scores: [B, N+1, N+1, L] float; gold: [B, N+1, N+1] long, the label id of each span of the tree and -1 at
    every other cell. Returns [B] float."""
    gold = torch.as_tensor(gold, device=scores.device).long()
    if gold.shape != scores.shape[:3]:
        raise ValueError(f"gold must be [B, N+1, N+1] = {list(scores.shape[:3])}, got {list(gold.shape)}")
    picked = scores.gather(-1, gold.clamp(min=0)[..., None]).squeeze(-1)
    return torch.where(gold >= 0, picked, torch.zeros((), dtype=picked.dtype, device=picked.device)).sum((1, 2))


def _check_gold(gold, lengths, allowed, dummy):
    """ValueError naming the sentence when `gold` [B, N+1, N+1] is not an allowed tree of its sentence: a full binary
    bracketing of 0..n_b with labels its spans' kinds allow and the dummy on left children only."""
    batch, size = gold.shape[0], gold.shape[1]
    num_labels = allowed.shape[1]
    fence = torch.arange(size, device=gold.device)
    width = fence[None, :] - fence[:, None]
    present = gold >= 0
    real = (width > 0)[None] & (fence[None, None, :] <= lengths[:, None, None])

    def refuse(bad, what):
        where = torch.nonzero(bad)
        if len(where):
            b = int(where[0, 0])
            raise ValueError(f"gold tree {b} (length {int(lengths[b])}): {what}"
                             + (f" at span {tuple(int(x) for x in where[0, 1:3])}" if where.shape[1] > 2 else ""))

    refuse((gold >= num_labels) | (gold < -1), f"a label id outside -1..{num_labels - 1}")
    refuse(present & ~real, "a span outside 0 <= i < j <= length")
    refuse(present.sum((1, 2)) != 2 * lengths - 1, "not 2 * length - 1 spans, as a binary bracketing has")
    one_word = real & (width == 1)[None]
    refuse(one_word & ~present, "a one-word span is missing")
    batch_index = torch.arange(batch, device=gold.device)
    refuse(~present[batch_index, 0, lengths], "the whole sentence is not a span")
    # crossing brackets: compact each tree's spans into [B, 2N - 1] rows and compare every pair
    flat = present.flatten(1)
    order = torch.where(flat, torch.arange(flat.shape[1], device=gold.device), flat.shape[1]).sort(1).values
    order = order[:, :2 * (size - 1) - 1]
    listed = order < flat.shape[1]
    starts, ends = order.clamp(max=flat.shape[1] - 1) // size, order.clamp(max=flat.shape[1] - 1) % size
    a, b_, c, d = starts[:, :, None], ends[:, :, None], starts[:, None, :], ends[:, None, :]
    crossing = (a < c) & (c < b_) & (b_ < d) & listed[:, :, None] & listed[:, None, :]
    refuse(crossing.any((1, 2)), "two spans cross")
    kind = torch.where(width == 1, ONE_WORD, INNER)[None].expand(batch, size, size).clone()
    kind[batch_index, 0, lengths] = SENTENCE
    refuse(present & ~allowed[kind, gold.clamp(min=0)], "a label its span's kind does not allow")
    if dummy is not None:
        # (k, j) is a right child iff a larger tree span (i, j), i < k, ends where it ends
        longer_ends_here = (present.long().cumsum(1) - present.long()) > 0  # [b, k, j]: some (i, j) with i < k
        refuse(present & (gold == dummy) & longer_ends_here, "the dummy label on a right child")


def tree_log_probs(scores, lengths, allowed, gold, dummy=None):
    """log q(y | x) = score(y) - log Z of given trees (differentiable; the training loss is its negation).

    scores: [B, N+1, N+1, L] float; lengths: [B] long; allowed: [3, L] bool; gold: [B, N+1, N+1] long (label id of
    each span of the tree, -1 elsewhere); dummy: label id or None. ValueError when a gold tree is not an allowed
    tree of its sentence. Returns [B] float."""
    scores = working_scores(scores, 4, "[B, N+1, N+1, L]")
    checked_lengths, checked_allowed = _check_inputs(scores, lengths, allowed, dummy)
    gold = torch.as_tensor(gold, device=scores.device).long()
    if gold.shape != scores.shape[:3]:
        raise ValueError(f"gold must be [B, N+1, N+1] = {list(scores.shape[:3])}, got {list(gold.shape)}")
    _check_gold(gold, checked_lengths, checked_allowed, dummy)
    return tree_scores(scores, gold) - log_partition(scores, checked_lengths, checked_allowed, dummy)


# ---- top-down walks: best trees and samples -----------------------------------------------------------------------

def _top_down(left, right, as_left, as_right, as_root, lengths, per_sentence, pick):
    """Walk the chart from the root down, one tree per row (sentence b's rows are b * per_sentence ...).

    left, right: [B, N+1, N+1] from `_inside`; as_left, as_right: [B, N+1, N+1, L], as_root [B, L] from
    `_label_scores`; pick: logits [R, K] -> chosen index [R] (argmax for the best tree, Gumbel-max for a sample).
    Returns spans [B * per_sentence, 2N - 1, 3] long, rows (i, j, label) in the order chosen, (-1, -1, -1) past a
    row's 2 n_b - 1 spans."""
    batch, size = left.shape[0], left.shape[1]
    n_max = size - 1
    device = left.device
    sentence = torch.arange(batch, device=device).repeat_interleave(per_sentence)  # [R]
    n = lengths[sentence]
    num_rows = len(sentence)
    rows = torch.arange(num_rows, device=device)
    spans = torch.full((num_rows, 2 * n_max - 1, 3), -1, dtype=torch.long, device=device)
    spans[:, 0, 1] = n
    spans[:, 0, 0] = 0
    spans[:, 0, 2] = pick(as_root[sentence])
    # the open spans (two words or more) of each row, still to split; a stack never holds more than N / 2
    open_i = torch.zeros(num_rows, n_max, dtype=torch.long, device=device)
    open_j = torch.zeros(num_rows, n_max, dtype=torch.long, device=device)
    open_j[:, 0] = n
    depth = (n >= 2).long()
    offsets = torch.arange(1, n_max, device=device)  # split k = i + offset
    for step in range(n_max - 1):  # a row splits its n - 1 inner nodes, one a step
        active = depth > 0
        top = (depth - 1).clamp(min=0)
        i = torch.where(active, open_i[rows, top], 0)
        j = torch.where(active, open_j[rows, top], 1)  # an idle row reads the harmless span (0, 1)
        depth = depth - active.long()
        w = j - i
        valid = offsets[None, :] < w[:, None]  # [R, N - 1]
        split_scores = (left[sentence[:, None], offsets[None, :], i[:, None]]
                        + right[sentence[:, None], (w[:, None] - offsets[None, :]).clamp(min=0), j[:, None]])
        k = i + 1 + pick(split_scores.masked_fill(~valid, float("-inf")))
        left_label = pick(as_left[sentence, i, k])
        right_label = pick(as_right[sentence, k, j])
        none = torch.full_like(i, -1)
        spans[:, 1 + 2 * step] = torch.stack([torch.where(active, x, none) for x in (i, k, left_label)], -1)
        spans[:, 2 + 2 * step] = torch.stack([torch.where(active, x, none) for x in (k, j, right_label)], -1)
        for start, end in ((k, j), (i, k)):
            push = active & (end - start >= 2)
            open_i[rows, depth] = torch.where(push, start, open_i[rows, depth])
            open_j[rows, depth] = torch.where(push, end, open_j[rows, depth])
            depth = depth + push.long()
    return spans


def _span_sums(scores, sentence, spans):
    """score(y) [R] of trees given as spans [R, S, 3] (rows of -1 ignored), sentence [R] their batch index."""
    present = spans[..., 0] >= 0
    i, j, label = (spans[..., c].clamp(min=0) for c in range(3))
    picked = scores[sentence[:, None], i, j, label]
    return torch.where(present, picked, torch.zeros((), dtype=picked.dtype, device=picked.device)).sum(1)


def _as_lists(spans, lengths_of_rows, size):
    """Per row, its spans as (i, j, label) tuples of python ints in pre-order (sorted by (i, -j))."""
    key = torch.where(spans[..., 0] >= 0, spans[..., 0] * (size + 1) + (size - spans[..., 1]), size * (size + 2))
    ordered = spans.gather(1, key.argsort(1)[..., None].expand_as(spans))
    return [[tuple(span) for span in row[:2 * n - 1]] for row, n in zip(ordered.tolist(), lengths_of_rows.tolist())]


def best_trees(scores, lengths, allowed, dummy=None):
    """The highest-scoring allowed tree of each sentence (CKY / Viterbi).

    scores: [B, N+1, N+1, L] float; lengths: [B] long; allowed: [3, L] bool; dummy: label id or None.
    Returns a list over b of (spans, score): spans a list of (i, j, label) python ints in pre-order (sorted by
    (i, -j)), score a float."""
    scores = working_scores(scores, 4, "[B, N+1, N+1, L]")
    lengths, allowed = _check_inputs(scores, lengths, allowed, dummy)
    with torch.no_grad():
        as_left, as_right, as_root = _label_scores(scores, lengths, allowed, dummy)
        left, right, _ = _inside(as_left.amax(-1), as_right.amax(-1), lengths, maximum)
        spans = _top_down(left, right, as_left, as_right, as_root, lengths, 1, lambda logits: logits.argmax(-1))
        sentence = torch.arange(len(lengths), device=scores.device)
        totals = _span_sums(scores, sentence, spans)
    return list(zip(_as_lists(spans, lengths, scores.shape[1] - 1), totals.tolist()))


def sample_trees(scores, lengths, allowed, dummy=None, num_samples=1, generator=None):
    """Exact independent samples from q(y | x), by backward (top-down) sampling through the inside chart.

    scores: [B, N+1, N+1, L] float; lengths: [B] long; allowed: [3, L] bool; dummy: label id or None;
    num_samples: samples per sentence; generator: a torch.Generator for reproducible draws.
    Returns a list over b of a list of num_samples (spans, log_q): spans as in `best_trees`, log_q =
    score(y) - log Z a float."""
    if int(num_samples) < 1:
        raise ValueError(f"num_samples must be at least 1, got {num_samples}")
    num_samples = int(num_samples)
    scores = working_scores(scores, 4, "[B, N+1, N+1, L]")
    lengths, allowed = _check_inputs(scores, lengths, allowed, dummy)
    with torch.no_grad():
        as_left, as_right, as_root = _label_scores(scores, lengths, allowed, dummy)
        left, right, below_root = _inside(torch.logsumexp(as_left, -1), torch.logsumexp(as_right, -1), lengths,
                                          log_sum)
        log_z = below_root + torch.logsumexp(as_root, -1)
        spans = _top_down(left, right, as_left, as_right, as_root, lengths, num_samples, gumbel_max_sampler(generator))
        sentence = torch.arange(len(lengths), device=scores.device).repeat_interleave(num_samples)
        log_q = _span_sums(scores, sentence, spans) - log_z[sentence]
    trees = list(zip(_as_lists(spans, lengths[sentence], scores.shape[1] - 1), log_q.tolist()))
    return [trees[b * num_samples:(b + 1) * num_samples] for b in range(len(lengths))]


__all__ = ["INNER", "KIND_NAMES", "ONE_WORD", "SENTENCE", "best_trees", "log_partition", "sample_trees",
           "tree_log_probs", "tree_scores"]
