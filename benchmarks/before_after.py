"""This checkout against an earlier one, in the same run: training tokens/s, beam-search speed, and whether the
numbers are the same (losses and gradients bit for bit, beam-search log-probabilities).

    git worktree add ../before 8b4a49a && python -m venv --system-site-packages ../venv-before \
        && ../venv-before/bin/pip install --no-deps -e ../before
    python benchmarks/before_after.py --before-python ../venv-before/bin/python --before-repo ../before \
        [--model hf-slm-quickstart] [--repeats 3]

Each measurement runs in a fresh process of one side's interpreter and its own benchmark scripts (benchmarks/
train_step.py's `--child`, beam_search.py's functions), the sides alternating (before, after, before, ...) so
that a drift of the machine falls on both; a table gives the median of `--repeats` runs of each side and the
ratio after / before. Training: B x T' = 16 x 256, d 256, 4 layers (train_step.py's small size), 5 timed Adam
steps after one warm-up step. Exactness: the same seeded model and batch, one forward and backward on each side:
the loss and every gradient are compared (max |after - before|; 0 means bit-identical). Beam search: the
quickstart checkpoint (`hf-slm quickstart` makes it; loaded by each side's installed classes), five GUM sentences
of 20 words one at a time, paper 003's settings at action beams 10, 30 and 100 (beam_search.py); the
log-probabilities of both sides are compared too. Time nothing else on the machine while it runs.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("tg", "choe_charniak", "terminals", "dtg", "nb-dn-ex-m", "nb-up-in-m", "som")
BEAMS = (10, 30, 100)

# One forward and backward of a seeded model on train_step.py's batch; the loss and the gradients saved.
GRADIENTS = r'''
import importlib.util, sys, torch
repo, name, output = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("train_step", f"{repo}/benchmarks/train_step.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
batch_size, length = 16, 256
torch.manual_seed(0)
if name == "som":
    captured = {}
    bench.time_training_steps = lambda model, batch, steps: captured.update(model=model, batch=batch) or (1.0, 0.0)
    bench.measure_som(1, batch_size, length)
    model, batch = captured["model"], captured["batch"]
else:
    batches, layout, words_layout, _ = bench.build_batches(batch_size, length)
    if name in bench.DEPENDENCY_MODELS:
        dependency_batches, layout = bench.build_dependency_batches(batch_size, length)
        batches[name] = dependency_batches[name]
    if name in bench.COMPOSITIONAL_ROWS:
        batches[name], layout, _ = bench.build_compositional_batch(name, batch_size, length)
    try:
        from hf_slm.families import causal_lm_for_config, config_for_grammar
    except ImportError:  # before the family registry
        from hf_slm.modeling.configuration_slm import config_for_grammar
        from hf_slm.modeling.modeling_slm import causal_lm_for_config
    config = config_for_grammar(vocab_size=bench.VOCAB, grammar=name, max_sequence_length=512, embedding_dropout=0.0,
                                core_dropout=0.0, final_dropout=0.0, **bench.MODEL,
                                **(words_layout if name == "terminals" else layout))
    torch.manual_seed(0)
    model, batch = causal_lm_for_config(config), batches[name]
model.train()
loss = model(**batch).loss
loss.backward()
torch.save({"loss": loss.detach(), "gradients": {n: p.grad for n, p in model.named_parameters()
                                                  if p.grad is not None}}, output)
'''

# Paper 003's search over five 20-word GUM sentences, one at a time, at each beam: seconds and log-probabilities.
BEAM_SEARCH = r'''
import importlib.util, json, sys, time, torch
repo, checkpoint = sys.argv[1:3]
beams = [int(beam) for beam in sys.argv[3].split(",")]
spec = importlib.util.spec_from_file_location("beam_search", f"{repo}/benchmarks/beam_search.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
model, tokenizer, _ = bench.load_model(checkpoint)
model.eval()
sentences = bench.sample_sentences(tokenizer, (20,), 5)
found = {}
with torch.no_grad():
    for beam in beams:
        search = bench.paper003_search(model, tokenizer, beam)
        bench.run(search, sentences[:1])  # warm-up
        start = time.perf_counter()
        log_probs = [bench.run(search, [words])[3][0].log_prob for words in sentences]
        found[beam] = {"seconds": (time.perf_counter() - start) / len(sentences), "log_probs": log_probs}
print(json.dumps(found))
'''


def run(python, arguments, cwd):
    result = subprocess.run([python, *arguments], capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        raise SystemExit(f"{python} {' '.join(map(str, arguments))} failed:\n{result.stderr[-3000:]}")
    return result.stdout.strip().splitlines()[-1]


def training_speed(sides, models, repeats):
    """{model: {side: [tokens/s of each repeat]}}, the sides alternating."""
    found = {model: {side: [] for side in sides} for model in models}
    for _ in range(repeats):
        for model in models:
            for side, (python, repo) in sides.items():
                line = run(python, [str(repo / "benchmarks" / "train_step.py"), "--child", model, "--steps", "5"], repo)
                found[model][side].append(json.loads(line)["tokens_per_second"])
                print(f"  run: {model} {side} {found[model][side][-1]:.0f} tokens/s", file=sys.stderr, flush=True)
    return found


def gradient_differences(sides, models):
    """{model: (|loss difference|, max |gradient difference| over every parameter, parameters compared)}."""
    import torch

    differences = {}
    with tempfile.TemporaryDirectory() as folder:
        for model in models:
            saved = {}
            for side, (python, repo) in sides.items():
                path = Path(folder) / f"{side}-{model}.pt"
                subprocess.run([python, "-c", GRADIENTS, str(repo), model, str(path)], check=True, cwd=repo,
                               capture_output=True)
                saved[side] = torch.load(path)
            before, after = saved["before"], saved["after"]
            if set(before["gradients"]) != set(after["gradients"]):
                raise SystemExit(f"{model}: the parameters with gradients differ: "
                                 f"{sorted(set(before['gradients']) ^ set(after['gradients']))}")
            gradient = max(float((after["gradients"][n] - before["gradients"][n]).abs().max())
                           for n in before["gradients"])
            differences[model] = (float((after["loss"] - before["loss"]).abs()), gradient, len(before["gradients"]))
    return differences


def beam_speed(sides, checkpoint, repeats):
    """{beam: {side: [seconds per sentence of each repeat]}}, and {side: {beam: log-probabilities}}."""
    found = {beam: {side: [] for side in sides} for beam in BEAMS}
    log_probs = {}
    for _ in range(repeats):
        for side, (python, repo) in sides.items():
            result = json.loads(run(python, ["-c", BEAM_SEARCH, str(repo), str(checkpoint),
                                             ",".join(map(str, BEAMS))], repo))
            for beam in BEAMS:
                found[beam][side].append(result[str(beam)]["seconds"])
                print(f"  run: beam {beam} {side} {found[beam][side][-1]:.3f} s/sentence", file=sys.stderr, flush=True)
            log_probs[side] = {beam: result[str(beam)]["log_probs"] for beam in BEAMS}
    return found, log_probs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-python", required=True, help="an interpreter with the earlier hf-slm installed")
    parser.add_argument("--before-repo", required=True, type=Path, help="the earlier checkout (its benchmarks/)")
    parser.add_argument("--model", type=Path, default=Path("hf-slm-quickstart"),
                        help="the checkpoint the beam search runs (hf-slm quickstart makes it)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--parts", nargs="+", choices=["exactness", "training", "beam"],
                        default=["exactness", "training", "beam"], help="what to measure (default: all three)")
    args = parser.parse_args()
    if not args.model.exists():
        raise SystemExit(f"no checkpoint at {args.model}: run `hf-slm quickstart` first (or name one with --model)")
    sides = {"before": (args.before_python, args.before_repo.resolve()), "after": (sys.executable, REPO)}
    models = args.models
    if not (REPO.parent / "shared" / "data" / "ud_english_ewt").exists():
        models = [model for model in models if model not in ("dtg", "txl_trans")]  # train_step.py reads EWT for them
    print(f"before: {args.before_repo} ({args.before_python}); after: {REPO} ({sys.executable}); "
          f"medians of {args.repeats} runs per side")

    if "exactness" in args.parts:
        print_differences(gradient_differences(sides, models))
    if "training" in args.parts:
        print_speeds(training_speed(sides, models, args.repeats))
    if "beam" in args.parts:
        print_beam(args.model, *beam_speed(sides, args.model, args.repeats))
    return 0


def print_differences(differences):
    print("\nExactness: one forward and backward, same seed and batch (0 = bit-identical)")
    print(f"{'model':<14} {'|loss diff|':>12} {'max |grad diff|':>16} {'parameters':>11}")
    for model, (loss, gradient, count) in differences.items():
        print(f"{model:<14} {loss:>12.3g} {gradient:>16.3g} {count:>11}", flush=True)


def print_speeds(speeds):
    print("\nTraining tokens/s (B 16 x T' 256, d 256, 4 layers; 5 Adam steps)")
    print(f"{'model':<14} {'before':>9} {'after':>9} {'after/before':>13}   runs before | after")
    for model, found in speeds.items():
        before, after = statistics.median(found["before"]), statistics.median(found["after"])
        runs = " ".join(f"{v:.0f}" for v in found["before"]) + " | " + " ".join(f"{v:.0f}" for v in found["after"])
        print(f"{model:<14} {before:>9.0f} {after:>9.0f} {after / before:>12.3f}x   {runs}", flush=True)


def print_beam(checkpoint, seconds, log_probs):
    print(f"\nBeam search, {checkpoint}: five 20-word GUM sentences one at a time, paper 003's settings (s/sentence)")
    print(f"{'beam':>5} {'before':>8} {'after':>8} {'after/before':>13} {'max |log p diff|':>17}")
    for beam, found in seconds.items():
        before, after = statistics.median(found["before"]), statistics.median(found["after"])
        difference = max(abs(a - b) for a, b in zip(log_probs["after"][beam], log_probs["before"][beam]))
        print(f"{beam:>5} {before:>8.3f} {after:>8.3f} {after / before:>12.3f}x {difference:>17.3g}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
