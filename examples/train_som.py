"""Train eSOM and dSOM (paper 001) on UD English EWT beside an LSTM LM of similar size, on CPU, in minutes.

    python examples/train_som.py [--data DIR] [--steps 300] [--train-sentences 2000] [--ablations] [--save DIR]
    python examples/train_som.py --data "$(hf-slm data fetch ud-english-ewt)"   # all of UD English EWT

By default it reads the UD English EWT sample shipped in the package (hf_slm/sample_data/ud_english_ewt_sample:
100 training and 25 dev sentences), enough to see every step run; the table below is from the whole treebank,
which `hf-slm data fetch ud-english-ewt` downloads once.

One model through the command line instead, with checkpoints, --resume and training_setup.json:
`hf-slm train --preset esom-tiny --train en_ewt-ud-train.conllu --eval en_ewt-ud-dev.conllu --output runs/esom`
(hf_slm/families/ordered_memory/training.py).

Everything in view: CoNLL-U sentences (hf_slm.data.conllu_loader) -> gold trees Gamma (Figure 4: each head and
its dependents form a constituent, left-binarized) -> Algorithm 1's first siblings per token (the collator) ->
a plain Adam loop over the same batches for every model. Printed per model on the dev sentences: the exact
perplexity (SOM's structure is marginalized by its soft parser, so p(x) needs no beam and is no bound), p and
p' accuracy against Algorithm 1's labels, and UF1 of the greedy incremental parses against Gamma (brackets of
2+ words, whole sentence excluded, punctuation kept; see hf_slm.families.ordered_memory.evaluation).

One run on a shared 2-core CPU (torch 2.13, one thread; `--steps 800 --ablations`, the other options at their
defaults: 2,000 training sentences of at most 25 words, 300 dev sentences, D = 64, N = 10, batch 32):

    model        params   dev ppl  p acc    UF1  p' acc  train s
    eSOM         252241    123.76  0.733  53.68   0.736      292
    dSOM         233809    121.35  0.703  42.64   0.750      223
    dSOM-TF      233809    158.76  0.559  52.99   0.526      245
    dSOM-noPN    191248    118.07  0.696  40.20       -      197
    dSOM-LB      233809    118.78  0.697  33.65   0.699      221
    LSTM-84      248795    117.08      -      -       -       16

At this size and length of training SOM's perplexity is the LSTM's within noise (an earlier run, without the
ablations and before theta was kept a valid tree: eSOM 117.4, dSOM 118.0, LSTM 123.0); teacher forcing costs perplexity
as in Table 2, and the left-branching labels cost UF1.
"""

import argparse
import math
import random
import time
from pathlib import Path

import torch
from torch import nn

from hf_slm.data.conllu_loader import read_conllu_file
from hf_slm.publishing.model_card import write_model_card
from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
from hf_slm.modeling.modeling_som import SyntacticOrderedMemoryForCausalLM
from hf_slm.families.ordered_memory.data import SyntacticOrderedMemoryCollator, gold_tree, som_example
from hf_slm.search.scorers import scorer_for
from hf_slm.families.ordered_memory.evaluation import som_parse_eval
from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer

DATA = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "ud_english_ewt_sample"


def exact_perplexity(model, tokenizer, sentences):
    """exp(-sum log p(x) / N), N counting the words and one </s> per sentence, as `hf-slm eval ppl` does for a model
    that scores words exactly (its Scorer, hf_slm/search/scorers.py)."""
    log_probs = scorer_for(model, tokenizer).log_probs(sentences, progress=False)
    return math.exp(-math.fsum(log_probs) / (sum(len(words) for words in sentences) + len(sentences)))


def read_sentences(path, limit, max_length):
    """The first `limit` sentences of a CoNLL-U file with at most `max_length` words, as {"words", "heads"}."""
    kept = []
    for example in read_conllu_file(path, path.name):
        if len(example["words"]) <= max_length:
            kept.append({"words": example["words"], "heads": example["heads"]})
        if len(kept) == limit:
            break
    return kept


