"""Training TG / TXL (CC) / TXL (terminals) with transformers.Trainer.

The loop is Trainer's; what this module adds is the glue: a tokenizer trained on the training trees (or a
given one), the model config from a preset and the tokenizer's id layout, datasets of action ids, the
data collator, Adam with the paper's schedule (linear warm-up from the initial to the maximum learning
rate, then cosine decay to the final one; paper 000, Appendix B) and gradient clipping at norm 3.
"""

import datetime
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from datasets import Dataset
from transformers import Trainer, TrainerCallback, TrainingArguments

from .checks import LINEARIZATION_OF_GRAMMAR, check_tokenizer_matches
from .collator import SyntacticDataCollator
from .modeling.configuration_tg import PRESETS, preset_config
from .modeling.grammars import ActionLayout, get_grammar
from .modeling.modeling_tg import TransformerGrammarForCausalLM
from .tokenization.tokenization_slm import SyntacticTokenizer
from .tokenization.trees import read_trees

def warmup_cosine_schedule(step, warmup_steps, total_steps, initial, peak, final):
    """Learning rate at `step`: linear from `initial` to `peak` over the warm-up, then cosine to `final`."""
    if step < warmup_steps:
        return initial + (peak - initial) * step / max(1, warmup_steps)
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return final + (peak - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model, learning_rate, warmup_steps, total_steps, initial_learning_rate, final_learning_rate):
    """Adam (betas 0.9, 0.999, no weight decay) and a LambdaLR following `warmup_cosine_schedule`."""
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, betas=(0.9, 0.999))

    def factor(step):
        lr = warmup_cosine_schedule(step, warmup_steps, total_steps, initial_learning_rate, learning_rate, final_learning_rate)
        return lr / learning_rate

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def tree_dataset(tokenizer, trees, grammar, max_length, source="trees"):
    """A datasets.Dataset with one column, input_ids (the unexpanded action ids of each tree).

    A tree whose expanded length exceeds `max_length` is an error naming it (nothing is dropped).
    """
    encoded = tokenizer(trees)["input_ids"]
    rules = get_grammar(grammar, ActionLayout(**tokenizer.action_layout))
    for index, ids in enumerate(encoded):
        expanded = len(ids) + (sum(1 for i in ids if tokenizer.action_layout["close_nt_start"] <= i < tokenizer.action_layout["close_nt_stop"]) if rules.duplicates_closing else 0)
        if expanded > max_length:
            raise ValueError(
                f"{source}: tree {index} expands to {expanded} positions under the {grammar} grammar, more than "
                f"the model's max_sequence_length {max_length}; raise it or remove the tree"
            )
    return Dataset.from_dict({"input_ids": encoded})


@dataclass
class TrainingSetup:
    """Everything `hf-slm train` needs, with the preset's values as defaults."""

    preset: str
    train: list
    output: str
    eval: list = field(default_factory=list)
    tokenizer: str | None = None
    vocab_size: int | None = None
    model_overrides: dict = field(default_factory=dict)
    max_steps: int | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    warmup_steps: int | None = None
    eval_steps: int = 200
    save_steps: int = 200
    logging_steps: int = 20
    seed: int = 0
    resume: bool = False
    normalize_options: dict = field(default_factory=dict)
    label_files: list = field(default_factory=list)  # tree files whose labels (only) join the vocabulary
    group_by_length: bool = True
    disable_progress: bool = False
    max_seconds: float | None = None


