"""Training-step throughput and peak memory: TG, TXL (CC), TXL (terminals), DTG, TXL (trans) and paper 003's
compositional SLMs against GPT-2.

    python benchmarks/train_step.py [--steps 5] [--batch-size 16] [--length 256] [--device cuda] [--dtype bf16]
                                    [--size small|paper|tiny] [--only NAME ...] [--budget SECONDS] [--markdown PATH]

Every model gets the same shape of batch, B x T' = 16 x 256 by default, built from the same GUM trees
(TG: its expanded actions; TXL (CC): the same actions without duplication; TXL (terminals): the words;
GPT-2: the TG ids under a causal mask), padded to T'; DTG and TXL (trans) read the longest UD English EWT
training trees that fit (../shared/data/ud_english_ewt; those rows are left out without it), as arc-standard
transitions (DTG: arcs doubled). Paper 003: one internal-composition (Nb-Dn-In-M) and one external-composition
(Nb-Dn-Ex-M, its composer included: the paper's 256-d, 4 layers) variant, when they are models, over the longest
GUM trees whose expansion fits, unlabeled (CompositionalTokenizer). Models: d 256, 8 heads, 4 layers, d_ff 1024
(`--size paper`: GPT-2 small's d 768, 12 heads, 12 layers, d_ff 3072, the composer still 256-d), vocabulary 8K, dropout
0 (so that every model runs its fused attention kernel). A step is forward, backward and an Adam update. Tokens/s counts
the B x T' positions. Peak memory is the growth of the process's peak resident set over the steps, each model measured
in its own process. Ratios are against GPT-2, measured in the same run. SOM (paper 001), a recurrent model over words,
reads the words of the same GUM trees (with its structural loss); its tokens/s counts B x T of its own batch
(measure_som), and an LSTM LM of its width reads the same batch (measure_lstm); below the table come SOM's ratio to
it and, on the CPU in float32, both models' arithmetic a step and their rate (counted_flops).

`--dtype bf16` runs each step under torch.autocast in bfloat16 (as Trainer's `--bf16` does), weights and the optimizer
in float32. `--budget` bounds the whole run: a model that cannot start before it runs out is listed as left out, and
the page is rewritten after every model, so a run stopped from outside keeps what it measured. On a GPU (or with
`--in-process`) every model is measured in this process, its peak taken after the previous one is freed (the
children exist for the CPU's resident set, which a process never gives back). `--size tiny` is the dry run's shape.
"""

import argparse
import functools
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
TREE_SOURCES = [REPO.parent / "shared" / "data" / "gum_const" / "const",
                REPO / "hf_slm" / "sample_data" / "gum" / "train.txt"]  # --dry-run: the sample only
# The whole UD English EWT when ../shared/data has it, else the sample shipped in the package (a GPU machine has only the
# repository): its longest trees fill the batch either way.
DEPENDENCY_SOURCES = [REPO.parent / "shared" / "data" / "ud_english_ewt" / "en_ewt-ud-train.conllu",
                      REPO / "hf_slm" / "sample_data" / "ud_english_ewt_sample" / "en_ewt-sample-ud-train.conllu"]
DEPENDENCY_MODELS = ("dtg", "txl_trans")
# Paper 003 (issue 14, Speed): an In-M variant should reach 0.9x GPT-2's tokens/s, an Ex variant (composer included)
# 0.75x. Nb-Up-In-M adds the start pointer (section 2.2), whose scores are [B, T, T'] per step.
COMPOSITIONAL_ROWS = ("nb-dn-in-m", "nb-dn-ex-m", "nb-up-in-m")
# `--size`: "small" (the default) for every row; "paper" is GPT-2 small's shape (paper 003's backbone), where the
# Ex composer (256-d, 4 layers, whatever the size) costs the main model what it does in the paper.
MODEL_SIZES = {"small": dict(hidden_size=256, num_attention_heads=8, num_hidden_layers=4, intermediate_size=1024),
               "paper": dict(hidden_size=768, num_attention_heads=12, num_hidden_layers=12, intermediate_size=3072),
               "tiny": dict(hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64)}
MODEL = dict(MODEL_SIZES["small"])  # the shape of this run's models (main() sets it from --size)
VOCAB = 8192


