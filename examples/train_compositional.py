"""Train paper 003's compositional SLMs on the GUM sample for the same steps on CPU, then compare them.

    python examples/train_compositional.py [--variants nb-dn-in-m nb-dn-ex-nm gpt2-tree ...]
                                           [--output runs/compositional-gum] [--max-steps 1000]
                                           [--dev-sentences 50] [--items 20]

Default variants: the Nb-Dn ones that are models (COMPOSITIONAL_MODEL_VARIANTS: Nb-Dn-In-M, Nb-Dn-In-Nm, and the Ex
ones once they land) and GPT2-tree. Every model gets the same trees (the 1,500 GUM training trees shipped in the
package, unlabeled, unary chains removed, left-binarized for Bi), its `<variant>-tiny` preset (4 layers, d 128,
absolute positions, pre-LN), a CompositionalTokenizer for its linearization (SentencePiece over the same words,
`--vocab-size`), the same batch size (16), steps and learning-rate schedule, and seed. Steps, written out as
`hf-slm train` does them: tokenizer, config from the preset and the tokenizer's id layout, the data collator,
Adam with warm-up and cosine decay, Trainer; then each model is loaded back through the Auto classes and
evaluated with paper 003's search settings (n_c = sentence length, p_c = 3: `paper003-sg`) and a small beam
(`--beam-size`, `--word-beam-size`):

- dev PPL: word perplexity on the first `--dev-sentences` GUM dev sentences of at most `--max-words` words, an
  UPPER BOUND for tree models (the final beam's mass is a lower bound on p(x)), per word and `</s>`;
- SG: SyntaxGym accuracy on a few suites (`--suites`, `--items` items each) from the shipped sample
  (hf_slm/sample_data/syntaxgym_sample) or all suites (`--suites "$(hf-slm data fetch syntaxgym)"`); left
  out, saying so, when that folder is absent;
- training tokens/s: action ids of the training batches (padding not counted; the In variants' duplicated `)`
  counts once) per second of Trainer's loop, on this machine's threads.

It prints a Markdown table. What the numbers are: a like-for-like comparison of tiny models trained for minutes on
1,500 trees. What they are not: paper 003's results (GPT-2 small with GPT-2's BPE, trained on BLLIP-LG, evaluated on
all 31 SG suites with beam 300); at this size and data every model is far from converged, SG on 20 items per suite
is noisy, and upper-bound perplexities of different beams do not compare.
"""

import argparse
import json
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from hf_slm import SyntacticDataCollator, preset_config, read_trees
from hf_slm.evaluation.perplexity import word_perplexity
from hf_slm.evaluation.syntaxgym import run_syntaxgym
from hf_slm.modeling.compositional_grammars import BASELINE_GRAMMARS
from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS
from hf_slm.modeling.generation_slm import CONSTRAINT_SETTINGS
from hf_slm.families import grammar_class
from hf_slm.families import causal_lm_for_config
from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer
from hf_slm.training.train import make_optimizer

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum"
SUITES = ["number_prep", "number_src", "reflexive_src_masc", "subordination"]
BATCH_SIZE = 16


def paper_name(variant):
    return {"gpt2-tree": "GPT2-tree", "gpt2-token": "GPT2-token"}.get(
        variant, "-".join(part.capitalize() for part in variant.split("-")))


class CountingCollator:
    """The data collator, counting the action ids (not padding) of every training batch it builds."""

    def __init__(self, collator, pad_token_id):
        self.collator, self.pad_token_id, self.tokens = collator, pad_token_id, 0

    def __call__(self, features):
        batch = self.collator(features)
        self.tokens += int((batch["input_ids"] != self.pad_token_id).sum())
        return batch


