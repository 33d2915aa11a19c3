"""The tokenizer of paper 003's compositional SLMs: unlabeled trees <-> the action ids of one linearization.

Vocabulary, in contiguous ranges (the fields of modeling/grammars.ActionLayout, `tokenizer.action_layout`), the
same for every linearization, so that one trained vocabulary serves every variant and both baselines:

    0 <pad>, 1 <s>, 2 </s>, 3 <unk>
    [4, open_nt_start)    SentencePiece pieces of the words (as SyntacticTokenizer)
    open_nt_start         `(`   (one id: the trees are unlabeled)
    close_nt_start        `)`

Linearizations (`linearization`, what a model's grammar reads: `grammar.linearization`), paper 003 section 2:
- "nb-dn": non-binary trees (unary chains removed), top-down: `<s> ( Write ( an essay ) quickly )`; the root's
  `)` ends the sequence (the nb-dn-* variants and GPT2-tree);
- "bi-dn": binary trees (unary chains removed, then left-binarized as nltk's CNF), top-down:
  `<s> ( ( Write ( an essay ) ) quickly )`;
- "bi-up": binary trees, bottom-up, and `</s>`: `<s> Write an essay ) ) quickly ) </s>` (each `)` closes the top
  two items, so no start position is needed);
- "nb-up": non-binary trees, bottom-up, and `</s>`: `<s> Write an essay ) quickly ) </s>`; a `)` may close any
  number of items, so each comes with its start (section 2.2): the output field `constituent_starts` [T] holds,
  at each `)`, the index (`<s>` = 0) of the first item it closes (a token, or the `)` of a closed constituent:
  compositional_grammars.py's C_k), -1 elsewhere. `model(**tokenizer(trees))` passes them to the model (the
  grammar needs them to expand the `)`, the start pointer learns from them), and `decode` / `tree_with_words`
  take them (`starts=`) to read a tree back;
- "terminals": the words and `</s>` (GPT2-token).

Trees are over tokens. A word of several pieces is several leaves: under Nb they are siblings, as in TG; under
Bi, where every constituent has two children, the word is a constituent of its own over its pieces, left-
binarized like the rest (`essay` in pieces `es say` is `( es say )` top-down, `es say )` bottom-up), so the
brackets of a word of three or more pieces come between its pieces. Decoding merges them back into the word.

Inputs of `tokenizer(...)`, one or a batch:
- an unlabeled tree written with `(` and `)` as separate tokens, `( ( Write ( an essay ) ) quickly )` (any
  tree form: unary chains are removed and Bi trees binarized at encode time), or an nltk.Tree whose labels
  are all empty;
- plain words (a string without brackets, or a list with `is_split_into_words=True`): `<s>` and the pieces,
  a prompt, without `</s>` (a string without the start token only for GPT2-token, whose sequences are words).
A labeled tree (PTB brackets, labeled actions, an nltk.Tree with labels) is a ValueError that says how to unlabel
it: `tokenizer.unlabel(tree)`; a dependency tree (inline `word/head`, CoNLL-U) is a ValueError too. `encode_actions`
takes the actions of this linearization as written (nb-up: with each `)`'s start; a Bi tokenizer refuses a constituent that is not binary). `decode` gives the unlabeled tree back, between `<s>` (and
`</s>` bottom-up) unless skip_special_tokens; the text it writes encodes to the same ids.

This file is hub code: it imports only its siblings, transformers, sentencepiece and tokenizers (not nltk).
"""

import os

from transformers.utils import PaddingStrategy

from .dependency_trees import refuse_dependency_tree
from .linearizers import UNLABELED_CLOSE, parse_action_string
from .tokenization_slm import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SyntacticTokenizer, ids_encoding, train_piece_model
from .tree_type import Tree
from .trees import (
    check_word_separators, escape_word, left_binarize_shape, read_tree_string, read_trees, remove_unary_chains,
)

OPEN = "("
LINEARIZATIONS = ("bi-dn", "nb-dn", "bi-up", "nb-up", "terminals")
STARTS_FIELD = "constituent_starts"  # Nb-Up: per action, the start of a `)` (-1 elsewhere)


def check_linearization(linearization):
    if linearization not in LINEARIZATIONS:
        raise ValueError(f"linearization {linearization!r} is not one of {list(LINEARIZATIONS)} (paper 003's tree form "
                         "and order, bi/nb-dn/up, or 'terminals' for GPT2-token)")


