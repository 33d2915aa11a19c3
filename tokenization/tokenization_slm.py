"""Tokenizers for syntactic language models: trees and words <-> action ids.

A syntactic LM reads one sequence of actions per sentence (see linearizers.py). These tokenizers turn trees,
word lists and action lists into ids, and ids back into trees, with one vocabulary laid out in contiguous
ranges that the model reads from `tokenizer.action_layout` (the fields of the model's `ActionLayout`):

    0 <pad>, 1 <s>, 2 </s>, 3 <unk>
    [4, open_nt_start)                terminals: SentencePiece pieces (`SyntacticTokenizer`) or words and
                                      unknown-word classes (`SyntacticWordTokenizer`)
    [open_nt_start, open_nt_stop)     one `(LABEL` per nonterminal label, labels sorted
    [close_nt_start, close_nt_stop)   one `LABEL)` per label, in the same order

Linearizations (the config key `linearization`):
- "top_down": `<s>` then the labeled Choe-Charniak actions `(S (NP the bird NP) (VP sings VP) S)`, each word
  replaced by its pieces. No `</s>`: generation ends when the root closes (grammars tg, choe_charniak).
- "terminals": `<s>` then the pieces of the words, then `</s>` (grammar terminals).
A list of words (`is_split_into_words=True`) or a string of plain words encodes as `<s>` and the pieces only,
without `</s>`: a prompt, as a GPT-2 or Llama tokenizer reads text, so that a client's context and continuation
encode as the prefix they are (a sentence's end is written `</s>`, as decode writes it). Without the start token
(add_special_tokens=False), plain words are a continuation, which only a words-only model ("terminals") reads.

Decoding writes a sequence's boundary tokens (`<pad>`, `<s>`, `</s>`) as themselves unless skip_special_tokens,
and a tree in a form that encodes back to the same ids (`tree_text`); a string that begins with `<s>` or ends with
`</s>` reads them as those tokens (`_written_bounds`), so `tokenizer(tokenizer.decode(ids))` gives `ids` back.

A string is read by the one rule of `trees.input_format`: an action sequence `(S (NP the bird NP) S)` when a
token `X)` closes an `(X` of the string, else PTB brackets when it starts with "(", else plain words (without
brackets). Action sequences and PTB brackets must be one complete tree (a prefix goes to `encode_actions`);
errors name the action, or the line and column. To say the format instead, pass an nltk.Tree
(`trees.read_tree_string(text, tree_format="ptb")`) or use `encode_actions`.

Words are encoded one at a time, so a piece never spans two words; `word_starts` marks the first piece of
each word. PTB bracket strings are normalized at encode time with the options stored in the tokenizer
config (trees.normalize_tree); action strings and nltk.Tree inputs are taken as already normalized.

This file is hub code: it is copied next to trees.py and linearizers.py into every saved tokenizer and loaded
with `AutoTokenizer.from_pretrained(dir, trust_remote_code=True)`, so it imports only its siblings (as
`from .name import x`), transformers, sentencepiece and tokenizers (nltk is used when installed; see tree_type.py).
"""

import hashlib
import io
import json
import os
from collections import Counter
from pathlib import Path

import sentencepiece as spm
from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import BatchEncoding, TruncationStrategy
from transformers.utils import PaddingStrategy

from .byte_level_pieces import ByteLevelPieces, train_byte_level_bpe
from .dependency_trees import refuse_dependency_tree
from .linearizers import (
    UNLABELED_CLOSE,
    close_label,
    is_close_nt,
    is_open_nt,
    open_label,
    parse_action_string,
    terminal_actions,
    top_down_actions,
    tree_from_top_down,
)
from .tree_type import Tree
from .trees import (
    check_word_separators, input_format, normalize_tree, parse_trees, read_input, read_trees, read_tree_string,
    tree_to_string,
)

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
NUM_SPECIAL_IDS = 4
LINEARIZATIONS = ("top_down", "terminals")
# SentencePiece marks the start of a word with this character; pieces that begin with it start a word.
WORD_BOUNDARY = "\u2581"
# The defaults of trees.normalize_tree, spelled out because they are stored in every tokenizer config.
NORMALIZATION_DEFAULTS = {
    "strip_traces": True,
    "strip_function_tags": False,
    "binarize": False,
    "preterminals": "auto",
    "drop_root": True,
    "remove_unary": False,
    "horizontal_markov": None,
}


def _check_linearization(linearization):
    if linearization not in LINEARIZATIONS:
        raise ValueError(f"linearization {linearization!r} is not supported; expected one of {list(LINEARIZATIONS)}")


def _normalization_options(options):
    """The full set of normalize_tree options: `options` over the defaults; unknown names are an error."""
    unknown = sorted(set(options) - set(NORMALIZATION_DEFAULTS))
    if unknown:
        raise ValueError(
            f"unknown tree normalization option(s) {unknown}; expected any of {sorted(NORMALIZATION_DEFAULTS)}"
        )
    return {**NORMALIZATION_DEFAULTS, **options}


def _read_training_trees(trees, normalize_options):
    """Yield the trees of `trees`: nltk.Tree objects as they are, tree files, directories and bracketed
    strings parsed and normalized with `normalize_options`."""
    if isinstance(trees, (str, Path, Tree)):
        trees = [trees]
    for item in trees:
        if isinstance(item, Tree):
            yield item
        elif isinstance(item, str) and input_format(item) == "actions":
            yield read_tree_string(item, source="training string")
        elif isinstance(item, str) and item.lstrip().startswith("("):
            for tree in parse_trees(item, source="training string"):
                yield normalize_tree(tree, **normalize_options)
        elif isinstance(item, (str, Path)):
            if not Path(item).exists():
                raise ValueError(
                    f"training input {str(item)!r} is neither a bracketed tree nor an existing file or directory"
                )
            yield from read_trees(item, **normalize_options)
        else:
            raise ValueError(
                f"training input of type {type(item).__name__} is not supported; expected nltk.Tree objects, "
                "bracketed tree strings, or paths of tree files or directories"
            )


