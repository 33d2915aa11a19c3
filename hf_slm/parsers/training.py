"""`hf-slm parser train`: a proposal parser trained with transformers.Trainer, one process or torchrun.

    hf-slm parser train --kind crf --train train.txt --eval dev.txt --output runs/crf
    hf-slm parser train --kind biaffine --train en_ewt-ud-train.conllu --eval en_ewt-ud-dev.conllu --output runs/dep
    hf-slm parser train --kind crf-unlabeled --size paper --train bllip-train/ --output runs/crf-003 --resume

What it reuses of the LMs' training (hf_slm/training/train.py): the output folder's lock and checks (a trained model
or an interrupted run's checkpoints are refused without --overwrite or --resume), the TrainingArguments (checkpoints
every save_steps, the lowest evaluation loss chosen at the end, length-grouped batches, precision options), the final
save (safetensors, the tokenizer, the hub code) and the time limit. What is its own:
- the data (hf_slm/parsers/data.py) and the tokenizer, trained on the training trees (deterministic, so every
  process of a torchrun run builds the same one) or given (--tokenizer), or the resumed run's;
- the model: the kind's config class (hf_slm/parsers/kinds.py) at a size ("tiny" or "paper") with the tokenizer's
  vocabulary sizes and label ids, `--set` overrides, or a HuggingFace encoder (--encoder NAME);
- the optimizer: Dozat and Manning's (Adam, betas 0.9 / 0.9, 2e-3 decayed by 0.75 every 5,000 steps, gradients
  clipped at 5); with a pretrained encoder 5e-5 for it and 20 times that for the scorers, warmed up over a tenth of
  the steps, then decayed linearly;
- at the end, the best checkpoint parses the evaluation trees: labelled F1 (EVALB's rules) or UAS / LAS, beside a
  right-branching baseline, recorded in training_setup.json and printed.
"""

import datetime
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import Trainer, set_seed

from ..checkpoints.whole import WholeCheckpoints, checkpoint_to_resume
from ..runs.distributed import is_main_process, main_process_context
from ..runs.journal import output_lock
from ..training.train import (
    GlobalLengthGrouping, _check_output, _TimeLimit, precision_arguments, train_and_save, training_arguments,
)
from ..tokenization.tokenization_parser import ProposalParserTokenizer
from .data import ParserCollator, encode_examples, read_examples
from .kinds import SCHEDULES, parser_kind

SIZES = ("tiny", "paper")
MAX_GRAD_NORM = 5.0


@dataclass
class ParserTrainingSetup:
    """Everything `hf-slm parser train` needs; None takes the size's (or the encoder's) default."""

    kind: str
    train: list
    output: str
    eval: list = field(default_factory=list)
    size: str = "tiny"
    encoder: str | None = None
    tokenizer: str | None = None
    max_steps: int | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    eval_steps: int = 200
    save_steps: int = 200
    logging_steps: int = 20
    seed: int = 0
    resume: bool = False
    overwrite: bool = False
    min_count: int = 2
    normalize_options: dict = field(default_factory=dict)
    model_overrides: dict = field(default_factory=dict)
    max_seconds: float | None = None
    disable_progress: bool = False
    group_by_length: bool = True
    mixed_precision: str | None = None
    gradient_accumulation_steps: int = 1


def _schedule(setup):
    base = SCHEDULES["pretrained" if setup.encoder else setup.size]
    return {**base, **{name: getattr(setup, name) for name in ("max_steps", "batch_size", "learning_rate")
                       if getattr(setup, name) is not None}}


def parser_tokenizer(setup, kind, examples, log):
    """The tokenizer of the run: the resumed run's, the given one, or one built from the training examples."""
    if setup.resume:
        return ProposalParserTokenizer.from_pretrained(checkpoint_to_resume(setup.output, log))
    if setup.tokenizer:
        tokenizer = ProposalParserTokenizer.from_pretrained(setup.tokenizer)
        if tokenizer.tree_kind != kind.tree_kind or tokenizer.labelled != kind.labelled:
            raise ValueError(f"--tokenizer {setup.tokenizer}: a tokenizer of {tokenizer.tree_kind} trees (labelled: "
                             f"{tokenizer.labelled}); a {kind.name} parser reads {kind.tree_kind} trees (labelled: "
                             f"{kind.labelled})")
        return tokenizer
    tokenizer = ProposalParserTokenizer.train([example for example, _ in examples], tree_kind=kind.tree_kind,
                                             labelled=kind.labelled, min_count=setup.min_count,
                                             encoder_tokenizer=encoder_pieces(setup.encoder) if setup.encoder else None,
                                             **setup.normalize_options)
    log(f"built the tokenizer: {len(tokenizer)} words and classes, {tokenizer.num_chars} characters, "
        f"{len(tokenizer.labels)} labels" + (f", {len(tokenizer.tags)} POS tags" if tokenizer.tags else ""))
    return tokenizer


