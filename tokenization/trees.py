"""Reading PTB-style bracketed trees, and the normalizations syntactic LMs are trained on.

Trees are `nltk.Tree` objects whose leaves are word strings. A file may hold one tree or many, each over one
line or several; WSJ .mrg files wrap every tree in an unlabeled root `( (S ...) )` and GUM wraps them in
`(ROOT ...)`. Labels are kept verbatim (`PRP$`, `-LRB-`, `:`, `NP-SBJ-1`, `S|<NP-VP>`) unless an option
strips them.

Normalization order (each step optional, see `normalize_tree`): strip `-NONE-` traces and the constituents
they leave empty, strip function tags and co-indices, binarize (nltk, left factoring), drop POS
preterminals, drop the wrapper root, remove unary chains.

One string given by a user (to the tokenizer, `hf-slm masks`, a line of `eval ppl` data) is an action
sequence, PTB brackets or plain words by the one rule of `input_format`; `read_input`, `read_tree_string`
and `read_words` read it so and check it strictly.

Words are separated by ASCII whitespace only (`check_word_separators`, which every reader of trees and
word-separated text goes through): a UTF-8 byte-order mark that starts a text is dropped, and any other
whitespace character (U+00A0 no-break space, U+2009 thin space, U+200A hair space, U+3000 ...) or invisible
U+200B / U+FEFF inside it is refused, naming the line and column. Whether `New York` joined by a no-break space
is one word or two is the user's to say; either guess would silently change the words a model scores.
Trees nested deeper than MAX_TREE_DEPTH constituents are refused (`TreeTooDeep`) where they are read, naming
the depth and where: the normalizations and linearizations below recurse once per level.
"""

import re
import unicodedata
from pathlib import Path

from .linearizers import tree_from_top_down
from .tree_type import MAX_TREE_DEPTH, Tree, TreeTooDeep

_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
# Labels that are entirely a bracketed symbol (-NONE-, -LRB-, -RRB-) are kept whole by tag stripping.
_SYMBOL_LABEL_RE = re.compile(r"^-[^-]+-$")
_WRAPPER_ROOT_LABELS = ("", "ROOT", "TOP")
_FUNCTION_TAG_RE = re.compile(r"(?<=[^-=])[-=]")


BYTE_ORDER_MARK = "\ufeff"
# Whitespace other than ASCII's (Python's \s also matches U+00A0, U+2009, U+3000, U+0085, U+001C-U+001F ...), and
# the zero-width characters that look like nothing.
_OTHER_SEPARATOR_RE = re.compile(r"[^\S \t\n\r\f\v]|[\u200b\ufeff]")
_ASCII_SPACE_RE = re.compile(r"[ \t\n\r\f\v]")
def check_word_separators(text, source="<string>"):
    """`text` without a leading UTF-8 byte-order mark; a ValueError naming `source`, the line, the column, the
    character and the word it stands in when the text holds whitespace other than ASCII's (module docstring)."""
    if text.startswith(BYTE_ORDER_MARK):
        text = text[1:]
    match = _OTHER_SEPARATOR_RE.search(text)
    if match is None:
        return text
    offset, character = match.start(), match.group()
    line_start = text.rfind("\n", 0, offset) + 1
    where = f"column {offset - line_start + 1}"
    if "\n" in text.rstrip("\n"):
        where = f"line {text.count(chr(10), 0, offset) + 1}, {where}"
    before = _ASCII_SPACE_RE.split(text[line_start:offset])[-1]
    after = _ASCII_SPACE_RE.split(text[offset + 1 : offset + 41], maxsplit=1)[0]
    name = unicodedata.name(character, "a control character")
    raise ValueError(
        f"{source}, {where}: U+{ord(character):04X} ({name}) in {before + character + after!r}; words are separated "
        "by ASCII spaces only: replace it by a space for two words, or by a character that is not whitespace "
        "(e.g. _) for one"
    )


def _snippet(text, start, width=60):
    piece = text[start : start + width].replace("\n", " ")
    return piece + ("..." if start + width < len(text) else "")


def _token_offset(text, token_index):
    """Character offset of the token at `token_index` (errors only: tokenizing with findall is faster)."""
    for index, match in enumerate(_TOKEN_RE.finditer(text)):
        if index == token_index:
            return match.start()
    return len(text)


def _where(text, source, tree_index, token_index):
    """`source, tree i, line l` for the token at `token_index`, plus the offset of that token."""
    offset = _token_offset(text, token_index)
    return f"{source}, tree {tree_index}, line {text.count(chr(10), 0, offset) + 1}", offset


