"""Fine-tuning a trained syntactic LM on XSum summarization with transformers.Trainer (paper 003, section 3.3).

    hf-slm data prepare --loader xsum --summarization --parser runs/tg --tokenizer runs/tg --path xsum/ \
        --output prepared/xsum-tg
    hf-slm finetune --task xsum --model runs/tg --train prepared/xsum-tg --output runs/tg-xsum [--preset xsum-paper003]

The loop is `hf_slm.training.train.run_trainer`, the one `hf-slm train` runs (our collator, which passes the prepared
per-action labels through, Adam with the warm-up/cosine schedule, gradient clipping at 3, checkpoints every
save_steps, resume from the last one). What fine-tuning adds:
- the model is the checkpoint's weights (`--model`), loaded with the installed classes and made
  document-level (config.document_level=True: one sequence holds the document's trees, the prompt and the
  summary; the grammar then reads several trees after one `<s>`). The prepared data must have been encoded with
  the checkpoint's own tokenizer (same ids), which is checked;
- presets of the schedule (FINETUNE_PRESETS): "xsum-paper003", paper 003's 15 epochs with batch 16 (the
  learning rate and warm-up are not in the paper's text: ours are a usual fine-tuning choice), and "xsum-cpu",
  a few hundred small steps for a CPU check (the default);
- config.summarization records the format (prompt, limits, labels), the task, the base model and the parser
  of the silver trees: `hf_slm.summarize` and `hf-slm summarize` read it;
- training_setup.json gains "fine_tuning" and the folder gets its model card (README.md), which says what the
  model was fine-tuned from and on.
The output folder follows `hf-slm train`'s rules: locked while written, an existing model refused unless
--overwrite or --resume (which continues from the last checkpoint-*: nothing finished is lost).
Under `torchrun` / `accelerate launch` it also runs as `hf-slm train` does (hf_slm/runs/distributed.py): Trainer
trains under DistributedDataParallel, the main process alone locks, checks and writes the output folder (model,
tokenizer, training_setup.json, card), and the others read the same prepared data and write nothing.
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

# torch, transformers and the training code are imported when a fine-tuning runs: `hf-slm` builds its command
# line from FINETUNE_PRESETS and must start quickly.

TASKS = ("xsum",)
FINETUNE_PRESETS = {
    "xsum-paper003": {
        "description": "paper 003 section 3.3: 15 epochs, batch 16 (learning rate and warm-up: ours, not the paper's)",
        "epochs": 15, "batch_size": 16, "learning_rate": 5e-5, "warmup_steps": 500,
        "initial_learning_rate": 0.0, "final_learning_rate": 0.0,
    },
    "xsum-cpu": {
        "description": "a CPU check of the pipeline: 200 steps of batch 2",
        "max_steps": 200, "batch_size": 2, "learning_rate": 3e-4, "warmup_steps": 20,
        "initial_learning_rate": 0.0, "final_learning_rate": 3e-5,
    },
}
DEFAULT_PRESET = "xsum-cpu"


@dataclass
class FinetuneSetup:
    """Everything `hf-slm finetune` needs; None values take the preset's."""

    model: str
    train: str
    output: str
    task: str = "xsum"
    preset: str = DEFAULT_PRESET
    epochs: float | None = None
    max_steps: int | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    warmup_steps: int | None = None
    eval_steps: int = 200
    save_steps: int = 200
    logging_steps: int = 20
    seed: int = 0
    resume: bool = False
    overwrite: bool = False
    disable_progress: bool = False
    max_seconds: float | None = None
    group_by_length: bool = True
    normalize_options: dict = field(default_factory=dict)  # read by training's checks: prepared data has none
    tokenizer: str | None = None
    eval: list = field(default_factory=list)
    mixed_precision: str | None = None  # "bf16" or "fp16": autocast (hf_slm.training.train.TrainingSetup)
    gradient_accumulation_steps: int = 1


def schedule_for(setup, train_examples, processes=1):
    """The schedule of `setup.preset` with the setup's values over it; epochs become max_steps. batch_size is per
    process and batch: a step reads processes x batch_size x gradient_accumulation_steps sequences."""
    if setup.preset not in FINETUNE_PRESETS:
        raise ValueError(f"unknown fine-tuning preset {setup.preset!r}; expected one of {sorted(FINETUNE_PRESETS)}")
    schedule = {"embedding_learning_rate_multiplier": 1.0,
                **{k: v for k, v in FINETUNE_PRESETS[setup.preset].items() if k != "description"}}
    for name in ("epochs", "max_steps", "batch_size", "learning_rate", "warmup_steps"):
        value = getattr(setup, name)
        if value is not None:
            if name == "epochs":
                schedule.pop("max_steps", None)
            elif name == "max_steps":
                schedule.pop("epochs", None)
            schedule[name] = value
    if "epochs" in schedule:
        steps_per_epoch = math.ceil(train_examples / (schedule["batch_size"] * processes
                                                      * setup.gradient_accumulation_steps))
        schedule["max_steps"] = max(1, math.ceil(schedule["epochs"] * steps_per_epoch))
    schedule["warmup_steps"] = min(schedule["warmup_steps"], schedule["max_steps"])
    return schedule


def load_base_model(directory):
    """(model, tokenizer) of a checkpoint folder with the installed classes, the model made document-level. A
    model of a family without grammars is refused: a summarization sequence is a grammar's actions."""
    from ..data.prepare import load_syntactic_tokenizer
    from ..families import family_for_config
    from ..checkpoints.loading import check_checkpoint_folder

    check_checkpoint_folder(directory)
    config = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    family = family_for_config(config, f"--model {directory}")
    if not family.grammars:
        raise ValueError(f"--model {str(directory)!r} is a {family.display_name} model, which has no grammar; "
                         "fine-tuning for summarization trains a model of a family with grammars (its sequences are "
                         "a grammar's actions over the document's trees)")
    try:
        model = family.causal_lm_class.from_pretrained(str(directory), document_level=True)
    except ValueError as error:
        raise ValueError(f"--model {str(directory)!r} cannot read documents, which summarization sequences are "
                         f"(several trees in one sequence): {error}") from None
    return model, load_syntactic_tokenizer(directory)


