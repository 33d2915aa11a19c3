"""The `hf-slm` commands for Syntactic Ordered Memory checkpoints (hf_slm.som_evaluation): eval ppl | sg | blimp |
parse, and parse, score, generate.

SOM scores words straight from its logits and parses with its own incremental parser, so the options of
word-synchronous beam search do not apply: one set away from its default is an error naming it
(`refuse_search_options`). The evaluations write `eval_results/` and their journals as every model's do
(evaluation.results): `ppl-DATA.json`, `sg-DATA.json`, `blimp-DATA.json`, and for `hf-slm eval parse --gold
FILE.conllu` (UF1 against Gamma from the gold dependency trees, p and p' accuracy: Table 2's setting)
`uf1-DATA.json`.

- `parse`: the unlabeled binary tree of the argmax decisions of p_t, bracketed (`som_evaluation.som_parses`).
- `score`: per-word surprisals, `</s>`'s, and log p(sentence), exact (nats, or bits with --bits).
- `generate`: transformers' own `model.generate` over the model's tokens, words printed.
"""

import json
import math
import sys

SOM_MODEL_TYPE = "syntactic_ordered_memory"


def is_som(model):
    return getattr(model.config, "model_type", None) == SOM_MODEL_TYPE


def check_som_tokenizer(config, tokenizer):
    """Raise ValueError naming every way `tokenizer` disagrees with a SOM `config` (ids and vocabulary)."""
    problems = []
    if len(tokenizer) > config.vocab_size:
        problems.append(f"the tokenizer has {len(tokenizer)} ids but the model's vocab_size is {config.vocab_size}")
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if getattr(tokenizer, name, None) != getattr(config, name, None):
            problems.append(f"{name} is {getattr(tokenizer, name, None)} in the tokenizer but "
                            f"{getattr(config, name, None)} in the model config")
    trained_with = getattr(config, "vocabulary_fingerprint", None)
    fingerprint = getattr(tokenizer, "vocabulary_fingerprint", None)
    if trained_with and fingerprint and fingerprint != trained_with:
        problems.append(f"the tokenizer's vocabulary (fingerprint {fingerprint}) is not the one the model was trained "
                        f"with ({trained_with})")
    if problems:
        raise ValueError("tokenizer and model do not match: " + "; ".join(problems))


def eval_ppl(model, tokenizer, args, directory):
    from .som_evaluation import run_som_perplexity

    refuse_search_options(args, "eval ppl")
    if args.proposals or args.document_level:
        raise ValueError("hf-slm eval ppl: --proposals and --document-level are for syntactic models that score trees; "
                         "a Syntactic Ordered Memory model's sentence perplexity is exact without them (leave them out)")
    metrics = run_som_perplexity(model, tokenizer, args.data, limit=args.limit, batch_size=args.batch_size,
                                 output_dir=directory, overwrite=args.overwrite)
    print(metrics["summary"])
    _report_files(metrics)
    return 0


def eval_sg(model, tokenizer, args, directory):
    from .evaluation.syntaxgym import format_summary
    from .som_evaluation import som_syntaxgym

    refuse_search_options(args, "eval sg")
    metrics = som_syntaxgym(model, tokenizer, args.suites, limit=args.limit, rule=args.rule,
                            batch_size=args.batch_size, output_dir=directory, overwrite=args.overwrite)
    print(format_summary(metrics))
    _report_files(metrics)
    return 0


def eval_blimp(model, tokenizer, args, directory):
    from .som_evaluation import som_blimp

    refuse_search_options(args, "eval blimp")
    metrics = som_blimp(model, tokenizer, args.data, limit=args.limit, batch_size=args.batch_size,
                        output_dir=directory, overwrite=args.overwrite)
    print(json.dumps({key: metrics[key] for key in ("accuracy", "pairs", "paradigms", "by_field", "units",
                                                     "log_prob")}))
    _report_files(metrics)
    return 0


def eval_parse(model, tokenizer, args, directory):
    from .som_evaluation import run_som_parse_eval

    refuse_search_options(args, "eval parse")
    metrics = run_som_parse_eval(model, tokenizer, args.gold, limit=args.limit, batch_size=args.batch_size,
                                 output_dir=directory, overwrite=args.overwrite)
    print(json.dumps({key: value for key, value in metrics.items() if key != "files"}))
    _report_files(metrics)
    return 0


def _report_files(metrics):
    from .cli import _report_files as report

    report(metrics)


# ---- hf-slm parse | score | generate ---------------------------------------------------------------------

# The options of word-synchronous beam search (hf_slm.cli._add_beam_options, `parse --cache`) and their
# defaults there (tests/test_som_cli.py holds them equal): SOM runs no search, so a value other than the default
# is an error rather than silently ignored. An option given at its default value cannot be told apart and is
# ignored.
SEARCH_OPTIONS = {"beam_size": 100, "word_beam_size": 10, "fast_track": 1, "constraints": None,
                  "max_nonterminals": None, "max_consecutive_open": None, "no_cache": False, "cache": None}


