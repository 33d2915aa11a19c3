"""The tokenizers: vocabulary layout, encoding and decoding of trees, words and actions, word starts, HF API
(batches, padding, tensors, save/load, AutoTokenizer with remote code), errors, unknown-word classes, and a
round trip of every GUM tree when ../shared/data is present."""

import inspect
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import torch

from hf_slm.modeling.grammars import ActionKind, ActionLayout
from hf_slm.tokenization.linearizers import top_down_actions
from hf_slm.tokenization.tokenization_slm import (
    NORMALIZATION_DEFAULTS,
    SyntacticTokenizer,
    SyntacticTokenizerBase,
    SyntacticWordTokenizer,
    unknown_word_signature,
)
from hf_slm.tokenization.trees import normalize_tree, parse_tree, parse_trees, read_trees, tree_to_string

FIXTURE = Path(__file__).parent / "fixtures" / "tokenizer_trees.mrg"
DATA = Path(__file__).parents[2] / "shared" / "data"
GUM = DATA / "gum_const"

# The fixture trees as one-line strings with POS tags, wrappers, function tags and a trace, as a user would
# pass them; and, written by hand, what they normalize to with strip_function_tags=True.
RAW_TREES = [tree_to_string(tree) for tree in parse_trees(FIXTURE.read_text(encoding="utf-8"))]
NORMALIZED_TREES = [
    "(S (NP the bird) (VP sings) .)",
    "(S (NP the birds) (VP sang (ADVP loudly)) .)",
    "(S (NP the cat) (VP sleeps (PP on (NP the mat))) .)",
    "(S (NP Gorbachev) (VP visited (NP NASA) (PP in (NP 1989))) .)",
    "(S (NP the proposal) (VP was (VP rejected)) .)",
    "(S (NP they) (VP opposed (NP antidisestablishmentarianism)) .)",
    "(SBARQ (WHNP who) (SQ saw (NP the well-known bird)) ?)",
    "(S (NP the cats) (VP were (ADJP happy)) .)",
    "(NP (NP a quick summary) : (NP 12 results))",
    "(FRAG (INTJ yes) !)",
]
FIXTURE_LABELS = ["ADJP", "ADVP", "FRAG", "INTJ", "NP", "PP", "S", "SBARQ", "SQ", "VP", "WHNP"]
LONG_WORD = "antidisestablishmentarianism"  # 28 characters: more than a piece may hold (16), so >= 2 pieces


@pytest.fixture(scope="module")
def tokenizer():
    return SyntacticTokenizer.train(
        FIXTURE, strip_function_tags=True, sentencepiece_options={"max_sentencepiece_length": 16}
    )


@pytest.fixture(scope="module")
def word_tokenizer():
    return SyntacticWordTokenizer.train(FIXTURE)


@pytest.fixture(scope="module")
def bpe_tokenizer():
    return SyntacticTokenizer.train(FIXTURE, vocab_size=300, pieces="byte_bpe", strip_function_tags=True)


def _layout_tokens(tok):
    layout = tok.action_layout
    tokens = tok.convert_ids_to_tokens(list(range(len(tok))))
    return layout, tokens