def peak_rss_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def time_training_steps(model, batch, steps, device="cpu", dtype="float32"):
    """(seconds per step, peak memory growth in MB) of `steps` training steps (forward, backward, an Adam update)
    of `model` on `batch`, after one warm-up step (allocations, kernels). On a GPU the memory is the device's peak
    allocation during the steps (torch.cuda.max_memory_allocated), on the CPU the growth of the process's peak
    resident set. dtype "bf16": forward and backward under torch.autocast in bfloat16."""
    import contextlib

    import torch

    model.to(device)
    precision = (torch.autocast(torch.device(device).type, dtype=torch.bfloat16) if dtype == "bf16"
                 else contextlib.nullcontext())
    batch = {name: value.to(device) if torch.is_tensor(value) else value for name, value in batch.items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    on_gpu = str(device).startswith("cuda")

    def step():
        with precision:
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    if on_gpu:
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        before = 0
    else:
        reset_peak_rss()
        before = peak_rss_kb()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if on_gpu:
        torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - start) / steps
    if on_gpu:
        return seconds, torch.cuda.max_memory_allocated(device) / 2**20
    return seconds, max(peak_rss_kb() - before, 0) / 1024


@functools.cache  # one build per run when every model is measured in this process
def build_batches(batch_size, length):
    """The same trees, as inputs of each model: dict name -> (input dict, labels present)."""
    import numpy as np

    from hf_slm import SyntacticDataCollator, SyntacticTokenizer, read_trees

    source = next(p for p in TREE_SOURCES if p.exists())
    trees = read_trees(source)
    tokenizer = SyntacticTokenizer.train(trees, vocab_size=VOCAB - 600)
    if len(tokenizer) > VOCAB:
        raise SystemExit(f"tokenizer has {len(tokenizer)} ids, more than {VOCAB}")
    ids = tokenizer(trees)["input_ids"]
    close_start, close_stop = tokenizer.action_layout["close_nt_start"], tokenizer.action_layout["close_nt_stop"]
    expanded = np.array([len(s) + sum(close_start <= i < close_stop for i in s) for s in ids])
    # The longest trees that fit, so that little of the batch is padding.
    order = [i for i in np.argsort(-expanded) if expanded[i] <= length][:batch_size]
    chosen = [trees[i] for i in order]
    batches = {}
    # pad_to_multiple_of=length: every model runs exactly `length` positions per row
    for grammar in ("tg", "choe_charniak"):
        collate = SyntacticDataCollator(grammar, tokenizer.action_layout, pad_to_multiple_of=length)
        batches[grammar] = collate(tokenizer(chosen)["input_ids"])
    words = SyntacticTokenizer.train(trees, vocab_size=VOCAB - 600, linearization="terminals")
    collate = SyntacticDataCollator("terminals", words.action_layout, pad_to_multiple_of=length)
    batches["terminals"] = collate(words(chosen)["input_ids"])
    tg = batches["tg"]
    positions = tg["input_ids"].gather(1, tg["expansion_index"])  # TG's expanded ids, [B, length]
    batches["gpt2"] = {"input_ids": positions, "labels": positions.masked_fill(tg["position_kinds"] == 0, -100)}
    real = {name: int((batch["position_kinds"] != 0).sum()) for name, batch in batches.items() if name != "gpt2"}
    real["gpt2"] = real["tg"]
    return batches, tokenizer.action_layout, words.action_layout, real


@functools.cache
def build_dependency_batches(batch_size, length):
    """The longest projective EWT training trees whose DTG expansion fits: dict name -> input dict, and the
    tokenizer's id layout."""
    import numpy as np

    from hf_slm import SyntacticDataCollator
    from hf_slm.data import load_conllu
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    source = next(path for path in DEPENDENCY_SOURCES if path.exists())
    examples = load_conllu({"train": str(source)}, non_projective="skip")["train"]
    trees = [{"words": words, "heads": heads} for words, heads in zip(examples["words"], examples["heads"])]
    tokenizer = DependencyTokenizer.train(trees, vocab_size=VOCAB - 600)
    ids = tokenizer(trees)["input_ids"]
    arcs = tokenizer.action_layout["left_arc_start"], tokenizer.action_layout["right_arc_stop"]
    expanded = np.array([len(s) + sum(arcs[0] <= i < arcs[1] for i in s) for s in ids])  # arcs count twice
    order = [i for i in np.argsort(-expanded) if expanded[i] <= length][:batch_size]
    chosen = [ids[i] for i in order]
    batches = {name: SyntacticDataCollator(name, tokenizer.action_layout, pad_to_multiple_of=length)(chosen)
               for name in DEPENDENCY_MODELS}
    return batches, tokenizer.action_layout