def encoder_pieces(name):
    """The `tokenizers.Tokenizer` (fast backend) of a HuggingFace encoder's tokenizer, set to split words given one
    by one: byte-level BPE tokenizers (RoBERTa's) need a space before each word, as the encoder saw words in text."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name, add_prefix_space=True)
    except (TypeError, ValueError):  # a tokenizer without that option
        tokenizer = AutoTokenizer.from_pretrained(name)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"--encoder {name}: its tokenizer ({type(tokenizer).__name__}) has no fast backend "
                         "(tokenizers); expected an encoder with a tokenizer.json")
    return backend


def parser_config(setup, kind, tokenizer):
    """The kind's config at the setup's size, with the tokenizer's vocabularies and the overrides."""
    config_class = kind.resolved("config_class")
    if setup.size not in kind.sizes:
        raise ValueError(f"--size {setup.size}: expected one of {sorted(kind.sizes)}")
    fields = dict(kind.sizes[setup.size], vocab_size=len(tokenizer), num_chars=tokenizer.num_chars,
                  vocabulary_fingerprint=tokenizer.vocabulary_fingerprint)
    if kind.tree_kind == "dependency":
        fields["num_relations"] = len(tokenizer.labels)
    else:
        reserved = tokenizer.label_kinds()
        fields.update(num_span_labels=len(tokenizer.labels), labelled=kind.labelled,
                      dummy_label_id=reserved["dummy"], no_constituent_label_id=reserved["no_constituent"],
                      num_tags=len(tokenizer.tags or []))
    if setup.encoder:
        from transformers import AutoConfig

        fields.update(encoder="pretrained", pretrained_encoder=AutoConfig.from_pretrained(setup.encoder).to_dict(),
                      pretrained_encoder_name=setup.encoder)
    unknown = sorted(set(setup.model_overrides) - set(config_class().to_dict()))
    if unknown:
        raise ValueError(f"--set {', '.join(unknown)}: not a field of {config_class.__name__}")
    return config_class(**{**fields, **setup.model_overrides})


