"""Raw text -> sentences -> PTB-style words, by rule (no model, no downloaded data).

nltk's punkt models are not installed and cannot be fetched here, so sentences are found by the rules below.
They are tuned for news text such as XSum's BBC articles; `sentence_spans` gives each sentence's character
offsets so that messages can name its line.

Sentence boundaries (`sentence_spans`, `split_sentences`):
1. Blocks. With `line_breaks=True` (the default) every line is a block: XSum stores one paragraph per line
   (the human-evaluation sample one sentence per line), and a sentence never runs across a line break. With
   `line_breaks=False` (text wrapped at a fixed width) only blank lines separate blocks; single line breaks
   are spaces. A sentence never crosses a block.
2. Within a block, a sentence ends after a run of `.`, `!` or `?` (so `...` and `?!` too), together with the
   closing quotes and brackets right after it (`"`, `'`, `”`, `’`, `''`, `)`, `]`, `}`, `»`), when whitespace
   follows and the next text starts like a sentence: an uppercase letter, a digit, or an opening quote or
   bracket (`"`, `'`, `“`, `‘`, `` ` ``, `(`, `[`, `«`). A lowercase word after the mark continues the sentence.
   Tokenized text writes closing quotes apart (`the gap . '' Plans ...`): a token made only of closing
   quotes and brackets right after the marks is part of the sentence that ends there.
3. A single `.` does not end a sentence when the word it closes is
   - a title or other common abbreviation (case ignored): Mr., Mrs., Ms., Dr., Prof., St., Mt., Jr., Sr.,
     Rev., Gen., Col., Capt., Lt., Sgt., Gov., Sen., Rep., Hon., Insp., Supt., Det., Fr., Messrs., Mme.,
     Mlle., the months' short forms (Jan. ... Dec., not May), vs., v., e.g., i.e., cf., viz., approx., est.,
     fig., figs. (ABBREVIATIONS);
   - No., Nos., Art., p., pp., vol., ch., para. before a digit ("No. 10"; NUMBER_ABBREVIATIONS);
   - a single capital letter, an initial ("J. K. Rowling", "George W. Bush");
   - a dotted acronym of capitals ("U.S.", "U.K.", "U.N."): in news text it starts a name far more often
     than it ends a sentence.
   A period inside a token is no boundary by rule 2 (no whitespace follows): decimals (3.5), times (10.30),
   web addresses (bbc.co.uk).
Known limits: an abbreviation or acronym that does end its sentence ("... moved to the U.S. The ...") joins
the two sentences; "etc.", "a.m.", "Inc." and an ellipsis ("... I asked") end a sentence when a capital
follows; lines without final punctuation (headlines, captions) join the next sentence when line_breaks=False.
On the 50 XSum sample documents (CoreNLP's sentences, one per line) joined into one line each, these rules
find 763 of the 811 boundaries (94%; the rest follow headline-like lines) with 1 extra one (the ellipsis).

Words (`treebank_words`): nltk's TreebankWordTokenizer (rules, no data), the tokenization of the Penn
Treebank the models are trained on: clitics split ("can't" -> "ca n't"), quotes as `` and '', the final
period split off. Before it, curly quotes become straight ones (“ ” -> ", ‘ ’ -> '), which the tokenizer
knows, and £ € ¥ are split off a number as it splits $. Round brackets in words are escaped as the trees
write them (`(` -> -LRB-, `)` -> -RRB-: tokenization/trees.escape_word), so a word is spelled as in the
training trees.
"""

import re
from functools import lru_cache

from ..tokenization.trees import escape_word

ABBREVIATIONS = frozenset("""
    mr mrs ms dr prof st mt jr sr rev gen col capt lt sgt gov sen rep hon insp supt det fr messrs mme mlle
    jan feb mar apr jun jul aug sep sept oct nov dec
    vs v e.g i.e cf viz approx est fig figs
""".split())
NUMBER_ABBREVIATIONS = frozenset("no nos art p pp vol ch para".split())
CLOSING = "\"'”’)]}»"
OPENING = "\"'“‘`([«"
QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})