def _training_corpus(trees, normalize_options):
    """(sentences as lists of words, set of nonterminal labels) of the training trees."""
    sentences, labels = [], set()
    for index, tree in enumerate(_read_training_trees(trees, normalize_options)):
        for subtree in tree.subtrees():
            label = subtree.label()
            if not label or any(char.isspace() or char in "()" for char in label):
                raise ValueError(
                    f"training tree {index} has the nonterminal label {label!r}; expected a non-empty label "
                    "without spaces or brackets (an unlabeled wrapper root is removed by drop_root=True)"
                )
            labels.add(label)
        sentences.append(list(tree.leaves()))
    if not sentences:
        raise ValueError("no training trees: expected at least one tree")
    return sentences, labels


def ids_encoding(ids, starts, return_word_starts=False, return_tensors=None, fields=None):
    """The BatchEncoding of one encoded sequence: input_ids, an all-ones attention_mask, on request word_starts
    (whether each id begins a word), and any further per-id `fields` (nb-up: constituent_starts)."""
    encoded = {"input_ids": ids, "attention_mask": [1] * len(ids), **(fields or {})}
    if return_word_starts:
        encoded["word_starts"] = starts
    return BatchEncoding(encoded, tensor_type=return_tensors, prepend_batch_axis=return_tensors is not None)


