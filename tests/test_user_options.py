"""Every option value a user gives is honoured or refused, never silently replaced (issue 12, class 1)."""

import pytest

import hf_slm
from hf_slm.action_vocab import ActionVocabulary
from hf_slm.modeling import generation_slm
from hf_slm.modeling.configuration_slm import config_for_grammar

from conftest import save_tiny_checkpoint
from test_beam_search import TREES, run_cli


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("options"), TREES)


@pytest.mark.parametrize("given, used", [(None, 2), (50, 50), (2, 2), (1, 1), (0, "vocabulary")])
def test_generate_uses_the_top_k_it_is_given(checkpoint, monkeypatch, given, used):
    """50 (transformers' default) and 0 (transformers: no top-k filtering) were once both read as 'unset'."""
    _, model, tokenizer = checkpoint
    seen = []
    original = generation_slm.WordSynchronousBeamSearch.generate

    def recording(self, prompts, **options):
        seen.append(options["top_k"])
        return original(self, prompts, **options)

    monkeypatch.setattr(generation_slm.WordSynchronousBeamSearch, "generate", recording)
    extra = {} if given is None else {"top_k": given}
    model.generate(do_sample=True, max_new_tokens=3, tokenizer=tokenizer, seed=0, **extra)
    assert seen == [model.config.vocab_size if used == "vocabulary" else used]


def test_generate_refuses_a_negative_top_k(checkpoint):
    _, model, tokenizer = checkpoint
    with pytest.raises(ValueError, match="top_k must be a non-negative integer"):
        model.generate(do_sample=True, top_k=-1, max_new_tokens=3, tokenizer=tokenizer)


@pytest.mark.parametrize("option", ["--max-nonterminals", "--max-consecutive-open"])
def test_cli_refuses_zero_limits_instead_of_ignoring_them(checkpoint, tmp_path, option):
    directory, _, _ = checkpoint
    result = run_cli("parse", "--model", str(directory), option, "0", "the bird sings .")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert option.lstrip("-").replace("-", "_") in result.stderr and "got 0" in result.stderr


@pytest.mark.parametrize("fields, message", [
    ({"num_hiden_layers": 7}, "unknown config field 'num_hiden_layers'; did you mean num_hidden_layers"),
    ({"hidden_size": "abc"}, "config field hidden_size='abc': expected int"),
    ({"core_dropout": "0.1"}, "config field core_dropout='0.1': expected float"),
    ({"document_level": 1}, "config field document_level=1: expected bool"),
])
def test_config_fields_are_known_and_typed(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        config_for_grammar("tg", **fields)
    with pytest.raises(ValueError, match="unknown config field|expected "):
        hf_slm.preset_config("tg-ptb", **fields)


def test_config_fields_accept_ints_for_floats_and_none_for_optional_fields():
    config = config_for_grammar("tg", core_dropout=0, attention_dropout=None, init_scale=1)
    assert config.core_dropout == 0 and config.attention_dropout is None and config.init_scale == 1


def test_cli_train_refuses_a_misspelled_set(tmp_path):
    sample = hf_slm.__file__.replace("__init__.py", "sample_data/gum/train.txt")
    result = run_cli("train", "--preset", "tg-ptb", "--train", sample, "--output", str(tmp_path / "out"),
                     "--set", "num_hiden_layers=7", "--max-steps", "1")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "num_hiden_layers" in result.stderr and "num_hidden_layers" in result.stderr
    assert not (tmp_path / "out" / "config.json").exists()


@pytest.mark.parametrize("call", ["score", "parse"])
def test_a_lone_string_is_a_type_error_not_a_list_of_characters(checkpoint, call):
    _, model, tokenizer = checkpoint
    with pytest.raises(TypeError, match=r"got one string; wrap it in a list: \['the bird sings .'\]"):
        getattr(hf_slm, call)(model, tokenizer, "the bird sings .", progress=False)
    with pytest.raises(TypeError, match="document 0 must be a list of sentences"):
        hf_slm.beam.score_documents(model, tokenizer, ["the bird sings ."], progress=False)


def test_a_tokenizer_of_another_vocabulary_with_the_same_layout_is_refused():
    """check_tokenizer_matches once compared id ranges only: same layout, other words passed."""
    trained_with = hf_slm.SyntacticWordTokenizer.train(TREES)
    other = hf_slm.SyntacticWordTokenizer.train([tree.replace("the", "das") for tree in TREES])
    assert other.action_layout == trained_with.action_layout and len(other) == len(trained_with)
    config = config_for_grammar("tg", vocab_size=len(trained_with), vocabulary_fingerprint=trained_with.vocabulary_fingerprint,
                                **trained_with.action_layout)
    hf_slm.check_tokenizer_matches(config, trained_with)
    with pytest.raises(ValueError, match=f"fingerprint {other.vocabulary_fingerprint}.* not the one the model was trained"):
        hf_slm.check_tokenizer_matches(config, other)
    # A model that recorded no fingerprint (checkpoints from before) is checked by its id ranges only.
    hf_slm.check_tokenizer_matches(config_for_grammar("tg", vocab_size=len(other), **other.action_layout), other)


@pytest.mark.parametrize("word", ["<s>", "</s>", "<pad>"])
def test_the_action_vocabulary_refuses_a_word_spelling_a_boundary(word):
    with pytest.raises(ValueError, match=f"'{word}'.*special tokens"):
        ActionVocabulary.from_action_sequences([["(S", "the", word, "S)"]])


def test_the_action_vocabulary_reads_the_word_unk_as_the_unknown_word():
    vocab = ActionVocabulary.from_action_sequences([["(S", "the", "<unk>", "S)"]])
    assert vocab.encode(["(S", "the", "<unk>", "S)"])[3] == vocab.layout.unk_token_id
    assert vocab.tokens.count("<unk>") == 1
