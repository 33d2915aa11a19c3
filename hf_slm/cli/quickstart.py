"""`hf-slm quickstart`: the main job, end to end, in a few minutes on a CPU.

1. train a tokenizer and a small model of QUICKSTART_PRESET's family (a TG) on the GUM sample shipped in the
   package;
2. save it, and load it back through AutoModelForCausalLM / AutoTokenizer with trust_remote_code;
3. print the joint log-probability of held-out trees and the action-level perplexity;
4. sample a few trees (ancestral sampling restricted to legal actions).

Training is a fixed number of steps (QUICKSTART_STEPS, about 3 minutes on 2 CPU cores), so every machine gets the
same model; a slower one takes longer (the progress bar says how long is left). `max_seconds` (`--max-seconds`)
caps training if asked: a capped run says loudly that it stopped early, and its model is never reused as finished.

Run again into the same folder, it does not train again: a model it finished there (with the same settings)
is reused and only steps 2-4 run; a run interrupted during training resumes from its last checkpoint.
`overwrite=True` (`--overwrite`) trains a new model in its place. Any other model in the folder is refused
(hf_slm.training.train).
"""

import json
import math
import time
from pathlib import Path

from ..families import preset as preset_of

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "gum"
# The demo's preset (hf-slm presets), with QUICKSTART_MODEL's sizes.
QUICKSTART_PRESET = "tg-ptb"
# Sized to finish in about 3 minutes on 2 CPU cores (measured: benchmarks/README or the closing note of issue 31).
QUICKSTART_STEPS = 700

# Small enough to learn something from 1,500 trees in a few minutes on two CPU cores.
QUICKSTART_MODEL = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                        embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.1, attention_dropout=0.0,
                        max_sequence_length=512)


def _finished_quickstart(output, setup):
    """The training record of a model this quickstart finished in `output` with `setup`'s data and schedule,
    else None."""
    from ..training.train import holds_trained_model

    record_path = Path(output) / "training_setup.json"
    if not holds_trained_model(output) or not record_path.is_file():
        return None
    record = json.loads(record_path.read_text(encoding="utf-8"))
    expected = {"preset": setup.preset, "train_data": [str(path) for path in setup.train], "seed": setup.seed,
                "max_steps": setup.max_steps}
    if not all(record.get(key) == value for key, value in expected.items()):
        return None
    if record.get("steps_done") != setup.max_steps:
        raise ValueError(f"{output} holds a quickstart model that stopped at step {record.get('steps_done')} of "
                         f"{setup.max_steps} (the --max-seconds cap); it is under-trained, so it is not reused: "
                         "pass --overwrite to train it again in full")
    return record