# A run of sentence-final marks, the closing quotes and brackets after it, and the whitespace after those.
_END = re.compile(rf"[.!?]+[{re.escape(CLOSING)}]*(?=\s)")
_DOTTED_ACRONYM = re.compile(r"(?:[A-Z]\.)+[A-Z]")
_CURRENCY = re.compile(r"([£€¥])")


def _blocks(text, line_breaks):
    """(start, end) of each block of rule 1."""
    pattern = r"[^\n]+" if line_breaks else r"\S(?:.|\n(?![ \t\r\f\v]*\n))*"
    return [(match.start(), match.end()) for match in re.finditer(pattern, text)]


def _word_before(text, position, block_start):
    """The word that ends at `position` (without leading quotes or brackets)."""
    start = position
    while start > block_start and not text[start - 1].isspace():
        start -= 1
    return text[start:position].lstrip(OPENING)


def _sentence_end(text, match, block_start, block_end):
    """Where the sentence ends after the run of marks `match` (rules 2 and 3), or None when it goes on."""
    end = match.end()
    following = end
    while True:
        while following < block_end and text[following].isspace():
            following += 1
        token_end = following
        while token_end < block_end and not text[token_end].isspace():
            token_end += 1
        # Tokenized text writes closing quotes apart (`the end . ''`): a token made only of them belongs here.
        if following < token_end and not text[following:token_end].strip(CLOSING):
            end = following = token_end
            continue
        break
    if following >= block_end:
        return None  # the block ends here anyway
    first = text[following]
    if not (first.isupper() or first.isdigit() or first in OPENING):
        return None
    if match.group().rstrip(CLOSING) != ".":
        return end
    word = _word_before(text, match.start(), block_start)
    if not word:
        return end  # a period on its own: tokenized text (" ... the end . The next ...")
    if word.lower() in ABBREVIATIONS:
        return None
    if word.lower() in NUMBER_ABBREVIATIONS and first.isdigit():
        return None
    if len(word) == 1 and word.isupper():
        return None  # an initial
    return None if _DOTTED_ACRONYM.fullmatch(word) else end


def sentence_spans(text, line_breaks=True):
    """(start, end) character offsets of each sentence of `text` (rules: module docstring), whitespace
    trimmed; text without any non-space character gives []."""
    spans = []
    for block_start, block_end in _blocks(text, line_breaks):
        start = block_start
        for match in _END.finditer(text, block_start, block_end):
            end = _sentence_end(text, match, block_start, block_end)
            if end is not None and end > start:
                spans.append((start, end))
                start = end
        spans.append((start, block_end))
    trimmed = []
    for start, end in spans:
        piece = text[start:end]
        if piece.strip():
            left = len(piece) - len(piece.lstrip())
            trimmed.append((start + left, start + len(piece.rstrip())))
    return trimmed


def split_sentences(text, line_breaks=True):
    """The sentences of `text` as strings (module docstring)."""
    return [text[start:end] for start, end in sentence_spans(text, line_breaks)]


def line_number(text, offset):
    """The 1-based line of `text` that holds character `offset` (for messages)."""
    return text.count("\n", 0, offset) + 1


@lru_cache(maxsize=1)
def _treebank_tokenizer():
    from nltk.tokenize.treebank import TreebankWordTokenizer

    return TreebankWordTokenizer()


def treebank_words(sentence):
    """PTB-style words of one sentence (module docstring), round brackets escaped as -LRB- / -RRB-."""
    text = _CURRENCY.sub(r" \1 ", sentence.translate(QUOTES))
    return [escape_word(word) for word in _treebank_tokenizer().tokenize(text)]


def text_words(text, line_breaks=True):
    """The PTB-style words of every sentence of `text`, one list (e.g. a summary of several sentences)."""
    return [word for sentence in split_sentences(text, line_breaks) for word in treebank_words(sentence)]


def lead_sentence(text, line_breaks=True):
    """The first sentence of `text` (the lead-1 baseline of summarization), or "" when it has none."""
    spans = sentence_spans(text, line_breaks)
    return text[spans[0][0] : spans[0][1]] if spans else ""


__all__ = ["ABBREVIATIONS", "NUMBER_ABBREVIATIONS", "lead_sentence", "line_number", "sentence_spans",
           "split_sentences", "text_words", "treebank_words"]
