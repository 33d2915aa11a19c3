"""Gold trees for Syntactic Ordered Memory (paper 001, section 3.3 and Figure 4).

- `dependency_to_constituency(words, heads)`: the tree Gamma of Figure 4. Every word with dependents heads one
  constituent made of itself and the constituents of its dependents, in sentence order; a word without
  dependents is a bare leaf. Nodes are labeled "X" (SOM's structure is unlabeled).
- `left_binarize(tree)`: n-ary nodes become left-branching binary nodes, (a b c d) -> (((a b) c) d): the
  "left branching bias" of Figure 4, which the grid view needs (it holds binary trees only).
- `left_branching_tree(words)`: Table 2's "left-branching tree labels" ablation.
- `token_first_siblings(tree, bos=True, eos=False)`: Algorithm 1's first_sibling for each token the model reads:
  `<s>` (None), the words, and `</s>` when the sequence has one. `<s>` and the sentence form one constituent
  below the initial context; `</s>` closes the whole sequence, so both point at token 0. See
  modeling/som_structure.py for the grid conventions.
- `piece_first_siblings(word_first_siblings, pieces_per_word)`: subword vocabularies. A word of several pieces
  becomes a left-branching constituent of its pieces.

This file is hub code: it imports only its siblings (nltk's Tree when installed, see tree_type.py).
"""

from .dependency_trees import check_heads, crossing_arcs
from .tree_type import Tree

LABEL = "X"


def dependency_to_constituency(words, heads, where="sentence"):
    """Gamma (n-ary) of a projective dependency tree: `heads[i]` is the 1-based head of word i + 1, 0 the root.

    A non-projective tree raises ValueError naming `where` and two crossing arcs (lift it first:
    dependency_trees.lift_to_projective), since a head's constituent would not be a contiguous span.
    """
    words, heads = list(words), list(heads)
    check_heads(words, heads, where)
    crossing = crossing_arcs(heads)
    if crossing is not None:
        raise ValueError(f"{where} is not projective (arcs {crossing[0]} and {crossing[1]} cross, as (head, dependent));"
                         " expected a projective tree: lift it with dependency_trees.lift_to_projective")
    dependents = {position: [] for position in range(len(words) + 1)}
    for dependent, head in enumerate(heads, start=1):
        dependents[head].append(dependent)

    def build(position):
        if not dependents[position]:
            return words[position - 1]
        # the head word and its dependents' constituents in sentence order (dependents are in order already)
        members = sorted(dependents[position] + [position])
        return Tree(LABEL, [words[position - 1] if member == position else build(member) for member in members])

    root = build(dependents[0][0])
    return root if isinstance(root, Tree) else Tree(LABEL, [root])


def left_binarize(tree):
    """A copy of `tree` whose nodes with k > 2 children are nested left-branching binary nodes."""
    if not isinstance(tree, Tree):
        return tree
    children = [left_binarize(child) for child in tree]
    node = children[0]
    if len(children) == 1:
        return Tree(tree.label(), [node])
    for child in children[1:-1]:
        node = Tree(tree.label(), [node, child])
    return Tree(tree.label(), [node, children[-1]])


def left_branching_tree(words):
    """(((w1 w2) w3) ... wn): Table 2's trivial left-branching labels."""
    words = list(words)
    if not words:
        raise ValueError("left_branching_tree: no words; expected at least one")
    node = Tree(LABEL, [words[0]]) if len(words) == 1 else words[0]
    for word in words[1:]:
        node = Tree(LABEL, [node, word])
    return node


def word_first_siblings(tree):
    """first_sibling for each leaf of `tree` (0-based leaf indices; None for the first leaf).

    For an n-ary node, the first leaf of each child but the first points at the node's first leaf: that is
    the smallest constituent containing it without starting at it, also after left binarization."""
    if not isinstance(tree, Tree):
        return [None]
    siblings = [None] * len(tree.leaves())

    def visit(node, start):
        position = start
        for index, child in enumerate(node):
            if index > 0:
                siblings[position] = start
            width = len(child.leaves()) if isinstance(child, Tree) else 1
            if isinstance(child, Tree):
                visit(child, position)
            position += width

    visit(tree, 0)
    return siblings


def token_first_siblings(tree, bos=True, eos=False):
    """first_sibling for `<s>` + the leaves of `tree` (+ `</s>`), as the model reads them (module docstring)."""
    words = word_first_siblings(tree)
    if not bos:
        if eos:
            raise ValueError("token_first_siblings: eos=True needs bos=True (</s> attaches to <s>)")
        return words
    tokens = [None] + [0 if sibling is None else sibling + 1 for sibling in words]
    if eos:
        tokens.append(0)
    return tokens


def piece_first_siblings(first_siblings, pieces_per_word):
    """Token-level first siblings when token i (one of `first_siblings`) is split into `pieces_per_word[i]`
    pieces: the first piece inherits the token's sibling (re-indexed), every other piece points at the first
    piece of its token, which makes ((p1 p2) p3)."""
    if len(first_siblings) != len(pieces_per_word):
        raise ValueError(f"{len(pieces_per_word)} piece counts for {len(first_siblings)} tokens; expected one each")
    starts, position = [], 0
    for count in pieces_per_word:
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"pieces_per_word holds {count!r}; expected positive integers")
        starts.append(position)
        position += count
    result = []
    for sibling, count, start in zip(first_siblings, pieces_per_word, starts):
        result.append(None if sibling is None else starts[sibling])
        result.extend([start] * (count - 1))
    return result


def constituent_spans(tree, offset=0):
    """The (first leaf, last leaf) span of every node of `tree`, leaves included, shifted by `offset` (1 puts
    the words after `<s>`)."""
    found = set()

    def visit(node, start):
        if not isinstance(node, Tree):
            found.add((start + offset, start + offset))
            return 1
        width = 0
        for child in node:
            width += visit(child, start + width)
        found.add((start + offset, start + width - 1 + offset))
        return width

    visit(tree, 0)
    return found