def _parse(text, source):
    """Parse every tree of `text`; return (trees, index of each tree's first token)."""
    # One pass over the tokens with an explicit stack (no recursion, so any depth parses); offsets and line
    # numbers are only computed when reporting an error, which keeps large files linear.
    tokens = _TOKEN_RE.findall(text)
    trees, starts = [], []
    stack = []  # open constituents, innermost last: (label, children, index of the '(' token)
    index, count = 0, len(tokens)

    def error(token_index, message, tree_index=None, context_before=False):
        where, offset = _where(text, source, len(trees) if tree_index is None else tree_index, token_index)
        if context_before:  # show what the stray token follows
            begin = max(offset - 59, 0)
            snippet = ("..." if begin else "") + text[begin : offset + 1].replace("\n", " ")
        else:
            snippet = _snippet(text, offset)
        column = offset - text.rfind("\n", 0, offset)  # 1-based, within the line
        return ValueError(f"{where}: {message} at column {column} in {snippet!r}")

    while index < count:
        token = tokens[index]
        if token == "(":
            if not stack:
                starts.append(index)
            if len(stack) == MAX_TREE_DEPTH:
                where, offset = _where(text, source, len(trees), index)
                column = offset - text.rfind("\n", 0, offset)
                raise TreeTooDeep(f"{where}: the tree is nested more than {MAX_TREE_DEPTH} constituents deep at "
                                  f"column {column}; expected at most {MAX_TREE_DEPTH} (hf-slm's tree functions "
                                  "recurse once per level)")
            if index + 1 < count and tokens[index + 1] not in ("(", ")"):
                stack.append((tokens[index + 1], [], index))
                index += 2
            else:
                stack.append(("", [], index))
                index += 1
        elif token == ")":
            if not stack:
                raise error(
                    index,
                    "unbalanced brackets: extra ')' with no open constituent",
                    tree_index=max(len(trees) - 1, 0),
                    context_before=True,
                )
            label, children, opened = stack.pop()
            if not children:
                if not stack and not label:
                    raise error(opened, "empty tree '()', expected a bracketed tree with at least one word")
                raise error(opened, f"empty constituent {label!r} (no words or constituents inside)")
            node = Tree(label, children)
            if stack:
                stack[-1][1].append(node)
            else:
                trees.append(node)
            index += 1
        else:
            if not stack:
                raise error(index, f"expected '(' to start a tree, found {token!r} outside any brackets")
            stack[-1][1].append(token)
            index += 1
    if stack:
        label = stack[-1][0]
        raise error(
            stack[0][2],
            f"unbalanced brackets: missing ')' ({len(stack)} constituent(s) still open, innermost {label!r})",
        )
    return trees, starts


def parse_trees(text, source="<string>"):
    """Parse every bracketed tree in `text`.

    Returns a list of nltk.Tree. Raises ValueError naming `source`, the tree's index, its line and a
    snippet when brackets are unbalanced, a constituent or tree is empty, or text stands outside brackets.
    (Every constituent must contain something, so every parsed tree has terminals.) Words are separated as
    `check_word_separators` says; a tree deeper than MAX_TREE_DEPTH is a TreeTooDeep error.
    """
    return _parse(check_word_separators(text, source), source)[0]


def parse_tree(text, source="<string>"):
    """Parse exactly one bracketed tree."""
    trees = parse_trees(text, source)
    if len(trees) != 1:
        raise ValueError(f"{source}: expected exactly one tree, found {len(trees)} in {_snippet(text, 0)!r}")
    return trees[0]


# ---- one input string: an action sequence, PTB brackets or plain words ------------------------------------

def labelled_closing(tokens):
    """Index of the first whitespace token `X)` that marks an action sequence (see `input_format`), or None.

    Brackets are paired as PTB brackets pair them (the word right after a `(` is its label); a mark is a token
    `X)` whose bracket closes a constituent labelled X that already holds something (`(IN IN)` is the tag IN
    over the word IN). One pass, no tree is built.
    """
    stack = []  # the open brackets: [label (None until read), number of children so far]
    for index, token in enumerate(tokens):
        word = token[:-1]
        if token.endswith(")") and word and "(" not in word and ")" not in word and stack:
            label, children = stack[-1]
            if label == word and children:
                return index
        for piece in _TOKEN_RE.findall(token):
            if piece == "(":
                if stack and stack[-1][0] is None:
                    stack[-1][0] = ""  # `( (S ...) )`: an unlabeled wrapper
                stack.append([None, 0])
            elif piece == ")":
                if not stack:
                    return None  # unbalanced: the PTB reader says where
                stack.pop()
                if stack:
                    stack[-1][1] += 1
            elif stack and stack[-1][0] is None:
                stack[-1][0] = piece
            elif stack:
                stack[-1][1] += 1
    return None


