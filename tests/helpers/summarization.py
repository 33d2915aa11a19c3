"""Two fixture documents as XSum data with a tiny base model and parser: the memorization setup of the
summarization tests."""

import json
from pathlib import Path

import torch

import hf_slm
from hf_slm.data.sentence_splitting import split_sentences, treebank_words
from hf_slm.families import causal_lm_for_config, config_for_grammar

from conftest import save_tiny_checkpoint


TREES = ["(S (NP The bird) (VP sings (PP in (NP the tree))) .)", "(S (NP A dog) (VP barks) .)",
         "(NP Summary :)"]
# The tiny base models that memorize two documents. Dropout off: memorizing is what the tests ask of them, and
# on the CPU dropout on the attention weights takes the unfused kernel, which doubled a fine-tuning step's time.
MEMORIZATION_MODEL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                          max_sequence_length=1024, embedding_dropout=0.0, core_dropout=0.0, final_dropout=0.0)
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "xsum" / "jsonl" / "train.jsonl"


def fixture_rows(count=2):
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()][:count]


def memorization_setup(tmp_path, grammar):
    """Two fixture documents as XSum data, a tokenizer that spells their words, a tiny random base model of
    `grammar` and a tiny TG parser (the base model itself for TG)."""
    rows = fixture_rows(2)
    data = tmp_path / "xsum"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    texts = [s for row in rows for s in split_sentences(row["document"]) + split_sentences(row["summary"])]
    trees = [f"(S (NP {' '.join(treebank_words(text))}))" for text in texts] + ["(S (VP (PP x)))", TREES[2]]
    linearization = "terminals" if grammar == "terminals" else "top_down"
    tokenizer = hf_slm.SyntacticTokenizer.train(trees, vocab_size=120, linearization=linearization)
    config = config_for_grammar(vocab_size=len(tokenizer), grammar=grammar, **MEMORIZATION_MODEL,
                                **tokenizer.action_layout)
    torch.manual_seed(0)
    causal_lm_for_config(config).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    parser = tmp_path / "base"
    if grammar == "terminals":  # given, and not needed: a words-only model reads words
        parser, _, _ = save_tiny_checkpoint(tmp_path / "parser", trees, vocab_size=120)
    return rows, data, parser


PARSER_ARGS = ["--beam-size", "10", "--word-beam-size", "2"]