class SyntacticTokenizerBase(PreTrainedTokenizer):
    """What both tokenizers share: the vocabulary layout, nonterminals, linearization, encoding and decoding.

    A subclass fills `self._terminal_tokens` (the terminal vocabulary, ids from 4 on) and
    `self._terminal_starts_word` (whether each terminal id begins a word) before calling this __init__, sets
    `_unk_starts_word`, and defines `_encode_word` and `_word_from_tokens`.

    Inputs of `tokenizer(...)` / `encode(...)`, one or a batch (a list of them):
    - a bracketed tree string, PTB with or without POS tags: normalized with the stored options, then
      linearized (`<s>` + actions for "top_down", `<s>` + words + `</s>` for "terminals");
    - an nltk.Tree, taken as already normalized, linearized the same way;
    - a list of words with `is_split_into_words=True`, or a string of plain words: `<s>` + the pieces of the
      words, no `</s>`: a prompt (a string of plain words with add_special_tokens=False, which only a words-only
      model reads, is the pieces alone);
    - not a dependency tree (an inline `word/head` tree, CoNLL-U lines): a ValueError names what it reads.
    Outputs: input_ids, attention_mask (1-D per sequence; the structural mask is the grammar's job), and
    with `return_word_starts=True` "word_starts": True exactly at the first piece of every word. Padding,
    `return_tensors`, `return_length` and `return_special_tokens_mask` work as in transformers; truncation
    that would cut a sequence is an error, since a cut tree cannot be closed.

    Args:
        nonterminals: the nonterminal labels; they are sorted into the vocabulary.
        linearization: "top_down" or "terminals" (see the module docstring).
        strip_traces, strip_function_tags, binarize, preterminals, drop_root, remove_unary, horizontal_markov:
            trees.normalize_tree options applied to bracketed tree strings at encode time.
    """

    model_input_names = ["input_ids", "attention_mask"]
    _unk_starts_word = False
    # The vocabularies `train` builds, by the name `hf-slm train --pieces` gives them (its `pieces` argument).
    piece_models = ()
    # A tokenizer hook (the one place it is declared): a tokenizer whose trees are not bracketed trees over pieces
    # writes a tree with given words itself, as tree_with_words(token_ids, words, starts=None) -> str (a dependency
    # tokenizer's inline trees, paper 003's trees over tokens); None: the search writes bracketed trees
    # (hf_slm/search/beam.py, tree_string).
    tree_with_words = None

    def __init__(
        self,
        nonterminals=None,
        linearization="top_down",
        strip_traces=True,
        strip_function_tags=False,
        binarize=False,
        preterminals="auto",
        drop_root=True,
        remove_unary=False,
        horizontal_markov=None,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        **kwargs,
    ):
        _check_linearization(linearization)
        labels = sorted(nonterminals or [])
        duplicates = sorted(label for label, count in Counter(labels).items() if count > 1)
        if duplicates:
            raise ValueError(f"nonterminal labels {duplicates} are listed more than once")
        for label in labels:
            if not isinstance(label, str) or not label or any(c.isspace() or c in "()" for c in label):
                raise ValueError(f"nonterminal label {label!r}: expected a non-empty string without spaces or brackets")
        self.nonterminals = labels
        self.linearization = linearization
        self.normalization = {
            "strip_traces": strip_traces,
            "strip_function_tags": strip_function_tags,
            "binarize": binarize,
            "preterminals": preterminals,
            "drop_root": drop_root,
            "remove_unary": remove_unary,
            "horizontal_markov": horizontal_markov,
        }

        specials = [str(pad_token), str(bos_token), str(eos_token), str(unk_token)]
        self._open_nt_start = NUM_SPECIAL_IDS + len(self._terminal_tokens)
        self._close_nt_start = self._open_nt_start + len(labels)
        self._id_to_token = specials + list(self._terminal_tokens)
        self._id_to_token += ["(" + label for label in labels] + [label + ")" for label in labels]
        # Pieces never contain brackets (trees.parse_trees splits words at them), so only a special token can
        # share its string with a terminal; the special token wins the string -> id lookup.
        self._token_to_id = {token: index for index, token in enumerate(self._id_to_token)}
        self._token_to_id.update({token: index for index, token in enumerate(specials)})
        self._open_ids = {label: self._open_nt_start + i for i, label in enumerate(labels)}
        self._close_ids = {label: self._close_nt_start + i for i, label in enumerate(labels)}
        self._special_ids = {token: index for index, token in enumerate(specials)}
        self._nonterminal_ids = {self._id_to_token[i]: i for i in range(self._open_nt_start, len(self._id_to_token))}
        self._word_cache = {}
        self._word_start_mask = [False] * len(self._id_to_token)
        self._word_start_mask[UNK_ID] = self._unk_starts_word
        self._word_start_mask[NUM_SPECIAL_IDS : self._open_nt_start] = self._terminal_starts_word

        super().__init__(
            pad_token=pad_token,
            bos_token=bos_token,
            eos_token=eos_token,
            unk_token=unk_token,
            nonterminals=labels,
            linearization=linearization,
            **self.normalization,
            **kwargs,
        )
        # HF's num_special_tokens_to_add / build_inputs_with_special_tokens follow this pattern.
        self.special_tokens_pattern = "bos" if linearization == "top_down" else "bos_eos"

    def __getstate__(self):
        # The word cache grows as text is encoded; leaving it out keeps a pickled tokenizer (and the
        # fingerprint `datasets.map` computes from it) independent of what was encoded before.
        state = self.__dict__.copy()
        state["_word_cache"] = {}
        return state

    # ---- vocabulary ---------------------------------------------------------------------------------
    @property
    def vocab_size(self):
        return len(self._id_to_token)

    def __len__(self):
        return len(self._id_to_token)

    def get_vocab(self):
        return dict(self._token_to_id)

    def _convert_token_to_id(self, token):
        return self._token_to_id.get(token, UNK_ID)

    def _convert_id_to_token(self, index):
        if not 0 <= index < len(self._id_to_token):
            raise ValueError(f"id {index} is outside the vocabulary: expected 0 <= id < {len(self._id_to_token)}")
        return self._id_to_token[index]

    @property
    def vocabulary_fingerprint(self):
        """A short hash of every token in id order: two tokenizers with the same id layout but other pieces or
        labels differ here (a model records its tokenizer's in config.vocabulary_fingerprint)."""
        return hashlib.sha256("\n".join(self._id_to_token).encode("utf-8")).hexdigest()[:16]

    @property
    def action_layout(self):
        """The id ranges of each action kind: `ActionLayout(**tokenizer.action_layout)` in modeling/grammars."""
        return {
            "pad_token_id": PAD_ID,
            "bos_token_id": BOS_ID,
            "eos_token_id": EOS_ID,
            "open_nt_start": self._open_nt_start,
            "open_nt_stop": self._close_nt_start,
            "close_nt_start": self._close_nt_start,
            "close_nt_stop": len(self._id_to_token),
            "unk_token_id": UNK_ID,
        }

    @property
    def action_input_fields(self):
        """The per-action fields this tokenizer's encodings carry beside input_ids (one value per id, -1 where there
        is none), which a dataset keeps as columns and the collator hands the grammar (its `action_inputs`): none
        here; paper 003's Nb-Up tokenizer gives constituent_starts."""
        return ()

    @property
    def word_start_mask(self):
        """For every id, whether it begins a word (the first piece of a word); False for specials and NTs.

        Word-synchronous beam search uses it to tell a new word from the continuation of the current one.
        The list is shared: do not modify it.
        """
        return self._word_start_mask

    @property
    def incomplete_word_ids(self):
        """Ids that start a word but spell none of it (SentencePiece's bare word-boundary piece, byte-level BPE's
        bare space "Ġ"): a generated word must not end on one. Empty for word-level vocabularies."""
        terminals = range(NUM_SPECIAL_IDS, self._open_nt_start)
        return [i for i in terminals if self._word_start_mask[i] and self._word_from_tokens([self._id_to_token[i]]) == ""]

    # ---- encoding -----------------------------------------------------------------------------------
    def _encode_word(self, word):
        """Ids of one word (its pieces, or its word or class id)."""
        raise NotImplementedError

    def _word_ids(self, word, where="word"):
        ids = self._word_cache.get(word)
        if ids is None:
            if not isinstance(word, str) or not word:
                raise ValueError(f"{where} {word!r}: expected a non-empty string")
            if any(char.isspace() for char in word):
                raise ValueError(f"{where} {word!r} contains whitespace; expected one word per item")
            ids = self._encode_word(word)
            self._word_cache[word] = ids
        return ids

    def _nonterminal_id(self, action, opening):
        label = open_label(action) if opening else close_label(action)
        ids = self._open_ids if opening else self._close_ids
        if label not in ids:
            shown = ", ".join(self.nonterminals[:30]) + (", ..." if len(self.nonterminals) > 30 else "")
            raise ValueError(
                f"nonterminal {action!r}: the label {label!r} is not in the vocabulary of this tokenizer "
                f"({len(self.nonterminals)} labels: {shown})"
            )
        return ids[label]

    def _actions_to_ids(self, actions, specials_allowed=False):
        """(ids, word_starts) of a list of actions, without added special tokens.

        With specials_allowed, an action spelled like a special token (`</s>`) is that token; otherwise it is
        a word like any other (a treebank leaf `<s>` is text, not a sequence boundary).
        """
        ids, starts = [], []
        nonterminal_ids, special_ids = self._nonterminal_ids, self._special_ids if specials_allowed else {}
        for index, action in enumerate(actions):
            if action in nonterminal_ids:
                ids.append(nonterminal_ids[action])
                starts.append(False)
            elif action in special_ids:
                ids.append(special_ids[action])
                starts.append(False)
            elif action == UNLABELED_CLOSE:
                raise ValueError(
                    f"action {index} is the unlabeled closing bracket ')'; this tokenizer expects labeled "
                    "closing nonterminals such as 'NP)'"
                )
            elif is_open_nt(action) or is_close_nt(action):
                ids.append(self._nonterminal_id(action, opening=is_open_nt(action)))
                starts.append(False)
            else:
                pieces = self._word_ids(action, where=f"action {index}")
                ids.extend(pieces)
                starts.extend([True] + [False] * (len(pieces) - 1))
        return ids, starts

    def _encode_one(self, item, is_split_into_words, add_special_tokens):
        """(ids, word_starts) of one input: a tree string, an nltk.Tree or a list of words."""
        ends_with_eos, written_start, written_end = False, False, False
        if isinstance(item, Tree):
            tree = item
        elif isinstance(item, str):
            text = check_word_separators(item, "tokenizer input").strip()
            if not is_split_into_words:
                text, written_start, written_end = self._written_bounds(text)
            if not text:
                raise ValueError("empty input: expected a bracketed tree or words, got an empty string")
            if is_split_into_words:
                tree, words = None, text.split()
            else:  # trees.input_format decides: actions, PTB brackets (normalized) or plain words
                refuse_dependency_tree(text, "tokenizer input", self._expected_input)
                read = read_input(text, "tokenizer input", **self.normalization)
                tree, words = (read, None) if isinstance(read, Tree) else (None, read)
                if words is not None and not (add_special_tokens or written_start):
                    self._check_words_can_stand_alone(text)
        elif isinstance(item, (list, tuple)):
            if not item:
                raise ValueError("empty input: expected at least one word, got an empty list")
            tree, words = None, list(item)
        else:
            raise ValueError(
                f"input of type {type(item).__name__} is not supported; expected a bracketed tree string, "
                "an nltk.Tree or a list of words"
            )
        if tree is not None:
            if self.linearization == "top_down":
                actions = top_down_actions(tree)
            else:
                actions, ends_with_eos = terminal_actions(tree), True
            ids, starts = self._actions_to_ids(actions)
        else:  # words only, a prompt or a sentence to score (a list's words as given, even one spelled `(S`)
            ids, starts = [], []
            for index, word in enumerate(words):
                pieces = self._word_ids(word, where=f"word {index}")
                ids.extend(pieces)
                starts.extend([True] + [False] * (len(pieces) - 1))
        if add_special_tokens or written_start:
            ids, starts = [BOS_ID] + ids, [False] + starts
        if (add_special_tokens and ends_with_eos) or written_end:
            ids, starts = ids + [EOS_ID], starts + [False]
        return ids, starts

    @property
    def words_only(self):
        """Whether this tokenizer's sequences are words only (the terminals linearization: TXL (terminals),
        GPT2-token, SOM), so that any run of words is a piece of a sequence the model scores."""
        return self.linearization == "terminals"

    def _check_words_can_stand_alone(self, text):
        """Plain words without the start token: a words-only model's continuation (what lm-evaluation-harness
        encodes after its own prefix token), but no part of a tree model's sequence, which begins with the start
        token and its tree. A client scoring plain text (lm-evaluation-harness's BLiMP and other tasks) would
        otherwise get the probability of words without their tree, or a grammar error that does not say why."""
        if self.words_only:
            return
        raise ValueError(
            f"tokenizer input {text[:60]!r} is plain words without the start token {self.bos_token}: a tree model "
            f"scores trees, and plain words are only a prompt, which starts a sequence ({self.bos_token} first: "
            "add_special_tokens=True, or a list of words with is_split_into_words=True). A client that scores plain "
            "sentences (lm-evaluation-harness's BLiMP and other tasks) asks for p(x), which a tree model gives by "
            "search: hf-slm eval blimp, hf-slm score; to score a tree with a client, pass the tree "
            "(docs/using-a-checkpoint.md)")

    # What a string given to this tokenizer may be, for the message that refuses another family's format.
    _expected_input = ("PTB brackets '(S (NP the bird) (VP sings))', a top-down action sequence "
                       "'(S (NP the bird NP) (VP sings VP) S)' or plain words")

    def _written_bounds(self, text):
        """(text without its written boundary tokens, whether it began with the start token, whether it ended
        with `</s>`): how a string that decode wrote with its special tokens (`<s> (S ...)`, `<s> the bird
        sings </s>`) reads back to the same ids. Only whole whitespace-separated tokens at the ends count;
        `<pad>` there is padding and is left out (the encoder pads on request)."""
        tokens = text.split()
        first, stop = 0, len(tokens)
        while first < stop and tokens[first] == self.pad_token:
            first += 1
        while stop > first and tokens[stop - 1] == self.pad_token:
            stop -= 1
        written_start = first < stop and tokens[first] == self._id_to_token[self.start_id]
        written_end = stop > first + written_start and tokens[stop - 1] == self.eos_token
        if (first, stop) == (0, len(tokens)) and not written_start and not written_end:
            return text, False, False  # as given, so that errors keep the input's lines and columns
        return " ".join(tokens[first + written_start : stop - written_end]), written_start, written_end

    def _encode_record(self, item, is_split_into_words, add_special_tokens):
        """(ids, word_starts, extra per-action fields of the tokenizer's output) of one input: `_encode_one`'s,
        and none; a linearization whose actions carry more than their ids (paper 003's Nb-Up) adds fields here."""
        ids, starts = self._encode_one(item, is_split_into_words, add_special_tokens)
        return ids, starts, {}

    def encode_actions(self, actions, add_special_tokens=True, return_word_starts=False, return_tensors=None):
        """Encode an action list (or a space-separated action string) such as
        `["(S", "(NP", "the", "bird", "NP)", "S)"]`: `<s>` (unless add_special_tokens=False or the actions
        already begin with it) then the ids of the actions, each word replaced by its pieces. Special-token
        strings (`</s>`) inside the actions map to their ids. Prefixes of a tree are accepted.

        Returns a BatchEncoding with input_ids, attention_mask and, on request, word_starts.
        """
        if isinstance(actions, str):
            actions = parse_action_string(actions)
        if not actions:
            raise ValueError("empty action list: expected at least one action")
        ids, starts = self._actions_to_ids(list(actions), specials_allowed=True)
        if add_special_tokens and ids[0] != BOS_ID:
            ids, starts = [BOS_ID] + ids, [False] + starts
        return ids_encoding(ids, starts, return_word_starts, return_tensors)

    def encode_document(self, sentences, add_special_tokens=True, return_word_starts=False, return_tensors=None):
        """Encode a document, a list of sentences (tree strings, nltk.Trees or word lists), as one sequence.

        The sentences' actions follow each other after a single `<s>`: each tree's root is a child of `<s>`, so
        under the TG grammar a sentence attends to the earlier ones through their composed roots (paper 000,
        section 3.1, document level). The terminals linearization ends with one `</s>`, after the last word.
        Models read such sequences when their config has `document_level=True`.
        """
        if isinstance(sentences, (str, Tree)) or not sentences:
            raise ValueError("encode_document expects a non-empty list of sentences (trees or word lists)")
        ids, starts, fields = [], [], {}
        opening, ending = self._document_bounds() if add_special_tokens else ([], [])
        first = len(opening)  # where the sentences' actions begin
        for index, sentence in enumerate(sentences):
            try:
                sentence_ids, sentence_starts, sentence_fields = self._document_record(
                    sentence, isinstance(sentence, (list, tuple)), first + len(ids))
            except ValueError as error:
                raise ValueError(f"document sentence {index}: {error}") from error
            ids.extend(sentence_ids)
            starts.extend(sentence_starts)
            for name, values in sentence_fields.items():
                fields.setdefault(name, []).extend(values)
        ids, starts = opening + ids + ending, [False] * len(opening) + starts + [False] * len(ending)
        # per-action fields are indices (-1: none)
        fields = {name: [-1] * len(opening) + values + [-1] * len(ending) for name, values in fields.items()}
        return ids_encoding(ids, starts, return_word_starts, return_tensors, fields)

    def _document_bounds(self):
        """(the ids before a document's sentences, the ids after them): `<s>`, and `</s>` for the terminals
        linearization, whose sequence ends there."""
        return [BOS_ID], ([EOS_ID] if self.linearization == "terminals" else [])

    def _document_record(self, sentence, is_split_into_words, position):
        """(ids, word_starts, fields) of one sentence of a document, whose first action will be at `position` of
        the document's ids: `_encode_record`'s without special tokens. A linearization that marks each
        sentence's end, or whose fields index the ids, says so here."""
        return self._encode_record(sentence, is_split_into_words, False)

    def tokenize(self, text, is_split_into_words=False, **kwargs):
        """The tokens of one input (pieces, `(S`, `S)`), without added special tokens."""
        ids, _ = self._encode_one(text, is_split_into_words, add_special_tokens=False)
        return [self._id_to_token[index] for index in ids]

    @staticmethod
    def _is_batch(text, is_split_into_words):
        if isinstance(text, (str, Tree)):
            return False
        if isinstance(text, (list, tuple)):
            if not text:
                raise ValueError("empty input: expected a tree, a list of words or a batch of them, got []")
            if is_split_into_words:
                return isinstance(text[0], (list, tuple)) and not isinstance(text[0], Tree)
            return True
        raise ValueError(
            f"input of type {type(text).__name__} is not supported; expected a bracketed tree string, an "
            "nltk.Tree, a list of words (is_split_into_words=True) or a batch of these"
        )

    def _encode_plus(
        self,
        text,
        text_pair=None,
        add_special_tokens=True,
        padding_strategy=PaddingStrategy.DO_NOT_PAD,
        truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE,
        max_length=None,
        stride=0,
        is_split_into_words=False,
        pad_to_multiple_of=None,
        padding_side=None,
        return_tensors=None,
        return_token_type_ids=None,
        return_attention_mask=None,
        return_overflowing_tokens=False,
        return_special_tokens_mask=False,
        return_offsets_mapping=False,
        return_length=False,
        verbose=True,
        split_special_tokens=False,
        return_word_starts=False,
        **kwargs,
    ):
        """Encode one input or a batch (called by __call__ and encode); inputs and outputs: class docstring."""
        if text_pair is not None:
            raise ValueError("text_pair is not supported: a syntactic tokenizer encodes one sentence per sequence")
        if return_offsets_mapping:
            raise ValueError("return_offsets_mapping is not supported: inputs are trees and words, not raw text")
        if kwargs:
            raise TypeError(f"unexpected keyword argument(s) {sorted(kwargs)} for {type(self).__name__}")
        batched = self._is_batch(text, is_split_into_words)
        records = []
        for index, item in enumerate(text if batched else [text]):
            try:
                ids, starts, fields = self._encode_record(item, is_split_into_words, add_special_tokens)
            except ValueError as error:
                if batched:
                    raise ValueError(f"batch item {index}: {error}") from error
                raise
            if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length and len(ids) > max_length:
                # Cutting an action sequence leaves constituents open that the grammar cannot close.
                raise ValueError(
                    f"input {index} has {len(ids)} ids, more than max_length={max_length}; truncation would cut "
                    "its action sequence, so filter or split long inputs before tokenizing"
                )
            record = {"input_ids": ids, **fields}
            if return_token_type_ids:
                record["token_type_ids"] = [0] * len(ids)
            if return_special_tokens_mask:
                boundary = {PAD_ID, BOS_ID, EOS_ID, self.start_id}  # the start token (`<root>`) is one too
                record["special_tokens_mask"] = [int(i in boundary) for i in ids]
            if return_word_starts:
                record["word_starts"] = starts
            if return_length:
                record["length"] = len(ids)
            records.append(record)

        encoded = {key: [record[key] for record in records] for key in records[0]} if batched else records[0]
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if padding_strategy != PaddingStrategy.DO_NOT_PAD or return_attention_mask:
            encoded = self.pad(
                encoded,
                padding=padding_strategy.value,
                max_length=max_length,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side,
                return_attention_mask=return_attention_mask,
            )
        return BatchEncoding(dict(encoded), tensor_type=return_tensors, prepend_batch_axis=not batched)

    def _pad(
        self,
        encoded_inputs,
        max_length=None,
        padding_strategy=PaddingStrategy.DO_NOT_PAD,
        pad_to_multiple_of=None,
        padding_side=None,
        return_attention_mask=None,
    ):
        """HF padding, plus word_starts padded with False so that a batch of them stacks into a tensor."""
        word_starts = encoded_inputs.pop("word_starts", None)
        padded = super()._pad(
            encoded_inputs,
            max_length=max_length,
            padding_strategy=padding_strategy,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
        )
        if word_starts is not None:
            word_starts = [bool(start) for start in word_starts]
            filler = [False] * (len(padded[self.model_input_names[0]]) - len(word_starts))
            side = padding_side if padding_side is not None else self.padding_side
            padded["word_starts"] = word_starts + filler if side == "right" else filler + word_starts
        return padded

    # ---- decoding -----------------------------------------------------------------------------------
    def _word_from_tokens(self, tokens):
        """The word spelled by the tokens of its pieces."""
        raise NotImplementedError

    def decode_actions(self, token_ids):
        """The actions of `token_ids` with words rebuilt from their pieces; pad, `<s>` and `</s>` dropped."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        actions, pieces = [], []
        starts_word = self.word_start_mask

        def flush():
            if pieces:
                actions.append(self._word_from_tokens(pieces))
                pieces.clear()

        for index in token_ids:
            index = int(index)
            token = self._convert_id_to_token(index)
            if index in (PAD_ID, BOS_ID, EOS_ID):
                flush()
            elif index >= self._open_nt_start:
                flush()
                actions.append(token)
            else:
                if starts_word[index]:
                    flush()
                pieces.append(token)
        flush()
        return actions

    def _decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None, **kwargs):
        """transformers' `decode` and `batch_decode` come here with one id or one sequence of ids.

        The ids between the sequence's boundary tokens (leading `<pad>` and start token, trailing end token and
        `<pad>`) decode as `_decode_body` says; the boundary tokens are written as themselves around that text
        (`<s> (S (NP the bird) (VP sings))`, `<root> There/2 is/0 ... </s>`, `<s> the bird sings </s>`), which
        `_written_bounds` reads back, unless skip_special_tokens. `<unk>` is part of a word's text and is always
        written (leaving it out would merge or drop words)."""
        ids = [int(token_ids)] if isinstance(token_ids, int) else [int(index) for index in token_ids]
        leading, trailing = self._leading_ids, (EOS_ID, PAD_ID)
        first, stop = 0, len(ids)
        while first < stop and ids[first] in leading:
            first += 1
        while stop > first and ids[stop - 1] in trailing:
            stop -= 1
        text = self._decode_body(ids, **kwargs) if first < stop else ""
        if skip_special_tokens:
            return text
        written = [self._convert_id_to_token(i) for i in ids[:first]] + ([text] if text else [])
        return " ".join(written + [self._convert_id_to_token(i) for i in ids[stop:]])

    @property
    def _leading_ids(self):
        """The ids that may open a sequence before its actions: padding (left padding) and the start tokens."""
        return (PAD_ID, BOS_ID, self.start_id)

    @property
    def start_id(self):
        """The first id of every sequence: `<s>` (a dependency tokenizer's is `<root>`)."""
        return BOS_ID

    def _decode_body(self, token_ids, **kwargs):
        """The text of a sequence without its boundary tokens (`token_ids` may hold them; they are left out).

        A complete top-down action sequence decodes to the tree in the form `tree_text` chooses; ids without
        nonterminals to the words joined by spaces (which a words-only tokenizer reads back as its complete
        sequence); anything else (a prefix of a tree, as during generation) to its actions joined by spaces."""
        actions = self.decode_actions(token_ids)
        if not any(is_open_nt(action) or is_close_nt(action) for action in actions):
            return " ".join(actions)
        try:
            return self.tree_text(tree_from_top_down(actions))
        except ValueError:
            return " ".join(actions)

    def tree_text(self, tree):
        """A tree as decode writes it: PTB brackets `(S (NP the bird) (VP sings))` when this tokenizer reads them
        back as the same tree, else the top-down action sequence `(S (NP The NP) (VP sleeps VP) S)`.

        PTB brackets read back otherwise when normalization changes them: a tree whose every word stands alone
        in its bracket reads as POS tags over the words (`(S (NP The) (VP sleeps))` is `(S The sleeps)`), and
        drop_root, remove_unary or binarize reshape a tree that a model may generate. The action sequence is read
        as written (trees.input_format finds its labelled closing brackets), so whatever decode writes, encode
        gives back the same ids."""
        text = tree_to_string(tree)
        try:
            if read_tree_string(text, "decoded tree", **self.normalization) == tree:
                return text
        except ValueError:
            pass
        return " ".join(top_down_actions(tree))

    def convert_tokens_to_string(self, tokens):
        return self._decode(self.convert_tokens_to_ids(tokens))


def train_sentencepiece(sentences, vocab_size, sentencepiece_options=None):
    """The serialized SentencePiece unigram model over `sentences` (lists of words), `vocab_size` word pieces
    (a small corpus may yield fewer): the terminal vocabulary of every SentencePiece-based tokenizer here."""
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size {vocab_size!r}: expected a positive number of word pieces")
    trainer_options = {
        "model_type": "unigram",
        # SentencePiece counts its own <unk> in vocab_size; vocab_size here counts word pieces only.
        "vocab_size": vocab_size + 1,
        # A soft limit, so that a corpus too small for vocab_size pieces still trains.
        "hard_vocab_limit": False,
        "character_coverage": 1.0,
        "byte_fallback": False,
        # Identity normalization keeps every word byte for byte, so that decoding gives back the tree.
        "normalization_rule_name": "identity",
        "unk_id": 0,
        "bos_id": -1,
        "eos_id": -1,
        "pad_id": -1,
        "minloglevel": 2,
        **(sentencepiece_options or {}),
    }
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter([" ".join(words) for words in sentences]), model_writer=model, **trainer_options
        )
    except RuntimeError as error:
        raise ValueError(
            f"SentencePiece training on {len(sentences)} sentences with vocab_size={vocab_size} failed: {error}"
        ) from error
    return model.getvalue()