# ---- vocabulary layout --------------------------------------------------------------------------------
def test_normalization_defaults_are_those_of_normalize_tree():
    signature = inspect.signature(normalize_tree)
    defaults = {name: p.default for name, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert NORMALIZATION_DEFAULTS == defaults
    init = inspect.signature(SyntacticTokenizerBase.__init__).parameters
    assert {name: init[name].default for name in defaults} == defaults


@pytest.mark.parametrize("which", ["tokenizer", "word_tokenizer"])
def test_vocabulary_ranges_are_contiguous_and_match_the_action_layout(which, request):
    tok = request.getfixturevalue(which)
    layout, tokens = _layout_tokens(tok)
    assert set(layout) == {
        "pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id",
        "open_nt_start", "open_nt_stop", "close_nt_start", "close_nt_stop",
    }  # fmt: skip
    assert layout["unk_token_id"] == tok.unk_token_id
    assert tokens[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert (layout["pad_token_id"], layout["bos_token_id"], layout["eos_token_id"]) == (0, 1, 2)
    assert layout["open_nt_stop"] == layout["close_nt_start"]
    assert layout["close_nt_stop"] == len(tok) == tok.vocab_size == len(tok.get_vocab())

    labels = tok.nonterminals
    assert labels == sorted(labels)
    assert tokens[layout["open_nt_start"] : layout["open_nt_stop"]] == ["(" + label for label in labels]
    assert tokens[layout["close_nt_start"] : layout["close_nt_stop"]] == [label + ")" for label in labels]
    terminals = tokens[4 : layout["open_nt_start"]]
    assert terminals and not any("(" in t or ")" in t for t in terminals)
    assert all(tok.get_vocab()[token] == index for index, token in enumerate(tokens))

    grammar_layout = ActionLayout(**tok.action_layout)
    kinds = grammar_layout.kinds(list(range(len(tok)))).tolist()
    n_terminals, n_labels = len(terminals), len(labels)
    assert kinds == (
        [ActionKind.PAD, ActionKind.BOS, ActionKind.EOS, ActionKind.TERMINAL]
        + [ActionKind.TERMINAL] * n_terminals
        + [ActionKind.OPEN_NT] * n_labels
        + [ActionKind.CLOSE_NT] * n_labels
    )
    for label in labels:
        open_id, close_id = tok.convert_tokens_to_ids(["(" + label, label + ")"])
        assert grammar_layout.closing_id_for(open_id) == close_id


def test_training_collects_the_normalized_labels(tokenizer, word_tokenizer):
    assert tokenizer.nonterminals == FIXTURE_LABELS
    # The word tokenizer was trained with the defaults: function tags stay, the trace's empty NP goes.
    assert word_tokenizer.nonterminals == sorted(
        ["S", "NP-SBJ", "VP", "ADVP", "PP-LOC", "NP", "PP-TMP", "NP-SBJ-1", "SBARQ", "WHNP", "SQ", "ADJP-PRD",
         "FRAG", "INTJ"]
    )  # fmt: skip


def test_sentencepiece_pieces_fill_the_terminal_range(tokenizer):
    sp = tokenizer.sp_model
    own_pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_unknown(i) or sp.is_control(i))]
    _, tokens = _layout_tokens(tokenizer)
    assert tokens[4 : tokenizer.action_layout["open_nt_start"]] == own_pieces
    # Every character of the training words is covered (character_coverage 1.0).
    characters = {c for tree in read_trees(FIXTURE) for word in tree.leaves() for c in word}
    assert characters <= set("".join(own_pieces))


# ---- encoding and decoding ----------------------------------------------------------------------------
def test_every_fixture_tree_decodes_to_its_normalized_string(tokenizer):
    for raw, expected in zip(RAW_TREES, NORMALIZED_TREES, strict=True):
        ids = tokenizer(raw)["input_ids"]
        assert ids[0] == tokenizer.bos_token_id and tokenizer.eos_token_id not in ids  # no </s> after a tree
        assert tokenizer.decode(ids, skip_special_tokens=True) == expected
        assert tokenizer.decode(tokenizer.encode(expected), skip_special_tokens=True) == expected  # already-normalized input