def refuse_search_options(args, command):
    """ValueError naming every search option of `args` set away from its default (see SEARCH_OPTIONS)."""
    given = [name for name, default in SEARCH_OPTIONS.items() if getattr(args, name, default) != default]
    if given:
        shown = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ValueError(f"hf-slm {command}: {shown} set(s) word-synchronous beam search, which a Syntactic Ordered "
                         "Memory model does not run (it scores words from its logits and parses with its own "
                         "incremental parser); leave these options out")


def parse(model, tokenizer, sentences, args):
    """Print the model's incremental parse of each sentence, one bracketed tree per line (or drawn)."""
    from .som_evaluation import som_parses
    from .tokenization.trees import parse_tree

    refuse_search_options(args, "parse")
    sentences = [sentence.split() if isinstance(sentence, str) else list(sentence) for sentence in sentences]
    for index, words in enumerate(sentences):
        if not words:
            raise ValueError(f"sentence {index + 1} is empty; expected at least one word")
    for tree in som_parses(model, tokenizer, sentences):
        if args.pretty:
            parse_tree(tree).pretty_print()
        else:
            print(tree)
    return 0


def score(model, tokenizer, args):
    """Print one JSON line per sentence: the surprisal of each word, of `</s>`, and log p(sentence), exact."""
    from .som_evaluation import som_sentence_scores

    refuse_search_options(args, "score")
    sentences = [sentence.split() for sentence in args.sentences]
    empty = [index + 1 for index, words in enumerate(sentences) if not words]
    if empty and args.stop_on_error:
        raise ValueError(f"sentence {empty[0]} is empty; expected at least one word")
    scale = 1 / math.log(2) if args.bits else 1.0
    kept = [words for words in sentences if words]
    scores = iter(som_sentence_scores(model, tokenizer, kept) if kept else [])
    for index, words in enumerate(sentences):
        if not words:  # a line that says why keeps one line per sentence
            print(json.dumps({"words": words, "error": f"sentence {index + 1} is empty"}))
            continue
        found = next(scores)
        print(json.dumps({"words": words, "surprisals": [-value * scale for value in found["word_log_probs"]],
                          "end_surprisal": -found["eos_log_prob"] * scale, "log_prob": found["log_prob"] * scale,
                          "exact": True, "units": "bits" if args.bits else "nats"}))
    if empty:
        print(f"hf-slm score: warning: left out {len(empty)} of {len(sentences)} sentences that cannot be scored "
              f"(empty: sentence {', '.join(map(str, empty))})", file=sys.stderr)
    return 0


def generate(model, tokenizer, args):
    """Print generated sentences (the prompt's words, then the new ones), by transformers' model.generate:
    beam search with --num-beams (default --num-trees; greedy for one), sampling among the top k with
    --top-k (0: among all)."""
    import torch

    refuse_search_options(args, "generate")
    if args.num_trees < 1 or args.max_new_words < 1:
        raise ValueError(f"--num-trees {args.num_trees} and --max-new-words {args.max_new_words}: expected "
                         "positive numbers")
    prompt = args.prompt.split() if args.prompt else []
    ids = tokenizer(prompt, is_split_into_words=True)["input_ids"] if prompt else [tokenizer.bos_token_id]
    if args.seed is not None:
        torch.manual_seed(args.seed)
    options = dict(max_new_tokens=args.max_new_words * _pieces_per_word_bound(tokenizer),
                   num_return_sequences=args.num_trees, pad_token_id=tokenizer.pad_token_id,
                   eos_token_id=tokenizer.eos_token_id)
    if args.top_k is not None:
        options.update(do_sample=True, top_k=args.top_k, num_beams=1)
    else:
        num_beams = args.num_beams if args.num_beams is not None else args.num_trees
        if num_beams < args.num_trees:
            raise ValueError(f"--num-beams {num_beams} is smaller than --num-trees {args.num_trees}; expected at "
                             "least as many beams as sentences to return")
        options.update(do_sample=False, num_beams=num_beams)
    model.eval()
    with torch.no_grad():
        output = model.generate(torch.tensor([ids], device=next(model.parameters()).device), **options)
    for row in output.tolist():
        print(" ".join(_words(tokenizer, row[1:])[:len(prompt) + args.max_new_words]))
    return 0


def _pieces_per_word_bound(tokenizer):
    """How many tokens --max-new-words words may take: one for a word vocabulary; for pieces, the longest
    piece sequence a word can have is not known, so up to 4 per word are generated and the words are cut after."""
    from .tokenization.tokenization_slm import SyntacticWordTokenizer

    return 1 if isinstance(tokenizer, SyntacticWordTokenizer) else 4


def _words(tokenizer, ids):
    """The words of generated ids, up to `</s>` (pieces joined by the tokenizer's decoding)."""
    if tokenizer.eos_token_id in ids:
        ids = ids[:ids.index(tokenizer.eos_token_id)]
    ids = [i for i in ids if i != tokenizer.pad_token_id]
    return tokenizer.decode(ids, skip_special_tokens=True).split()