def is_unlabeled_tree_string(text):
    """Whether `text` is an unlabeled tree as this tokenizer reads it: its `(` stand alone as tokens."""
    return OPEN in text.split()


def closed_from(stack_positions, start, where):
    """Where on the stack a nb-up `)` that starts at position `start` begins: `start` must be the position of an
    item still on the stack (`stack_positions`, bottom first; the pieces of one written word share its position),
    else ValueError naming `where`."""
    if start not in stack_positions:
        raise ValueError(f"{where} starts at {start}, which is no item on the stack {list(dict.fromkeys(stack_positions))}: a `)` closes the "
                         "items from a token or closed constituent not yet subsumed (paper 003's C_k) to the top")
    return stack_positions.index(start)


def has_brackets(text):
    return "(" in text or ")" in text


def unlabeled_string(tree):
    """`( ( Write ( an essay ) ) quickly )`: a tree with its labels left out, words escaped (`(` -> -LRB-)."""
    if not isinstance(tree, Tree):
        return escape_word(tree)
    return " ".join([OPEN] + [unlabeled_string(child) for child in tree] + [UNLABELED_CLOSE])


def parse_unlabeled(text, where="tokenizer input"):
    """The tree of an unlabeled tree string (every label empty); ValueError naming the token when it is not one
    tree."""
    tokens = text.split()
    stack, root = [], None
    for index, token in enumerate(tokens):
        at = f"{where}: token {index} ({token!r})"
        if root is not None:
            raise ValueError(f"{at}: the tree closed before it; expected one tree")
        if token == OPEN:
            stack.append([])
        elif token == UNLABELED_CLOSE:
            if not stack:
                raise ValueError(f"{at} closes nothing: expected an opening `(` before it")
            children = stack.pop()
            if not children:
                raise ValueError(f"{at} closes an empty constituent; expected a word or constituent in it")
            node = Tree("", children)
            if stack:
                stack[-1].append(node)
            else:
                root = node
        elif has_brackets(token):
            raise ValueError(f"{at}: a bracket must stand alone; write the brackets of a word as -LRB- / -RRB-")
        elif not stack:
            raise ValueError(f"{at} stands outside the tree; expected `(` first")
        else:
            stack[-1].append(token)
    if root is None:
        raise ValueError(f"{where}: {len(stack)} constituent(s) left open; expected `)` to close them")
    return root


def _labeled_error(where, shown):
    return ValueError(
        f"{where} {shown} is a labeled tree; paper 003's models read unlabeled trees written with `(` and `)` as "
        "separate tokens, '( ( Write ( an essay ) ) quickly )'. Unlabel it with tokenizer.unlabel(tree) (PTB "
        "brackets, labeled actions or an nltk.Tree: POS tags, traces and a wrapper root go as the tokenizer's "
        "normalization options say, and every label)")


class _Run:
    """Decoding: `count` consecutive pieces of word `word`, not yet the whole word."""

    __slots__ = ("word", "count")

    def __init__(self, word, count):
        self.word, self.count = word, count


