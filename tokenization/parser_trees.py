"""Trees as a span CRF parser reads and writes them: n-ary constituency trees <-> labelled binary bracketings.

A constituency proposal parser (modeling/span_crf.py) scores binary trees over fenceposts 0..n, one label per
span, every span of the tree included (the n one-word spans, the whole sentence and the n - 2 between). A
treebank tree becomes such a bracketing in three steps, each undone exactly on the way back:

1. POS tags are taken off (`split_tags`): the parser predicts them beside the tree, not inside it.
2. Unary chains collapse into one label joined by CHAIN_SEPARATOR: `(S (VP (VB Go) ...))` labels the span of the VP
   `S+VP`; a constituent over a single word labels that word's one-word span (`(NP it)`: NP on (i, i + 1)). A word
   that is no constituent of its own gets NO_CONSTITUENT on its one-word span.
3. Left binarization: a constituent with children c1 ... cm (m > 2) becomes (((c1 c2) c3) ... cm), each added node
   labelled BINARIZED. The added nodes are always left children, so a bracketing whose BINARIZED spans are all
   left children is the image of exactly one n-ary tree (the span CRF allows BINARIZED on left children only):
   the CRF's q(y | x) is then a distribution over n-ary trees, and distinct samples are distinct trees.

Unlabelled trees (paper 003's) have no unary chains and every constituent labelled UNLABELLED; a labelled tree is
unlabelled by `remove_unary_chains` and dropping its labels, as paper 003's tokenizer does.

This file is hub code: it is copied into parser checkpoints and imports nothing from hf_slm.
"""

from bisect import bisect_left

from .tree_type import Tree
from .trees import drop_preterminals, escape_word, has_preterminals, remove_unary_chains, tree_to_string

CHAIN_SEPARATOR = "+"
# The label of a node added by left binarization; it never labels a right child or the whole sentence.
BINARIZED = "<binarized>"
# The label of a one-word span whose word is no constituent of its own.
NO_CONSTITUENT = "<word>"
# The one label of an unlabelled tree's constituents.
UNLABELLED = "<constituent>"
RESERVED_LABELS = (BINARIZED, NO_CONSTITUENT, UNLABELLED)
# Span kinds, as the span CRF's `allowed` rows are indexed: a one-word span that is not the whole sentence, a span
# of two words or more that is not the whole sentence, the whole sentence.
ONE_WORD, INNER, SENTENCE = 0, 1, 2


def span_kind(start, end, length):
    """The kind (ONE_WORD, INNER, SENTENCE) of the span (start, end) in a sentence of `length` words."""
    if start == 0 and end == length:
        return SENTENCE
    return ONE_WORD if end - start == 1 else INNER


def check_label(label, where="tree"):
    """A treebank label the bracketings can carry: not empty, none of the reserved ones, no CHAIN_SEPARATOR."""
    if not label or CHAIN_SEPARATOR in label or label in RESERVED_LABELS:
        raise ValueError(f"{where}: label {label!r} cannot be read: expected a non-empty label without "
                         f"{CHAIN_SEPARATOR!r} that is none of {list(RESERVED_LABELS)}")


def split_tags(tree):
    """(the tree without POS preterminals, the tags in word order) of a tree with a POS tag over every word."""
    if not has_preterminals(tree):
        raise ValueError(f"tree {tree_to_string(tree)[:60]!r} has a word without a POS tag over it alone; expected "
                         "a tag over every word")
    return drop_preterminals(tree), [tag for _, tag in tree.pos()]


def _collapse_chain(node, labelled, where):
    """(the chain's label, the lowest node of the unary chain starting at `node`)."""
    labels = [node.label()]
    while len(node) == 1 and isinstance(node[0], Tree):
        node = node[0]
        labels.append(node.label())
    if not labelled:
        return UNLABELLED, node
    for label in labels:
        check_label(label, where)
    return CHAIN_SEPARATOR.join(labels), node


