"""hf-slm's generative RNNG against Noji and Oseki's rnng-pytorch (MIT) on the same weights and trees: a one-off check
(CI cannot fetch rnng-pytorch), run with a checkout of it:

    git clone https://github.com/aistairc/rnng-pytorch /tmp/rnng-pytorch
    python benchmarks/rnng_reference_comparison.py --reference /tmp/rnng-pytorch [--markdown PATH]

A tiny hf-slm RNNG with random weights (tokenizer trained on the shipped GUM sample) is mapped onto rnng-pytorch's
FixedStackRNNG (its fixed-stack, batched model): embeddings, the stack LSTM's cells, the bidirectional composition,
the action context, the action and word softmaxes. Both score the same trees, batched, in evaluation mode, and the
script prints the largest difference of each action's log-probability (nats). Two differences are by design and
are taken out before comparing, each checked on its own:
- rnng-pytorch's action softmax has an entry for its padding action; it is given a bias of -1e9 here (its training
  pushes it down; hf-slm's softmax has no padding action);
- before the first action no constituent is open, so REDUCE cannot apply: hf-slm leaves its probability out (the
  first action's log-probability is rnng-pytorch's minus log(1 - p(REDUCE))), where rnng-pytorch keeps it.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from report import Report, add_markdown_option

REPOSITORY = Path(__file__).resolve().parents[1]


def hf_slm_model(trees, embedding_size, hidden_size, layers, seed):
    from hf_slm.families.recurrent_grammars.modeling_rnng import RNNGConfig, RNNGForCausalLM
    from hf_slm.tokenization.tokenization_slm import SyntacticTokenizer

    tokenizer = SyntacticTokenizer.train(trees, vocab_size=200)
    config = RNNGConfig(vocab_size=len(tokenizer), embedding_size=embedding_size, hidden_size=hidden_size,
                        num_hidden_layers=layers, dropout=0.0, **tokenizer.action_layout)
    torch.manual_seed(seed)
    model = RNNGForCausalLM(config).eval()
    with torch.no_grad():  # a bias that is not zero, so that the mapping of every parameter is checked
        model.word_bias.normal_()
    return model, tokenizer


def reference_model(model, reference):
    """rnng-pytorch's FixedStackRNNG with `model`'s weights; (the model, hf-slm id -> its word id)."""
    sys.path.insert(0, str(reference))
    from action_dict import TopDownActionDict
    from fixed_stack_models import FixedStackRNNG

    layout = model.grammar.layout
    labels = [f"L{k}" for k in range(layout.open_nt_stop - layout.open_nt_start)]
    word_ids = [int(i) for i in model.word_ids]
    config = model.config
    ours = model.model
    theirs = FixedStackRNNG(TopDownActionDict(labels), vocab=len(word_ids) + 1, padding_idx=0,
                            w_dim=config.embedding_size, h_dim=config.hidden_size, num_layers=config.num_hidden_layers,
                            dropout=0.0).eval()
    with torch.no_grad():
        embeddings = ours.embed_tokens.weight
        theirs.emb[0].weight[1:] = embeddings[word_ids]  # (row 0: its padding word)
        theirs.vocab_mlp.bias[1:] = model.word_bias[word_ids]
        theirs.vocab_mlp.bias[0] = -1e9
        theirs.rnng.nt_emb[0].weight[:] = embeddings[layout.open_nt_start:layout.open_nt_stop]
        theirs.rnng.initial_emb[0].weight[0] = embeddings[layout.bos_token_id]
        for cell, our_cell in zip(theirs.rnng.stack_rnn.lstm, ours.stack_lstm.cells):
            cell.load_state_dict(our_cell.state_dict())
        theirs.rnng.output[1].load_state_dict(ours.context[1].state_dict())
        composition = theirs.rnng.composition
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(composition.rnn, name)[:] = getattr(ours.composition.forward_lstm, name)
            getattr(composition.rnn, name + "_reverse")[:] = getattr(ours.composition.backward_lstm, name)
        composition.output[1].load_state_dict(ours.composition.output.state_dict())
        theirs.action_mlp.weight.zero_()
        theirs.action_mlp.bias[0] = -1e9  # its padding action
        theirs.action_mlp.weight[1:] = model.action_head.weight
        theirs.action_mlp.bias[1:] = model.action_head.bias
    return theirs, {our_id: index + 1 for index, our_id in enumerate(word_ids)}


def reference_inputs(sequences, layout, word_index):
    """rnng-pytorch's x [B, words] and actions [B, actions] (SHIFT 1, REDUCE 2, NT(k) 3 + k) of our id sequences."""
    words, actions = [], []
    for ids in sequences:
        words.append([word_index[i] for i in ids[1:] if i in word_index])
        actions.append([3 + i - layout.open_nt_start if layout.open_nt_start <= i < layout.open_nt_stop
                        else 2 if layout.close_nt_start <= i < layout.close_nt_stop else 1 for i in ids[1:]])
    pad = lambda rows: torch.tensor([row + [0] * (max(map(len, rows)) - len(row)) for row in rows])  # noqa: E731
    return pad(words), pad(actions)


