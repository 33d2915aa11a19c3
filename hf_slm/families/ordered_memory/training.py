"""`hf-slm train` for Syntactic Ordered Memory (paper 001): presets, gold trees from the data, Trainer with the SOM
collator.

    hf-slm train --preset esom-tiny --train en_ewt-ud-train.conllu --eval en_ewt-ud-dev.conllu --output runs/esom
    hf-slm train --preset dsom-ptb --train treebank/combined --convert-to-dependencies --output runs/dsom
    hf-slm train --preset esom-ptb --train train.mrg --gold-tree constituency --output runs/esom-const
    hf-slm train --preset esom-tiny ... --output runs/esom --resume     # after an interruption

`hf_slm.training.train.train` hands a SOM preset to `train_som` inside its output lock (so torchrun, the lock and the
precision checks are the same as every family's); this module reuses the rest of that machinery too: the output
checks (`_check_output`: a trained model or an interrupted run's checkpoints are refused without --overwrite or
--resume), the tokenizer of a resumed run (`resumed_tokenizer`), the tokenizer trained once under torchrun
(`trained_once`), Adam with the warm-up / cosine schedule, the TrainingArguments and the final save
(`schedule_optimizer`, `training_arguments`, `train_and_save`), the time limit, the precision arguments and
training_setup.json (`write_training_record`, plus a `som` entry). What differs is the data, the
collator and the model:

- The data: CoNLL-U files (words and heads; a non-projective tree is lifted) or bracketed PTB trees. The gold tree
  Gamma of the structural loss (section 3.3) comes from `gold_tree`: "dependency" (the paper's: each head with its
  dependents one constituent, Figure 4; CoNLL-U, or PTB trees with `convert_to_dependencies`, a Collins-style
  head-rule conversion in hf_slm/data/dependency_conversion.py, not the paper's CoreNLP UD conversion),
  "constituency" (Appendix B.1: the PTB trees themselves, traces removed, left-binarized) or "left_branching"
  (Table 2's ablation; any input, only the words are read). An input that cannot give the tree asked for is an
  error naming the file and the option that fits.
- The tokenizer: the word vocabulary of the PTB setup (SyntacticWordTokenizer, words seen fewer than `min_count`
  times become unknown-word classes) trained on the training sentences, or with `--pieces` / `--vocab-size` a
  SentencePiece (or byte-level BPE) SyntacticTokenizer; or the one given with --tokenizer (a resumed run reads the
  one saved in its checkpoint). Its linearization is "terminals" (`<s> words </s>`).
- The model: `SyntacticOrderedMemoryForCausalLM` of a preset (`SOM_TRAINING_PRESETS`: Table 6's sizes and section
  3.2's sampled prediction network, and tiny CPU ones) with `--set` overrides (field names are checked) and
  `--oracle-trees` (config.oracle_trees, Table 2's "- Predicted tree + Gold tree"); vocab_size and the special ids
  come from the tokenizer.
- Trainer: `SyntacticOrderedMemoryCollator` (input_ids, attention_mask, labels, som_first_siblings), the loss
  lm + structure (the model's), gradient clipping at norm 1.0, evaluation loss on --eval (the same loss, with
  Algorithm 1's labels from the model's argmax decisions). The final folder holds safetensors, the tokenizer, the
  hub code and training_setup.json; `hf-slm card DIR` writes its model card (model_cards/som.md).

Paper 001 gives no optimizer, learning rate, batch size or step count: the presets' schedule is this library's
choice (Adam, batch 64 sentences, peak 1e-3 after 1,000 warm-up steps, cosine decay; the tiny presets: batch 32,
3e-3, as examples/train_som.py).
"""

import difflib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from datasets import Dataset
from transformers import Trainer