def test_example_sentence_actions(tokenizer):
    ids = tokenizer("(ROOT (S (NP (DT the) (NN bird)) (VP (VBZ sings))))")["input_ids"]
    assert tokenizer.decode_actions(ids) == ["(S", "(NP", "the", "bird", "NP)", "(VP", "sings", "VP)", "S)"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "(S (NP the bird) (VP sings))"
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[:3] == ["<s>", "(S", "(NP"] and tokens[-2:] == ["VP)", "S)"]


def test_encode_actions_matches_tree_encoding(tokenizer):
    actions = ["(S", "(NP", "the", "bird", "NP)", "S)"]
    assert tokenizer.encode_actions(actions)["input_ids"] == tokenizer("(S (NP the bird))")["input_ids"]
    assert tokenizer.encode_actions(" ".join(actions))["input_ids"] == tokenizer.encode("(S (NP the bird))")
    for raw in RAW_TREES:
        tree = normalize_tree(parse_tree(raw), strip_function_tags=True)
        assert tokenizer.encode_actions(top_down_actions(tree))["input_ids"] == tokenizer(raw)["input_ids"]
    # Prefixes (generation) encode too, and without <s> when asked.
    prefix = tokenizer.encode_actions(["(S", "(NP", "the"], add_special_tokens=False)["input_ids"]
    assert prefix == tokenizer("(S (NP the bird))")["input_ids"][1 : 1 + len(prefix)]
    assert tokenizer.decode(prefix, skip_special_tokens=True) == "(S (NP the"


def _words_by_starts(tokenizer, ids, starts):
    """Group the terminal tokens into words by word_starts; NTs and specials end a word."""
    tokens = tokenizer.convert_ids_to_tokens(ids)
    open_start = tokenizer.action_layout["open_nt_start"]
    words = []
    for index, token, start in zip(ids, tokens, starts, strict=True):
        if index < 3 or index >= open_start:
            assert not start, f"{token!r} is not a terminal but is marked as a word start"
            words.append(None)
        elif start:
            words.append([token])
        else:
            assert words and words[-1] is not None, f"continuation piece {token!r} follows no word start"
            words[-1].append(token)
    return [w for w in words if w is not None]


def test_word_starts_mark_the_first_piece_of_each_word(tokenizer):
    raw = RAW_TREES[5]
    encoded = tokenizer(raw, return_word_starts=True)
    ids, starts = encoded["input_ids"], encoded["word_starts"]
    assert len(starts) == len(ids) and sum(starts) == 4  # they opposed antidisestablishmentarianism .
    words = _words_by_starts(tokenizer, ids, starts)
    assert ["".join(pieces)[1:] for pieces in words] == ["they", "opposed", LONG_WORD, "."]
    for pieces in words:
        assert pieces[0].startswith("\u2581") and not any(p.startswith("\u2581") for p in pieces[1:])
    long_pieces = words[2]
    assert len(long_pieces) >= 2
    assert tokenizer.tokenize([LONG_WORD], is_split_into_words=True) == long_pieces
    mask = tokenizer.word_start_mask
    assert [mask[i] for i in ids] == starts


def test_unknown_characters_become_unk(tokenizer):
    encoded = tokenizer(["the", "\u03a9\u03a9"], is_split_into_words=True, return_word_starts=True)
    ids, starts = encoded["input_ids"], encoded["word_starts"]
    # The word-boundary mark is a piece of its own, then one <unk> for the run of unseen characters.
    assert tokenizer.convert_ids_to_tokens(ids[-2:]) == ["\u2581", "<unk>"]
    assert ids[-1] == tokenizer.unk_token_id and starts[-2:] == [True, False]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "the <unk>"
    assert tokenizer.decode(tokenizer(["na\u00efve"], is_split_into_words=True)["input_ids"], skip_special_tokens=True) == "na<unk>ve"


def test_words_encode_without_eos(tokenizer):
    words = ["the", "bird", "sang", LONG_WORD]
    ids = tokenizer(words, is_split_into_words=True)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and tokenizer.eos_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == "the bird sang " + LONG_WORD
    # A string that is not a bracketed tree is taken as words.
    assert tokenizer("the bird sang " + LONG_WORD)["input_ids"] == ids
    # Without special tokens, exactly the pieces of the words.
    assert tokenizer(words, is_split_into_words=True, add_special_tokens=False)["input_ids"] == ids[1:]


def test_terminals_linearization_ends_with_eos():
    tok = SyntacticTokenizer.train(FIXTURE, linearization="terminals", strip_function_tags=True)
    encoded = tok(RAW_TREES[0], return_word_starts=True)
    ids = encoded["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[-1] == tok.eos_token_id
    assert all(i < tok.action_layout["open_nt_start"] for i in ids)
    assert sum(encoded["word_starts"]) == 4
    assert tok.decode(ids, skip_special_tokens=True) == "the bird sings ."
    assert tok.init_kwargs["linearization"] == "terminals"
    # Prompts do not end: no </s> after words.
    assert tok(["the", "bird"], is_split_into_words=True)["input_ids"][-1] != tok.eos_token_id


def test_tree_objects_are_taken_as_normalized(tokenizer):
    tree = normalize_tree(parse_tree(RAW_TREES[2]), strip_function_tags=True)
    assert tokenizer(tree)["input_ids"] == tokenizer(RAW_TREES[2])["input_ids"]
    batch = tokenizer([tree, RAW_TREES[3]])["input_ids"]
    assert tokenizer.decode(batch, skip_special_tokens=True) == NORMALIZED_TREES[2:4]


# ---- HF API: batches, padding, tensors, pickling -------------------------------------------------------
@pytest.mark.parametrize("side", ["right", "left"])
def test_batch_padding_and_tensors(tokenizer, side):
    singles = [tokenizer(raw, return_word_starts=True) for raw in RAW_TREES[:4]]
    batch = tokenizer(RAW_TREES[:4], padding=True, return_tensors="pt", return_word_starts=True, padding_side=side)
    assert set(batch) == {"input_ids", "attention_mask", "word_starts"}
    width = max(len(s["input_ids"]) for s in singles)
    assert batch["input_ids"].shape == (4, width) and batch["input_ids"].dtype == torch.long
    assert batch["word_starts"].dtype == torch.bool and batch["attention_mask"].shape == (4, width)
    for row, single in enumerate(singles):
        n = len(single["input_ids"])
        real = slice(0, n) if side == "right" else slice(width - n, width)
        pad = slice(n, width) if side == "right" else slice(0, width - n)
        assert batch["input_ids"][row, real].tolist() == single["input_ids"]
        assert batch["word_starts"][row, real].tolist() == single["word_starts"]
        assert batch["attention_mask"][row].sum().item() == n and batch["attention_mask"][row, real].all()
        assert (batch["input_ids"][row, pad] == tokenizer.pad_token_id).all()
        assert not batch["word_starts"][row, pad].any()
    assert tokenizer.decode(batch["input_ids"], skip_special_tokens=True) == NORMALIZED_TREES[:4]


def test_single_input_tensors_and_word_batches(tokenizer):
    single = tokenizer(RAW_TREES[0], return_tensors="pt")
    assert single["input_ids"].shape == (1, len(tokenizer(RAW_TREES[0])["input_ids"]))
    words = tokenizer([["the", "bird"], ["a", "cat", "sleeps"]], is_split_into_words=True, padding=True)
    assert len(words["input_ids"][0]) == len(words["input_ids"][1])
    assert tokenizer.decode(words["input_ids"], skip_special_tokens=True) == ["the bird", "a cat sleeps"]
    padded = tokenizer.pad([tokenizer(r, return_word_starts=True) for r in RAW_TREES[:2]], return_tensors="pt")
    assert padded["word_starts"].shape == padded["input_ids"].shape


def test_pickle_round_trip_keeps_ids_and_does_not_depend_on_past_inputs(tokenizer):
    before = pickle.dumps(tokenizer)
    copy = pickle.loads(before)
    assert [copy(raw)["input_ids"] for raw in RAW_TREES] == [tokenizer(raw)["input_ids"] for raw in RAW_TREES]
    tokenizer(["some", "words", "never", "encoded", "before"], is_split_into_words=True)
    assert pickle.dumps(tokenizer) == before  # datasets.map fingerprints the pickled tokenizer


# ---- save / load --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "which, cls, vocab_file",
    [("tokenizer", SyntacticTokenizer, "spiece.model"), ("word_tokenizer", SyntacticWordTokenizer, "vocab.json")],
)
def test_save_and_load_round_trip(which, cls, vocab_file, request, tmp_path):
    tok = request.getfixturevalue(which)
    tok.save_pretrained(tmp_path)
    for name in (vocab_file, "tokenizer_config.json", "tokenization_slm.py", "trees.py", "linearizers.py"):
        assert (tmp_path / name).is_file(), name
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["auto_map"] == {"AutoTokenizer": [f"tokenization_slm.{cls.__name__}", None]}
    assert config["nonterminals"] == tok.nonterminals and config["linearization"] == "top_down"
    assert {name: config[name] for name in NORMALIZATION_DEFAULTS} == tok.normalization
    loaded = cls.from_pretrained(tmp_path)
    assert loaded.get_vocab() == tok.get_vocab() and loaded.action_layout == tok.action_layout
    assert loaded.normalization == tok.normalization
    for raw in RAW_TREES:
        assert loaded(raw, return_word_starts=True) == tok(raw, return_word_starts=True)


def test_autotokenizer_loads_both_classes_from_the_library_without_remote_code(tokenizer, word_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    for tok in (tokenizer, word_tokenizer):
        directory = tmp_path / type(tok).__name__
        tok.save_pretrained(directory)
        loaded = AutoTokenizer.from_pretrained(directory)  # `import hf_slm` registered the classes
        assert type(loaded) is type(tok)
        assert loaded(RAW_TREES[0])["input_ids"] == tok(RAW_TREES[0])["input_ids"]


def test_autotokenizer_loads_saved_tokenizers_with_remote_code(tokenizer, word_tokenizer, bpe_tokenizer, tmp_path):
    subword_dir, word_dir, bpe_dir = tmp_path / "subword", tmp_path / "word", tmp_path / "bpe"
    tokenizer.save_pretrained(subword_dir)
    word_tokenizer.save_pretrained(word_dir)
    bpe_tokenizer.save_pretrained(bpe_dir)
    script = textwrap.dedent(
        """
        import json, sys

        class BlockLibrary:  # the checkpoint must not need the hf_slm library
            def find_spec(self, name, path=None, target=None):
                if name == "hf_slm" or name.startswith("hf_slm."):
                    raise ImportError("hf_slm is not installed here")

        sys.meta_path.insert(0, BlockLibrary())
        from transformers import AutoTokenizer

        result = {}
        for directory in sys.argv[2:]:
            tok = AutoTokenizer.from_pretrained(directory, trust_remote_code=True)
            result[directory] = {
                "class": type(tok).__name__,
                "module": type(tok).__module__,
                "ids": tok(sys.argv[1])["input_ids"],
                "layout": tok.action_layout,
            }
        print(json.dumps(result))
        """
    )
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", script, RAW_TREES[0], str(subword_dir), str(word_dir), str(bpe_dir)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for directory, tok in ((subword_dir, tokenizer), (word_dir, word_tokenizer), (bpe_dir, bpe_tokenizer)):
        loaded = result[str(directory)]
        assert loaded["class"] == type(tok).__name__
        assert loaded["module"].startswith("transformers_modules.")  # loaded from the saved files
        assert loaded["ids"] == tok(RAW_TREES[0])["input_ids"]
        assert loaded["layout"] == tok.action_layout
    assert (tmp_path / "hf_home" / "modules" / "transformers_modules").is_dir()


def test_byte_level_bpe_pieces_spell_any_word_and_mark_word_starts(bpe_tokenizer, tmp_path):
    """GPT-2-style pieces (paper 003): every word's first piece carries GPT-2's space mark and starts the word,
    bytes make every character known (no <unk>), decoding gives the words back, and the bare space piece is
    an incomplete word (a generated word must not end on it)."""
    tree = "(S (NP Zoë's naïve café NP) (VP sang 🎶 VP) S)"
    encoding = bpe_tokenizer(tree, return_word_starts=True)
    ids, starts = encoding["input_ids"], encoding["word_starts"]
    assert bpe_tokenizer.unk_token_id not in ids
    tokens = bpe_tokenizer.convert_ids_to_tokens(ids)
    terminals = [(token, start) for token, start in zip(tokens, starts) if not token.startswith("(") and not token.endswith(")") and token != "<s>"]
    assert [start for _, start in terminals] == [token.startswith("Ġ") for token, _ in terminals]
    assert sum(start for _, start in terminals) == 5  # one start per word
    assert bpe_tokenizer.decode(ids, skip_special_tokens=True) == "(S (NP Zoë's naïve café) (VP sang 🎶))"
    assert [bpe_tokenizer.convert_ids_to_tokens(i) for i in bpe_tokenizer.incomplete_word_ids] == ["Ġ"]
    bpe_tokenizer.save_pretrained(tmp_path / "bpe")
    assert (tmp_path / "bpe" / "byte_bpe.json").is_file() and not (tmp_path / "bpe" / "spiece.model").exists()
    loaded = SyntacticTokenizer.from_pretrained(tmp_path / "bpe")
    assert loaded.pieces == "byte_bpe" and loaded(tree)["input_ids"] == ids
    with pytest.raises(ValueError, match="at least the 256 bytes"):
        SyntacticTokenizer.train(FIXTURE, vocab_size=100, pieces="byte_bpe")
    with pytest.raises(ValueError, match="pieces 'wordpiece': expected one of sentencepiece, byte_bpe"):
        SyntacticTokenizer.train(FIXTURE, vocab_size=100, pieces="wordpiece")


def test_compositional_tokenizer_with_byte_level_bpe_pieces(tmp_path):
    from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer

    tokenizer = CompositionalTokenizer.train(FIXTURE, vocab_size=300, linearization="nb-dn", pieces="byte_bpe")
    tree = "( ( the naïve bird ) ( sings loudly ) )"
    ids = tokenizer(tree)["input_ids"]
    assert tokenizer.pieces == "byte_bpe" and tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True).split() == tree.split()
    tokenizer.save_pretrained(tmp_path / "c")
    assert CompositionalTokenizer.from_pretrained(tmp_path / "c")(tree)["input_ids"] == ids


# ---- errors -------------------------------------------------------------------------------------------
def test_unknown_nonterminal_is_an_error_naming_it(tokenizer):
    with pytest.raises(ValueError, match=r"'XYZ' is not in the vocabulary"):
        tokenizer("(S (XYZ the bird))")
    with pytest.raises(ValueError, match=r"'FOO' is not in the vocabulary"):
        tokenizer.encode_actions(["(S", "(FOO", "the", "FOO)", "S)"])
    with pytest.raises(ValueError, match=r"'BAR' is not in the vocabulary"):
        tokenizer.encode_actions(["(S", "(NP", "the", "BAR)"])
    with pytest.raises(ValueError, match=r"batch item 1: .*'QQ'"):
        tokenizer(["(S (NP the bird))", "(S (QQ the bird))"])


@pytest.mark.parametrize(
    "text, kwargs",
    [
        ("", {}),
        ("   ", {}),
        ([], {}),
        ([], {"is_split_into_words": True}),
        (["the", ""], {"is_split_into_words": True}),
    ],
)
def test_empty_inputs_are_errors(tokenizer, text, kwargs):
    with pytest.raises(ValueError, match="empty|non-empty"):
        tokenizer(text, **kwargs)


def test_other_input_errors(tokenizer):
    with pytest.raises(ValueError, match="missing '\\)'"):
        tokenizer("(S (NP the bird)")
    with pytest.raises(ValueError, match="unlabeled closing bracket"):
        tokenizer.encode_actions(["(S", "the", ")"])
    with pytest.raises(ValueError, match="contains whitespace"):
        tokenizer(["the bird"], is_split_into_words=True)
    with pytest.raises(ValueError, match="text_pair"):
        tokenizer(RAW_TREES[0], RAW_TREES[1])
    with pytest.raises(ValueError, match="truncation would cut"):
        tokenizer(RAW_TREES[0], truncation=True, max_length=5)
    with pytest.raises(ValueError, match=r"id 99999 is outside the vocabulary"):
        tokenizer.decode([1, 99999])
    with pytest.raises(TypeError, match="return_word_start"):
        tokenizer(RAW_TREES[0], return_word_start=True)


def test_training_errors():
    with pytest.raises(ValueError, match="linearization 'bottom_up'"):
        SyntacticTokenizer.train(FIXTURE, linearization="bottom_up")
    with pytest.raises(ValueError, match="unknown tree normalization option"):
        SyntacticTokenizer.train(FIXTURE, strip_tags=True)
    with pytest.raises(ValueError, match="no training trees"):
        SyntacticTokenizer.train([])
    with pytest.raises(ValueError, match="neither a bracketed tree nor an existing file"):
        SyntacticWordTokenizer.train(["no/such/file.mrg"])
    with pytest.raises(ValueError, match="vocab_file"):
        SyntacticTokenizer()


def test_special_token_strings(tokenizer):
    # In a tree a leaf spelled `<s>` is a word like any other; in an action list it is the special token.
    ids = tokenizer("(S (NP <s> bird) (VP </s>))")["input_ids"]
    assert ids.count(tokenizer.bos_token_id) == 1 and tokenizer.eos_token_id not in ids
    # `<`, `/` and `>` never occur in the fixture: each run of them is one <unk>.
    assert tokenizer.decode(ids, skip_special_tokens=True) == "(S (NP <unk>s<unk> bird) (VP <unk>s<unk>))"
    ids = tokenizer.encode_actions(["<s>", "the", "bird", "</s>"])["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    assert ids[-1] == tokenizer.eos_token_id and tokenizer.decode(ids, skip_special_tokens=True) == "the bird"


def test_a_partial_tree_decodes_to_its_actions(tokenizer):
    ids = tokenizer.encode_actions(["(S", "(NP", "the", "bird", "NP)"])["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "(S (NP the bird NP)"


# ---- word-level tokenizer -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "word, signature",
    [
        ("Birds", "<UNK-INITC-s>"),
        ("Running", "<UNK-INITC-ing>"),
        ("NASA", "<UNK-ALLC>"),
        ("COVID-19", "<UNK-ALLC-NUM-DASH>"),
        ("1,234", "<UNK-NUM>"),
        ("3rd", "<UNK-LC-NUM>"),
        ("well-known", "<UNK-LC-DASH>"),
        ("iPhones", "<UNK-HASLC-s>"),
        ("running", "<UNK-LC-ing>"),
        ("nationality", "<UNK-LC-ity>"),
        ("nation", "<UNK-LC-ion>"),
        ("greatest", "<UNK-LC-est>"),
        ("tested", "<UNK-LC-ed>"),
        ("higher", "<UNK-LC-er>"),
        ("quickly", "<UNK-LC-ly>"),
        ("national", "<UNK-LC-al>"),
        ("happy", "<UNK-LC-y>"),
        ("class", "<UNK-LC>"),
        ("virus", "<UNK-LC>"),
        ("ed", "<UNK-LC>"),
        ("\u041c\u043e\u0441\u043a\u0432\u0430", "<UNK-INITC>"),
        ("\u00a7", "<UNK>"),
        ("\u6771\u4eac", "<UNK>"),
    ],
)
def test_unknown_word_signature(word, signature):
    assert unknown_word_signature(word) == signature


def test_word_vocabulary_keeps_frequent_words_and_classes_of_rare_ones(word_tokenizer):
    layout, tokens = _layout_tokens(word_tokenizer)
    terminals = tokens[4 : layout["open_nt_start"]]
    # Counted by hand over the fixture: `the` and `.` occur 7 times, `bird` twice, every other word once.
    words = [t for t in terminals if not t.startswith("<UNK")]
    assert words == [".", "the", "bird"]
    classes = {t for t in terminals if t.startswith("<UNK")}
    assert classes == {
        "<UNK>", "<UNK-ALLC>", "<UNK-INITC>", "<UNK-LC>", "<UNK-LC-DASH>", "<UNK-LC-al>", "<UNK-LC-ed>",
        "<UNK-LC-ly>", "<UNK-LC-s>", "<UNK-LC-y>", "<UNK-NUM>",
    }  # fmt: skip
    counts = Counter(word for tree in read_trees(FIXTURE) for word in tree.leaves())
    assert set(words) == {w for w, c in counts.items() if c >= 2}


def test_word_tokenizer_maps_words_to_words_classes_or_unk(word_tokenizer):
    words = ["the", "Gorbachev", "Yeltsin", "jumped", "x-Ray-7s", "bird"]
    encoded = word_tokenizer(words, is_split_into_words=True, return_word_starts=True)
    ids = encoded["input_ids"]
    assert word_tokenizer.convert_ids_to_tokens(ids) == [
        "<s>", "the", "<UNK-INITC>", "<UNK-INITC>", "<UNK-LC-ed>", "<unk>", "bird",
    ]  # fmt: skip
    assert ids[5] == word_tokenizer.unk_token_id  # <UNK-HASLC-NUM-DASH> never occurred in training
    assert encoded["word_starts"] == [False] + [True] * len(words)
    assert word_tokenizer.decode(ids, skip_special_tokens=True) == "the <UNK-INITC> <UNK-INITC> <UNK-LC-ed> <unk> bird"


def test_word_tokenizer_trees(word_tokenizer):
    encoded = word_tokenizer(RAW_TREES[0], return_word_starts=True)
    assert word_tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == "(S (NP-SBJ the bird) (VP <UNK-LC-s>) .)"
    assert word_tokenizer.convert_ids_to_tokens(encoded["input_ids"])[:3] == ["<s>", "(S", "(NP-SBJ"]
    starts = [i < word_tokenizer.action_layout["open_nt_start"] and i > 3 for i in encoded["input_ids"]]
    assert encoded["word_starts"] == starts
    # Every training tree encodes without <unk>: each rare training word's class is in the vocabulary.
    for raw in RAW_TREES:
        assert word_tokenizer.unk_token_id not in word_tokenizer(raw)["input_ids"]


def test_word_tokenizer_min_count_one_keeps_every_word():
    tok = SyntacticWordTokenizer.train(FIXTURE, min_count=1)
    counts = Counter(word for tree in read_trees(FIXTURE) for word in tree.leaves())
    _, tokens = _layout_tokens(tok)
    assert set(tokens[4 : tok.action_layout["open_nt_start"]]) == set(counts)
    for raw in RAW_TREES:
        expected = tree_to_string(normalize_tree(parse_tree(raw)))
        assert tok.decode(tok(raw)["input_ids"], skip_special_tokens=True) == expected


# ---- GUM: every tree round-trips --------------------------------------------------------------------
def _gum_splits():
    """Document name -> split, from splits.md; documents not listed under dev/test/test2 are train."""
    splits, section = {}, None
    for line in (GUM / "splits.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        match = re.match(r"\s*\*\s+(\S+)", line)
        if match and section in ("dev", "test", "test2"):
            splits[match.group(1)] = section
    return splits


@pytest.fixture(scope="module")
def gum():
    if not GUM.is_dir():
        pytest.skip(f"GUM data not found at {GUM}")
    splits = _gum_splits()
    files = sorted((GUM / "const").glob("*.ptb"))
    raw = {f.stem: parse_trees(f.read_text(encoding="utf-8"), source=str(f)) for f in files}
    train_trees = [normalize_tree(t) for name, trees in raw.items() if name not in splits for t in trees]
    tokenizer = SyntacticTokenizer.train(train_trees, vocab_size=2000)
    return raw, splits, train_trees, tokenizer


def test_gum_every_tree_round_trips(gum):
    raw, splits, train_trees, tokenizer = gum
    counts = Counter(splits.get(name, "train") for name, trees in raw.items() for _ in trees)
    assert counts == {"train": 7425, "dev": 1022, "test": 937}  # PROVENANCE.md
    assert len(tokenizer.action_layout) == 8 and len(tokenizer) <= 4 + 2000 + 2 * len(tokenizer.nonterminals)
    # Characters never seen in training become <unk> (one per run of them); the rest must come back exactly.
    seen = {c for tree in train_trees for word in tree.leaves() for c in word}
    unseen_run = re.compile("[^" + re.escape("".join(sorted(seen))) + "() ]+")
    mismatches = []
    for name, trees in raw.items():
        for tree in trees:
            # the written form: PTB brackets, or the action sequence where every word stands alone in its bracket
            expected_decoded = unseen_run.sub("<unk>", tokenizer.tree_text(normalize_tree(tree)))
            decoded = tokenizer.decode(tokenizer(tree_to_string(tree))["input_ids"], skip_special_tokens=True)
            if decoded != expected_decoded:
                mismatches.append((name, expected_decoded, decoded))
    assert not mismatches, mismatches[:3]


def test_gum_long_words_split_into_pieces(gum):
    _, _, train_trees, tokenizer = gum
    long_words = sorted({w for tree in train_trees for w in tree.leaves() if len(w) > 16})
    assert long_words
    for word in long_words[:50]:
        encoded = tokenizer([word], is_split_into_words=True, return_word_starts=True, add_special_tokens=False)
        assert len(encoded["input_ids"]) >= 2
        assert encoded["word_starts"] == [True] + [False] * (len(encoded["input_ids"]) - 1)
        assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == word