def build_compositional_batch(name, batch_size, length):
    """The longest GUM trees whose expansion under paper 003's grammar `name` fits `length`, unlabeled and
    collated for it (the collator computes the Ex variants' composition inputs too); the number of real tokens."""
    import numpy as np

    from hf_slm import SyntacticDataCollator, read_trees
    from hf_slm.families import grammar_class
    from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer
    from hf_slm.training.train import doubled_id_ranges

    trees = read_trees(next(p for p in TREE_SOURCES if p.exists()))
    tokenizer = CompositionalTokenizer.train(trees, vocab_size=VOCAB - 600,
                                             linearization=grammar_class(name).linearization)
    encoded = tokenizer([tokenizer.unlabel(tree) for tree in trees])
    ids = encoded["input_ids"]
    doubled = doubled_id_ranges(name, tokenizer.action_layout)
    expanded = np.array([len(s) + sum(low <= i < high for i in s for low, high in doubled) for s in ids])
    order = [i for i in np.argsort(-expanded) if expanded[i] <= length][:batch_size]
    fields = [field for field in ("input_ids", "constituent_starts") if field in encoded]  # Nb-Up: each `)`'s start
    features = [{field: encoded[field][i] for field in fields} for i in order]
    batch = SyntacticDataCollator(name, tokenizer.action_layout, pad_to_multiple_of=length)(features)
    return batch, tokenizer.action_layout, int((batch["position_kinds"] != 0).sum())


@functools.cache
def som_batch(batch_size, length):
    """SOM's batch: the GUM trees' words (SentencePiece pieces, `<s>` ... `</s>`), the longest that fit `length`,
    with the structural loss's first siblings from each tree (left-binarized)."""
    from hf_slm import SyntacticTokenizer, read_trees
    from hf_slm.families.ordered_memory.data import SyntacticOrderedMemoryCollator, som_example

    trees = read_trees(next(p for p in TREE_SOURCES if p.exists()))
    words = SyntacticTokenizer.train(trees, vocab_size=VOCAB - 600, linearization="terminals")
    features = [som_example(words, constituency=tree) for tree in trees]
    fitting = sorted((f for f in features if len(f["input_ids"]) <= length), key=lambda f: -len(f["input_ids"]))
    return SyntacticOrderedMemoryCollator(words)(fitting[:batch_size])


def _lstm_layer_flops(inputs, input_weights, hidden_weights, *ignored, backward=False, **unused):
    """oneDNN's LSTM layer (nn.LSTM's CPU kernel), which torch's flop counter does not know: per position the gates'
    products with the input and the previous state, 2 x 4H x (I + H) operations; backward twice that (the gradients
    of the inputs and of the weights). Takes shapes (the counter passes shapes)."""
    positions = inputs[0] * inputs[1]
    forward = 2 * positions * (input_weights[0] * input_weights[1] + hidden_weights[0] * hidden_weights[1])
    return 2 * forward if backward else forward