class LSTMLanguageModel(nn.Module):
    """The baseline: embeddings, a one-layer LSTM, the output layer tied to the embeddings."""

    def __init__(self, vocab_size, hidden_size, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden_size)
        self.lstm = nn.LSTM(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, input_ids, attention_mask, labels, **_):
        hidden, _ = self.lstm(self.dropout(self.embed(input_ids)))
        logits = self.dropout(hidden) @ self.embed.weight.T + self.bias
        return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)


def parameter_count(model):
    """Trainable weights; dSOM's block-triangular layers do not count their zero block (as the paper's Table 2)."""
    count = sum(p.numel() for p in model.parameters())
    for module in model.modules():
        if getattr(module, "layout", None) is not None:
            count -= int((module.allowed(module.linear.weight.device, module.linear.weight.dtype) == 0).sum())
    return count


def train(model, batches, steps, learning_rate, log_every):
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    started = time.time()
    for step in range(1, steps + 1):
        batch = batches[(step - 1) % len(batches)]
        output = model(**batch)
        loss = output if torch.is_tensor(output) else output.loss
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % log_every == 0 or step == steps:
            extra = "" if torch.is_tensor(output) else \
                f" (lm {output.lm_loss.item():.3f}, structure {output.structure_loss.item():.3f})"
            print(f"  step {step:4d}  loss {loss.item():.3f}{extra}  {time.time() - started:.0f}s", flush=True)
    model.eval()
    return time.time() - started


def save_with_card(model, tokenizer, directory):
    """A checkpoint that loads with AutoModelForCausalLM (trust_remote_code) and its README.md model card."""
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    print(f"  saved {directory} ({write_model_card(directory).name})", flush=True)