def tree_to_spans(tree, labelled=True, where="tree"):
    """(words, spans) of a tree without POS tags: spans [(start, end, label)] in pre-order, the 2n - 1 spans of its
    left-binarized, chain-collapsed form (module docstring). Unlabelled: unary chains are removed first and every
    constituent is UNLABELLED."""
    if not isinstance(tree, Tree):
        raise ValueError(f"{where}: {tree!r} is a word, not a tree; expected a constituent over the words")
    if not labelled:
        tree = remove_unary_chains(tree)
    words, spans = [], []

    def visit(node):  # returns the node's end; appends its spans in pre-order
        start = len(words)
        label, node = _collapse_chain(node, labelled, where)
        at = len(spans)
        spans.append(None)  # the node's own span, filled once its end is known
        if len(node) == 1:  # a chain ending in one word: the word's own span carries the chain
            words.append(node[0])
            spans[at] = (start, start + 1, label)
            return start + 1
        ends = []
        for child in node:
            if isinstance(child, Tree):
                ends.append(visit(child))
            else:
                spans.append((len(words), len(words) + 1, NO_CONSTITUENT))
                words.append(child)
                ends.append(len(words))
        # (((c1 c2) c3) ... cm): the added nodes end after c2 ... c(m-1) and come before c1's spans in pre-order
        spans[at + 1 : at + 1] = [(start, end, BINARIZED) for end in reversed(ends[1:-1])]
        spans[at] = (start, ends[-1], label)
        return ends[-1]

    visit(tree)
    return words, spans


def check_spans(spans, length, where="spans"):
    """{(start, end): (label, the split of its children or None)} of `spans`; a ValueError unless they are the
    2n - 1 spans of one binary tree over `length` words, BINARIZED only on left children and never on the whole
    sentence, NO_CONSTITUENT only on one-word spans.

    The tree is walked from the whole sentence down: a span's left child is the longest span that starts where it
    starts and ends before it ends, its right child the rest. 2n - 1 distinct spans whose walk meets only spans of
    the set are exactly one binary tree (the walk of any binary tree meets 2n - 1 spans)."""
    by_span, ends = {}, {}
    for start, end, label in spans:
        if not 0 <= start < end <= length or (start, end) in by_span:
            raise ValueError(f"{where}: span ({start}, {end}) is outside 0..{length} or given twice")
        if label == NO_CONSTITUENT and end - start != 1:
            raise ValueError(f"{where}: {NO_CONSTITUENT} on ({start}, {end}), a span of several words")
        by_span[(start, end)] = label
        ends.setdefault(start, []).append(end)
    if len(by_span) != 2 * length - 1 or (0, length) not in by_span:
        raise ValueError(f"{where}: {len(by_span)} spans; expected the {2 * length - 1} spans of a binary tree over "
                         f"{length} words, the whole sentence included")
    if by_span[(0, length)] in (BINARIZED, NO_CONSTITUENT):
        raise ValueError(f"{where}: the whole sentence is labelled {by_span[(0, length)]}; expected a constituent")
    for starting_here in ends.values():
        starting_here.sort()
    tree, pending = {}, [(0, length)]
    while pending:
        start, end = pending.pop()
        split = None
        if end - start > 1:
            shorter = ends[start][: bisect_left(ends[start], end)]
            split = shorter[-1] if shorter else None
            if split is None or (split, end) not in by_span:
                raise ValueError(f"{where}: span ({start}, {end}) has no two child spans; expected a binary tree")
            if by_span[(split, end)] == BINARIZED:
                raise ValueError(f"{where}: {BINARIZED} on the right child ({split}, {end})")
            pending += [(start, split), (split, end)]
        tree[(start, end)] = (by_span[(start, end)], split)
    return tree


def _chain(label, children):
    """The nodes of a collapsed chain label over `children`: `S+VP` -> (S (VP children))."""
    for name in reversed(label.split(CHAIN_SEPARATOR)):
        children = [Tree(name, children)]
    return children[0]


def spans_to_tree(words, spans, tags=None, where="spans"):
    """The n-ary tree of a bracketing (`tree_to_spans`'s inverse): BINARIZED nodes spliced into their parents,
    chains expanded, NO_CONSTITUENT words bare; with `tags`, each word under its POS tag. UNLABELLED constituents
    keep that label (`unlabelled_string` writes them)."""
    length = len(words)
    tree = check_spans(spans, length, where)
    leaves = [Tree(tag, [word]) for tag, word in zip(tags, words)] if tags is not None else list(words)

    def build(start, end):  # the nodes the span contributes to its parent's children
        label, split = tree[(start, end)]
        children = [leaves[start]] if split is None else build(start, split) + build(split, end)
        if label in (BINARIZED, NO_CONSTITUENT):
            return children
        return [_chain(label, children)]

    return build(0, length)[0]


def unlabelled_string(tree):
    """`( ( Write ( an essay ) ) quickly )`, paper 003's unlabelled trees (words escaped, `(` -> -LRB-)."""
    if not isinstance(tree, Tree):
        return escape_word(tree)
    return " ".join(["("] + [unlabelled_string(child) for child in tree] + [")"])


def bracketed_string(tree, labelled=True):
    """The tree on one line: PTB brackets, or unlabelled brackets."""
    return tree_to_string(tree) if labelled else unlabelled_string(tree)
