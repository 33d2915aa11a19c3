"""The tree type: nltk.Tree, or a minimal stand-in when nltk is not installed.

hf-slm depends on nltk (tree transforms, binarization). A checkpoint's hub code, though, must load with only
torch, transformers, tokenizers and sentencepiece: encoding and decoding need nothing of nltk but a labeled
list, so without nltk this small class takes its place and only binarization is unavailable.

MAX_TREE_DEPTH bounds the trees the readers accept (tokenization/trees.py, linearizers.py): the tree functions
recurse once per level.
"""

# The deepest tree read. The recursive normalizations and linearizations take one or two Python frames per level,
# under Python's limit of 1000 with room for their callers; treebanks nest a few dozen levels.
MAX_TREE_DEPTH = 300


class TreeTooDeep(ValueError):
    """A tree nested deeper than MAX_TREE_DEPTH constituents; the message names the depth and where."""


try:
    from nltk import Tree
except ImportError:  # pragma: no cover - exercised by the isolated-load tests

    class Tree(list):
        """A nonterminal: a list of children (Tree or word strings) with a label."""

        def __init__(self, label, children=()):
            super().__init__(children)
            self._label = label

        def label(self):
            return self._label

        def set_label(self, label):
            self._label = label

        def leaves(self):
            return self._leaves_in_order()

        def _leaves_in_order(self):
            words = []
            for child in self:
                if isinstance(child, Tree):
                    words.extend(child._leaves_in_order())
                else:
                    words.append(child)
            return words

        def subtrees(self):
            yield self
            for child in self:
                if isinstance(child, Tree):
                    yield from child.subtrees()

        def copy(self, deep=False):
            if not deep:
                return Tree(self._label, list(self))
            return Tree(self._label, [c.copy(deep=True) if isinstance(c, Tree) else c for c in self])

        def chomsky_normal_form(self, *args, **kwargs):
            raise ImportError("binarizing trees needs nltk: pip install nltk")

        def __eq__(self, other):
            return isinstance(other, Tree) and self._label == other._label and list.__eq__(self, other)

        def __ne__(self, other):
            return not self == other

        __hash__ = None

        def __repr__(self):
            return f"Tree({self._label!r}, {list.__repr__(self)})"