from ...checkpoints.whole import WholeCheckpoints
from ...data.numbering import sentence_name
from ...option_types import or_default
from ...data.conllu_loader import read_conllu_file
from ...data.prepare import load_syntactic_tokenizer
from ...data.dependency_conversion import RAW_TREE_OPTIONS, ptb_to_dependencies
from ...runs.distributed import is_distributed, is_main_process, on_main_process
from ...modeling.configuration_som import SOM_PRESETS, SyntacticOrderedMemoryConfig
from ...modeling.modeling_som import SyntacticOrderedMemoryForCausalLM
from .data import SyntacticOrderedMemoryCollator, check_som_tokenizer, som_example
from ...tokenization.tokenization_slm import SyntacticTokenizer, SyntacticTokenizerBase, SyntacticWordTokenizer
from ...tokenization.trees import read_trees
from ...tokenization.tree_type import Tree
from ...training.train import (
    TrainingSetup,
    _check_output,
    _TimeLimit,
    resumed_tokenizer,
    schedule_optimizer,
    trained_once,
    train_and_save,
    training_arguments,
    unused_parameter_names,
    write_training_record,
)

GOLD_TREES = ("dependency", "constituency", "left_branching")
# Gradient clipping of SOM runs (examples/train_som.py's; TG's 3.0 suits its Transformer).
SOM_MAX_GRAD_NORM = 1.0

_PAPER_SCHEDULE = dict(batch_size=64, max_steps=50_000, warmup_steps=1_000, initial_learning_rate=1e-7,
                       learning_rate=1e-3, final_learning_rate=1e-5)
_TINY_SCHEDULE = dict(batch_size=32, max_steps=2_000, warmup_steps=50, initial_learning_rate=1e-7,
                      learning_rate=3e-3, final_learning_rate=3e-5)
# The tiny presets: examples/train_som.py's sizes (D = 64, N = 10; dSOM: D_sem = 3/4 D), which train on a CPU in
# minutes.
_TINY_MODEL = dict(hidden_size=64, num_slots=10, dropout=0.1, embedding_dropout=0.05, output_dropout=0.2)

SOM_TRAINING_PRESETS = {
    **{name: {"description": f"{'dSOM' if model.get('disentangle') else 'eSOM'}, paper 001 Table 6's "
                             f"{name.split('-', 1)[1].upper()} setting: D {model['hidden_size']}, "
                             f"{model['num_slots']} slots" + (f" (D_sem {model['semantic_size']}, D_syn "
                                                               f"{model['syntactic_size']})" if model.get("disentangle")
                                                              else ""),
              "model": dict(model), "training": dict(_PAPER_SCHEDULE)}
       for name, model in SOM_PRESETS.items()},
    "esom-tiny": {"description": "eSOM for CPUs: D 64, 10 slots (examples/train_som.py's sizes)",
                  "model": dict(_TINY_MODEL), "training": dict(_TINY_SCHEDULE)},
    "dsom-tiny": {"description": "dSOM for CPUs: D 64 (D_sem 48, D_syn 16), 10 slots",
                  "model": dict(_TINY_MODEL, disentangle=True, semantic_size=48, syntactic_size=16),
                  "training": dict(_TINY_SCHEDULE)},
}
# Config fields that come from the tokenizer, never from --set.
TOKENIZER_FIELDS = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id",
                    "vocabulary_fingerprint")


def som_preset_columns(preset):
    """The `hf-slm presets` columns of a SOM preset: eSOM or dSOM, D and the number of slots."""
    model = preset["model"]
    return {"model": "dsom" if model.get("disentangle") else "esom", "D": model["hidden_size"],
            "slots": model["num_slots"]}


def is_som_preset(name):
    return name in SOM_TRAINING_PRESETS


@dataclass
class SomTrainingSetup(TrainingSetup):
    """A TrainingSetup with SOM's options (module docstring): where the gold trees come from, the oracle ablation,
    and the word vocabulary's threshold."""

    gold_tree: str = "dependency"
    convert_to_dependencies: bool = False
    oracle_trees: bool = False  # Table 2's oracle: the config's oracle_trees (the memory follows the gold tree)
    min_count: int | None = None  # None: 2 (Dyer et al.'s singletons) for a word vocabulary