def train(setup, log=print):
    """Train a model as `setup` says; return (trainer, tokenizer). Checkpoints go to setup.output."""
    if setup.preset not in PRESETS:
        raise ValueError(f"unknown preset {setup.preset!r}; expected one of {sorted(PRESETS)}")
    preset = PRESETS[setup.preset]
    grammar = preset["model"]["grammar"]
    schedule = dict(preset["training"])
    for name in ("max_steps", "batch_size", "learning_rate", "warmup_steps"):
        if getattr(setup, name) is not None:
            schedule[name] = getattr(setup, name)
    for path in list(setup.train) + list(setup.eval):
        if not Path(path).exists():
            raise ValueError(f"tree file {str(path)!r} does not exist")
    output = Path(setup.output)

    log(f"reading trees from {', '.join(map(str, setup.train))}")
    train_trees = read_trees(setup.train, **setup.normalize_options)
    eval_trees = read_trees(setup.eval, **setup.normalize_options) if setup.eval else []
    if setup.tokenizer:
        tokenizer = SyntacticTokenizer.from_pretrained(setup.tokenizer)
        if tokenizer.linearization != LINEARIZATION_OF_GRAMMAR[grammar]:
            raise ValueError(
                f"tokenizer {setup.tokenizer!r} linearizes {tokenizer.linearization!r}; the {grammar} grammar "
                f"needs {LINEARIZATION_OF_GRAMMAR[grammar]!r}"
            )
    else:
        vocab_size = setup.vocab_size or preset["model"]["vocab_size"]
        log(f"training a SentencePiece tokenizer ({vocab_size} pieces requested) on {len(train_trees)} trees")
        # The trees are already normalized; the options are stored so that tree strings encoded later get
        # the same normalization.
        labels = {node.label() for tree in eval_trees + read_trees(setup.label_files, **setup.normalize_options)
                  for node in tree.subtrees()}
        tokenizer = SyntacticTokenizer.train(train_trees, vocab_size=vocab_size, linearization=LINEARIZATION_OF_GRAMMAR[grammar],
                                             extra_nonterminals=labels, **setup.normalize_options)
    overrides = dict(setup.model_overrides)
    overrides.update(tokenizer.action_layout)
    overrides["vocab_size"] = len(tokenizer)
    config = preset_config(setup.preset, **overrides)
    check_tokenizer_matches(config, tokenizer)
    torch.manual_seed(setup.seed)
    model = TransformerGrammarForCausalLM(config)
    log(f"model: {setup.preset} ({grammar}), {sum(p.numel() for p in model.parameters()):,} parameters")

    train_dataset = tree_dataset(tokenizer, train_trees, grammar, config.max_sequence_length, "training trees")
    eval_dataset = tree_dataset(tokenizer, eval_trees, grammar, config.max_sequence_length, "evaluation trees") if eval_trees else None
    collator = SyntacticDataCollator(grammar, tokenizer.action_layout, max_length=config.max_sequence_length,
                                     return_relative_positions=False)
    optimizer, scheduler = make_optimizer(
        model, schedule["learning_rate"], schedule["warmup_steps"], schedule["max_steps"],
        schedule["initial_learning_rate"], schedule["final_learning_rate"],
    )
    args = TrainingArguments(
        output_dir=str(output),
        max_steps=schedule["max_steps"],
        per_device_train_batch_size=schedule["batch_size"],
        per_device_eval_batch_size=schedule["batch_size"],
        max_grad_norm=3.0,
        logging_steps=setup.logging_steps,
        eval_strategy="steps" if eval_dataset is not None else "no",
        eval_steps=setup.eval_steps,
        save_strategy="steps",
        save_steps=setup.save_steps,
        save_total_limit=2,
        seed=setup.seed,
        data_seed=setup.seed,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=setup.disable_progress,
        dataloader_num_workers=0,
        # Batches of similar lengths waste less on padding: the [B, T', T'] attention grows with the longest.
        train_sampling_strategy="group_by_length" if setup.group_by_length else "random",
    )
    callbacks = [_TimeLimit(setup.max_seconds)] if setup.max_seconds else []
    trainer = Trainer(
        model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, data_collator=collator,
        optimizers=(optimizer, scheduler), callbacks=callbacks, processing_class=tokenizer,
    )
    trainer.train(resume_from_checkpoint=True if setup.resume else None)
    trainer.save_model(str(output))
    tokenizer.save_pretrained(str(output))
    write_training_record(output, setup, grammar, schedule, trainer, len(train_dataset), len(eval_dataset or []))
    return trainer, tokenizer


def write_training_record(output, setup, grammar, schedule, trainer, train_examples, eval_examples):
    """Write `<output>/training_setup.json`: what the model was trained on and how (read by `hf-slm card`).

    JSON rather than Trainer's pickled training_args.bin, so that it can be published and read safely.
    """
    history = trainer.state.log_history
    train_losses = [entry["loss"] for entry in history if "loss" in entry]
    eval_losses = [entry["eval_loss"] for entry in history if "eval_loss" in entry]
    record = {
        "preset": setup.preset,
        "grammar": grammar,
        "train_data": [str(path) for path in setup.train],
        "eval_data": [str(path) for path in setup.eval],
        "train_examples": train_examples,
        "eval_examples": eval_examples,
        "normalization": setup.normalize_options,
        "max_steps": schedule["max_steps"],
        "steps_done": trainer.state.global_step,
        "batch_size": schedule["batch_size"],
        "learning_rate": schedule["learning_rate"],
        "warmup_steps": schedule["warmup_steps"],
        "initial_learning_rate": schedule["initial_learning_rate"],
        "final_learning_rate": schedule["final_learning_rate"],
        "seed": setup.seed,
        "final_train_loss": train_losses[-1] if train_losses else None,
        "final_eval_loss": eval_losses[-1] if eval_losses else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path = Path(output) / "training_setup.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


class _TimeLimit(TrainerCallback):
    """Stop training after a wall-clock budget (the quickstart's guard on slow machines)."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.start = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start > self.seconds:
            control.should_training_stop = True
        return control
