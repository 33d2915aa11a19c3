"""GPT-2-style byte-level BPE word pieces (paper 003's models read GPT-2's vocabulary), with the `tokenizers` library.

SyntacticTokenizer splits each word into pieces with a piece model; this is the alternative to SentencePiece's
unigram model (`SyntacticTokenizer.train(..., pieces="byte_bpe")`). Every word is encoded on its own, after a
space, as GPT-2 encodes a word inside a sentence: its first piece carries GPT-2's space mark "Ġ" and starts the
word, the others continue it. Bytes are the alphabet, so no word is ever unknown.

The model is kept as the `tokenizers` JSON (saved as byte_bpe.json beside the tokenizer's config).
"""

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPACE_MARK = "Ġ"  # GPT-2's byte-level form of a leading space: the mark of a word's first piece


def train_byte_level_bpe(sentences, vocab_size):
    """The JSON of a byte-level BPE model trained on `sentences` (lists of words) with at most `vocab_size`
    pieces (the 256 bytes included: a smaller vocab_size is an error naming it)."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet):
        raise ValueError(f"vocab_size {vocab_size}: a byte-level BPE vocabulary holds at least the {len(alphabet)} bytes; "
                         f"expected vocab_size >= {len(alphabet)}")
    model = _empty_model()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=alphabet, special_tokens=[],
                                  show_progress=False)
    model.train_from_iterator((" ".join(words) for words in sentences), trainer=trainer)
    return model.to_str()


def _empty_model():
    model = Tokenizer(models.BPE())
    # No prefix space of its own: every word is encoded as " " + word (word_ids), so that all words are alike.
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    return model


class ByteLevelPieces:
    """A trained byte-level BPE model as SyntacticTokenizer's piece model: its pieces in id order, which of them
    start a word, a word's pieces and the word back from them."""

    def __init__(self, model_json):
        self.json = model_json
        self.model = Tokenizer.from_str(model_json)
        vocabulary = self.model.get_vocab()
        self.pieces = sorted(vocabulary, key=vocabulary.get)
        if [vocabulary[piece] for piece in self.pieces] != list(range(len(self.pieces))):
            raise ValueError("byte-level BPE model: expected piece ids 0..n-1 without gaps")

    def starts_word(self, piece):
        return piece.startswith(SPACE_MARK)

    def word_ids(self, word):
        """The model's piece ids of `word` (its first piece marked as a word start)."""
        return self.model.encode(" " + word, add_special_tokens=False).ids

    def word(self, pieces):
        """The word spelled by `pieces` (without the leading space of its first piece)."""
        text = self.model.decoder.decode(list(pieces))
        return text[1:] if text.startswith(" ") else text