def check_config_overrides(overrides):
    """Raise ValueError naming a --set field that SyntacticOrderedMemoryConfig does not have, or one that comes
    from the tokenizer."""
    known = set(inspect.signature(SyntacticOrderedMemoryConfig.__init__).parameters) - {"self", "kwargs"}
    for key in overrides:
        if key in TOKENIZER_FIELDS:
            raise ValueError(f"--set {key}: it comes from the tokenizer; leave it out")
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"--set {key}: SyntacticOrderedMemoryConfig has no field {key!r}{hint}; its fields are "
                             f"{', '.join(sorted(known - set(TOKENIZER_FIELDS)))}")


def som_config(preset, overrides, tokenizer):
    """The SyntacticOrderedMemoryConfig of `preset` with `overrides` (--set) and the tokenizer's ids."""
    check_config_overrides(overrides)
    fields = {**SOM_TRAINING_PRESETS[preset]["model"], **overrides}
    if fields.get("disentangle") is False:  # eSOM from a dSOM preset: no segments
        fields.pop("semantic_size", None)
        fields.pop("syntactic_size", None)
    config = SyntacticOrderedMemoryConfig(
        **fields, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, unk_token_id=tokenizer.unk_token_id,
        vocabulary_fingerprint=tokenizer.vocabulary_fingerprint)
    check_som_tokenizer(config, tokenizer)
    return config


# ---- reading sentences and their gold trees ------------------------------------------------------------------


def _is_conllu(path):
    """Whether `path` is a CoNLL-U file: named .conllu, or its first token line has 10 tab-separated fields."""
    path = Path(path)
    if path.suffix == ".conllu":
        return True
    if not path.is_file():
        return False
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                return len(line.rstrip("\r\n").split("\t")) == 10
    return False


def _input_files(paths, option):
    """The files of --train / --eval: CoNLL-U files, bracketed tree files, or folders of .mrg files."""
    files = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise ValueError(f"{option} {str(path)!r} does not exist")
        if path.is_dir():
            conllu = sorted(path.glob("*.conllu"))
            if conllu:
                raise ValueError(f"{option} {str(path)!r} is a folder of CoNLL-U files "
                                 f"({', '.join(p.name for p in conllu[:3])}); name the file(s) of the split")
        files.append(path)
    return files