def input_format(text):
    """The one rule that decides how a string is read: "actions", "ptb" or "words".

    - "actions", a top-down action sequence `(S (NP the bird NP) (VP sings VP) S)`, when one of its
      whitespace-separated tokens is a labelled closing `X)` that closes its own `(X`: pairing the brackets as
      PTB does, the constituent that the token's `)` closes is labelled X and holds something before the
      word X (`(IN IN)` is PTB, the tag IN over the word IN);
    - otherwise "ptb", PTB brackets `(S (NP (DT the) (NN bird)) (VP sings))`, with or without POS tags,
      when it starts with "(";
    - otherwise "words", a sentence of whitespace-separated plain words, which holds no bracket.

    So `(S (NP the bird VP) S)` is an action sequence (its `S)` closes `(S`) that `read_input` refuses,
    because `VP)` closes `(NP`: it is never PTB with the words VP and S. The rule reads a POS-free PTB
    constituent that ends in its own label, `(NP the NP)`, as actions; to read it as PTB, say the format
    (`read_tree_string(text, tree_format="ptb")`, `parse_tree`, or pass an nltk.Tree).
    """
    if labelled_closing(text.split()) is not None:
        return "actions"
    return "ptb" if text.lstrip().startswith("(") else "words"


def refuse_bracketed_tree(text, where, expected):
    """Raise ValueError naming `where` and `expected` when `text` is a constituency tree (PTB brackets or a
    top-down action sequence, by the rule of `input_format`) given to a tokenizer that reads another format."""
    found = input_format(text)
    if found != "words":
        kind = "PTB brackets" if found == "ptb" else "a top-down action sequence"
        raise ValueError(
            f"{where} {_snippet(text.strip(), 0)!r} is {kind}, a constituency tree; this tokenizer reads {expected} "
            "(words that hold brackets go as a list, with is_split_into_words=True)"
        )


def read_words(text, source="<string>"):
    """The words of a plain-word sentence; a word holding a bracket is a ValueError naming its position, as is a
    separator other than ASCII whitespace (`check_word_separators`)."""
    text = check_word_separators(text, source)
    words = text.split()
    for index, word in enumerate(words):
        if "(" in word or ")" in word:
            found = input_format(text)
            looks = "" if found == "words" else f" ({'PTB brackets' if found == 'ptb' else 'an action sequence'}?)"
            raise ValueError(
                f"{source}: word {index} {word!r} contains a bracket, but {_snippet(text.strip(), 0)!r}{looks} is "
                "read as a sentence of plain words, which has none; write a bracket as the Penn Treebank does, "
                "-LRB- or -RRB-"
            )
    return words


def read_tree_string(text, source="<string>", tree_format="auto", **normalize_options):
    """One tree from a string: an action sequence, taken as written, or PTB brackets, normalized with
    `normalize_options` (`normalize_tree`).

    tree_format: "auto" (the rule of `input_format`), "actions" or "ptb". Plain words are a ValueError, as are
    an action sequence that is not one tree (naming the action) and PTB brackets that are not one tree
    (naming the line and column).
    """
    if tree_format not in ("auto", "actions", "ptb"):
        raise ValueError(f"tree_format must be 'auto', 'actions' or 'ptb', got {tree_format!r}")
    text = check_word_separators(text, source)
    found = input_format(text) if tree_format == "auto" else tree_format
    if found == "words":
        raise ValueError(
            f"{source} {_snippet(text.strip(), 0)!r} is plain words; expected a tree: an action sequence "
            "'(S (NP the bird NP) S)' or PTB brackets '(S (NP the bird))'"
        )
    if found == "ptb":
        return normalize_tree(parse_tree(text, source), **normalize_options)
    tokens = text.split()
    try:
        return tree_from_top_down(tokens)
    except ValueError as error:
        mark = labelled_closing(tokens)
        why = "" if mark is None or tree_format != "auto" else (
            f" (its token {mark}, {tokens[mark]!r}, closes {'(' + tokens[mark][:-1]!r})")
        kind = TreeTooDeep if isinstance(error, TreeTooDeep) else ValueError
        raise kind(f"{source} reads as an action sequence{why}, but {error}") from error