class SyntacticTokenizer(SyntacticTokenizerBase):
    """Subword syntactic tokenizer: a piece model over the words, plus nonterminals. The piece model is
    SentencePiece's unigram model, or, with `pieces="byte_bpe"`, a GPT-2-style byte-level BPE (paper 003's models
    read GPT-2's vocabulary; byte_level_pieces.py).

    Train one with `SyntacticTokenizer.train(trees, vocab_size=32000)`; load a saved one with
    `from_pretrained`. The terminal ids [4, open_nt_start) are the pieces in the piece model's order (without
    SentencePiece's own `<unk>`); characters SentencePiece does not know become `<unk>` (id 3); byte-level BPE
    knows every byte.

    Args:
        vocab_file: path of the SentencePiece model (`spiece.model` in a saved tokenizer).
        sp_model_proto: the serialized SentencePiece model, instead of vocab_file (not saved in the config).
        bpe_file: path of a byte-level BPE model (`byte_bpe.json` in a saved tokenizer), instead of SentencePiece.
        bpe_model_json: that model as a string, instead of bpe_file (not saved in the config).
        Other arguments: see SyntacticTokenizerBase.
    """

    vocab_files_names = {"vocab_file": "spiece.model", "bpe_file": "byte_bpe.json"}
    piece_models = ("sentencepiece", "byte_bpe")
    # SentencePiece keeps the word-boundary mark as a piece of its own before unknown characters.
    _unk_starts_word = False

    def __init__(self, vocab_file=None, nonterminals=None, linearization="top_down", sp_model_proto=None,
                 bpe_file=None, bpe_model_json=None, **kwargs):
        if bpe_model_json is None and bpe_file is not None:
            bpe_model_json = Path(bpe_file).read_text(encoding="utf-8")
        self._bpe, self._unknown_character = None, None
        if bpe_model_json is not None:
            self._bpe = ByteLevelPieces(bpe_model_json)
            self.sp_model, self._sp_model_proto = None, None
            self._terminal_tokens = list(self._bpe.pieces)
            self._terminal_starts_word = [self._bpe.starts_word(piece) for piece in self._terminal_tokens]
            super().__init__(nonterminals=nonterminals, linearization=linearization, **kwargs)
            return
        if sp_model_proto is None:
            if vocab_file is None:
                raise ValueError(
                    "SyntacticTokenizer needs a piece model: expected vocab_file (a spiece.model path), "
                    "sp_model_proto, bpe_file (a byte_bpe.json path) or bpe_model_json; train one with "
                    "SyntacticTokenizer.train(trees)"
                )
            sp_model_proto = Path(vocab_file).read_bytes()
        self.sp_model = spm.SentencePieceProcessor(model_proto=sp_model_proto)
        self._sp_model_proto = sp_model_proto
        self._terminal_tokens, self._terminal_starts_word = [], []
        self._sp_to_id = []
        for sp_id in range(self.sp_model.get_piece_size()):
            if self.sp_model.is_unknown(sp_id) or self.sp_model.is_control(sp_id) or self.sp_model.is_unused(sp_id):
                self._sp_to_id.append(UNK_ID)
                continue
            piece = self.sp_model.id_to_piece(sp_id)
            self._sp_to_id.append(NUM_SPECIAL_IDS + len(self._terminal_tokens))
            self._terminal_tokens.append(piece)
            self._terminal_starts_word.append(piece.startswith(WORD_BOUNDARY))
        super().__init__(nonterminals=nonterminals, linearization=linearization, **kwargs)
        self._unknown_character = self._find_unknown_character()

    @classmethod
    def train(cls, trees, vocab_size=32000, linearization="top_down", sentencepiece_options=None,
              extra_nonterminals=(), pieces="sentencepiece", **normalize_options):
        """Train a piece model over the words of `trees` (SentencePiece's unigram model, or with
        pieces="byte_bpe" a GPT-2-style byte-level BPE) and collect their nonterminals.

        Args:
            trees: nltk.Tree objects (already normalized, POS-free), bracketed tree strings, or paths of tree
                files or directories (strings and files are normalized with `normalize_options`).
            vocab_size: the number of word pieces requested (TG uses 32K); a small corpus may yield fewer.
            linearization: "top_down" or "terminals".
            sentencepiece_options: extra SentencePieceTrainer arguments (e.g. input_sentence_size).
            extra_nonterminals: labels to include besides those of `trees` (e.g. the labels of held-out trees,
                which would otherwise be an error to encode).
            normalize_options: trees.normalize_tree options, stored in the config and applied at encode time.
            pieces: "sentencepiece" (default) or "byte_bpe".
        """
        _check_linearization(linearization)
        options = _normalization_options(normalize_options)
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size {vocab_size!r}: expected a positive number of word pieces")
        sentences, labels = _training_corpus(trees, options)
        return cls(**train_piece_model(sentences, vocab_size, pieces, sentencepiece_options),
                   nonterminals=sorted(set(labels) | set(extra_nonterminals)), linearization=linearization, **options)

    @property
    def pieces(self):
        """The piece model: "sentencepiece" or "byte_bpe"."""
        return "sentencepiece" if self._bpe is None else "byte_bpe"

    def _encode_word(self, word):
        if self._bpe is not None:
            return [NUM_SPECIAL_IDS + piece for piece in self._bpe.word_ids(word)]
        if self.unk_token in word and self._unknown_character is not None:
            word = word.replace(self.unk_token, self._unknown_character)
        return [self._sp_to_id[sp_id] for sp_id in self.sp_model.encode(word)]

    def _find_unknown_character(self):
        """A character SentencePiece reads as `<unk>`, which stands for `<unk>` written in a word, or None.

        An unknown character decodes as `<unk>` (`na<unk>ve`); reading that back as the unknown token makes decode
        and encode agree. Only where the piece model cannot spell `<unk>` itself (its characters < or > are
        unknown too): a model that learned the text `<unk>` (a corpus that writes rare words so) keeps reading it
        as text, with the same ids as before; elsewhere the text `<unk>` already held unknown pieces (`▁ <unk> u n
        k <unk>`) and now reads as the one `<unk>` it stands for."""
        if UNK_ID not in [self._sp_to_id[i] for i in self.sp_model.encode(self.unk_token)]:
            return None
        for character in ("\ue000", "\ue001", "\U000f0000"):  # private use: absent from real text
            if [self._sp_to_id[i] for i in self.sp_model.encode(character)][-1:] == [UNK_ID]:
                return character
        return None

    def _word_from_tokens(self, tokens):
        if self._bpe is not None:
            return self._bpe.word(tokens)
        word = "".join(tokens)
        return word[1:] if word.startswith(WORD_BOUNDARY) else word

    def save_vocabulary(self, save_directory, filename_prefix=None):
        if not os.path.isdir(save_directory):
            raise ValueError(f"save_vocabulary: {str(save_directory)!r} is not a directory")
        prefix = filename_prefix + "-" if filename_prefix else ""
        if self._bpe is not None:
            path = os.path.join(save_directory, prefix + self.vocab_files_names["bpe_file"])
            Path(path).write_text(self._bpe.json, encoding="utf-8")
            return (path,)
        path = os.path.join(save_directory, prefix + self.vocab_files_names["vocab_file"])
        with open(path, "wb") as handle:
            handle.write(self._sp_model_proto)
        return (path,)


