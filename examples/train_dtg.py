"""Train a small DTG and its TXL (trans) twin on UD English EWT, then compare them (paper 002, section 4).

    python examples/train_dtg.py [--data DIR] [--suites DIR] [--output runs/dtg-ewt]
                                 [--max-steps 2000] [--train-sentences 20000] [--dev-sentences 100]
    python examples/train_dtg.py --data "$(hf-slm data fetch ud-english-ewt)" --suites "$(hf-slm data fetch syntaxgym)"

By default it reads the samples shipped in the package (hf_slm/sample_data: 100 training and 25 dev sentences
of UD English EWT, four SyntaxGym suites), enough to see every step run (`--max-steps 100` for a quick look);
the second line trains on all of EWT
(12,544 training sentences) and evaluates on the full suites, downloaded once by `hf-slm data fetch`.

Both models read the same arc-standard transition sequences with the same tokenizer, preset shape
(`dtg-tiny` / `txl-trans-tiny`: 4 layers, d 128) and training steps; they differ only in what paper 002
studies: DTG's stack attention, relative positions and head embeddings against a causal Transformer-XL.
Steps, written out as `hf-slm data prepare` + `hf-slm train` do them: CoNLL-U trees (non-projective ones
lifted), a DependencyTokenizer, the data collator, Adam with the embedding learning-rate multiplier 2.0,
Trainer; then each model is loaded back through the Auto classes and evaluated on dev sentences of at most
`--max-words` words with a small beam (`--beam-size`, `--word-beam-size`):

- perplexity: word-level, an UPPER BOUND (the beam's mass is a lower bound on p(x)), per word and `</s>`;
- UAS: the beam's best tree against the gold heads, punctuation (UPOS PUNCT) excluded, in %;
- SyntaxGym: accuracy on a few suites (`--suites`, a folder holding SUITES), `--items` items each.

It prints a Markdown table. These are small models trained for minutes on CPU: the numbers show that the
pipeline works and how the two models compare at this size, not the paper's figures (paper 002 trains 252M
parameters on BLLIP-LG with parser-produced trees).
"""

import argparse
import json
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from hf_slm import SyntacticDataCollator, preset_config
from hf_slm.data import load_conllu
from hf_slm.evaluation.attachment import parse_uas
from hf_slm.evaluation.perplexity import word_perplexity
from hf_slm.evaluation.syntaxgym import run_syntaxgym
from hf_slm.families import causal_lm_for_config
from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer
from hf_slm.tokenization.trees import escape_word
from hf_slm.training.train import make_optimizer