def read_som_sentences(paths, gold_tree, convert_to_dependencies=False, normalize_options=None, option="--train"):
    """The sentences of `paths`, each {"words": [...]} and, as `gold_tree` needs, "heads" (1-based, 0 the root) or
    "tree" (an nltk Tree over the words). Errors name the file and the option that fits (module docstring)."""
    if gold_tree not in GOLD_TREES:
        raise ValueError(f"gold tree {gold_tree!r}: expected one of {GOLD_TREES}")
    if convert_to_dependencies and gold_tree != "dependency":
        raise ValueError(f"--convert-to-dependencies makes dependency trees from PTB trees; --gold-tree {gold_tree} "
                         "does not read dependency trees (leave one of the two out)")
    normalize_options = dict(normalize_options or {})
    sentences = []
    for path in _input_files(paths, option):
        if _is_conllu(path):
            if convert_to_dependencies:
                raise ValueError(f"{option} {str(path)!r} is a CoNLL-U file, which holds dependency trees already; "
                                 "--convert-to-dependencies converts bracketed PTB trees: leave it out")
            if gold_tree == "constituency":
                raise ValueError(f"{option} {str(path)!r} is a CoNLL-U file (dependency trees); --gold-tree "
                                 "constituency needs bracketed PTB trees: use --gold-tree dependency (the paper's "
                                 "setting) or give tree files")
            if any(normalize_options.values()):
                raise ValueError(f"{option} {str(path)!r} is a CoNLL-U file; the tree normalization options "
                                 "(--strip-function-tags, --binarize, --remove-unary) apply to bracketed trees")
            for example in read_conllu_file(path, str(path)):
                sentences.append({"words": example["words"], "heads": example["heads"]})
            continue
        # Bracketed trees.
        if gold_tree == "dependency":
            if not convert_to_dependencies:
                raise ValueError(
                    f"{option} {str(path)!r} holds bracketed (constituency) trees, and the gold trees of this setup "
                    "are dependency trees (--gold-tree dependency, the paper's setting): give CoNLL-U files, or pass "
                    "--convert-to-dependencies (Collins-style head rules, hf_slm/data/dependency_conversion.py; "
                    "not the paper's CoreNLP conversion), or --gold-tree constituency (paper 001, Appendix B.1)")
            for index, tree in enumerate(read_trees(path, **RAW_TREE_OPTIONS)):
                converted = ptb_to_dependencies(tree, where=f"tree file {str(path)!r}, tree {index}")
                sentences.append({"words": list(converted.words), "heads": list(converted.heads)})
        else:
            for tree in read_trees(path, **normalize_options):
                tree = tree if isinstance(tree, Tree) else Tree("X", [tree])
                sentences.append({"words": tree.leaves(), "tree": tree})
    if not sentences:
        raise ValueError(f"{option} {', '.join(map(str, paths))}: no sentences")
    return sentences


def som_dataset(tokenizer, sentences, gold_tree, source):
    """A Dataset of som_example features (input_ids, som_first_siblings); errors name the sentence."""
    features = []
    for index, sentence in enumerate(sentences):
        where = f"{source}, {sentence_name(index)}"
        if gold_tree == "constituency":
            features.append(som_example(tokenizer, constituency=sentence["tree"], where=where))
        else:
            features.append(som_example(tokenizer, sentence["words"], sentence.get("heads"),
                                        tree="left_branching" if gold_tree == "left_branching" else "dependency",
                                        where=where))
    return Dataset.from_list(features)


# ---- the tokenizer -------------------------------------------------------------------------------------------


def _check_given_tokenizer(tokenizer, where):
    if not isinstance(tokenizer, SyntacticTokenizerBase) or tokenizer.linearization != "terminals":
        what = (f"a {type(tokenizer).__name__} of the {tokenizer.linearization!r} linearization"
                if isinstance(tokenizer, SyntacticTokenizerBase) else f"a {type(tokenizer).__name__}")
        raise ValueError(f"{where} is {what}; a SOM model reads words: expected a SyntacticWordTokenizer or "
                         "SyntacticTokenizer of the 'terminals' linearization (leave --tokenizer out to train one)")
    return tokenizer


def som_tokenizer(setup, sentences, output, log):
    """The tokenizer of a new run: the given one, or one trained on the training sentences (module docstring)."""
    pieces = setup.pieces not in (None, "words") or setup.vocab_size is not None  # "words": the default
    min_count = getattr(setup, "min_count", None)
    if setup.tokenizer:
        if pieces or min_count is not None:
            given = [name for name, value in (("--pieces", setup.pieces), ("--vocab-size", setup.vocab_size),
                                              ("--min-count", min_count)) if value is not None]
            raise ValueError(f"{', '.join(given)}: they choose the tokenizer trained here, and --tokenizer gives one; "
                             "leave them out")
        return _check_given_tokenizer(load_syntactic_tokenizer(setup.tokenizer), f"tokenizer {setup.tokenizer!r}")
    trees = [Tree("X", list(sentence["words"])) for sentence in sentences]
    if pieces:
        if min_count is not None:
            raise ValueError("--min-count is the word vocabulary's threshold; --pieces / --vocab-size train a piece "
                             "vocabulary instead (leave one out)")
        vocab_size = or_default(setup.vocab_size, 8000)
        kind = setup.pieces or "sentencepiece"
        log(f"training a {kind} tokenizer (SyntacticTokenizer, {vocab_size} pieces requested) on {len(trees)} "
            "sentences")
        return trained_once(lambda: SyntacticTokenizer.train(trees, vocab_size=vocab_size, linearization="terminals",
                                                             pieces=kind), output)
    min_count = 2 if min_count is None else min_count
    log(f"training a word vocabulary (SyntacticWordTokenizer, words seen {min_count}+ times; the others become "
        f"unknown-word classes) on {len(trees)} sentences")
    return trained_once(lambda: SyntacticWordTokenizer.train(trees, min_count=min_count, linearization="terminals"),
                        output)