PIECE_MODELS = SyntacticTokenizer.piece_models


def train_piece_model(sentences, vocab_size, pieces="sentencepiece", sentencepiece_options=None):
    """SyntacticTokenizer's piece-model arguments (sp_model_proto or bpe_model_json) for a model of `pieces`
    trained on `sentences` (lists of words)."""
    if pieces == "byte_bpe":
        if sentencepiece_options:
            raise ValueError(f"sentencepiece_options {sentencepiece_options!r} apply to SentencePiece, not to pieces='byte_bpe'")
        return {"bpe_model_json": train_byte_level_bpe(sentences, vocab_size)}
    if pieces != "sentencepiece":
        raise ValueError(f"pieces {pieces!r}: expected one of {', '.join(PIECE_MODELS)}")
    return {"sp_model_proto": train_sentencepiece(sentences, vocab_size, sentencepiece_options)}


def unknown_word_signature(word):
    """The unknown-word class of `word`, in the spirit of Petrov and Klein (2007): `<UNK` + features + `>`.

    Features, in this order:
    - case: `-ALLC` when every cased letter is upper case, `-INITC` when the word starts with a capital and
      has lower-case letters too, `-LC` when every cased letter is lower case, `-HASLC` when it has lower and
      upper case without an initial capital (`iPhone`); nothing without cased letters;
    - `-NUM` when it contains a digit, `-DASH` when it contains `-`;
    - the first English suffix it ends with (case-insensitive) among -ity, -ing, -ion, -est, -ed, -er, -ly,
      -al, -s, -y, when at least two characters precede the suffix and the one right before it is a letter;
      -s is skipped after s, u and i (`class`, `virus`, `analysis` are not plurals).
    `Birds` -> `<UNK-INITC-s>`, `COVID-19` -> `<UNK-ALLC-NUM-DASH>`, `§` -> `<UNK>`.
    """
    features = []
    has_upper = any(char.isupper() for char in word)
    has_lower = any(char.islower() for char in word)
    if has_upper and not has_lower:
        features.append("ALLC")
    elif has_upper and word[0].isupper():
        features.append("INITC")
    elif has_lower and not has_upper:
        features.append("LC")
    elif has_lower:
        features.append("HASLC")
    if any(char.isdigit() for char in word):
        features.append("NUM")
    if "-" in word:
        features.append("DASH")
    lowered = word.lower()
    for suffix in ("ity", "ing", "ion", "est", "ed", "er", "ly", "al", "s", "y"):
        stem = lowered[: -len(suffix)]
        if lowered.endswith(suffix) and len(stem) >= 2 and stem[-1].isalpha():
            if suffix == "s" and stem[-1] in "sui":
                continue
            features.append(suffix)
            break
    return "<UNK" + "".join("-" + feature for feature in features) + ">"