def read_input(text, source="<string>", **normalize_options):
    """A string as `input_format` reads it: an nltk.Tree (actions, or PTB normalized with
    `normalize_options`) or a list of words. Errors name `source` and the position (`read_tree_string`,
    `read_words`)."""
    if input_format(text) == "words":
        return read_words(text, source)
    return read_tree_string(text, source, **normalize_options)


def read_tree_file(path, **normalize_options):
    """Read all trees of one file and normalize them (options of `normalize_tree`).

    Errors (a missing file, a malformed tree, a tree that normalization leaves empty) name the file, the
    tree's index and its line.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise ValueError(f"tree file {str(path)!r} {what}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        # Hub code cannot import hf_slm.data.text_files, which says the same for hf-slm's other readers. The whole
        # file was decoded at once, so error.start is an offset in the file.
        data = error.object
        what = ("is gzip-compressed; decompress it first" if data[:2] == b"\x1f\x8b" else
                f"is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); expected PTB brackets")
        raise ValueError(f"tree file {str(path)!r} {what}") from None
    text = check_word_separators(text, f"tree file {str(path)!r}")
    trees, starts = _parse(text, str(path))
    normalized = []
    for tree_index, (tree, start) in enumerate(zip(trees, starts)):
        try:
            normalized.append(normalize_tree(tree, **normalize_options))
        except ValueError as error:
            where, _ = _where(text, str(path), tree_index, start)
            raise ValueError(f"{where}: {error}") from error
    return normalized


def read_trees(paths, **normalize_options):
    """Read and normalize the trees of one path or several, in order.

    A directory means its .mrg files when it has any (a treebank folder also holds READMEs and such), else
    all its files but hidden ones; sorted by name.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    trees = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            files = [p for p in files if p.suffix == ".mrg"] or files
        else:
            files = [path]
        if not files:
            raise ValueError(f"tree directory {str(path)!r} holds no files")
        for file in files:
            trees.extend(read_tree_file(file, **normalize_options))
    return trees


def has_preterminals(tree):
    """True when every word is the only child of its parent, i.e. the tree carries POS tags."""
    stack = [tree]  # an explicit stack: nltk's recursive subtrees() generator is slow on deep trees
    while stack:
        node = stack.pop()
        for child in node:
            if not isinstance(child, Tree):
                if len(node) != 1:
                    return False
            else:
                stack.append(child)
    return True


def remove_traces(tree):
    """Remove `-NONE-` leaves and every constituent left without words. Returns a new tree or None."""
    if tree.label() == "-NONE-":
        return None
    children = []
    for child in tree:
        if isinstance(child, Tree):
            child = remove_traces(child)
            if child is None:
                continue
        children.append(child)
    return Tree(tree.label(), children) if children else None


def strip_function_tag(label):
    """`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`, `PP-LOC-PRD` -> `PP`; `-NONE-`, `-LRB-`, `--` stay whole.

    A binarization label keeps its child list: `NP-SBJ|<DT-JJ>` -> `NP|<DT-JJ>`, `S|<NP-VP>` unchanged.
    """
    if _SYMBOL_LABEL_RE.match(label):
        return label
    head, bar, children = label.partition("|")
    # A tag starts at the first '-' or '=' that follows a character other than '-' / '=' (so `--` stays).
    return _FUNCTION_TAG_RE.split(head, maxsplit=1)[0] + bar + children


def remove_function_tags(tree):
    children = [remove_function_tags(c) if isinstance(c, Tree) else c for c in tree]
    return Tree(strip_function_tag(tree.label()), children)


def drop_preterminals(tree):
    """Replace each POS preterminal `(NN bird)` by its word."""
    children = []
    for child in tree:
        if isinstance(child, Tree) and len(child) == 1 and isinstance(child[0], str):
            children.append(child[0])
        elif isinstance(child, Tree):
            children.append(drop_preterminals(child))
        else:
            children.append(child)
    return Tree(tree.label(), children)


def drop_wrapper_root(tree):
    """`( (S ...) )` and `(ROOT (S ...))` -> `(S ...)`; a wrapper with several children is kept (as ROOT)."""
    if tree.label() in _WRAPPER_ROOT_LABELS:
        if len(tree) == 1 and isinstance(tree[0], Tree):
            return tree[0]
        if tree.label() == "":
            return Tree("ROOT", list(tree))
    return tree