# ---- training ------------------------------------------------------------------------------------------------


def _refuse_options(setup):
    """Options of `hf-slm train` that mean nothing to a recurrent model of words: errors naming them."""
    if getattr(setup, "segment_length", None) is not None or getattr(setup, "memory_length", None) is not None \
            or getattr(setup, "memory_update", None) is not None:
        raise ValueError("--segment-length, --memory-length and --memory are Transformer-XL segment recurrence; a "
                         "Syntactic Ordered Memory model is recurrent already and reads sentences whole: leave them out")
    if getattr(setup, "pack_to", None):
        raise ValueError("--pack-to packs sentences side by side for a Transformer's attention; a Syntactic Ordered "
                         "Memory model reads each sentence recurrently: leave it out")
    if getattr(setup, "label_files", None):
        raise ValueError("label files add nonterminals to a syntactic tokenizer; SOM's tokenizer has words only")
    gold_tree = getattr(setup, "gold_tree", "dependency")
    if gold_tree not in GOLD_TREES:
        raise ValueError(f"--gold-tree {gold_tree!r}: expected one of {', '.join(GOLD_TREES)}")
    if getattr(setup, "min_count", None) is not None and (not isinstance(setup.min_count, int) or setup.min_count < 1):
        raise ValueError(f"--min-count {setup.min_count!r}: expected a positive number of occurrences")


