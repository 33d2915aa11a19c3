"""Tiny proposal parsers (hf_slm/parsers/kinds.py's crf, crf-unlabeled and biaffine) with random weights, and the
shipped sample trees they are built from: the GUM constituency sample and the UD English EWT dependency sample.

A parser's biaffine scorers start at zero (Dozat and Manning's initialization), which makes every tree equally
likely; `tiny_parser` draws them at random as well, so that trees differ in probability and the best one is unique.
"""

import itertools
from pathlib import Path

import torch
from hf_slm.tokenization.tokenization_parser import ProposalParserTokenizer
from hf_slm.tokenization.trees import read_tree_file

import hf_slm
from hf_slm.parsers.data import read_dependency_examples
from hf_slm.parsers.kinds import parser_kind
from hf_slm.parsers.training import ParserTrainingSetup, parser_config

SAMPLE_DATA = Path(hf_slm.__file__).resolve().parent / "sample_data"
GUM = SAMPLE_DATA / "gum"
EWT = SAMPLE_DATA / "ud_english_ewt_sample"
SPLITS = ("train", "dev", "test")

# Small enough for a forward pass over a batch in milliseconds; one BiLSTM layer (no dropout between layers).
TINY_ENCODER = {"word_embedding_size": 8, "char_embedding_size": 4, "char_hidden_size": 8, "lstm_hidden_size": 8,
                "lstm_layers": 1}
TINY_SCORERS = {"constituency": {"span_mlp_size": 8, "label_mlp_size": 8, "tag_mlp_size": 8},
                "dependency": {"arc_mlp_size": 8, "relation_mlp_size": 8}}
# A discriminative RNNG's stack (the kinds whose sizes have these fields), at most 3 constituents open: a random
# policy otherwise opens dozens before it shifts a word.
TINY_STACK = {"stack_input_size": 8, "stack_hidden_size": 8, "stack_layers": 1, "action_mlp_size": 8,
              "max_open_nonterminals": 3}


def gum_trees(splits=SPLITS):
    """The GUM sample's trees as written (ROOT wrappers and POS tags kept), split by split, in file order."""
    return [tree for split in splits
            for tree in read_tree_file(GUM / f"{split}.txt", strip_traces=False, preterminals=False, drop_root=False)]


def ewt_examples(splits=SPLITS):
    """The UD EWT sample's sentences {"words", "heads", "relations"}, non-projective trees lifted (as a dependency
    parser trains on them)."""
    files = [EWT / f"en_ewt-sample-ud-{split}.conllu" for split in splits]
    return [example for example, _ in read_dependency_examples(files, log=lambda *_: None)]


def tiny_parser(kind_name, examples=None, tokenizer=None, seed=0, scale=1.0, min_count=2):
    """(model in eval mode, tokenizer) of a parser kind at a tiny size with random weights: the tokenizer trained on
    `examples` (trees, or dependency examples) unless given; every parameter (biaffines included) drawn with
    `torch.manual_seed(seed)`, the biaffines' weights from N(0, scale^2)."""
    kind = parser_kind(kind_name)
    if tokenizer is None:
        tokenizer = ProposalParserTokenizer.train(examples, tree_kind=kind.tree_kind, labelled=kind.labelled,
                                                  min_count=min_count)
    stack = {name: value for name, value in TINY_STACK.items() if name in kind.sizes["tiny"] or name == "max_open_nonterminals"
             and "stack_layers" in kind.sizes["tiny"]}
    setup = ParserTrainingSetup(kind=kind_name, train=[], output="unused",
                                model_overrides={**TINY_ENCODER, **TINY_SCORERS[kind.tree_kind], **stack})
    config = parser_config(setup, kind, tokenizer)
    torch.manual_seed(seed)
    model = kind.resolved("model_class")(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("biaffine.weight"):
                parameter.normal_(0.0, scale)
    return model.eval(), tokenizer


def encode(tokenizer, sentences):
    """The model inputs of a batch of sentences (lists of words), padded on the right."""
    return dict(tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt"))


def nary_trees(words, labels):
    """Every n-ary tree over `words` (PTB strings, no POS tags) whose constituents have two children or more, or one
    word, labelled from `labels`, without unary chains: each child of a constituent is a word, bare or a constituent
    of its own, or a constituent over two words or more. These are the trees a span CRF parser over `labels` (and
    `<binarized>`, `<word>`) draws; written from that definition, not from tokenization/parser_trees.py."""
    if len(words) == 1:
        return [f"({label} {words[0]})" for label in labels]
    return list(_constituents(list(words), labels))


def _constituents(words, labels):
    """The constituents over two words or more: every split of the words into two parts or more, in order."""
    for cuts in range(1 << (len(words) - 1)):
        bounds = [0] + [k for k in range(1, len(words)) if cuts >> (k - 1) & 1] + [len(words)]
        if len(bounds) < 3:
            continue
        parts = [words[start:end] for start, end in itertools.pairwise(bounds)]
        options = [[part[0]] + [f"({label} {part[0]})" for label in labels] if len(part) == 1
                   else list(_constituents(part, labels)) for part in parts]
        for children in itertools.product(*options):
            for label in labels:
                yield f"({label} {' '.join(children)})"