def _is_reserved_word(word, specials):
    # A word spelled like a special token or an unknown-word class would make two ids share one string.
    return word in specials or (word.startswith("<UNK") and word.endswith(">"))


class SyntacticWordTokenizer(SyntacticTokenizerBase):
    """Word-level syntactic tokenizer: a fixed word vocabulary plus Berkeley-style unknown-word classes.

    Training keeps the words seen at least `min_count` times (Dyer et al. 2016 replace singletons, the
    default min_count=2). Every other training word is represented by its class (`unknown_word_signature`),
    and each class that occurs among them becomes a token; at encode time a word outside the vocabulary maps
    to its class, or to `<unk>` when that class never occurred in training. Every terminal id starts a word.
    The terminal ids [4, open_nt_start) are the classes (sorted) then the words (most frequent first).

    Args:
        vocab_file: path of `vocab.json` (terminal token -> id) in a saved tokenizer.
        terminals: the terminal tokens in id order, instead of vocab_file (not saved in the config).
        min_count: the training threshold, kept in the config for reference.
        Other arguments: see SyntacticTokenizerBase.
    """

    vocab_files_names = {"vocab_file": "vocab.json"}
    _unk_starts_word = True  # <unk> stands for a whole word
    piece_models = ("words",)  # whole words, the rare ones as their classes; its size is set by the data

    def __init__(
        self, vocab_file=None, nonterminals=None, linearization="top_down", min_count=2, terminals=None, **kwargs
    ):
        if terminals is None:
            if vocab_file is None:
                raise ValueError(
                    "SyntacticWordTokenizer needs a word vocabulary: expected vocab_file (a vocab.json path) or "
                    "terminals; train one with SyntacticWordTokenizer.train(trees)"
                )
            with open(vocab_file, encoding="utf-8") as handle:
                saved = json.load(handle)
            terminals = sorted(saved, key=saved.get)
            expected = list(range(NUM_SPECIAL_IDS, NUM_SPECIAL_IDS + len(terminals)))
            if [saved[token] for token in terminals] != expected:
                raise ValueError(
                    f"{vocab_file}: terminal ids must be contiguous from {NUM_SPECIAL_IDS}, "
                    f"found {sorted(saved.values())[:5]}..."
                )
        self._terminal_tokens = list(terminals)
        self._terminal_starts_word = [True] * len(self._terminal_tokens)
        self._terminal_ids = {token: NUM_SPECIAL_IDS + i for i, token in enumerate(self._terminal_tokens)}
        if len(self._terminal_ids) != len(self._terminal_tokens):
            raise ValueError("the terminal vocabulary lists a token more than once")
        super().__init__(nonterminals=nonterminals, linearization=linearization, min_count=min_count, **kwargs)

    @classmethod
    def train(cls, trees, min_count=2, linearization="top_down", extra_nonterminals=(), pieces="words",
              **normalize_options):
        """Build the word vocabulary and the unknown-word classes from `trees` (as SyntacticTokenizer.train;
        `pieces` is "words", the one vocabulary this class builds, so that a caller may name it as for the other)."""
        _check_linearization(linearization)
        if pieces not in cls.piece_models:
            raise ValueError(f"pieces {pieces!r}: {cls.__name__} builds a vocabulary of {', '.join(cls.piece_models)}; "
                             "SyntacticTokenizer trains pieces")
        options = _normalization_options(normalize_options)
        if not isinstance(min_count, int) or min_count < 1:
            raise ValueError(f"min_count {min_count!r}: expected a positive integer")
        sentences, labels = _training_corpus(trees, options)
        counts = Counter(word for words in sentences for word in words)
        specials = {"<pad>", "<s>", "</s>", "<unk>"}
        kept = [w for w, c in counts.items() if c >= min_count and not _is_reserved_word(w, specials)]
        kept_set = set(kept)
        classes = sorted({unknown_word_signature(w) for w in counts if w not in kept_set and w != "<unk>"})
        words = sorted(kept, key=lambda word: (-counts[word], word))
        return cls(
            terminals=classes + words,
            nonterminals=sorted(set(labels) | set(extra_nonterminals)),
            linearization=linearization,
            min_count=min_count,
            **options,
        )

    def _encode_word(self, word):
        if word == self.unk_token:
            return [UNK_ID]
        if word in self._terminal_ids:
            return [self._terminal_ids[word]]
        return [self._terminal_ids.get(unknown_word_signature(word), UNK_ID)]

    def _word_from_tokens(self, tokens):
        return "".join(tokens)

    def save_vocabulary(self, save_directory, filename_prefix=None):
        if not os.path.isdir(save_directory):
            raise ValueError(f"save_vocabulary: {str(save_directory)!r} is not a directory")
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "vocab.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self._terminal_ids, handle, ensure_ascii=False, indent=0)
            handle.write("\n")
        return (path,)


# save_pretrained then writes auto_map {"AutoTokenizer": ["tokenization_slm.<Class>", null]} and copies this
# file with its relative imports (trees.py, linearizers.py) next to the config.
SyntacticTokenizer.register_for_auto_class("AutoTokenizer")
SyntacticWordTokenizer.register_for_auto_class("AutoTokenizer")