SAMPLES = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data"
MODELS = {"dtg": ("DTG", "dtg-tiny"), "txl_trans": ("TXL (trans)", "txl-trans-tiny")}
SUITES = ["number_prep", "number_src", "reflexive_src_masc", "subordination"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(SAMPLES / "ud_english_ewt_sample"),
                        help="a folder of *-ud-{train,dev}.conllu (default: the shipped EWT sample)")
    parser.add_argument("--suites", default=str(SAMPLES / "syntaxgym_sample"),
                        help="a folder of SyntaxGym suite JSON files (default: the shipped sample)")
    parser.add_argument("--output", default="runs/dtg-ewt")
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--train-sentences", type=int, default=20000, help="at most this many (EWT has 12,544)")
    parser.add_argument("--dev-sentences", type=int, default=100)
    parser.add_argument("--max-words", type=int, default=20, help="the longest dev sentence evaluated")
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--beam-size", type=int, default=50)
    parser.add_argument("--word-beam-size", type=int, default=5)
    parser.add_argument("--items", type=int, default=20, help="SyntaxGym items per suite")
    args = parser.parse_args()
    if not Path(args.data).exists():
        raise SystemExit(f"{args.data} does not exist; pass --data with a folder of UD CoNLL-U files "
                         "(e.g. UD English EWT: --data \"$(hf-slm data fetch ud-english-ewt)\")")
    output = Path(args.output)
    torch.manual_seed(0)

    # 1. Trees: CoNLL-U, non-projective trees lifted to projective ones (DTG's transitions need projectivity).
    # Brackets in words are written as the Penn Treebank does (-LRB-, -RRB-), as sentence files need them.
    data = load_conllu(args.data, non_projective="lift").map(lambda e: {"words": [escape_word(w) for w in e["words"]]})
    train = data["train"].select(range(min(args.train_sentences, len(data["train"]))))
    trees = [{"words": words, "heads": heads} for words, heads in zip(train["words"], train["heads"])]
    dev = data["validation"].filter(lambda example: len(example["words"]) <= args.max_words)
    dev = dev.select(range(min(args.dev_sentences, len(dev))))
    gold = [dict(example) for example in dev]  # words, heads, upos, sent_id...
    dev_text = output / "dev.txt"
    output.mkdir(parents=True, exist_ok=True)
    dev_text.write_text("".join(" ".join(sentence["words"]) + "\n" for sentence in gold), encoding="utf-8")

    # 2. One tokenizer for both: SentencePiece over the words, `<root>`, LA, RA (arc-standard, as both read).
    tokenizer = DependencyTokenizer.train(trees, vocab_size=args.vocab_size, transition_system="arc_standard")
    ids = tokenizer(trees)["input_ids"]

    chosen_suites = output / "syntaxgym_suites"  # the suites evaluated, linked (results are named by this folder)
    chosen_suites.mkdir(exist_ok=True)
    for name in SUITES:
        link = chosen_suites / f"{name}.json"
        if not link.exists():
            link.symlink_to(Path(args.suites).resolve() / f"{name}.json")

    rows = []
    for grammar, (label, preset) in MODELS.items():
        directory = output / grammar
        started = time.perf_counter()
        # 3. Model: the tiny preset with the tokenizer's id layout.
        config = preset_config(preset, vocab_size=len(tokenizer), **tokenizer.action_layout)
        torch.manual_seed(0)
        model = causal_lm_for_config(config)

        # 4. Training: only action ids are stored; the collator derives the masks per batch.
        collator = SyntacticDataCollator(grammar, tokenizer.action_layout)
        optimizer, scheduler = make_optimizer(model, learning_rate=1e-3, warmup_steps=min(100, args.max_steps // 10),
                                              total_steps=args.max_steps, initial_learning_rate=1e-7,
                                              final_learning_rate=3e-7, embedding_learning_rate_multiplier=2.0)
        training_args = TrainingArguments(
            output_dir=str(directory), max_steps=args.max_steps, per_device_train_batch_size=16, max_grad_norm=3.0,
            logging_steps=min(50, args.max_steps), save_strategy="no", report_to=[],
            use_cpu=not torch.cuda.is_available(),
            train_sampling_strategy="group_by_length", seed=0,
        )
        trainer = Trainer(model=model, args=training_args, train_dataset=Dataset.from_dict({"input_ids": ids}),
                          data_collator=collator, optimizers=(optimizer, scheduler), processing_class=tokenizer)
        trainer.train()
        trainer.save_model(str(directory))
        tokenizer.save_pretrained(directory)
        trained = time.perf_counter() - started

        # 5. Load it back as anyone would, and evaluate.
        model = AutoModelForCausalLM.from_pretrained(directory, trust_remote_code=True).eval()
        loaded_tokenizer = AutoTokenizer.from_pretrained(directory, trust_remote_code=True)
        beam = dict(beam_size=args.beam_size, word_beam_size=args.word_beam_size)
        results = directory / "eval_results"
        perplexity = word_perplexity(model, loaded_tokenizer, str(dev_text), beam_options=beam, output_dir=results,
                                     overwrite=True)
        uas = parse_uas(model, loaded_tokenizer, gold, output_dir=results, overwrite=True, **beam)
        gym = run_syntaxgym(model, loaded_tokenizer, chosen_suites, output_dir=results, limit=args.items,
                            overwrite=True, **beam)
        final_loss = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry][-1]
        rows.append((label, model.num_parameters(), float(final_loss), trained, perplexity, uas, gym))
        print(json.dumps({"model": label, "perplexity": perplexity, "uas": uas, "syntaxgym": gym}, default=str)[:2000])

    print(f"\nUD English EWT: {len(trees)} training trees, {args.max_steps} steps of 16; {len(gold)} dev sentences of "
          f"at most {args.max_words} words; beam {args.beam_size} / word beam {args.word_beam_size}; SyntaxGym: "
          f"{', '.join(SUITES)}, {args.items} items each")
    print("| model | parameters | train loss, last 50 steps (nats/action) | training minutes | dev PPL (upper bound) "
          "| dev UAS (%) | SG (%) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, parameters, loss, seconds, perplexity, uas, gym in rows:
        print(f"| {label} | {parameters:,} | {loss:.3f} | {seconds / 60:.1f} | {perplexity['perplexity']:.1f} | "
              f"{uas['uas']:.1f} | {100 * gym['mean_all_suites']:.1f} |")


if __name__ == "__main__":
    main()