def run_quickstart(output="hf-slm-quickstart", max_steps=QUICKSTART_STEPS, max_seconds=None, vocab_size=2000, seed=0,
                   log=print, overwrite=False):
    from ..training.train import TrainingSetup, holds_trained_model, train

    started = time.monotonic()
    output = Path(output)

    def stage(number, text):
        log(f"\n[{number}/4] {text}  ({time.monotonic() - started:.0f}s)")

    family, preset = preset_of(QUICKSTART_PRESET)
    setup = TrainingSetup(
        preset=QUICKSTART_PRESET, train=[SAMPLE / "train.txt"], eval=[SAMPLE / "dev.txt"], output=str(output),
        vocab_size=vocab_size, model_overrides=QUICKSTART_MODEL, max_steps=max_steps, batch_size=16,
        learning_rate=1e-3, warmup_steps=100, eval_steps=400, save_steps=400, logging_steps=50, seed=seed,
        max_seconds=max_seconds, label_files=[SAMPLE / "test.txt"], overwrite=overwrite,
        # an earlier quickstart interrupted during training goes on from its last checkpoint
        resume=not overwrite and not holds_trained_model(output) and any(output.glob("checkpoint-*")),
    )
    finished = None if overwrite else _finished_quickstart(output, setup)
    if finished is not None:
        steps = finished["steps_done"]
        stage(1, f"{output} holds the model an earlier quickstart trained ({steps} steps, finished "
                 f"{finished.get('date')}); reusing it (--overwrite trains a new one)")
    else:
        stage(1, f"training a tokenizer and a small {family.variant(preset['model']['grammar']).display_name} "
                 f"({QUICKSTART_MODEL['num_hidden_layers']} layers, d {QUICKSTART_MODEL['hidden_size']}; "
                 f"{QUICKSTART_PRESET}'s grammar and schedule) for {max_steps} steps on {SAMPLE / 'train.txt'}")
        trainer, _ = train(setup, log=log)
        steps = trainer.state.global_step
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        evals = [entry["eval_loss"] for entry in trainer.state.log_history if "eval_loss" in entry]
        log(f"trained {steps} steps" + (f"; training loss {losses[0]:.2f} -> {losses[-1]:.2f}" if losses else "")
            + (f"; dev loss {evals[-1]:.2f}" if evals else ""))
        if steps < max_steps:
            log(f"\nWARNING: training STOPPED EARLY at step {steps} of {max_steps} (--max-seconds {max_seconds:g}); the "
                "model is under-trained, so the scores and samples below are poor. Run again with --overwrite and "
                "without --max-seconds for the full model.\n")

    stage(2, f"loading {output} back with AutoModelForCausalLM / AutoTokenizer (trust_remote_code=True)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(output), trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(str(output), trust_remote_code=True)
    from ..checkpoints.checks import check_tokenizer_matches

    check_tokenizer_matches(model.config, tokenizer)
    log(f"loaded {type(model).__name__} ({model.config.grammar} grammar) and {type(tokenizer).__name__}")

    stage(3, f"scoring held-out trees from {SAMPLE / 'test.txt'}")
    from ..search.scoring import action_log_probs, action_perplexity
    from ..tokenization.trees import read_trees

    test_trees = read_trees(SAMPLE / "test.txt")
    ids = tokenizer(test_trees)["input_ids"]
    scores = action_log_probs(model, ids, progress=True)
    for tree, values in list(zip(test_trees, scores))[:5]:
        text = " ".join(tree.leaves())
        log(f"  log p(x, y) = {values.sum():8.2f}   {text[:70]}{'...' if len(text) > 70 else ''}")
    perplexity = action_perplexity(scores)
    log(f"action-level perplexity on {len(test_trees)} test trees: {perplexity:.2f} "
        f"(mean log p(x, y) per tree {sum(v.sum() for v in scores) / len(scores):.1f} nats)")

    stage(4, "sampling trees (ancestral sampling over legal actions)")
    from ..search.sampling import sample_trees

    samples = sample_trees(model, num_samples=3, max_words=20, word_start_mask=tokenizer.word_start_mask,
                           incomplete_word_ids=tokenizer.incomplete_word_ids, seed=seed)
    for sample in samples:
        log("  " + tokenizer.decode(sample, skip_special_tokens=True))
    log(f"\ndone in {time.monotonic() - started:.0f}s. The checkpoint is in {output}/ (safetensors, tokenizer, hub code).")
    log(f"Next: hf-slm parse --model {output} --pretty \"The students are happy .\"   # beam-search parsing")
    log(f"      hf-slm score --model {output} --bits \"The students are happy .\"    # surprisals, log p(x)")
    log("      hf-slm masks \"(S (NP the bird NP) (VP sings VP) S)\" --png mask.png   # what the grammar attends to")
    log(f"      python -c \"from transformers import AutoModelForCausalLM; "
        f"AutoModelForCausalLM.from_pretrained('{output}', trust_remote_code=True)\"")
    return {"perplexity": perplexity, "steps": steps, "log_probs": [float(v.sum()) for v in scores],
            "seconds": time.monotonic() - started, "math_ok": math.isfinite(perplexity)}