@torch.no_grad()
def lstm_perplexity(model, batches):
    total = count = 0
    for batch in batches:
        tokens = int((batch["labels"][:, 1:] != -100).sum())
        total += model(**batch).item() * tokens
        count += tokens
    return math.exp(total / count)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA,
                        help="folder of *-ud-{train,dev}.conllu (default: the shipped EWT sample)")
    parser.add_argument("--train-sentences", type=int, default=2000)
    parser.add_argument("--dev-sentences", type=int, default=300)
    parser.add_argument("--max-length", type=int, default=25, help="longest sentence kept, in words")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64, help="D (dSOM: D_sem = 3/4 D, D_syn = 1/4 D, as 300/100)")
    parser.add_argument("--slots", type=int, default=10, help="N, the memory slots")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, metavar="DIR",
                        help="save each SOM model with the tokenizer to DIR/<model> and write its model card "
                             "(hf-slm eval ... --model DIR/<model> adds results; hf-slm card DIR/<model> quotes them)")
    parser.add_argument("--ablations", action="store_true",
                        help="also Table 2's switches on dSOM: teacher forcing loss (TF), no prediction network "
                             "(noPN), left-branching tree labels (LB)")
    args = parser.parse_args()
    files = {split: sorted(args.data.glob(f"*-ud-{split}.conllu")) for split in ("train", "dev")}
    for split, found in files.items():
        if len(found) != 1:
            raise SystemExit(f"{args.data}: expected one *-ud-{split}.conllu file, found {len(found)}; "
                             "pass --data FOLDER")
    torch.manual_seed(args.seed)
    random.seed(args.seed)

    # 1. Sentences and gold trees; the word vocabulary of the PTB setup (singletons -> unknown-word classes).
    train_rows = read_sentences(files["train"][0], args.train_sentences, args.max_length)
    dev_rows = read_sentences(files["dev"][0], args.dev_sentences, args.max_length)
    tokenizer = SyntacticWordTokenizer.train([gold_tree(r["words"], r["heads"]) for r in train_rows],
                                             linearization="terminals", min_count=2)
    print(f"{len(train_rows)} training and {len(dev_rows)} dev sentences, {len(tokenizer)} token ids")

    # 2. Batches: input_ids, attention_mask, labels and Algorithm 1's first siblings per token.
    collator = SyntacticOrderedMemoryCollator(tokenizer)
    features = [som_example(tokenizer, r["words"], r["heads"]) for r in train_rows]
    random.shuffle(features)
    batches = [collator(features[i:i + args.batch_size]) for i in range(0, len(features), args.batch_size)]
    dev_batches = [collator([som_example(tokenizer, r["words"], r["heads"]) for r in dev_rows[i:i + 64]])
                   for i in range(0, len(dev_rows), 64)]

    # 3. Models: eSOM, dSOM and the LSTM, trained on the same batches.
    common = dict(vocab_size=len(tokenizer), hidden_size=args.hidden, num_slots=args.slots, dropout=0.1,
                  embedding_dropout=0.05, output_dropout=0.2)
    models = {
        "eSOM": SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(**common)),
        "dSOM": SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(
            **common, disentangle=True, semantic_size=args.hidden * 3 // 4)),
    }
    if args.ablations:
        dsom = dict(common, disentangle=True, semantic_size=args.hidden * 3 // 4)
        models["dSOM-TF"] = SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(
            **dsom, structure_loss="teacher_forcing"))
        models["dSOM-noPN"] = SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(
            **dsom, use_prediction_network=False))
        models["dSOM-LB"] = SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(**dsom))
        # the same sentences in the same order, labelled with left-branching trees
        order = {tuple(f["input_ids"]): index for index, f in enumerate(features)}
        left = [som_example(tokenizer, r["words"], tree="left_branching") for r in train_rows]
        left.sort(key=lambda f: order[tuple(f["input_ids"])])
        left_batches = [collator(left[i:i + args.batch_size]) for i in range(0, len(left), args.batch_size)]
    # the LSTM gets the width that brings it closest to eSOM's parameter count
    target = parameter_count(models["eSOM"])
    lstm_hidden = min(range(8, 4 * args.hidden + 1, 4), key=lambda size: abs(
        parameter_count(LSTMLanguageModel(len(tokenizer), size, 0.0)) - target))
    lstm = LSTMLanguageModel(len(tokenizer), lstm_hidden, dropout=0.2)
    rows = []
    for name, model in models.items():
        print(f"training {name}", flush=True)
        seconds = train(model, left_batches if name == "dSOM-LB" else batches, args.steps, args.learning_rate,
                        log_every=50)
        if args.save:
            save_with_card(model, tokenizer, args.save / name)
        ppl = exact_perplexity(model, tokenizer, [r["words"] for r in dev_rows])
        parse = som_parse_eval(model, tokenizer, dev_rows)
        rows.append((name, parameter_count(model), ppl, parse["p_accuracy"], parse["uf1"],
                     parse["next_p_accuracy"], seconds))
    print("training LSTM", flush=True)
    seconds = train(lstm, [{k: v for k, v in b.items() if k != "som_first_siblings"} for b in batches], args.steps,
                    args.learning_rate, log_every=50)
    ppl = lstm_perplexity(lstm, [{k: v for k, v in b.items() if k != "som_first_siblings"} for b in dev_batches])
    rows.append((f"LSTM-{lstm_hidden}", parameter_count(lstm), ppl, None, None, None, seconds))

    # 4. The table (dev sentences; perplexity over words + one </s> per sentence, exact for every model; p acc, UF1
    # and p' acc always against Gamma from the dependency trees, also for the left-branching ablation).
    show = lambda value, spec: format("-", ">" + spec[:spec.index(".")] + "s") if value is None else format(value, spec)  # noqa: E731
    header = ("model", "params", "dev ppl", "p acc", "UF1", "p' acc", "train s")
    print("\n{:10} {:>8} {:>9} {:>6} {:>6} {:>7} {:>8}".format(*header))
    for name, params, ppl, p_acc, uf1, q_acc, seconds in rows:
        print(f"{name:10} {params:8d} {ppl:9.2f} {show(p_acc, '6.3f')} {show(uf1, '6.2f')} {show(q_acc, '7.3f')} "
              f"{seconds:8.0f}")


if __name__ == "__main__":
    main()