class CompositionalTokenizer(SyntacticTokenizer):
    """SentencePiece pieces over the words, plus one `(` and one `)`, for one of paper 003's linearizations.

    Train one with `CompositionalTokenizer.train(trees, vocab_size=..., linearization="bi-up")`; the training
    trees may be labeled (only their words are read). Trees to encode must be unlabeled: `tokenizer.unlabel`.

    Args:
        linearization: "nb-dn", "bi-dn", "bi-up", "nb-up" or "terminals" (module docstring).
        Other arguments: see SyntacticTokenizer (its normalization options apply to `unlabel`).
    """

    def __init__(self, vocab_file=None, linearization="nb-dn", sp_model_proto=None, **kwargs):
        check_linearization(linearization)
        kwargs.pop("nonterminals", None)
        super().__init__(vocab_file=vocab_file, nonterminals=[], linearization="terminals",
                         sp_model_proto=sp_model_proto, **kwargs)
        # `(` and `)` follow the pieces (the base class laid out specials, then pieces).
        for token in (OPEN, UNLABELED_CLOSE):
            self._token_to_id[token] = len(self._id_to_token)
            self._nonterminal_ids[token] = len(self._id_to_token)
            self._id_to_token.append(token)
            self._word_start_mask.append(False)
        self._open_id, self._close_id = self._open_nt_start, self._open_nt_start + 1
        self._close_nt_start = self._close_id
        self.special_tokens_pattern = "none"  # _encode_one adds `<s>` and `</s>` itself
        self.linearization = linearization  # what a model's grammar checks (the base class said "terminals")
        self.init_kwargs["linearization"] = linearization  # and what save_pretrained writes
        self.binary = linearization.startswith("bi-")
        self.top_down = linearization.endswith("-dn")
        self.points_at_starts = linearization == "nb-up"  # each `)` carries its start (section 2.2)

    # ---- vocabulary ---------------------------------------------------------------------------------
    @property
    def action_layout(self):
        """The fields of modeling/grammars.ActionLayout: one `(` and one `)` id."""
        return {"pad_token_id": PAD_ID, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
                "open_nt_start": self._open_id, "open_nt_stop": self._close_id, "close_nt_start": self._close_id,
                "close_nt_stop": self._close_id + 1, "unk_token_id": UNK_ID}

    # ---- trees ----------------------------------------------------------------------------------------
    def unlabel(self, tree):
        """The unlabeled tree string of a labeled tree: PTB brackets (with or without POS tags) or labeled actions,
        normalized with this tokenizer's options (traces, POS tags, the wrapper root), or an nltk.Tree, taken as
        normalized. `tokenizer(tokenizer.unlabel("(S (NP the bird) (VP sings))"))` encodes it."""
        if isinstance(tree, str):
            tree = read_tree_string(tree, "unlabel input", **self.normalization)
        elif not isinstance(tree, Tree):
            raise ValueError(f"unlabel input of type {type(tree).__name__}: expected a bracketed tree string or an "
                             "nltk.Tree")
        return unlabeled_string(tree)

    def _check_unlabeled(self, tree, where):
        labels = sorted({node.label() for node in tree.subtrees()} - {""})
        if labels:
            raise _labeled_error(where, f"(an nltk.Tree with the labels {labels[:5]})")

    def _shaped(self, tree):
        """The tree the linearization writes: unary chains removed (section 2.1), left-binarized for Bi."""
        tree = remove_unary_chains(tree)
        return remove_unary_chains(left_binarize_shape(tree)) if self.binary else tree

    # ---- encoding -----------------------------------------------------------------------------------
    def _word_actions(self, pieces):
        """The ids of one word's pieces, with the brackets of its own constituent when a Bi tree needs them."""
        if not self.binary or len(pieces) == 1:
            return list(pieces), [True] + [False] * (len(pieces) - 1)
        opening = [self._open_id] * (len(pieces) - 1) if self.top_down else []
        ids = opening + [pieces[0]]
        for piece in pieces[1:]:  # left-binarized: ((p1 p2) p3) ...
            ids += [piece, self._close_id]
        return ids, [k == len(opening) for k in range(len(ids))]

    def _tree_ids(self, tree, where):
        """(ids, word_starts, constituent starts) of an unlabeled tree's actions, without `<s>` / `</s>`; a `)`'s
        start is the index of its first item (bottom-up; -1 elsewhere, and everywhere top-down)."""
        if self.linearization == "terminals":
            ids, starts = self._words_ids(tree.leaves(), where)
            return ids, starts, [-1] * len(ids)
        tree = self._shaped(tree)
        ids, starts = [], []
        start_of = {}  # index of a bottom-up `)` -> index of its first item

        def word(text):
            pieces = self._word_ids(text, where=f"{where}: word")
            word_ids, word_starts = self._word_actions(pieces)
            ids.extend(word_ids)
            starts.extend(word_starts)

        def visit(node):
            """Write the node's actions; return the index of the item it is on the stack (bottom-up): its first
            piece for a word (under Nb each piece is an item), its `)` for a constituent."""
            first = len(ids)
            if not isinstance(node, Tree):
                word(node)
                return first
            if self.top_down:
                ids.append(self._open_id)
                starts.append(False)
            items = [visit(child) for child in node]
            ids.append(self._close_id)
            starts.append(False)
            start_of[len(ids) - 1] = items[0]
            return len(ids) - 1

        # A Bi sentence of one word of several pieces: that word's own constituent is the root.
        if self.binary and len(tree) == 1 and len(self._word_ids(tree[0], where=f"{where}: word")) > 1:
            word(tree[0])
        else:
            visit(tree)
        pointers = [start_of.get(index, -1) if not self.top_down else -1 for index in range(len(ids))]
        return ids, starts, pointers

    def _words_ids(self, words, where):
        ids, starts = [], []
        for index, text in enumerate(words):
            pieces = self._word_ids(text, where=f"{where}: word {index}")
            ids.extend(pieces)
            starts.extend([True] + [False] * (len(pieces) - 1))
        return ids, starts

    def _encode_one(self, item, is_split_into_words, add_special_tokens):
        ids, starts, _ = self._encode_with_pointers(item, is_split_into_words, add_special_tokens)
        return ids, starts

    @property
    def action_input_fields(self):
        """Nb-Up: each `)`'s start (constituent_starts) beside the ids; no field for the other linearizations."""
        return (STARTS_FIELD,) if self.points_at_starts else ()

    def _encode_record(self, item, is_split_into_words, add_special_tokens):
        """(ids, word_starts, fields): a Nb-Up tokenizer's fields hold constituent_starts (module docstring)."""
        ids, starts, pointers = self._encode_with_pointers(item, is_split_into_words, add_special_tokens)
        return ids, starts, ({STARTS_FIELD: pointers} if self.points_at_starts else {})

    def _encode_with_pointers(self, item, is_split_into_words, add_special_tokens):
        """(ids, word_starts, constituent starts) of one input (-1 where an action has no start)."""
        where = "tokenizer input"
        tree, written_start, written_end = None, False, False
        if isinstance(item, Tree):
            self._check_unlabeled(item, where)
            tree = item
        elif isinstance(item, str):
            text = check_word_separators(item, where).strip()
            if not is_split_into_words:
                text, written_start, written_end = self._written_bounds(text)
                refuse_dependency_tree(text, where, self._expected_input)
            if not text:
                raise ValueError("empty input: expected an unlabeled tree or words, got an empty string")
            if not is_split_into_words and is_unlabeled_tree_string(text):
                tree = parse_unlabeled(text, where)
            elif not is_split_into_words and has_brackets(text):
                if UNLABELED_CLOSE in text.split():
                    raise ValueError(f"{where} {text[:60]!r} has `)` but no `(`: trees are written top-down, "
                                     "'( ( Write ( an essay ) ) quickly )'; a bottom-up action sequence goes to "
                                     "encode_actions")
                raise _labeled_error(where, repr(text[:60]))
            else:
                words = text.split()
                if not (add_special_tokens or written_start or is_split_into_words):
                    self._check_words_can_stand_alone(text)
        elif isinstance(item, (list, tuple)):
            if not item:
                raise ValueError("empty input: expected at least one word, got an empty list")
            words = list(item)
        else:
            raise ValueError(f"input of type {type(item).__name__} is not supported; expected an unlabeled tree "
                             "string, an nltk.Tree with empty labels or a list of words")
        if tree is not None:
            ids, starts, pointers = self._tree_ids(tree, where)
            ends = [EOS_ID] if (add_special_tokens and not self.top_down) or written_end else []
        else:  # words only: a prompt or a sentence to score
            ids, starts = self._words_ids(words, where)
            pointers, ends = [-1] * len(ids), [EOS_ID] if written_end else []
        pointers, starts, ids = pointers + [-1] * len(ends), starts + [False] * len(ends), ids + ends
        if add_special_tokens or written_start:  # `<s>` comes first: every start moves one on
            pointers = [-1] + [p + 1 if p >= 0 else -1 for p in pointers]
            ids, starts = [BOS_ID] + ids, [False] + starts
        return ids, starts, pointers

    def _document_record(self, sentence, is_split_into_words, position):
        """A document's sentence: a bottom-up tree keeps its `</s>` (the grammar's sentence end), and Nb-Up starts
        index the document's ids."""
        ids, starts, pointers = self._encode_with_pointers(sentence, is_split_into_words, True)
        pointers = [pointer - 1 + position if pointer >= 0 else -1 for pointer in pointers[1:]]  # past the `<s>`
        return ids[1:], starts[1:], ({STARTS_FIELD: pointers} if self.points_at_starts else {})

    def _pad(self, encoded_inputs, max_length=None, padding_strategy=PaddingStrategy.DO_NOT_PAD, pad_to_multiple_of=None,
             padding_side=None, return_attention_mask=None):
        """The base class's padding, plus constituent_starts padded with -1 (no start) on the padding side."""
        pointers = encoded_inputs.pop(STARTS_FIELD, None)
        padded = super()._pad(encoded_inputs, max_length=max_length, padding_strategy=padding_strategy,
                              pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                              return_attention_mask=return_attention_mask)
        if pointers is not None:
            filler = [-1] * (len(padded[self.model_input_names[0]]) - len(pointers))
            side = padding_side if padding_side is not None else self.padding_side
            padded[STARTS_FIELD] = list(pointers) + filler if side == "right" else filler + list(pointers)
        return padded

    def encode_actions(self, actions, add_special_tokens=True, return_word_starts=False, return_tensors=None,
                       starts=None):
        """Encode this linearization's actions as written (a list, or a string split on whitespace): `(`, `)`,
        words, `<s>` and `</s>`; `<s>` is added unless present or add_special_tokens=False. A prefix of a tree
        is accepted. A Bi tokenizer refuses a `)` that does not close two items (ValueError naming it); a word
        of several pieces gets the brackets of its own constituent, as `tokenizer(tree)` gives it.

        nb-up: a `)` as written does not say where its constituent starts (paper 003, section 2.2), so `starts`
        gives, for each `)` in order, the index in `actions` of the first item it closes (a word, or the `)` of
        a closed constituent still on the stack): `encode_actions("Write an essay ) quickly )", starts=[1, 0])`
        is `( Write ( an essay ) quickly )`. The encoding then holds constituent_starts (indices into input_ids),
        as `tokenizer(tree)` gives them; a start that is no item on the stack is a ValueError naming the `)`."""
        if isinstance(actions, str):
            actions = parse_action_string(actions)
        actions = list(actions)
        if not actions:
            raise ValueError("empty action list: expected at least one action")
        closes = actions.count(UNLABELED_CLOSE)
        if self.points_at_starts and (starts is None or len(starts) != closes):
            given = "no starts" if starts is None else f"{len(starts)} starts"
            raise ValueError(f"nb-up actions with {closes} `)` got {given}: a nb-up `)` does not say where its "
                             "constituent starts (paper 003, section 2.2); pass starts=[...] (for each `)`, the "
                             "index in the actions of the first item it closes) or encode the tree with "
                             "tokenizer(tree)")
        if not self.points_at_starts and starts is not None:
            raise ValueError(f"starts= is for nb-up actions; a {self.linearization} `)` implies where it starts")
        self._check_action_shape(actions)
        ids, word_starts, pointers = [], [], []
        first_id = []  # per action, the index in ids of its first id
        stack = []  # nb-up: per item on the stack (each piece of a word is one), the index of its action
        written_starts = iter(starts or ())
        for index, action in enumerate(actions):
            first_id.append(len(ids))
            if action in (OPEN, UNLABELED_CLOSE, self.bos_token, self.eos_token):
                if action == UNLABELED_CLOSE and self.points_at_starts:
                    pointers.append(self._start_id_index(next(written_starts), index, actions, first_id, stack))
                else:
                    pointers.append(-1)
                ids.append(self._token_to_id[action])
                word_starts.append(False)
            elif has_brackets(action):
                raise _labeled_error(f"action {index}", repr(action))
            else:
                word_ids, starts_of_word = self._word_actions(self._word_ids(action, where=f"action {index}"))
                stack.extend([index] * len(word_ids))
                ids.extend(word_ids)
                word_starts.extend(starts_of_word)
                pointers.extend([-1] * len(word_ids))
        if add_special_tokens and ids[0] != BOS_ID:
            ids, word_starts = [BOS_ID] + ids, [False] + word_starts
            pointers = [-1] + [p + 1 if p >= 0 else -1 for p in pointers]
        fields = {STARTS_FIELD: pointers} if self.points_at_starts else {}
        return ids_encoding(ids, word_starts, return_word_starts, return_tensors, fields)

    def _start_id_index(self, start, index, actions, first_id, stack):
        """The ids index of a written nb-up start (an index into `actions`) of the `)` at action `index`, checked
        against the stack (`stack`: the action index of each item, updated for the close); ValueError naming the
        `)`."""
        where = f"action {index} (`)`)"
        if not isinstance(start, int) or not 0 <= start < index or actions[start] in (OPEN, self.bos_token,
                                                                                      self.eos_token):
            raise ValueError(f"{where} starts at {start!r}: expected the index of an earlier word or `)` in the actions")
        del stack[closed_from(stack, start, where):]
        stack.append(index)
        return first_id[start]

    def _check_action_shape(self, actions):
        """A Bi tokenizer's actions close constituents of two items (a one-word sentence's root, one); a top-down
        one's brackets never close more than they opened."""
        open_children, items = [], 0  # Dn: children of each open constituent; Up: items on the stack
        words = sum(1 for a in actions if a not in (OPEN, UNLABELED_CLOSE, self.bos_token, self.eos_token))
        for index, action in enumerate(actions):
            if action in (self.bos_token, self.eos_token):
                continue
            where = f"action {index} ({action!r})"
            if self.top_down and action == OPEN:
                open_children.append(0)
                continue
            if action != UNLABELED_CLOSE:
                if open_children:
                    open_children[-1] += 1
                items += 1
                continue
            if self.top_down:
                if not open_children:
                    raise ValueError(f"{where} closes nothing: expected an opening `(` before it")
                count = open_children.pop()
                if open_children:
                    open_children[-1] += 1
            else:
                count = min(items, 2)
                items -= count - 1
            one_word = count == 1 and words == 1
            if self.binary and count != 2 and not one_word:
                raise ValueError(f"{where} closes a constituent of {count} item(s): a {self.linearization} tokenizer "
                                 "reads binary trees (paper 003's Bi); encode the tree with tokenizer(tree), which "
                                 "binarizes it, or use an nb-* tokenizer")

    # ---- decoding -----------------------------------------------------------------------------------
    def _piece_tree(self, token_ids, starts=None):
        """(tree over piece leaves (word index, piece id), pieces per word) of a whole sequence (nb-up: with the
        constituent starts, indices into token_ids); ValueError when the ids are not one tree of this
        linearization."""
        if self.points_at_starts and (starts is None or len(starts) != len(token_ids)):
            raise ValueError("nb-up ids read back as a tree only with their constituent starts, one per id")
        leaves, words = [], []
        for index in token_ids:
            index = int(index)
            if index in (PAD_ID, BOS_ID, EOS_ID) or index in (self._open_id, self._close_id):
                leaves.append(index)
                continue
            if self._word_start_mask[index] or not words:
                words.append([])
            words[-1].append(index)
            leaves.append((len(words) - 1, index))
        stack, opens = [], []  # items; Dn: where each open constituent's children begin
        item_index = []  # nb-up: the index in token_ids of each item on the stack
        ended = False
        for index, leaf in enumerate(leaves):
            if leaf in (PAD_ID, BOS_ID, EOS_ID):
                ended |= leaf == EOS_ID
                continue
            if ended:
                raise ValueError("actions after `</s>`")
            if leaf == self._open_id:
                if not self.top_down:
                    raise ValueError("a `(` in a bottom-up sequence")
                opens.append(len(stack))
            elif leaf == self._close_id:
                if self.top_down and not opens:
                    raise ValueError("a `)` with no open constituent")
                if self.points_at_starts:
                    begin = closed_from(item_index, int(starts[index]), f"the `)` at {index}")
                else:
                    begin = opens.pop() if self.top_down else max(len(stack) - 2, 0)  # Bi-Up: the top two items
                if begin >= len(stack):
                    raise ValueError("a `)` that closes nothing")
                node = Tree("", stack[begin:])
                del stack[begin:], item_index[begin:]
                stack.append(node)
                item_index.append(index)
            else:
                stack.append(leaf)
                item_index.append(index)
        if opens or len(stack) != 1 or not isinstance(stack[0], Tree):
            raise ValueError("the ids are not one complete tree")
        return stack[0], words

    def _word_tree(self, token_ids, words=(), starts=None):
        """The tree over words of ids (the first ones replaced by `words`, as given; nb-up: with their constituent
        starts); ValueError when a word's pieces do not make one leaf (Nb: siblings; Bi: a constituent of its
        own)."""
        tree, pieces = self._piece_tree(token_ids, starts)
        counts = [len(p) for p in pieces]
        texts = [words[w] if w < len(words) else self._word_from_tokens(self.convert_ids_to_tokens(p))
                 for w, p in enumerate(pieces)]

        def merged(node):
            """The node with its words joined: a word string (a Bi word's own constituent), a _Run (a constituent
            over some of one word's pieces: its parent joins them), or a Tree."""
            children = []  # words, subtrees, and runs of one word's pieces
            for child in node:
                part = _Run(child[0], 1) if isinstance(child, tuple) else merged(child)
                if isinstance(part, _Run) and children and isinstance(children[-1], _Run) \
                        and children[-1].word == part.word:
                    children[-1].count += part.count
                else:
                    children.append(part)
            if len(children) == 1 and isinstance(children[0], _Run):
                run = children[0]
                return texts[run.word] if run.count == counts[run.word] else run
            for position, child in enumerate(children):
                if isinstance(child, _Run):
                    if child.count != counts[child.word]:
                        raise ValueError(f"word {child.word} ({texts[child.word]!r}) is split across constituents")
                    children[position] = texts[child.word]
            return Tree("", children)

        result = merged(tree)
        if isinstance(result, _Run):
            raise ValueError("the tree does not cover its words")
        return Tree("", [result]) if isinstance(result, str) else result

    def tree_with_words(self, token_ids, words=(), starts=None):
        """The unlabeled tree string of ids whose first words are `words` (a forced-word search: the given words,
        whatever the pieces spell); ids that are no tree give their actions joined by spaces. nb-up: `starts`
        are the constituent starts (indices into token_ids, -1 where none), by default the `starts` attribute the
        beam search's action lists carry (generation_slm.ActionIds)."""
        if starts is None:
            starts = getattr(token_ids, "starts", None)
        try:
            return unlabeled_string(self._word_tree(token_ids, list(words), starts))
        except ValueError:
            return " ".join(self.decode_actions(token_ids))

    _expected_input = "an unlabelled tree '( ( Write ( an essay ) ) quickly )' or plain words"

    def _decode_body(self, token_ids, starts=None, **kwargs):
        """A whole tree decodes to its unlabeled string `( ( Write ( an essay ) ) quickly )` (nb-up: given its
        constituent `starts`); anything else (a prefix, words, nb-up ids without starts) to its actions joined by
        spaces."""
        if self.linearization == "terminals" or not any(int(i) in (self._open_id, self._close_id) for i in token_ids):
            return " ".join(self.decode_actions(token_ids))
        return self.tree_with_words(token_ids, starts=starts)

    # ---- training -----------------------------------------------------------------------------------
    @classmethod
    def train(cls, trees, vocab_size=32000, linearization="nb-dn", sentencepiece_options=None, pieces="sentencepiece",
              **normalize_options):
        """Train a piece model over the words of `trees` (SentencePiece's unigram model, or with pieces="byte_bpe"
        GPT-2's kind of byte-level BPE, as the paper's models): unlabeled tree strings, nltk.Trees, labeled
        bracketed strings or paths of tree files (only their words are read; `normalize_options` go to
        trees.normalize_tree for strings and files, and are stored for `unlabel`)."""
        check_linearization(linearization)
        options = dict(normalize_options)
        sentences = []
        for index, item in enumerate([trees] if isinstance(trees, (str, Tree, os.PathLike)) else trees):
            if isinstance(item, Tree):
                sentences.append(list(item.leaves()))
            elif isinstance(item, str) and is_unlabeled_tree_string(item):
                sentences.append(list(parse_unlabeled(item, f"training tree {index}").leaves()))
            elif isinstance(item, str) and item.lstrip().startswith("("):
                sentences.append(list(read_tree_string(item, f"training tree {index}", **options).leaves()))
            else:
                sentences.extend(list(tree.leaves()) for tree in read_trees(item, **options))
        if not sentences:
            raise ValueError("no training trees: expected at least one tree")
        return cls(**train_piece_model(sentences, vocab_size, pieces, sentencepiece_options),
                   linearization=linearization, **options)


# save_pretrained writes auto_map {"AutoTokenizer": ["tokenization_compositional.CompositionalTokenizer", null]} and
# copies this file with its relative imports next to the config.
CompositionalTokenizer.register_for_auto_class("AutoTokenizer")
