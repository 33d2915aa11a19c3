"""The tokenizer of hf-slm's proposal parsers: words in, word and character ids out; trees <-> training targets.

A proposal parser (a CRF constituency parser or a biaffine dependency parser) reads a sentence's words and draws
trees of them. Its tokenizer holds three vocabularies, saved together in `parser_vocab.json`:

- words: `<pad>`, `<s>`, `</s>`, `<unk>`, then the unknown-word classes of the rare training words (Petrov and
  Klein's signatures, tokenization_slm.unknown_word_signature) and the words seen at least `min_count` times. A
  sentence encodes as `<s> w1 ... wn </s>`: the boundary positions give a constituency parser its fenceposts and a
  dependency parser its root.
- characters: `<pad>`, `<unk>`, `<s>`, `</s>`, then every character of the training words; each position gets
  `max_word_length` character ids (a longer word keeps its first and last halves), `char_ids` [n + 2, C].
- the output labels: a constituency parser's bracketing labels (tokenization/parser_trees.py: treebank labels and
  their unary chains, BINARIZED and NO_CONSTITUENT; UNLABELLED for unlabelled trees) and, when its training trees
  had them, POS tags; a dependency parser's relations.

A parser over a pretrained encoder (BERT, RoBERTa, ...) also keeps that encoder's tokenizer, saved as its fast backend
(`encoder_tokenizer.json`, the `tokenizers` library's JSON, read without transformers' tokenizer classes): each
sentence then also gives the encoder's pieces, `piece_ids` and `piece_attention_mask` [P] (the encoder's own special
pieces around the words), and `word_piece_spans` [n + 2, 2], each position's [start, end) among them (`<s>` the
special pieces before the first word, `</s>` those after the last).

`tokenizer(words, is_split_into_words=True)` (one sentence or a batch; a string is split at spaces) gives
input_ids, attention_mask and char_ids (and the pieces' fields), padded on the right. `encode_target` turns a training tree into what the
loss reads (a bracketing's spans and tags, or heads and relations), and `decode_tree` writes a parser's structure as
a tree: PTB brackets (unlabelled brackets for unlabelled trees) or a dependency tree (inline or CoNLL-U).

This file is hub code: it is copied into parser checkpoints and imports only its siblings and transformers.
"""

import hashlib
import json
import os
from collections import Counter

from tokenizers import Tokenizer as PieceTokenizer
from transformers import PreTrainedTokenizer
from transformers.tokenization_utils_base import BatchEncoding
from transformers.utils import PaddingStrategy

from .parser_trees import (
    BINARIZED, NO_CONSTITUENT, RESERVED_LABELS, UNLABELLED, bracketed_string, spans_to_tree, split_tags, tree_to_spans,
)
from .tokenization_slm import unknown_word_signature
from .tree_type import Tree
from .trees import check_word_separators, drop_wrapper_root, has_preterminals, normalize_tree, parse_trees

WORD_SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
CHAR_SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
CHAR_PAD, CHAR_UNK, CHAR_BOS, CHAR_EOS = 0, 1, 2, 3
TREE_KINDS = ("constituency", "dependency")
# The normalization of a constituency parser's training trees (trees.normalize_tree options). Binarization and
# unary chains are the bracketing's own business (parser_trees.py), so they are not options here.
PARSER_NORMALIZATION = ("strip_traces", "strip_function_tags", "preterminals", "drop_root")


def _checked_words(words, where):
    if isinstance(words, str):
        words = check_word_separators(words, where).split()
    words = list(words)
    if not words:
        raise ValueError(f"{where}: an empty sentence; expected at least one word")
    for word in words:
        if not isinstance(word, str) or not word or any(c.isspace() for c in word):
            raise ValueError(f"{where}: word {word!r} is not a non-empty string without spaces")
    return words


def pad_pieces(records):
    """Right-pad the encoder pieces of a batch's records to its longest (piece id 0, masked out)."""
    width = max(len(record["piece_ids"]) for record in records)
    for record in records:
        missing = width - len(record["piece_ids"])
        record["piece_ids"] = record["piece_ids"] + [0] * missing
        record["piece_attention_mask"] = record["piece_attention_mask"] + [0] * missing