def finetune(setup, log=print):
    """Fine-tune `setup.model` on the prepared summarization data `setup.train`; return (trainer, tokenizer).
    Under several processes the main process alone locks and writes the output folder and logs (module docstring)."""
    from ..runs.distributed import is_main_process, main_process_context
    from ..runs.journal import output_lock
    from ..training.train import precision_arguments

    precision_arguments(setup)  # checked before any work
    if not is_main_process():
        log = _say_nothing  # one process speaks for all
    with main_process_context(output_lock(setup.output, log=log), f"locking the output folder {setup.output}"):
        return _finetune(setup, log)


def _say_nothing(*_):
    pass


def _finetune(setup, log):
    import torch

    from ..data.prepare import PREPARE_RECORD
    from ..runs.distributed import is_main_process, on_main_process, world_size
    from ..checkpoints.whole import checkpoint_to_resume
    from ..training.train import (
        _check_output,
        ids_dataset,
        load_prepared_dataset,
        prepared_tokenizer,
        run_trainer,
        tokenizer_difference,
        _eval_split,
    )

    if setup.task not in TASKS:
        raise ValueError(f"unknown fine-tuning task {setup.task!r}; expected one of {list(TASKS)}")
    if not Path(setup.train).is_dir():
        raise ValueError(f"--train {str(setup.train)!r} is not a folder; expected one made by `hf-slm data prepare "
                         "--loader xsum --summarization`")
    record_path = Path(setup.train) / PREPARE_RECORD
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    summarization = record.get("summarization")
    if not summarization:
        raise ValueError(f"--train {str(setup.train)!r} holds no summarization sequences (its prepare.json has no "
                         "'summarization'); prepare it with `hf-slm data prepare --loader xsum --summarization ...`")
    dataset, record = load_prepared_dataset(setup.train)
    if "train" not in dataset:
        raise ValueError(f"prepared dataset {str(setup.train)!r} has no train split; its splits are {list(dataset)}")
    on_main_process(lambda: _check_output(setup, log), f"checking the output folder {setup.output}")
    if setup.resume:  # what it passes over is said, and a folder without a complete checkpoint refused, before loading
        checkpoint_to_resume(setup.output, log)
    model, tokenizer = load_base_model(setup.model)
    difference = tokenizer_difference(prepared_tokenizer(setup.train), tokenizer)
    if difference:
        raise ValueError(f"the prepared dataset {str(setup.train)!r} was encoded with another tokenizer than the "
                         f"model {str(setup.model)!r}'s ({difference}); prepare it with --tokenizer {setup.model}")
    grammar = model.config.grammar
    limit = model.config.max_sequence_length
    train_dataset = ids_dataset(dataset["train"], tokenizer, grammar, limit, f"{setup.train} split 'train'")
    split = _eval_split(dataset)
    eval_dataset = (ids_dataset(dataset[split], tokenizer, grammar, limit, f"{setup.train} split {split!r}")
                    if split is not None else None)
    schedule = schedule_for(setup, len(train_dataset), world_size())
    fine_tuning = {"task": setup.task, "base_model": str(setup.model), "prepared": str(setup.train),
                   "preset": setup.preset, "data": record.get("path"), "labels": summarization.get("labels")}
    # Read by hf_slm.summarize: the format of the sequences, and the parser whose trees the documents need.
    model.config.summarization = {**{key: summarization.get(key) for key in (
        "prompt", "max_document_words", "max_summary_words", "labels") if key in summarization},
        "parser": summarization.get("parser"), "parser_beam_options": summarization.get("parser_beam_options") or {},
        "task": setup.task, "base_model": str(setup.model)}
    torch.manual_seed(setup.seed)
    log(f"fine-tuning {setup.model} ({grammar}) on {len(train_dataset):,} {setup.task} sequences for "
        f"{schedule['max_steps']} steps of {schedule['batch_size']} ({setup.preset})")
    setup.train = [setup.train]  # write_training_record lists the training data
    trainer = run_trainer(setup, model, tokenizer, train_dataset, eval_dataset, schedule)
    if is_main_process():  # the others wrote nothing (run_trainer saved the model on the main process only)
        _write_fine_tuning_record(setup, grammar, schedule, trainer, train_dataset, eval_dataset, record, fine_tuning)
    return trainer, tokenizer


def _write_fine_tuning_record(setup, grammar, schedule, trainer, train_dataset, eval_dataset, record, fine_tuning):
    """training_setup.json with "fine_tuning", and the model card."""
    from ..publishing.model_card import write_model_card
    from ..training.train import write_training_record

    path = write_training_record(setup.output, setup, grammar, schedule, trainer, len(train_dataset),
                                 len(eval_dataset or []), prepared={"path": str(setup.train[0]), "loader": "xsum",
                                                                    "source": record.get("path"),
                                                                    "summarization": True})
    written = json.loads(path.read_text())
    written["fine_tuning"] = fine_tuning
    path.write_text(json.dumps(written, indent=2) + "\n")
    # The output folder is this run's own (new, resumed or --overwrite: checked before training), card included.
    write_model_card(setup.output, datasets=["xsum"], overwrite=True)


__all__ = ["DEFAULT_PRESET", "FINETUNE_PRESETS", "FinetuneSetup", "TASKS", "finetune", "load_base_model",
           "schedule_for"]