def counted_flops(model, batch):
    """Floating-point operations of one forward and backward of `model` on `batch` (no update), in the matrix
    products only, counted by torch.utils.flop_counter on the CPU (elementwise work is not counted). A "sampled"
    SOM counts the slots drawn in this step."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    lstm_layers = {torch.ops.aten.mkldnn_rnn_layer: _lstm_layer_flops,
                   torch.ops.aten.mkldnn_rnn_layer_backward: functools.partial(_lstm_layer_flops, backward=True)}
    with FlopCounterMode(display=False, custom_mapping=lstm_layers) as counter:
        model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def time_forward(model, batch, steps):
    """Seconds of one forward of `model` on `batch` in training mode under torch.no_grad (after one warm-up), on
    the CPU: the step's forward computation without autograd's records and without a backward, the part of a step
    that no change to the backward can remove."""
    import torch

    with torch.no_grad():
        model(**batch)
        start = time.perf_counter()
        for _ in range(steps):
            model(**batch)
    return (time.perf_counter() - start) / steps


def recorded_products(model, batch):
    """The matrix products of one forward and backward of `model` on `batch`, in order: (operation, arguments) with
    each tensor argument as its layout and memory location (shape, strides, dtype, storage address, offset), so that
    a replay can give a tensor read twice in the step one tensor. Counts aten's mm, addmm, bmm and baddbmm; a fused
    kernel that hides its products (nn.LSTM's oneDNN layer) is not seen."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    products = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}

    class RecordProducts(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in products:
                self.calls.append((func, [(tuple(a.shape), a.stride(), a.dtype, a.untyped_storage().data_ptr(),
                                           a.storage_offset()) if isinstance(a, torch.Tensor) else a
                                          for a in args], kwargs))
            return func(*args, **kwargs)

    with RecordProducts() as recorder:
        model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)
    return recorder.calls


def time_products_alone(model, batch, repeats=3):
    """Seconds of the matrix products of one forward and backward of `model` on `batch` (recorded_products) with
    nothing between them: run again, in order, on tensors of the same layouts (one per memory location the step
    used, so that a weight read again is read again here too), best of `repeats`. That is the step's time for an
    implementation that keeps these products and makes everything else free: the least that any code computing them
    takes on this machine. For SOM's row (nn.LSTM's products are hidden in its kernel)."""
    import torch

    tensors = {}  # one tensor per (layout, memory location) seen in the step

    def tensor_like(layout):
        if layout not in tensors:
            tensors[layout] = torch.empty_strided(layout[0], layout[1], dtype=layout[2]).normal_()
        return tensors[layout]

    calls = [(func, [tensor_like(a) if isinstance(a, tuple) else a for a in args], kwargs)
             for func, args, kwargs in recorded_products(model, batch)]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for func, args, kwargs in calls:
            func(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best


def _word_batch_result(name, model, batch, steps, device, dtype, products_alone=False):
    """The row of a model timed on som_batch: tokens/s counts B x T of that batch. On the CPU in float32 the row also
    has the step's arithmetic (counted_flops), its forward alone (time_forward) and with `products_alone` its matrix
    products alone (time_products_alone), which say whether SOM's time against the LSTM's is its arithmetic, its rate,
    or already its forward."""
    import torch

    seconds, peak_mb = time_training_steps(model, batch, steps, device, dtype)
    positions = batch["input_ids"].numel()
    analysed = device == "cpu" and dtype == "float32"  # the CPU's rows, which the page reads against each other
    return {"model": name, "seconds_per_step": seconds, "tokens_per_second": positions / seconds,
            "peak_mb": peak_mb, "parameters": sum(p.numel() for p in model.parameters()),
            "real_tokens": int(batch["attention_mask"].sum()), "threads": torch.get_num_threads(),
            "positions": positions, "flops_per_step": counted_flops(model, batch) if analysed else None,
            "forward_seconds": time_forward(model, batch, steps) if analysed else None,
            "products_seconds": time_products_alone(model, batch) if analysed and products_alone else None}


def measure_som(steps, batch_size, length, device, dtype):
    """SOM (paper 001) reads words, not actions (som_batch). Its time loop runs over its own T (the longest
    sentence), so tokens/s counts B x T; 15 slots, d 256, cells' MLP 512; the prediction network as the paper and
    its presets run it (prediction_network="sampled": one slot's RNN output per word, not every slot's)."""
    import torch

    from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
    from hf_slm.modeling.modeling_som import SyntacticOrderedMemoryForCausalLM

    torch.manual_seed(0)
    batch = som_batch(batch_size, length)
    config = SyntacticOrderedMemoryConfig(vocab_size=VOCAB, hidden_size=MODEL["hidden_size"], num_slots=15,
                                          intermediate_size=512, dropout=0.0, embedding_dropout=0.0, output_dropout=0.0,
                                          prediction_network="sampled")
    model = SyntacticOrderedMemoryForCausalLM(config).train()
    return _word_batch_result("som", model, batch, steps, device, dtype, products_alone=True)


def measure_lstm(steps, batch_size, length, device, dtype):
    """An LSTM language model of SOM's width (d 256, two layers, tied embeddings) over SOM's batch (som_batch): the
    recurrent baseline SOM's row is read against (issue 39 asks SOM's step within 3x of it). tokens/s counts B x T."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from types import SimpleNamespace

    class LSTMLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, MODEL["hidden_size"])
            self.lstm = nn.LSTM(MODEL["hidden_size"], MODEL["hidden_size"], num_layers=2, batch_first=True)

        def forward(self, input_ids, attention_mask, labels=None, **ignored):
            hidden, _ = self.lstm(self.embed(input_ids))
            logits = hidden @ self.embed.weight.T
            targets = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, -100)
            return SimpleNamespace(loss=F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten()))

    torch.manual_seed(0)
    batch = som_batch(batch_size, length)
    model = LSTMLanguageModel().train()
    return _word_batch_result("lstm", model, batch, steps, device, dtype)


def measure_rnng(actions, layout, real, steps, batch_size, length, device, dtype):
    """The generative RNNG (hf_slm/families/recurrent_grammars) on TXL (CC)'s batch, the same actions (its ids, mask and labels: it
    reads no position structure): a stack LSTM of rnng-pytorch's 2 layers, embeddings and states of the run's width.
    tokens/s counts B x T of that batch, as every row."""
    import torch

    from hf_slm.families import causal_lm_for_config, config_for_grammar

    config = config_for_grammar(grammar="rnng", vocab_size=VOCAB, embedding_size=MODEL["hidden_size"],
                                hidden_size=MODEL["hidden_size"], num_hidden_layers=2, dropout=0.0,
                                max_sequence_length=max(length, 512), **layout)
    model = causal_lm_for_config(config)
    batch = {name: actions[name] for name in ("input_ids", "attention_mask", "labels")}
    seconds, peak_mb = time_training_steps(model.train(), batch, steps, device, dtype)
    return {"model": "rnng", "seconds_per_step": seconds, "tokens_per_second": batch_size * length / seconds,
            "peak_mb": peak_mb, "parameters": sum(p.numel() for p in model.parameters()), "real_tokens": real,
            "threads": torch.get_num_threads()}


def measure(name, steps, batch_size, length, device, dtype="float32"):
    """Build the model and its batch, time `steps` training steps: the row, as a dict."""
    import torch

    torch.manual_seed(0)
    if name == "som":
        return measure_som(steps, batch_size, length, device, dtype)
    if name == "lstm":
        return measure_lstm(steps, batch_size, length, device, dtype)
    batches, layout, words_layout, real = build_batches(batch_size, length)
    batches, real = dict(batches), dict(real)
    if name in DEPENDENCY_MODELS:
        dependency_batches, layout = build_dependency_batches(batch_size, length)
        batches[name] = dependency_batches[name]
        real[name] = int((batches[name]["position_kinds"] != 0).sum())
    if name in COMPOSITIONAL_ROWS:
        batches[name], layout, real[name] = build_compositional_batch(name, batch_size, length)
    if name == "rnng":
        return measure_rnng(batches["choe_charniak"], layout, real["choe_charniak"], steps, batch_size, length, device,
                            dtype)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=VOCAB, n_positions=length, n_embd=MODEL["hidden_size"], n_layer=MODEL["num_hidden_layers"],
                            n_head=MODEL["num_attention_heads"], n_inner=MODEL["intermediate_size"], resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(config)
        batch = batches["gpt2"]
    else:
        from hf_slm.families import config_for_grammar
        from hf_slm.families import causal_lm_for_config

        chosen_layout = words_layout if name == "terminals" else layout
        config = config_for_grammar(vocab_size=VOCAB, grammar=name, max_sequence_length=max(length, 512),
                                          embedding_dropout=0.0, core_dropout=0.0, final_dropout=0.0,
                                          **MODEL, **chosen_layout)
        model = causal_lm_for_config(config)
        batch = batches[name]
    seconds, peak_mb = time_training_steps(model.train(), batch, steps, device, dtype)
    return {"model": name, "seconds_per_step": seconds, "tokens_per_second": batch_size * length / seconds,
            "peak_mb": peak_mb, "parameters": sum(p.numel() for p in model.parameters()),
            "real_tokens": real[name], "threads": torch.get_num_threads()}


def measure_in_child(name, args, seconds_left):
    """measure(name, ...) in a child process of its own (its resident set is its own), stopped after `seconds_left`:
    the row, or None when it ran out of time."""
    command = [sys.executable, __file__, "--child", name, "--steps", str(args.steps), "--batch-size",
               str(args.batch_size), "--length", str(args.length), "--size", args.size, "--device", args.device,
               "--dtype", args.dtype]
    try:
        child = subprocess.run(command, check=False, capture_output=True, text=True, env=dict(os.environ),
                               timeout=None if seconds_left == float("inf") else seconds_left)  # no --budget
    except subprocess.TimeoutExpired:
        return None
    if child.returncode != 0:
        raise SystemExit(f"measuring {name} failed (exit {child.returncode}):\n{child.stderr[-4000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def measure_here(name, args):
    """measure(name, ...) in this process, the previous model's memory freed first (a GPU's peak allocation is
    then this model's own)."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return measure(name, args.steps, args.batch_size, args.length, args.device, args.dtype)


LABELS = {"gpt2": "GPT-2", "tg": "TG", "choe_charniak": "TXL (CC)", "terminals": "TXL (terminals)", "dtg": "DTG",
          "txl_trans": "TXL (trans)", "som": "SOM (words)", "lstm": "LSTM LM (words)", "rnng": "RNNG (2-layer stack LSTM)",
          **{name: "-".join(part.capitalize() for part in name.split("-")) for name in COMPOSITIONAL_ROWS}}


def write_report(results, left_out, args, echo=True):
    """The page of the rows measured so far (GPT-2's first: the ratios' base), and the models left out; printed
    too when `echo`."""
    base = results["gpt2"]
    report = Report("Training-step throughput and peak memory against GPT-2", echo=echo)
    memory = "GPU peak allocation" if args.device.startswith("cuda") else "growth of the peak resident set"
    precision = "bf16 autocast" if args.dtype == "bf16" else "float32"
    if args.dry_run:
        report.line("DRY RUN (tiny models, one step, the shipped samples): the figures mean nothing.")
    report.line(f"B {args.batch_size}, T' {args.length}, d {MODEL['hidden_size']}, {MODEL['num_attention_heads']} heads, "
                f"{MODEL['num_hidden_layers']} layers, d_ff {MODEL['intermediate_size']}, vocab {VOCAB}, dropout 0, "
                f"{precision}, device {args.device}, {base['threads']} threads, {args.steps} steps; peak MB = {memory}.")
    report.line(f"tokens/s counts all {args.batch_size * args.length} positions of a batch; 'real' says how many are not "
                "padding (TXL (terminals) reads the words only, so most of its positions are padding, which its attention "
                "skips). Ratios are against GPT-2 measured in the same run.")
    report.table("", ["model", "params", "real", "s/step", "tokens/s", "tokens/s vs GPT-2", "peak MB",
                      "peak vs GPT-2"],
                 [[LABELS[name], f"{r['parameters']:,}", r["real_tokens"], f"{r['seconds_per_step']:.3f}",
                   f"{r['tokens_per_second']:.0f}", f"{r['tokens_per_second'] / base['tokens_per_second']:.2f}x",
                   f"{r['peak_mb']:.0f}", f"{r['peak_mb'] / max(base['peak_mb'], 1e-9):.2f}x"]
                  for name, r in results.items()])
    if "som" in results and "lstm" in results:
        report_som_against_lstm(report, results["som"], results["lstm"])
    if left_out:
        report.line(f"Left out: {', '.join(LABELS[name] for name in left_out)} (the {args.budget:.0f} s budget ran out "
                    "before or while measuring them).")
    report.finish(args.markdown, device=args.device)


def report_som_against_lstm(report, som, lstm):
    """SOM's tokens/s against the LSTM LM's, and where its arithmetic was counted (counted_flops), how much of the
    gap is arithmetic (GFLOP a step) and how much the rate (GFLOP/s): tokens/s ratio = rate ratio / arithmetic ratio."""
    speed = som["tokens_per_second"] / lstm["tokens_per_second"]
    report.line(f"SOM against the LSTM LM of its width on the same batch: {speed:.2f}x its tokens/s.")
    if som.get("forward_seconds"):
        report.line(f"SOM's forward alone (training mode under torch.no_grad: no autograd records, no backward, no "
                    f"update) takes {som['forward_seconds']:.3f} s, {som['forward_seconds'] / lstm['seconds_per_step']:.1f}x "
                    f"the LSTM LM's whole training step ({lstm['seconds_per_step']:.3f} s); a step within 3x of the "
                    f"LSTM's has {3 * lstm['seconds_per_step']:.3f} s for its forward, backward and update together.")
    if som.get("products_seconds"):
        rest = som["seconds_per_step"] - som["products_seconds"]
        report.line(f"SOM's matrix products alone (one step's, replayed in order with nothing between them: "
                    f"time_products_alone) take {som['products_seconds']:.3f} s, "
                    f"{som['products_seconds'] / lstm['seconds_per_step']:.1f}x the LSTM LM's whole step, the least that "
                    f"a step computing these products takes here. Within 3x leaves "
                    f"{3 * lstm['seconds_per_step'] - som['products_seconds']:.3f} s for all the rest of the step "
                    f"(the element-wise work, the bookkeeping and the update), which takes {rest:.3f} s now.")
    if not (som.get("flops_per_step") and lstm.get("flops_per_step")):
        return
    report.table("Arithmetic of a step (matrix products, forward and backward, counted by torch.utils.flop_counter)",
                 ["model", "GFLOP/step", "s/step", "GFLOP/s"],
                 [[LABELS[r["model"]], f"{r['flops_per_step'] / 1e9:.1f}", f"{r['seconds_per_step']:.3f}",
                   f"{r['flops_per_step'] / 1e9 / r['seconds_per_step']:.1f}"] for r in (som, lstm)])
    arithmetic = som["flops_per_step"] / lstm["flops_per_step"]
    rate = speed * arithmetic
    report.line(f"SOM does {arithmetic:.1f}x the LSTM LM's arithmetic a step, at {rate:.2f}x its rate (GFLOP/s). At the "
                f"LSTM's own rate SOM's step would take {arithmetic:.1f}x the LSTM's time ({1 / arithmetic:.2f}x its "
                f"tokens/s); a step within 3x of the LSTM's needs {arithmetic / 3:.2f}x the LSTM's rate.")


def model_names(only):
    """The rows, GPT-2 first: every model, or GPT-2 and `only`."""
    from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS

    names = ["gpt2", "tg", "choe_charniak", "terminals", *DEPENDENCY_MODELS]
    names += [name for name in COMPOSITIONAL_ROWS if name in COMPOSITIONAL_MODEL_VARIANTS]
    names += ["som", "lstm"]  # paper 001: a recurrent model over words (measure_som), and an LSTM LM beside it
    names += ["rnng"]  # the generative RNNG (measure_rnng): paper 000 reports TG far faster to train
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise SystemExit(f"--only {' '.join(unknown)}: expected some of {', '.join(names)}")
        names = ["gpt2"] + [name for name in names if name in only and name != "gpt2"]
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--only", nargs="+", help="measure only these models (grammar names), with GPT-2")
    parser.add_argument("--size", choices=sorted(MODEL_SIZES), default="small",
                        help="the models' shape: small (d 256, 4 layers), paper (GPT-2 small: d 768, 12 layers, 12 "
                             "heads, d_ff 3072; slow on CPU: pair it with --only and a smaller --batch-size) or tiny "
                             "(d 32, 2 layers: a dry run)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (peak memory is then the GPU's peak allocation)")
    parser.add_argument("--dtype", choices=["float32", "bf16"], default="float32",
                        help="bf16: each step under torch.autocast in bfloat16")
    parser.add_argument("--budget", type=float, default=float("inf"), metavar="SECONDS",
                        help="stop starting models after this many seconds; those left are listed as left out")
    parser.add_argument("--in-process", action="store_true",
                        help="measure every model in this process (the default on a GPU)")
    add_markdown_option(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="seconds on the CPU in float32 whatever --device and --dtype say: --size tiny, B 2, T' 32, "
                             "one step, in this process, the samples shipped in the package; measures nothing")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dry_run:
        args.size, args.batch_size, args.length, args.steps, args.in_process = "tiny", 2, 32, 1, True
        args.device, args.dtype = "cpu", "float32"
        del TREE_SOURCES[:-1], DEPENDENCY_SOURCES[:-1]
        import torch

        torch.set_num_threads(1)  # the suite runs it beside other work: one thread spins on no other's core
    MODEL.update(MODEL_SIZES[args.size])
    if args.child:
        print(json.dumps(measure(args.child, args.steps, args.batch_size, args.length, args.device, args.dtype)))
        return 0
    started = time.perf_counter()
    in_process = args.in_process or args.device.startswith("cuda")
    results, left_out = {}, []
    for name in model_names(args.only):
        seconds_left = args.budget - (time.perf_counter() - started)
        row = None
        if seconds_left > 0:
            row = measure_here(name, args) if in_process else measure_in_child(name, args, seconds_left)
        if row is None:
            if name == "gpt2":
                raise SystemExit(f"GPT-2, the base of every ratio, did not finish within the {args.budget:.0f} s budget")
            left_out.append(name)
            continue
        results[name] = row
        write_report(results, left_out, args, echo=False)  # after every model: a run stopped from outside keeps them
    write_report(results, left_out, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