def main():
    known = list(COMPOSITIONAL_MODEL_VARIANTS) + sorted(BASELINE_GRAMMARS)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", help="default: the Nb-Dn variants that are models, and gpt2-tree")
    parser.add_argument("--suites", default=str(REPO / "hf_slm" / "sample_data" / "syntaxgym_sample"))
    parser.add_argument("--output", default="runs/compositional-gum")
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--dev-sentences", type=int, default=50)
    parser.add_argument("--max-words", type=int, default=20, help="the longest dev sentence evaluated")
    parser.add_argument("--beam-size", type=int, default=50)
    parser.add_argument("--word-beam-size", type=int, default=5)
    parser.add_argument("--items", type=int, default=20, help="SyntaxGym items per suite")
    args = parser.parse_args()
    variants = args.variants or [v for v in COMPOSITIONAL_MODEL_VARIANTS if v.startswith("nb-dn-")] + ["gpt2-tree"]
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise SystemExit(f"--variants {' '.join(unknown)}: expected some of {' '.join(known)} (the compositional "
                         "variants that are models and the two baselines)")
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)

    # 1. Trees: the GUM sample; the dev sentences evaluated, as a text file (one sentence per line).
    train_trees = read_trees(SAMPLE / "train.txt")
    dev_words = [tree.leaves() for tree in read_trees(SAMPLE / "dev.txt") if len(tree.leaves()) <= args.max_words]
    dev_text = output / "dev.txt"
    dev_text.write_text("".join(" ".join(words) + "\n" for words in dev_words[: args.dev_sentences]), encoding="utf-8")
    suites = Path(args.suites)
    chosen_suites = None
    if suites.is_dir():
        chosen_suites = output / "syntaxgym_suites"  # the suites evaluated, linked (results are named by this folder)
        chosen_suites.mkdir(exist_ok=True)
        for name in SUITES:
            link = chosen_suites / f"{name}.json"
            if not link.exists():
                link.symlink_to(suites.resolve() / f"{name}.json")
    else:
        print(f"{suites} is absent: no SyntaxGym column (pass --suites with SyntaxGym's test_suites/json)")

    search = dict(beam_size=args.beam_size, word_beam_size=args.word_beam_size, **CONSTRAINT_SETTINGS["paper003-sg"])
    tokenizers, rows = {}, []
    for variant in variants:
        directory = output / variant
        # 2. Tokenizer: one per linearization (nb-dn serves the Nb-Dn variants and GPT2-tree), over the same words.
        linearization = grammar_class(variant).linearization
        if linearization not in tokenizers:
            tokenizers[linearization] = CompositionalTokenizer.train(train_trees, vocab_size=args.vocab_size,
                                                                     linearization=linearization)
        tokenizer = tokenizers[linearization]
        ids = tokenizer([tokenizer.unlabel(tree) for tree in train_trees])["input_ids"]

        # 3. Model: the tiny preset with the tokenizer's id layout.
        config = preset_config(f"{variant}-tiny", vocab_size=len(tokenizer), **tokenizer.action_layout)
        torch.manual_seed(0)
        model = causal_lm_for_config(config)

        # 4. Training: only action ids are stored; the collator derives masks (and Ex's composition inputs) per batch.
        collator = CountingCollator(SyntacticDataCollator(variant, tokenizer.action_layout,
                                                          max_length=config.max_sequence_length),
                                    tokenizer.pad_token_id)
        optimizer, scheduler = make_optimizer(model, learning_rate=1e-3, warmup_steps=min(100, args.max_steps // 10),
                                              total_steps=args.max_steps, initial_learning_rate=1e-7,
                                              final_learning_rate=3e-7)
        training_args = TrainingArguments(
            output_dir=str(directory), max_steps=args.max_steps, per_device_train_batch_size=BATCH_SIZE,
            max_grad_norm=3.0, logging_steps=max(1, min(50, args.max_steps)), save_strategy="no", report_to=[],
            use_cpu=not torch.cuda.is_available(), train_sampling_strategy="group_by_length", seed=0,
        )
        trainer = Trainer(model=model, args=training_args, train_dataset=Dataset.from_dict({"input_ids": ids}),
                          data_collator=collator, optimizers=(optimizer, scheduler), processing_class=tokenizer)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
        trainer.save_model(str(directory))
        tokenizer.save_pretrained(directory)

        # 5. Load it back as anyone would, and evaluate.
        model = AutoModelForCausalLM.from_pretrained(directory, trust_remote_code=True).eval()
        loaded_tokenizer = AutoTokenizer.from_pretrained(directory, trust_remote_code=True)
        results = directory / "eval_results"
        perplexity = word_perplexity(model, loaded_tokenizer, str(dev_text), beam_options=search, output_dir=results,
                                     overwrite=True)
        gym = (run_syntaxgym(model, loaded_tokenizer, chosen_suites, output_dir=results, limit=args.items,
                             overwrite=True, **search) if chosen_suites is not None else None)
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        rows.append((variant, model.num_parameters(), losses[-1] if losses else float("nan"), collator.tokens / seconds,
                     seconds, perplexity, gym))
        print(json.dumps({"model": paper_name(variant), "perplexity": perplexity["perplexity"],
                          "sg": gym["sg_score"] if gym else None}, default=str))

    print(f"\nGUM sample: {len(train_trees)} training trees, {args.max_steps} steps of {BATCH_SIZE}; "
          f"{len(dev_words[: args.dev_sentences])} dev sentences of at most {args.max_words} words; beam "
          f"{args.beam_size} / word beam {args.word_beam_size}, n_c = words, p_c = 3; {torch.get_num_threads()} threads"
          + (f"; SyntaxGym: {', '.join(SUITES)}, {args.items} items each" if chosen_suites else "; no SyntaxGym"))
    print("| model | parameters | last logged train loss (nats/action) | training tokens/s | training minutes "
          "| dev PPL | PPL is | SG (%) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for variant, parameters, loss, tokens_per_second, seconds, perplexity, gym in rows:
        sg = f"{100 * gym['sg_score']:.1f}" if gym and gym.get("sg_score") is not None else "-"
        print(f"| {paper_name(variant)} | {parameters:,} | {loss:.3f} | {tokens_per_second:,.0f} | "
              f"{seconds / 60:.1f} | {perplexity['perplexity']:.1f} | {perplexity.get('estimate', 'upper bound')} | {sg} |")


if __name__ == "__main__":
    main()
