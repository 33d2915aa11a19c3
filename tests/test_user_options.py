"""Every option value a user gives is honoured or refused, never silently replaced (issue 12, class 1)."""

import pytest

import hf_slm
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.modeling import generation_slm
from hf_slm.families import config_for_grammar

from conftest import save_tiny_checkpoint
from helpers.ptb_trees import TREES


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


def test_the_action_vocabulary_reads_the_word_unk_as_the_unknown_word():
    vocab = ActionVocabulary.from_action_sequences([["(S", "the", "<unk>", "S)"]])
    assert vocab.encode(["(S", "the", "<unk>", "S)"])[3] == vocab.layout.unk_token_id
    assert vocab.tokens.count("<unk>") == 1