def parser_optimizer(model, schedule, pretrained):
    """(optimizer, scheduler) of the module docstring."""
    steps = schedule["max_steps"]
    if not pretrained:
        optimizer = torch.optim.Adam(model.parameters(), lr=schedule["learning_rate"], betas=(0.9, 0.9), eps=1e-12)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.75 ** (step / 5000))
    encoder = [parameter for name, parameter in model.named_parameters() if name.startswith("encoder.pretrained.")]
    others = [parameter for name, parameter in model.named_parameters() if not name.startswith("encoder.pretrained.")]
    rate = schedule["learning_rate"]
    optimizer = torch.optim.AdamW([{"params": encoder, "lr": rate},
                                   {"params": others, "lr": rate * schedule["scorer_learning_rate_multiplier"]}],
                                  betas=(0.9, 0.9), eps=1e-12, weight_decay=0.0)
    warmup = max(1, int(schedule["warmup_fraction"] * steps))

    def factor(step):
        return step / warmup if step < warmup else max(0.0, (steps - step) / max(1, steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_parser(setup, log=print):
    """Train a parser as `setup` says; returns (trainer, tokenizer). The output folder is locked while it is
    written; under torchrun the main process alone checks and writes it."""
    precision_arguments(setup)
    if setup.size not in SIZES:
        raise ValueError(f"--size {setup.size}: expected one of {SIZES}")
    kind = parser_kind(setup.kind)
    if not is_main_process():
        log = _quiet
    with main_process_context(output_lock(setup.output, log=log), f"locking the output folder {setup.output}"):
        _check_output(setup, log)
        return _train(setup, kind, log)


def _quiet(*_):
    pass


class ParserTrainer(WholeCheckpoints, GlobalLengthGrouping, Trainer):
    """Trainer whose N processes with batches of B read the batches of one process with batches of N x B: a parser's
    loss is a mean over sentences, so DistributedDataParallel's average of the processes' gradients is the one
    process's gradient (equal batches)."""


def _train(setup, kind, log):
    train_examples = read_examples(kind, setup.train, log)
    eval_examples = read_examples(kind, setup.eval, log) if setup.eval else []
    tokenizer = parser_tokenizer(setup, kind, train_examples, log)
    train_dataset, _ = encode_examples(tokenizer, train_examples)
    eval_dataset, left_out = encode_examples(tokenizer, eval_examples, skip_unknown=True) if eval_examples \
        else (None, [])
    if left_out:
        log(f"{len(left_out)} of {len(eval_examples)} evaluation tree(s) left out of the evaluation loss (a label the "
            f"training trees lack), e.g. {left_out[0][0]}: {left_out[0][1]}")
    config = parser_config(setup, kind, tokenizer)
    set_seed(setup.seed)  # the initial weights: the same run gives the same parser, on one process or several
    model = kind.resolved("model_class")(config)
    if setup.encoder:
        from transformers import AutoModel

        model.encoder.pretrained.load_state_dict(AutoModel.from_pretrained(setup.encoder).state_dict())
    schedule = _schedule(setup)
    optimizer, scheduler = parser_optimizer(model, schedule, bool(setup.encoder))
    args = training_arguments(setup, schedule, eval_dataset is not None, max_grad_norm=MAX_GRAD_NORM,
                              remove_unused_columns=False, prediction_loss_only=True,
                              # what tells Trainer a batch has targets, so that evaluation computes the loss
                              label_names=["heads"] if kind.tree_kind == "dependency" else ["span_labels"])
    callbacks = [] if setup.max_seconds is None else [_TimeLimit(setup.max_seconds)]
    trainer = ParserTrainer(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset,
                      data_collator=ParserCollator(tokenizer), optimizers=(optimizer, scheduler), callbacks=callbacks,
                      processing_class=tokenizer)
    log(f"training a {kind.name} parser ({setup.size}{', encoder ' + setup.encoder if setup.encoder else ''}) on "
        f"{len(train_dataset)} trees for {schedule['max_steps']} steps")
    train_and_save(trainer, setup, tokenizer)
    if is_main_process():
        quality = _held_out_quality(trainer.model, tokenizer, kind, eval_examples, log) if eval_examples else None
        _write_record(setup, kind, schedule, trainer, len(train_dataset), eval_dataset, left_out, quality)
    return trainer, tokenizer


def _held_out_quality(model, tokenizer, kind, examples, log):
    """The trained parser's best trees of the evaluation sentences scored against them, beside right-branching."""
    from .evaluation import score_examples

    quality = score_examples(model, tokenizer, kind, examples)
    log("held-out " + ", ".join(f"{name} {value:.2f}" for name, value in quality.items()
                                if isinstance(value, float)))
    return quality


def _write_record(setup, kind, schedule, trainer, train_count, eval_dataset, left_out, quality):
    """training_setup.json: what the parser was trained on and how, and how good it is (read by `hf-slm card`)."""
    history = trainer.state.log_history
    losses = [entry["loss"] for entry in history if "loss" in entry]
    eval_losses = [entry["eval_loss"] for entry in history if "eval_loss" in entry]
    record = {
        "parser_kind": kind.name, "size": setup.size, "encoder": setup.encoder,
        "train_data": [str(path) for path in setup.train], "eval_data": [str(path) for path in setup.eval],
        "train_examples": train_count, "eval_examples": len(eval_dataset) if eval_dataset is not None else 0,
        "eval_examples_left_out": len(left_out), "normalization": setup.normalize_options,
        "max_steps": schedule["max_steps"], "steps_done": trainer.state.global_step,
        "batch_size": schedule["batch_size"], "learning_rate": schedule["learning_rate"], "seed": setup.seed,
        "final_train_loss": losses[-1] if losses else None,
        "final_eval_loss": eval_losses[-1] if eval_losses else None,
        "held_out": quality,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path = Path(setup.output) / "training_setup.json"
    path.write_text(json.dumps(record, indent=2, default=lambda v: None if isinstance(v, float) and math.isnan(v)
                               else str(v)) + "\n")
    return path
