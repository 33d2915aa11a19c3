"""Trees <-> action sequences, each linearization with an exact inverse.

Actions are strings: an opening nonterminal `(NP`, a word, a closing nonterminal `NP)` (labeled) or `)`
(unlabeled). Trees are POS-free nltk.Tree objects (see trees.normalize_tree).

- top-down labeled (Choe and Charniak 2016; TG, TXL (CC)): `(S (NP the bird NP) (VP sings VP) S)`
- top-down unlabeled (paper 003 "Dn"): `(S (NP the bird ) (VP sings ) )`; closing brackets carry no label
- bottom-up (paper 003 "Up"): `the bird ) sings ) )` with, for every `)`, the index (into the action list)
  of the first action of the constituent it closes; binary trees do not need it, non-binary trees do
- terminals only: the words
"""

from .tree_type import MAX_TREE_DEPTH, Tree, TreeTooDeep

UNLABELED_CLOSE = ")"


def is_open_nt(action):
    return len(action) > 1 and action[0] == "("


def is_close_nt(action):
    return action == UNLABELED_CLOSE or (len(action) > 1 and action[-1] == ")" and action[0] != "(")


def open_label(action):
    return action[1:]


def close_label(action):
    return action[:-1]


def _context(actions, index, width=3):
    """The actions around `index`, for error messages."""
    return " ".join(str(action) for action in actions[max(index - width, 0) : index + width + 1])


def _check_label(label):
    # An empty label would read back as the word `(` and an unlabeled `)`; brackets or spaces inside a
    # label would read back as other actions (PTB labels such as `PRP$`, `-LRB-`, `S|<NP-VP>` are fine).
    if not isinstance(label, str) or not label or any(c in "()" or c.isspace() for c in label):
        raise ValueError(
            f"nonterminal label {label!r} cannot be linearized: expected a non-empty string without brackets "
            "or whitespace"
        )


def _require_tree(tree):
    """Refuse a string where a linearization takes a tree: a tree written as text is read first, a word has no
    structure to linearize."""
    if not isinstance(tree, str):
        return
    shown = tree if len(tree) <= 60 else tree[:60] + "..."
    if "(" in tree or ")" in tree:
        raise ValueError(f"expected a tree, got the string {shown!r} (a tree written as text?): read it first "
                         "with read_tree_string (an action sequence or PTB brackets) or parse_tree (PTB brackets)")
    raise ValueError(f"expected a tree, got the bare word {shown!r}")


def _check_word(word, top_down):
    if not word or any(c.isspace() for c in word):
        raise ValueError(f"word {word!r} cannot be linearized: expected a non-empty string without whitespace")
    if word == UNLABELED_CLOSE or (top_down and (is_open_nt(word) or is_close_nt(word))):
        raise ValueError(f"word {word!r} would read back as a bracket action, not a word")


def top_down_actions(tree, labeled=True):
    """Pre-order: `(X` before the children, `X)` (or `)` when unlabeled) after them.

    Raises ValueError for a label or word that would not read back as itself (an empty label, a word
    such as `(a` or `a)`).
    """
    actions = []

    def visit(node):
        if isinstance(node, str):
            _check_word(node, top_down=True)
            actions.append(node)
            return
        _check_label(node.label())
        actions.append("(" + node.label())
        for child in node:
            visit(child)
        actions.append(node.label() + ")" if labeled else UNLABELED_CLOSE)

    _require_tree(tree)
    visit(tree)
    return actions


def tree_from_top_down(actions):
    """Inverse of `top_down_actions`; a labeled closing action must match its opening label.

    Raises ValueError naming the action index, the action and its context when the sequence is not one
    well-formed tree.
    """
    stack = []  # open constituents: [label, children]
    root = None

    def error(index, message):
        return ValueError(f"action {index} ({actions[index]!r}) in {_context(actions, index)!r}: {message}")

    for index, action in enumerate(actions):
        if root is not None:
            raise error(index, "the tree is already complete, expected no more actions")
        if is_open_nt(action):
            if len(stack) == MAX_TREE_DEPTH:
                raise TreeTooDeep(f"action {index} ({action!r}) in {_context(actions, index)!r}: the tree is nested "
                                  f"more than {MAX_TREE_DEPTH} constituents deep; expected at most {MAX_TREE_DEPTH} "
                                  "(hf-slm's tree functions recurse once per level)")
            stack.append((open_label(action), []))
        elif is_close_nt(action):
            if not stack:
                raise error(index, "closing bracket with no open constituent")
            label, children = stack.pop()
            if action != UNLABELED_CLOSE and close_label(action) != label:
                raise error(index, f"closes {label!r}, expected {label + ')'!r} or ')'")
            if not children:
                raise error(index, f"constituent {label!r} is empty, expected a word or constituent")
            node = Tree(label, children)
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
        else:
            if not stack:
                raise error(index, "word outside any constituent, expected an opening '(X' first")
            stack[-1][1].append(action)
    if root is None:
        if not stack:
            raise ValueError(f"no tree in {list(actions)[:8]!r}: expected an opening '(X' action")
        raise ValueError(
            f"actions end with {len(stack)} unclosed constituent(s) ({stack[-1][0]!r} innermost): "
            f"{list(actions)[-5:]!r}, expected closing brackets"
        )
    return root