def train_som(setup, log=print):
    """Train a SOM model as `setup` (a TrainingSetup, or SomTrainingSetup for SOM's options) says, inside the output
    lock that hf_slm.training.train.train holds; return (trainer, tokenizer)."""
    preset = SOM_TRAINING_PRESETS[setup.preset]
    _refuse_options(setup)
    check_config_overrides(setup.model_overrides)
    gold_tree = getattr(setup, "gold_tree", "dependency")
    convert = bool(getattr(setup, "convert_to_dependencies", False))
    schedule = {"embedding_learning_rate_multiplier": 1.0, **preset["training"]}
    for name in ("max_steps", "batch_size", "learning_rate", "warmup_steps", "embedding_learning_rate_multiplier"):
        if getattr(setup, name) is not None:
            schedule[name] = getattr(setup, name)
    output = Path(setup.output)
    # The data first: a wrong file or option fails before the output folder is touched.
    shown = [str(path) for path in setup.train]
    shown = ", ".join(shown) if len(shown) <= 3 else f"{len(shown)} files ({shown[0]} ... {shown[-1]})"
    log(f"reading sentences from {shown} (gold trees: {gold_tree}"
        + (", converted from PTB trees by head rules" if convert else "") + ")")
    train_sentences = read_som_sentences(setup.train, gold_tree, convert, setup.normalize_options, "--train")
    eval_sentences = (read_som_sentences(setup.eval, gold_tree, convert, setup.normalize_options, "--eval")
                      if setup.eval else [])
    on_main_process(lambda: _check_output(setup, log), f"checking the output folder {setup.output}")
    if setup.resume:
        # As hf_slm.training.train's: --pieces is refused; --vocab-size and --min-count (the same command again, with
        # --resume) are unused, the saved tokenizer's ids are the ones the checkpoint learned.
        if setup.pieces is not None:
            raise ValueError(f"--pieces {setup.pieces}: it chooses the piece model of a tokenizer trained here, and "
                             "--resume uses the one saved with the run; leave --pieces out")
        tokenizer, source = resumed_tokenizer(output, setup.tokenizer, log)
        _check_given_tokenizer(tokenizer, f"the tokenizer of the run being resumed ({source})")
        log(f"resuming with the tokenizer saved in {source} (not trained again)")
    else:
        tokenizer = som_tokenizer(setup, train_sentences, output, log)
    oracle = {"oracle_trees": True} if getattr(setup, "oracle_trees", False) else {}
    config = som_config(setup.preset, {**setup.model_overrides, **oracle}, tokenizer)
    torch.manual_seed(setup.seed)
    model = SyntacticOrderedMemoryForCausalLM(config)
    log(f"model: {setup.preset} ({'dSOM' if config.disentangle else 'eSOM'}"
        + (", the memory following the gold trees (oracle)" if config.oracle_trees else "") + "), "
        f"{sum(p.numel() for p in model.parameters()):,} parameters, {len(tokenizer):,} token ids")
    train_dataset = som_dataset(tokenizer, train_sentences, gold_tree, "--train")
    eval_dataset = som_dataset(tokenizer, eval_sentences, gold_tree, "--eval") if eval_sentences else None
    trainer = _run_som_trainer(setup, model, tokenizer, train_dataset, eval_dataset, schedule)
    if is_main_process():
        path = write_training_record(output, setup, None, schedule, trainer, len(train_dataset),
                                     len(eval_dataset or []))
        record = json.loads(path.read_text())
        record["som"] = {
            "gold_tree": gold_tree,
            "dependency_conversion": ("head rules (hf_slm.data.dependency_conversion: Collins-style, not CoreNLP's "
                                      "Universal Dependencies)" if convert else None),
            "tokenizer": type(tokenizer).__name__,
            "min_count": getattr(tokenizer, "init_kwargs", {}).get("min_count"),
            "max_grad_norm": SOM_MAX_GRAD_NORM,
            "model": "dSOM" if config.disentangle else "eSOM",
            "prediction_network": config.prediction_network,
            "oracle_trees": config.oracle_trees,
        }
        path.write_text(json.dumps(record, indent=2) + "\n")
    return trainer, tokenizer


class _SomTrainer(WholeCheckpoints, Trainer):
    """transformers.Trainer whose checkpoints are written whole (hf_slm/checkpoints/whole.py)."""


def _run_som_trainer(setup, model, tokenizer, train_dataset, eval_dataset, schedule):
    """transformers.Trainer over SOM features: training_args as hf_slm.training.train.run_trainer's (Adam with the
    warm-up / cosine schedule, checkpoints, resume, time limit, precision), with the SOM collator; the final model
    and tokenizer saved to setup.output (safetensors and JSON only)."""
    collator = SyntacticOrderedMemoryCollator(tokenizer)
    optimizer, scheduler = schedule_optimizer(model, schedule)
    # the evaluation loss only: SOM's outputs carry its recurrent state, which is not gathered
    args = training_arguments(setup, schedule, eval_dataset is not None, max_grad_norm=SOM_MAX_GRAD_NORM,
                              prediction_loss_only=True)
    if is_distributed():
        # Table 2's switches leave parameters without gradients (no prediction network: p'_t's scorer)
        unused = unused_parameter_names(model, collator, train_dataset, schedule["batch_size"])
        args.ddp_find_unused_parameters = bool(unused)
    callbacks = [_TimeLimit(setup.max_seconds)] if setup.max_seconds else []
    trainer = _SomTrainer(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset,
                      data_collator=collator, optimizers=(optimizer, scheduler), callbacks=callbacks,
                      processing_class=tokenizer)
    return train_and_save(trainer, setup, tokenizer)