def compare(model, tokenizer, trees, reference):
    theirs, word_index = reference_model(model, reference)
    layout = model.grammar.layout
    batch = tokenizer([str(tree) for tree in trees], padding=True, return_tensors="pt")
    sequences = [ids[mask.bool()].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]
    with torch.no_grad():
        log_probs = torch.log_softmax(model(**batch).logits, -1)
        x, actions = reference_inputs(sequences, layout, word_index)
        _, action_loss, word_loss, _ = theirs(x, actions)
        # their first action's softmax, for the REDUCE term hf-slm leaves out
        stack = theirs.build_stack(x, max(100, x.size(1) + 10))
        first = torch.log_softmax(theirs.action_mlp(theirs.rnng.output(stack.hidden_head()[:, :, -1])), -1)
    ours, reference_values, first_differences = [], [], []
    action_position, word_position = 0, 0
    for row, ids in enumerate(sequences):
        for t, action in enumerate(ids[1:]):
            value = -float(action_loss[action_position])
            action_position += 1
            if action in word_index:
                value -= float(word_loss[word_position])
                word_position += 1
            our_value = float(log_probs[row, t, action])
            if t == 0:  # no constituent is open: hf-slm renormalizes without REDUCE
                p_reduce = float(first[row, 2].exp())
                first_differences.append(abs(our_value - (value - np.log1p(-p_reduce))))
                continue
            ours.append(our_value)
            reference_values.append(value)
    differences = np.abs(np.array(ours) - np.array(reference_values))
    return len(sequences), len(differences), float(differences.max()), float(max(first_differences))


def reference_commit(reference):
    """The checkout's commit, or "unknown"."""
    import subprocess

    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=reference, capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="a checkout of github.com/aistairc/rnng-pytorch")
    parser.add_argument("--trees", type=int, default=40, help="GUM sample trees scored (default 40)")
    add_markdown_option(parser)
    args = parser.parse_args()
    from hf_slm.tokenization.trees import read_trees

    trees = read_trees(REPOSITORY / "hf_slm" / "sample_data" / "gum" / "train.txt")[: args.trees]
    report = Report("hf-slm's generative RNNG beside rnng-pytorch's FixedStackRNNG")
    report.line(f"rnng-pytorch at commit {reference_commit(args.reference)}; random hf-slm RNNGs mapped onto it weight "
                f"for weight; the first {len(trees)} GUM sample trees, batched, in evaluation mode. Differences are "
                "of each action's log-probability, in nats.")
    rows = []
    for embedding, hidden, layers in ((16, 12, 1), (24, 20, 2)):
        model, tokenizer = hf_slm_model(trees, embedding, hidden, layers, seed=layers)
        sentences, actions, largest, first = compare(model, tokenizer, trees, args.reference)
        rows.append([embedding, hidden, layers, sentences, actions, f"{largest:.2e}", f"{first:.2e}"])
    report.table("", ["w_dim", "h_dim", "layers", "trees", "actions after the first", "largest |Δ log p|",
                      "first actions, REDUCE's mass taken out: largest |Δ|"], rows)
    report.finish(args.markdown)


if __name__ == "__main__":
    main()