def bottom_up_actions(tree):
    """Post-order: the words, and `)` after the last child of every constituent.

    Returns (actions, starts): starts[k] is, for a `)` at index k, the index of the first action of the
    constituent it closes, and None for words.
    """
    actions, starts = [], []

    def visit(node):
        first = len(actions)
        if isinstance(node, str):
            _check_word(node, top_down=False)
            actions.append(node)
            starts.append(None)
            return
        for child in node:
            visit(child)
        actions.append(UNLABELED_CLOSE)
        starts.append(first)

    _require_tree(tree)
    visit(tree)
    return actions, starts


def tree_from_bottom_up(actions, starts, label="X"):
    """Inverse of `bottom_up_actions` (labels are not part of the linearization: every node gets `label`).

    Raises ValueError naming the action index when a start is missing, given for a word, or not the
    start of one of the items still open (an infeasible start), or when the actions leave more than one
    item.
    """
    if len(actions) != len(starts):
        raise ValueError(f"{len(actions)} actions but {len(starts)} start positions, expected one per action")
    items = []  # completed items not yet inside a closed constituent: (start index, node); starts increase
    for index, (action, start) in enumerate(zip(actions, starts)):
        if action != UNLABELED_CLOSE:
            if start is not None:
                raise ValueError(
                    f"action {index} ({action!r}) in {_context(actions, index)!r}: a word has start {start!r}, "
                    "expected None"
                )
            items.append((index, action))
            continue
        feasible = [item[0] for item in items]
        if start is None or start not in feasible:
            where = f"action {index} (')') in {_context(actions, index)!r}"
            if start is None:
                raise ValueError(f"{where}: missing the start position it closes")
            raise ValueError(f"{where}: start {start!r} is not one of the feasible starts {feasible}")
        first = feasible.index(start)
        taken = items[first:]
        del items[first:]
        items.append((start, Tree(label, [node for _, node in taken])))
    if len(items) != 1 or isinstance(items[0][1], str):
        raise ValueError(
            f"bottom-up actions {list(actions)[-5:]!r} leave {len(items)} item(s), expected one closed tree"
        )
    return items[0][1]


def bottom_up_pointers(actions, starts):
    """The start of every `)` as paper 003 (section 2.2) points at it: the item its constituent begins with, a
    token or the `)` of a closed constituent (C_k holds only those); None for words. `starts` are those of
    `bottom_up_actions` (the first action of each constituent); indices are into `actions`.

    `Write an essay ) quickly )` points from its `)`s to `an` (1) and `Write` (0), as the starts do; in
    `a b ) c )` the root begins with the constituent `a b )`, so its pointer is 2 where its start is 0.
    Raises ValueError as `tree_from_bottom_up` does for a start that is not one of an item still open.
    """
    if len(actions) != len(starts):
        raise ValueError(f"{len(actions)} actions but {len(starts)} start positions, expected one per action")
    items = []  # the items not yet inside a closed constituent: (first action, pointer to it)
    pointers = []
    for index, start in enumerate(starts):
        if actions[index] != UNLABELED_CLOSE:
            items.append((index, index))
            pointers.append(None)
            continue
        firsts = [first for first, _ in items]
        if start not in firsts:
            raise ValueError(f"action {index} (')') in {_context(actions, index)!r}: start {start!r} is not one of "
                             f"the feasible starts {firsts}")
        taken = firsts.index(start)
        pointers.append(items[taken][1])
        del items[taken:]
        items.append((start, index))
    return pointers


def terminal_actions(tree):
    return list(tree.leaves())


def parse_action_string(text):
    """Split `(S (NP the bird NP) S)` into actions. Each whitespace-separated token is one action."""
    return text.split()


def unlabel(tree, label="X"):
    """The tree with every nonterminal relabeled, for comparing unlabeled linearizations."""
    if isinstance(tree, str):
        return tree
    return Tree(label, [unlabel(child, label) for child in tree])
