"""Hypothesis strategies for random POS-free constituency trees (shared by the tree and linearizer tests), and
`assert_positions_equal_sequence` (a grammar's step form against its whole-sequence form).

The shape of a tree is read from one drawn byte string rather than from one draw per node: hypothesis pays a
fixed cost per draw, and drawing node by node made the property tests ~10x slower. Shrinking still works
(shorter, smaller byte strings give smaller trees), and labels and words still include hypothesis-drawn text.
"""

import numpy as np
from hypothesis import strategies as st

from nltk import Tree

from hf_slm.tokenization.dependency_trees import DependencyTree

# Labels of every spelling the readers must keep verbatim.
ODD_LABELS = [
    "S", "NP", "VP", "PP", "X", "ROOT", "PRP$", "WP$", "-LRB-", "-RRB-", "-NONE-", "NP-SBJ", "NP-SBJ-1", "NP=2",
    "S|<NP-VP>", "NP|<DT-JJ>", ":", ",", ".", "``", "''", "HYPH", "$", "#",
]  # fmt: skip
COMMON_WORDS = ["the", "bird", "sings", "-", "--", ".", ",", "$", "'s", "*T*-1", "NP", "S-1", "x=y", "-LRB-", "é"]

# Any character but brackets and whitespace: every character that str.isspace() or re's \s matches is in one
# of the excluded categories (checked over all of Unicode); surrogates cannot be encoded.
NON_SPACE_CHARACTERS = st.characters(exclude_characters="()", exclude_categories=("Zs", "Zl", "Zp", "Cc", "Cs"))
TOKENS = st.text(NON_SPACE_CHARACTERS, min_size=1, max_size=8)


@st.composite
def random_trees(draw, max_depth=10, max_children=8, max_nodes=80, labels=None, words=None):
    """A random POS-free nltk.Tree: nesting up to `max_depth` constituents, fan-out up to `max_children`,
    unary chains (also over a single word), labels from ODD_LABELS plus drawn text, words that are any
    non-empty strings without whitespace or brackets."""
    shape = draw(st.binary(min_size=16, max_size=400))
    extra = draw(st.lists(TOKENS, max_size=6))
    labels = (ODD_LABELS if labels is None else labels) + extra
    words = (COMMON_WORDS if words is None else words) + extra
    position = 0

    def byte():
        nonlocal position
        position += 1
        return shape[position - 1] if position <= len(shape) else 0

    budget = 1 + byte() % max_nodes  # nodes (constituents and words) still to place, roughly

    def node(depth):
        nonlocal budget
        budget -= 1
        label = labels[byte() % len(labels)]
        if depth < max_depth and budget > 0 and byte() % 6 == 1:
            return Tree(label, [node(depth + 1)])  # a unary chain link
        children = []
        for _ in range(1 + byte() % max_children):
            if depth < max_depth and budget > 0 and byte() % 2:
                children.append(node(depth + 1))
            else:
                budget -= 1
                children.append(words[byte() % len(words)])
        return Tree(label, children)

    return node(1)


def action_vocabulary_trees(**kwargs):
    """random_trees whose words the test ActionVocabulary can hold: it refuses a word spelling `<pad>`, `<s>`
    or `</s>` (tested in mistake_cases_options)."""
    from hf_slm.families.action_vocab import SPECIAL_TOKENS

    return random_trees(**kwargs).filter(lambda tree: not set(SPECIAL_TOKENS) & set(tree.leaves()))


def assert_positions_equal_sequence(positions, seq, ignore_index=-100):
    """The step form's positions (grammar.step's NewPositions, in order) equal the whole-sequence form `seq`
    (grammar.sequence): count, mask, relative positions, ids, kinds, and which positions predict."""
    n = len(positions)
    assert n == len(seq.input_ids)
    mask = np.zeros((n, n), dtype=bool)
    relative = np.zeros((n, n), dtype=np.int64)
    for row, position in enumerate(positions):
        mask[row, position.attended] = True
        relative[row, position.attended] = position.relative_positions
    assert (mask == seq.attention_mask).all()
    assert (relative == seq.relative_positions).all()
    assert [p.input_id for p in positions] == seq.input_ids.tolist()
    assert [p.kind for p in positions] == seq.position_kinds.tolist()
    predicts = np.array([p.predicts for p in positions])
    assert ((seq.labels != ignore_index) == np.append(predicts[:-1], False)).all()


@st.composite
def projective_trees(draw, max_words=30):
    """A random projective tree: a head for the span, its dependents' spans to its left and right, recursively
    (every tree made this way is projective, and every projective tree can be made)."""
    count = draw(st.integers(1, max_words))
    shape = draw(st.binary(min_size=2 * count, max_size=2 * count))
    heads = [0] * (count + 1)
    position = 0

    def byte():
        nonlocal position
        position += 1
        return shape[(position - 1) % len(shape)]

    def build(left, right, parent):  # words left..right (inclusive) under `parent`
        head = left + byte() % (right - left + 1)
        heads[head] = parent
        for start, stop in ((left, head - 1), (head + 1, right)):
            while start <= stop:  # consecutive spans, each one dependent's subtree
                end = start + byte() % (stop - start + 1)
                build(start, end, head)
                start = end + 1

    build(1, count, 0)
    return DependencyTree([f"w{i}" for i in range(1, count + 1)], heads[1:])