def remove_unary_chains(tree):
    """Replace every constituent with a single child by that child (paper 003, section 2.1).

    `(S (VP Write (NP an essay) (ADVP quickly)))` becomes `(VP Write (NP an essay) quickly)`: a chain of
    single-child constituents is replaced by its lowest member, or by the word it ends in. The root stays a
    constituent: a tree over a single word becomes `(X word)` with X the lowest label of the root chain.
    """
    while len(tree) == 1 and isinstance(tree[0], Tree):
        tree = tree[0]
    return Tree(tree.label(), [_remove_unary_below(child) for child in tree])


def _remove_unary_below(node):
    while isinstance(node, Tree) and len(node) == 1:
        node = node[0]
    if isinstance(node, str):
        return node
    return Tree(node.label(), [_remove_unary_below(child) for child in node])


def left_binarize(tree, horizontal_markov=None):
    """Left-factored Chomsky normal form with nltk: intermediate nodes are labeled `NP|<DT-JJ>`.

    Words directly under phrases would appear in nltk's artificial labels, so POS-free trees get a
    temporary preterminal `_` around each word while binarizing.
    """
    wrapped = not has_preterminals(tree)
    tree = _wrap_words(tree) if wrapped else tree.copy(deep=True)  # nltk binarizes in place
    tree.chomsky_normal_form(factor="left", horzMarkov=horizontal_markov)
    return drop_preterminals(tree) if wrapped else tree


def left_binarize_shape(tree):
    """The shape `left_binarize` gives, without nltk (a checkpoint's tokenizer loads without it): a node with
    children c1 ... cn (n > 2) becomes (((c1 c2) c3) ... cn), each new node labeled as the node it came from (nltk
    names them `NP|<DT-JJ>`). For trees whose labels do not matter (paper 003's unlabeled trees); unary chains
    are kept, as nltk keeps them."""
    if not isinstance(tree, Tree):
        return tree
    children = [left_binarize_shape(child) for child in tree]
    while len(children) > 2:
        children = [Tree(tree.label(), children[:2])] + children[2:]
    return Tree(tree.label(), children)


def _wrap_words(tree):
    return Tree(tree.label(), [_wrap_words(c) if isinstance(c, Tree) else Tree("_", [c]) for c in tree])


def normalize_tree(
    tree,
    *,
    strip_traces=True,
    strip_function_tags=False,
    binarize=False,
    preterminals="auto",
    drop_root=True,
    remove_unary=False,
    horizontal_markov=None,
):
    """Apply the standard preprocessing steps to one tree and return a new tree.

    Args:
        strip_traces: remove `-NONE-` leaves and the constituents they leave empty.
        strip_function_tags: `NP-SBJ-1` -> `NP`.
        binarize: left binarization (nltk CNF, left factoring): every node gets at most two children. nltk
            keeps unary chains; paper 003's Bi trees (binary, no unary chains) also set remove_unary.
        preterminals: "auto" drops POS tags when every word is the only child of its parent; True always
            drops them (the tree has POS tags); False keeps the tree as is (it has no POS tags).
        drop_root: remove an unlabeled, ROOT or TOP wrapper that has a single child.
        remove_unary: remove unary chains (paper 003's non-binary trees).
        horizontal_markov: nltk's horzMarkov for binarization labels (None keeps all siblings).
    """
    if strip_traces:
        stripped = remove_traces(tree)
        if stripped is None:
            raise ValueError(
                f"tree has only -NONE- traces, expected at least one word: {tree_to_string(tree)[:80]!r}"
            )
        tree = stripped
    if strip_function_tags:
        tree = remove_function_tags(tree)
    pos_tagged = has_preterminals(tree) if preterminals == "auto" else bool(preterminals)
    if binarize:
        tree = left_binarize(tree, horizontal_markov)
    if pos_tagged:
        tree = drop_preterminals(tree)
    if drop_root:
        tree = drop_wrapper_root(tree)
    if remove_unary:
        tree = remove_unary_chains(tree)
    return tree


# PTB's escapes for the brackets a word may hold, so that a tree of any words reads back as the same tree.
WORD_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


def escape_word(word):
    """A word as a bracketed tree's leaf: `(` -> `-LRB-`, `)` -> `-RRB-` (PTB), anywhere in the word."""
    for bracket, escaped in WORD_ESCAPES.items():
        word = word.replace(bracket, escaped)
    return word


def tree_to_string(tree):
    """One-line PTB bracketing."""
    if isinstance(tree, str):
        return tree
    return "(" + " ".join([tree.label()] + [tree_to_string(child) for child in tree]) + ")"
