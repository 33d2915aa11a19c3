"""Train a small Transformer Grammar on the GUM sample with transformers.Trainer, step by step.

    python examples/train_tg.py [--output runs/tg-gum] [--max-steps 300] [--grammar tg|choe_charniak|terminals]

The same thing `hf-slm train` does, written out: read trees, train a tokenizer, build the config from a preset
and the tokenizer's id layout, a dataset of action ids, the data collator, Adam with linear warm-up then
cosine decay (paper 000, Appendix B), Trainer. Then it loads the result back through the Auto classes.
"""

import argparse
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from hf_slm import SyntacticDataCollator, SyntacticTokenizer, preset_config, read_trees
from hf_slm.families import causal_lm_for_config
from hf_slm.search.scoring import action_log_probs, action_perplexity
from hf_slm.training.train import make_optimizer

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="runs/tg-gum")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--grammar", default="tg", choices=["tg", "choe_charniak", "terminals"])
    args = parser.parse_args()

    # 1. Trees: PTB brackets, POS tags and the ROOT wrapper dropped, function tags stripped.
    options = dict(strip_function_tags=True)
    train_trees = read_trees(SAMPLE / "train.txt", **options)
    dev_trees = read_trees(SAMPLE / "dev.txt", **options)
    test_trees = read_trees(SAMPLE / "test.txt", **options)

    # 2. Tokenizer: SentencePiece over the words, one token per opening / closing nonterminal.
    labels = {t.label() for tree in dev_trees + test_trees for t in tree.subtrees()}
    linearization = "terminals" if args.grammar == "terminals" else "top_down"
    tokenizer = SyntacticTokenizer.train(train_trees, vocab_size=2000, linearization=linearization,
                                         extra_nonterminals=labels, **options)

    # 3. Model: the PTB preset's shape scaled down, with the tokenizer's id layout.
    preset = {"tg": "tg-ptb", "choe_charniak": "txl-cc-ptb", "terminals": "txl-terminals-ptb"}[args.grammar]
    config = preset_config(preset, vocab_size=len(tokenizer), hidden_size=128, intermediate_size=512,
                           num_hidden_layers=4, num_attention_heads=4, attention_dropout=0.0,
                           max_sequence_length=512, **tokenizer.action_layout)
    model = causal_lm_for_config(config)

    # 4. Data: only action ids are stored; the collator derives masks and relative positions per batch.
    train_data = Dataset.from_dict({"input_ids": tokenizer(train_trees)["input_ids"]})
    dev_data = Dataset.from_dict({"input_ids": tokenizer(dev_trees)["input_ids"]})
    collator = SyntacticDataCollator(args.grammar, tokenizer.action_layout)

    # 5. Training.
    optimizer, scheduler = make_optimizer(model, learning_rate=1e-3, warmup_steps=50, total_steps=args.max_steps,
                                          initial_learning_rate=1e-7, final_learning_rate=3e-7)
    training_args = TrainingArguments(
        output_dir=args.output, max_steps=args.max_steps, per_device_train_batch_size=16, per_device_eval_batch_size=16,
        max_grad_norm=3.0, logging_steps=25, eval_strategy="steps", eval_steps=100, save_steps=100,
        report_to=[], use_cpu=not torch.cuda.is_available(), train_sampling_strategy="group_by_length",
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train_data, eval_dataset=dev_data,
                      data_collator=collator, optimizers=(optimizer, scheduler), processing_class=tokenizer)
    trainer.train()
    trainer.save_model(args.output)
    tokenizer.save_pretrained(args.output)

    # 6. Load it back as anyone would, and score the test trees.
    loaded = AutoModelForCausalLM.from_pretrained(args.output, trust_remote_code=True)
    scores = action_log_probs(loaded, tokenizer(test_trees)["input_ids"])
    print(f"action-level perplexity on {len(test_trees)} test trees: {action_perplexity(scores):.2f}")


if __name__ == "__main__":
    main()