class ProposalParserTokenizer(PreTrainedTokenizer):
    """Words -> word and character ids for a proposal parser; its trees <-> training targets (module docstring).

    Args:
        vocab_file: the saved `parser_vocab.json` ({"words", "chars", "labels", "tags"}).
        words, chars, labels, tags: the vocabularies without their specials, instead of vocab_file (`train` builds
            them).
        tree_kind: "constituency" or "dependency".
        labelled: constituency trees with labels (False: paper 003's unlabelled trees).
        min_count, max_word_length: the training threshold of the word vocabulary, and the characters kept of a word.
        strip_traces, strip_function_tags, preterminals, drop_root: how bracketed training trees are normalized
            (trees.normalize_tree).
        encoder_tokenizer_file, encoder_tokenizer: a pretrained encoder's tokenizer, its saved backend (a file) or
            a `tokenizers.Tokenizer` (or its JSON string); None for a parser over its own BiLSTM.
    """

    vocab_files_names = {"vocab_file": "parser_vocab.json", "encoder_tokenizer_file": "encoder_tokenizer.json"}
    model_input_names = ["input_ids", "attention_mask", "char_ids"]
    PIECE_FIELDS = ("piece_ids", "piece_attention_mask")

    def __init__(self, vocab_file=None, words=None, chars=None, labels=None, tags=None, tree_kind="constituency",
                 labelled=True, min_count=2, max_word_length=20, strip_traces=True, strip_function_tags=False,
                 preterminals="auto", drop_root=True, pad_token=WORD_SPECIALS[PAD_ID], bos_token=WORD_SPECIALS[BOS_ID],
                 eos_token=WORD_SPECIALS[EOS_ID], unk_token=WORD_SPECIALS[UNK_ID], encoder_tokenizer_file=None,
                 encoder_tokenizer=None, **kwargs):
        if tree_kind not in TREE_KINDS:
            raise ValueError(f"tree_kind {tree_kind!r}: expected one of {TREE_KINDS}")
        if vocab_file is not None:
            with open(vocab_file, encoding="utf-8") as handle:
                saved = json.load(handle)
            words, chars, labels, tags = saved["words"], saved["chars"], saved["labels"], saved.get("tags")
        if words is None or chars is None or labels is None:
            raise ValueError("ProposalParserTokenizer needs its vocabularies: vocab_file (parser_vocab.json), or "
                             "words, chars and labels; build them with ProposalParserTokenizer.train(...)")
        if not isinstance(max_word_length, int) or max_word_length < 2:
            raise ValueError(f"max_word_length {max_word_length!r}: expected an integer >= 2")
        self.tree_kind = tree_kind
        self.labelled = bool(labelled) if tree_kind == "constituency" else True
        self.max_word_length = max_word_length
        self.normalization = {"strip_traces": strip_traces, "strip_function_tags": strip_function_tags,
                              "preterminals": preterminals, "drop_root": drop_root}
        self._id_to_word = list(WORD_SPECIALS) + list(words)
        self._word_to_id = {word: index for index, word in enumerate(self._id_to_word)}
        if len(self._word_to_id) != len(self._id_to_word):
            raise ValueError("the word vocabulary lists a word more than once")
        self._chars = list(CHAR_SPECIALS) + list(chars)
        self._char_to_id = {char: index for index, char in enumerate(self._chars)}
        self.labels = list(labels)
        self.label_ids = {label: index for index, label in enumerate(self.labels)}
        self.tags = list(tags) if tags else None
        self.tag_ids = {tag: index for index, tag in enumerate(self.tags or [])}
        if isinstance(encoder_tokenizer, str):
            encoder_tokenizer = PieceTokenizer.from_str(encoder_tokenizer)
        if encoder_tokenizer is None and encoder_tokenizer_file is not None:
            encoder_tokenizer = PieceTokenizer.from_file(encoder_tokenizer_file)
        self.encoder_tokenizer = encoder_tokenizer
        super().__init__(pad_token=pad_token, bos_token=bos_token, eos_token=eos_token, unk_token=unk_token,
                         tree_kind=tree_kind,
                         labelled=self.labelled, min_count=min_count, max_word_length=max_word_length,
                         **self.normalization, **kwargs)

    # ---- building the vocabularies -------------------------------------------------------------------
    @classmethod
    def train(cls, examples, tree_kind="constituency", labelled=True, min_count=2, max_word_length=20,
              encoder_tokenizer=None, **normalization):
        """A tokenizer for training examples: constituency trees (bracketed strings or nltk Trees, normalized with
        `normalization`) or dependency examples {"words", "relations"}. Words seen fewer than `min_count` times are
        represented by their unknown-word classes. `encoder_tokenizer`: a pretrained encoder's (class docstring)."""
        words, labels, tags = [], Counter(), Counter()
        probe = cls(words=[], chars=[], labels=[], tree_kind=tree_kind, labelled=labelled,
                    max_word_length=max_word_length, **normalization)
        for index, example in enumerate(examples):
            if tree_kind == "dependency":
                words.append(list(example["words"]))
                labels.update(example.get("relations") or ["_"] * len(example["words"]))
                continue
            sentence, spans, sentence_tags = probe.tree_spans(example, f"training tree {index}")
            words.append(sentence)
            labels.update(label for _, _, label in spans)
            if sentence_tags is not None and labelled:  # an unlabelled tree has no POS tags to write
                tags.update(sentence_tags)
        if not words:
            raise ValueError("no training examples: expected at least one tree")
        counts = Counter(word for sentence in words for word in sentence)
        kept = sorted((w for w, c in counts.items() if c >= min_count and w not in WORD_SPECIALS
                       and not (w.startswith("<UNK") and w.endswith(">"))), key=lambda w: (-counts[w], w))
        kept_set = set(kept)
        classes = sorted({unknown_word_signature(w) for w in counts if w not in kept_set})
        chars = sorted({char for word in counts for char in word})
        if tree_kind == "constituency":  # the reserved labels the bracketings may need, whether seen or not
            labels.update({label: 0 for label in ((BINARIZED, NO_CONSTITUENT) if labelled else RESERVED_LABELS)})
        return cls(words=classes + kept, chars=chars, labels=sorted(labels), tags=sorted(tags) or None,
                   tree_kind=tree_kind, labelled=labelled, min_count=min_count, max_word_length=max_word_length,
                   encoder_tokenizer=encoder_tokenizer, **normalization)

    # ---- vocabulary (transformers' interface) --------------------------------------------------------
    @property
    def vocab_size(self):
        return len(self._id_to_word)

    def __len__(self):
        return len(self._id_to_word)

    def get_vocab(self):
        return dict(self._word_to_id)

    def _convert_token_to_id(self, token):
        return self._word_to_id.get(token, UNK_ID)

    def _convert_id_to_token(self, index):
        if not 0 <= index < len(self._id_to_word):
            raise ValueError(f"id {index} is outside the vocabulary: expected 0 <= id < {len(self._id_to_word)}")
        return self._id_to_word[index]

    @property
    def num_chars(self):
        return len(self._chars)

    @property
    def vocabulary_fingerprint(self):
        """A short hash of the three vocabularies in id order (a parser config records its tokenizer's)."""
        text = json.dumps([self._id_to_word, self._chars, self.labels, self.tags])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def save_vocabulary(self, save_directory, filename_prefix=None):
        if not os.path.isdir(save_directory):
            raise ValueError(f"save_vocabulary: {str(save_directory)!r} is not a directory")
        prefix = filename_prefix + "-" if filename_prefix else ""
        path = os.path.join(save_directory, prefix + "parser_vocab.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"words": self._id_to_word[len(WORD_SPECIALS):], "chars": self._chars[len(CHAR_SPECIALS):],
                       "labels": self.labels, "tags": self.tags}, handle, ensure_ascii=False)
            handle.write("\n")
        if self.encoder_tokenizer is None:
            return (path,)
        pieces = os.path.join(save_directory, prefix + "encoder_tokenizer.json")
        self.encoder_tokenizer.save(pieces)
        return (path, pieces)

    # ---- encoding words ------------------------------------------------------------------------------
    def word_id(self, word):
        if word in self._word_to_id and self._word_to_id[word] >= len(WORD_SPECIALS):
            return self._word_to_id[word]
        return self._word_to_id.get(unknown_word_signature(word), UNK_ID)

    def _char_row(self, word):
        if len(word) > self.max_word_length:  # the first and last characters carry most of what a word says
            half = self.max_word_length // 2
            word = word[:half] + word[len(word) - (self.max_word_length - half):]
        row = [self._char_to_id.get(char, CHAR_UNK) for char in word]
        return row + [CHAR_PAD] * (self.max_word_length - len(row))

    def _boundary_row(self, char_id):
        return [char_id] + [CHAR_PAD] * (self.max_word_length - 1)

    def encode_words(self, words, where="sentence"):
        """{"input_ids", "char_ids"} of one sentence: `<s>`, its words, `</s>` (and the encoder's pieces)."""
        words = _checked_words(words, where)
        encoded = {"input_ids": [BOS_ID] + [self.word_id(word) for word in words] + [EOS_ID],
                   "char_ids": [self._boundary_row(CHAR_BOS)] + [self._char_row(w) for w in words]
                   + [self._boundary_row(CHAR_EOS)]}
        if self.encoder_tokenizer is not None:
            encoded.update(self._pieces(words))
        return encoded

    def _pieces(self, words):
        """piece_ids, piece_attention_mask and word_piece_spans of one sentence (module docstring)."""
        pieces = self.encoder_tokenizer.encode(words, is_pretokenized=True, add_special_tokens=True)
        owners = pieces.word_ids
        starts, ends = [None] * len(words), [None] * len(words)
        for position, owner in enumerate(owners):
            if owner is not None:
                starts[owner] = position if starts[owner] is None else starts[owner]
                ends[owner] = position + 1
        first = next((p for p, owner in enumerate(owners) if owner is not None), len(owners))
        last = max((p + 1 for p, owner in enumerate(owners) if owner is not None), default=0)
        # a word with no piece of its own (the encoder drops it) gets an empty span, hence a zero vector
        spans = [[0, first]] + [[start, end] if start is not None else [0, 0] for start, end in zip(starts, ends)]
        return {"piece_ids": list(pieces.ids), "piece_attention_mask": [1] * len(pieces.ids),
                "word_piece_spans": spans + [[last, len(owners)]]}

    def _encode_plus(self, text, text_pair=None, add_special_tokens=True, padding_strategy=PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy=None, max_length=None, stride=0, is_split_into_words=False,
                     pad_to_multiple_of=None, padding_side=None, return_tensors=None, return_token_type_ids=None,
                     return_attention_mask=None, return_overflowing_tokens=False, return_special_tokens_mask=False,
                     return_offsets_mapping=False, return_length=False, verbose=True, split_special_tokens=False,
                     **kwargs):
        """One sentence or a batch: words (is_split_into_words=True) or strings of words separated by spaces."""
        if text_pair is not None or return_offsets_mapping or kwargs:
            raise ValueError("a parser tokenizer encodes sentences only: no text_pair, offsets or "
                             f"{sorted(kwargs)}")
        if isinstance(text, str):
            batched = False
        elif isinstance(text, (list, tuple)) and text:
            batched = not is_split_into_words or isinstance(text[0], (list, tuple))
        else:
            raise ValueError(f"input {text!r}: expected a sentence (a string of words, or a list of words with "
                             "is_split_into_words=True) or a batch of them")
        records = [self.encode_words(item, f"sentence {index}" if batched else "sentence")
                   for index, item in enumerate(text if batched else [text])]
        if self.encoder_tokenizer is not None and padding_strategy != PaddingStrategy.DO_NOT_PAD:
            pad_pieces(records)
        for record in records:
            if return_length:
                record["length"] = len(record["input_ids"])
        encoded = {key: [record[key] for record in records] for key in records[0]} if batched else records[0]
        if padding_strategy != PaddingStrategy.DO_NOT_PAD or return_attention_mask is not False:
            encoded = self.pad(encoded, padding=padding_strategy.value, max_length=max_length,
                               pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                               return_attention_mask=return_attention_mask is not False)
        return BatchEncoding(dict(encoded), tensor_type=return_tensors, prepend_batch_axis=not batched)

    def _pad(self, encoded_inputs, max_length=None, padding_strategy=PaddingStrategy.DO_NOT_PAD,
             pad_to_multiple_of=None, padding_side=None, return_attention_mask=None):
        """transformers' padding of input_ids, plus char_ids padded with rows of `<pad>` characters (right only)."""
        char_ids = encoded_inputs.pop("char_ids", None)
        spans = encoded_inputs.pop("word_piece_spans", None)
        pieces = {name: encoded_inputs.pop(name) for name in self.PIECE_FIELDS if name in encoded_inputs}
        length = len(encoded_inputs["input_ids"])
        if (padding_side or self.padding_side) != "right":
            raise ValueError("a parser tokenizer pads on the right (padding_side='right')")
        padded = super()._pad(encoded_inputs, max_length=max_length, padding_strategy=padding_strategy,
                              pad_to_multiple_of=pad_to_multiple_of, padding_side="right",
                              return_attention_mask=return_attention_mask)
        missing = len(padded["input_ids"]) - length
        if char_ids is not None:
            padded["char_ids"] = list(char_ids) + [[CHAR_PAD] * self.max_word_length] * missing
        if spans is not None:
            padded["word_piece_spans"] = list(spans) + [[0, 0]] * missing
        padded.update(pieces)  # padded across the batch by pad_pieces
        return padded

    def _decode(self, token_ids, skip_special_tokens=False, **kwargs):
        ids = [int(token_ids)] if isinstance(token_ids, int) else [int(i) for i in token_ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)]
        return " ".join(self._convert_id_to_token(i) for i in ids)

    # ---- trees <-> targets ---------------------------------------------------------------------------
    def read_tree(self, tree, where="tree"):
        """(a constituency tree without POS tags, its tags or None) of a bracketed string or an nltk Tree, normalized
        as this tokenizer's training trees: traces and function tags as its options say, POS tags taken off
        (`preterminals`: "auto" when every word has one, True, False for none), then a wrapper root dropped, in
        the order trees.normalize_tree takes these steps."""
        if isinstance(tree, str):
            found = parse_trees(tree, source=where)
            if len(found) != 1:
                raise ValueError(f"{where}: {len(found)} trees; expected one")
            tree = found[0]
        if not isinstance(tree, Tree):
            raise ValueError(f"{where}: {type(tree).__name__}; expected a bracketed tree")
        options = self.normalization
        tree = normalize_tree(tree, strip_traces=options["strip_traces"],
                              strip_function_tags=options["strip_function_tags"], preterminals=False, drop_root=False)
        tagged = has_preterminals(tree) if options["preterminals"] == "auto" else bool(options["preterminals"])
        tree, tags = split_tags(tree) if tagged else (tree, None)
        return (drop_wrapper_root(tree) if options["drop_root"] else tree), tags

    def tree_spans(self, tree, where="tree"):
        """(words, spans [(start, end, label)], tags or None) of a constituency tree, labels as strings."""
        tree, tags = self.read_tree(tree, where)
        words, spans = tree_to_spans(tree, labelled=self.labelled, where=where)
        return words, spans, tags

    def _label_id(self, label, where, vocabulary, what):
        if label not in vocabulary:
            raise ValueError(f"{where}: {what} {label!r} is not in this parser's vocabulary (it was not in the "
                             f"training data); expected one of {sorted(vocabulary)[:20]}")
        return vocabulary[label]

    def encode_target(self, example, where="tree"):
        """What a parser's loss reads of one training example, with its words' encoding:
        constituency (a tree): "spans" [[start, end, label id]] and, with tags, "tags" (ids);
        dependency ({"words", "heads", "relations"}): "heads" (0 the root) and "relations" (ids)."""
        if self.tree_kind == "dependency":
            encoded = self.encode_words(example["words"], where)
            relations = example.get("relations") or ["_"] * len(example["words"])
            encoded["heads"] = list(example["heads"])
            encoded["relations"] = [self._label_id(r, where, self.label_ids, "relation") for r in relations]
            return encoded
        words, spans, tags = self.tree_spans(example, where)
        encoded = self.encode_words(words, where)
        encoded["spans"] = [[start, end, self._label_id(label, where, self.label_ids, "label")]
                            for start, end, label in spans]
        if self.tags is not None:
            if tags is None:
                raise ValueError(f"{where}: the tree has no POS tags, but this parser predicts them; expected a tree "
                                 "with a tag over every word")
            encoded["tags"] = [self._label_id(tag, where, self.tag_ids, "POS tag") for tag in tags]
        return encoded

    def decode_tree(self, words, structure, dependency_format="inline"):
        """A parser's structure as a tree string.

        Constituency: structure {"spans": [(start, end, label id)], "tags": [tag id] or None} -> PTB brackets (POS
        tags over the words when given), or unlabelled brackets for an unlabelled parser.
        Dependency: structure {"heads": [...], "relations": [relation id] or None} -> an inline tree
        `The/2 bird/3 sings/0` (dependency_format "inline"), or CoNLL-U lines ("conllu": ID, FORM, HEAD, DEPREL)."""
        words = list(words)
        if self.tree_kind == "dependency":
            heads = [int(h) for h in structure["heads"]]
            if dependency_format == "inline":
                return " ".join(f"{word}/{head}" for word, head in zip(words, heads))
            relations = structure.get("relations")
            names = [self.labels[r] for r in relations] if relations is not None else ["_"] * len(words)
            return "\n".join("\t".join([str(i), word, "_", "_", "_", "_", str(head), name, "_", "_"])
                             for i, (word, head, name) in enumerate(zip(words, heads, names), start=1))
        spans = [(int(start), int(end), self.labels[int(label)]) for start, end, label in structure["spans"]]
        tags = structure.get("tags")
        tags = [self.tags[int(t)] for t in tags] if tags is not None and self.tags and self.labelled else None
        return bracketed_string(spans_to_tree(words, spans, tags), self.labelled)

    def label_kinds(self):
        """{"dummy": id of BINARIZED or None, "no_constituent": id or None} of a constituency vocabulary."""
        return {"dummy": self.label_ids.get(BINARIZED), "no_constituent": self.label_ids.get(NO_CONSTITUENT),
                "unlabelled": self.label_ids.get(UNLABELLED)}


ProposalParserTokenizer.register_for_auto_class("AutoTokenizer")
