"""Paper 000's PTB vocabulary from the command line (section 3): words, those seen once replaced by Berkeley
unknown-word classes. The PTB presets name it, `hf-slm train --pieces words` chooses it for any paper 000 preset;
the checkpoint loads through the Auto classes without hf-slm and scores with the same numbers."""

import json
from pathlib import Path

import pytest
import torch
from conftest import ISOLATION_PREAMBLE, run_without_hf_slm

from hf_slm.cli import main

GUM_TRAIN = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum" / "train.txt"
TINY = ["--set=hidden_size=16", "--set=intermediate_size=32", "--set=num_hidden_layers=1",
        "--set=num_attention_heads=2"]
# "hostility" occurs once in the GUM sample: the vocabulary holds its class, lower case with the suffix -ity, instead;
# "Zorbing" never occurs and takes the class of a capitalized -ing word ("Tracking", "Citing" occur once each).
TREE = "(ROOT (S (NP (NNP Zorbing)) (VP (VBZ shows) (NP (NN hostility))) (. .)))"

SCORE = ISOLATION_PREAMBLE + r'''
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
inputs = tokenizer([sys.argv[2]], return_tensors="pt")
with torch.no_grad():
    out = model(**inputs, labels=inputs["input_ids"])
torch.save({"input_ids": inputs["input_ids"][0], "loss": out.loss, "tokenizer": type(tokenizer).__name__,
            "tokens": tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())}, sys.argv[3])
'''


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """tg-ptb trained for 2 steps on the GUM sample, with the preset's vocabulary (no --pieces, no --vocab-size)."""
    output = tmp_path_factory.mktemp("words") / "tg"
    assert main(["train", "--preset", "tg-ptb", "--train", str(GUM_TRAIN), "--output", str(output), "--max-steps", "2",
                 "--batch-size", "2", "--warmup-steps", "1", "--save-steps", "100", *TINY]) == 0
    return output


def test_the_ptb_preset_trains_a_word_vocabulary_with_unknown_word_classes(trained):
    from hf_slm.data.prepare import load_syntactic_tokenizer

    tokenizer = load_syntactic_tokenizer(trained)
    assert type(tokenizer).__name__ == "SyntacticWordTokenizer" and (trained / "vocab.json").is_file()
    assert not (trained / "spiece.model").exists()
    config = json.loads((trained / "config.json").read_text())
    assert config["vocab_size"] == len(tokenizer)  # the data's size, not the preset's 23,888
    record = json.loads((trained / "training_setup.json").read_text())
    assert record["preset"] == "tg-ptb"
    ids = tokenizer([TREE])["input_ids"][0]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    # (ROOT is dropped and the tags are stripped, as for every tree; "shows" occurs 5 times and keeps its id
    assert tokens == ["<s>", "(S", "(NP", "<UNK-INITC-ing>", "NP)", "(VP", "shows", "(NP", "<UNK-LC-ity>", "NP)", "VP)",
                      ".", "S)"]
    assert tokenizer.convert_tokens_to_ids("the") not in (tokenizer.unk_token_id, None)  # a frequent word keeps its id


def test_the_checkpoint_scores_through_the_auto_classes_without_hf_slm(trained, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    found = run_without_hf_slm(SCORE, [trained, TREE], tmp_path)
    assert found["tokenizer"] == "SyntacticWordTokenizer"
    assert found["tokens"][3] == "<UNK-INITC-ing>" and found["tokens"][8] == "<UNK-LC-ity>"
    model = AutoModelForCausalLM.from_pretrained(trained, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained, trust_remote_code=True)
    inputs = tokenizer([TREE], return_tensors="pt")
    with torch.no_grad():
        loss = model(**inputs, labels=inputs["input_ids"]).loss
    assert torch.equal(found["input_ids"], inputs["input_ids"][0])
    assert bool(torch.isfinite(found["loss"])) and float(found["loss"]) == pytest.approx(float(loss), abs=1e-6)


def test_the_vocabulary_is_the_commands_else_the_presets_unless_a_size_asks_for_pieces():
    from hf_slm.families import family_for_grammar, preset
    from hf_slm.training.train import TrainingSetup, new_vocabulary

    def chosen(name, **options):
        return new_vocabulary(TrainingSetup(preset=name, train=[], output="unused", **options), preset(name)[1])

    assert chosen("tg-ptb") == chosen("txl-terminals-ptb") == chosen("tg-txl-positions-ptb") == "words"
    assert chosen("tg-ptb", vocab_size=500) is None  # SentencePiece, as before the word vocabulary
    assert chosen("tg-ptb", pieces="byte_bpe") == "byte_bpe"
    assert chosen("tg-bllip") is None and chosen("tg-bllip", pieces="words") == "words"
    assert family_for_grammar("tg").tokenizer_class_for("words").__name__ == "SyntacticWordTokenizer"
    assert family_for_grammar("tg").tokenizer_class_for(None).__name__ == "SyntacticTokenizer"
    with pytest.raises(ValueError, match="--pieces words: the dependency_transformer_grammar family's tokenizers build "
                                         "sentencepiece, byte_bpe"):
        family_for_grammar("dtg").tokenizer_class_for("words")


def test_pieces_words_with_a_vocabulary_size_is_refused(tmp_path, capsys):
    code = main(["train", "--preset", "tg-bllip", "--pieces", "words", "--vocab-size", "100", "--train",
                 str(GUM_TRAIN), "--output", str(tmp_path / "run"), "--max-steps", "1", *TINY])
    assert code == 2
    assert "--vocab-size 100: a word vocabulary (--pieces words) has the size of the data" in capsys.readouterr().err
    assert not (tmp_path / "run" / "config.json").exists()
