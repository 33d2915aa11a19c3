"""The `hf-slm` command line."""

import argparse
import json
import sys

from .card_command import add_card_command
from .data.command import add_data_command
from .publishing_command import add_publishing_commands


def _add_tree_options(parser):
    parser.add_argument("--strip-function-tags", action="store_true", help="NP-SBJ-1 -> NP")
    parser.add_argument("--binarize", action="store_true", help="left binarization (nltk CNF)")
    parser.add_argument("--remove-unary", action="store_true", help="remove unary chains")


def _tree_options(args):
    return {
        "strip_function_tags": args.strip_function_tags,
        "binarize": args.binarize,
        "remove_unary": args.remove_unary,
    }


def command_masks(args):
    from .mask_inspection import format_report, mask_report, plot_report

    report = mask_report(args.tree, args.grammar, **_tree_options(args))
    if args.json:
        print(json.dumps({k: report[k] for k in ("tokens", "kinds", "attention_mask", "relative_positions", "labels")}))
    else:
        print(format_report(report))
    if args.png:
        plot_report(report, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def command_quickstart(args):
    from .quickstart import run_quickstart

    run_quickstart(output=args.output, max_steps=args.max_steps, max_seconds=args.max_seconds)
    return 0


def command_presets(args):
    from .modeling.configuration_slm import PRESETS

    print(f"{'preset':<22} {'grammar':<14} {'d':>5} {'layers':>6} {'heads':>5} {'d_ff':>5} {'vocab':>6}  description")
    for name, preset in PRESETS.items():
        m = preset["model"]
        print(f"{name:<22} {m['grammar']:<14} {m['hidden_size']:>5} {m['num_hidden_layers']:>6} "
              f"{m['num_attention_heads']:>5} {m['intermediate_size']:>5} {m['vocab_size']:>6}  {preset['description']}")
    return 0


def command_train(args):
    from .training import TrainingSetup, train

    overrides = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        if not value:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. --set hidden_size=128")
        overrides[key] = json.loads(value) if value[0] in "0123456789-[{tf" or value in ("true", "false") else value
    setup = TrainingSetup(
        preset=args.preset, train=args.train, eval=args.eval or [], output=args.output, tokenizer=args.tokenizer,
        vocab_size=args.vocab_size, model_overrides=overrides, max_steps=args.max_steps, batch_size=args.batch_size,
        learning_rate=args.learning_rate, warmup_steps=args.warmup_steps, eval_steps=args.eval_steps,
        save_steps=args.save_steps, seed=args.seed, resume=args.resume,
        normalize_options=_tree_options(args),
    )
    train(setup)
    print(f"saved the model and tokenizer to {args.output}")
    return 0


def _load(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .checks import check_tokenizer_matches

    model = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=True)
    check_tokenizer_matches(model.config, tokenizer)
    return model, tokenizer


def _beam_options(args):
    from .modeling.generation_slm import CONSTRAINT_SETTINGS

    options = dict(CONSTRAINT_SETTINGS[args.constraints]) if getattr(args, "constraints", None) else {}
    options["fast_track"] = args.fast_track
    if hasattr(args, "beam_size"):
        options.update(beam_size=args.beam_size, word_beam_size=args.word_beam_size)
    # Every value the user gives is passed on (BeamSearchOptions refuses the bad ones, 0 included).
    if args.max_nonterminals is not None:
        options["max_nonterminals"] = args.max_nonterminals
    if args.max_consecutive_open is not None:
        options["max_consecutive_open"] = args.max_consecutive_open
    if args.no_cache:
        options["use_cache"] = False
    return options


def command_parse(args):
    from .beam import parse
    from .tokenization.trees import parse_tree

    model, tokenizer = _load(args.model)
    for tree in parse(model, tokenizer, args.sentences, progress=len(args.sentences) > 8, **_beam_options(args)):
        if args.pretty:
            parse_tree(tree).pretty_print()
        else:
            print(tree)
    return 0


def command_score(args):
    from .beam import score

    model, tokenizer = _load(args.model)
    units = "bits" if args.bits else "nats"
    for result in score(model, tokenizer, args.sentences, bits=args.bits, progress=len(args.sentences) > 8,
                        **_beam_options(args)):
        # end_surprisal is printed so that a reader can check sum(surprisals) + end_surprisal == -log_prob.
        shown = {key: result[key] for key in ("words", "surprisals", "end_surprisal", "log_prob", "tree")}
        print(json.dumps({**shown, "units": units}))
    return 0


def command_generate(args):
    from .beam import generate_trees

    model, tokenizer = _load(args.model)
    options = _beam_options(args)
    trees = generate_trees(model, tokenizer, args.prompt, num_trees=args.num_trees, num_beams=args.num_beams,
                           top_k=args.top_k, max_new_words=args.max_new_words, seed=args.seed, **options)
    for tree in trees:
        print(tree)
    return 0


def _eval_setup(args):
    from .evaluation.results import results_directory

    model, tokenizer = _load(args.model)
    return model, tokenizer, results_directory(args.model, args.output)


def _report(name, metrics, directory, keys):
    shown = {k: metrics[k] for k in keys if k in metrics}
    print(json.dumps(shown))
    print(f"wrote {directory}/{name}.json", file=sys.stderr)


def command_eval_rerank(args):
    from .evaluation.parsing import rerank

    model, tokenizer, directory = _eval_setup(args)
    metrics = rerank(model, tokenizer, args.gold, args.proposals, limit=args.limit, batch_size=args.batch_size,
                     output_dir=directory)
    _report("rerank", metrics, directory,
            ("precision", "recall", "f1", "exact_match", "sentences", "oracle", "first_proposal", "units"))
    return 0


def command_eval_parse(args):
    from .evaluation.parsing import parse_eval

    model, tokenizer, directory = _eval_setup(args)
    metrics = parse_eval(model, tokenizer, args.gold, limit=args.limit, output_dir=directory, **_beam_options(args))
    _report("parse", metrics, directory, ("precision", "recall", "f1", "exact_match", "sentences", "units"))
    return 0


def command_eval_sg(args):
    from .evaluation.syntaxgym import format_summary, run_syntaxgym

    model, tokenizer, directory = _eval_setup(args)
    metrics = run_syntaxgym(model, tokenizer, args.suites, output_dir=directory, limit=args.limit,
                            batch_size=args.batch_size, rule=args.rule, **_beam_options(args))
    print(format_summary(metrics))
    print(f"wrote {directory}/sg.json, sg.csv, sg_items.csv and sg.png", file=sys.stderr)
    return 0


def command_eval_ppl(args):
    from .evaluation.perplexity import word_perplexity

    model, tokenizer, directory = _eval_setup(args)
    metrics = word_perplexity(model, tokenizer, args.data, proposals=args.proposals, beam_options=_beam_options(args),
                              document_level=args.document_level, batch_size=args.batch_size, limit=args.limit,
                              output_dir=directory)
    print(metrics["summary"])
    print(f"wrote {directory}/ppl.json", file=sys.stderr)
    return 0


def command_eval_blimp(args):
    from .evaluation.blimp import run_blimp

    model, tokenizer, directory = _eval_setup(args)
    metrics = run_blimp(model, tokenizer, args.data, limit=args.limit, output_dir=directory, batch_size=args.batch_size,
                        **_beam_options(args))
    print(json.dumps({key: metrics[key] for key in ("accuracy", "pairs", "paradigms", "by_field", "units")}))
    print(f"wrote {directory}/blimp.json", file=sys.stderr)
    return 0


def _add_eval_command(evaluations, name, help_text, function, beam=True):
    command = evaluations.add_parser(name, help=help_text)
    command.add_argument("--model", required=True, help="checkpoint directory")
    command.add_argument("--limit", type=int, help="evaluate only the first N items")
    command.add_argument("--batch-size", type=int, default=8)
    command.add_argument("--output", help="results directory (default: MODEL/eval_results)")
    if beam:
        _add_beam_options(command)
    command.set_defaults(function=function)
    return command


# The names of modeling.generation_slm.CONSTRAINT_SETTINGS, written out so that building the parser imports
# no torch (a test holds them equal).
CONSTRAINT_SETTING_NAMES = ("default", "paper003-sg", "paper003-summaries")


def _add_beam_options(parser, sizes=True):
    if sizes:
        parser.add_argument("--beam-size", type=int, default=100, help="action beam (paper 003: 300)")
        parser.add_argument("--word-beam-size", type=int, default=10)
    parser.add_argument("--fast-track", type=int, default=1)
    parser.add_argument("--constraints", choices=CONSTRAINT_SETTING_NAMES,
                        help="named n_c / p_c settings: 'default' (n_c = 2 x words, p_c = 6: every gold tree of the GUM "
                             "and PTB samples stays reachable), 'paper003-sg' (n_c = words, p_c = 3) or "
                             "'paper003-summaries' (n_c = words, p_c = 5); --max-* options override them")
    parser.add_argument("--max-nonterminals", type=int, help="n_c (default: 2 x the number of words)")
    parser.add_argument("--max-consecutive-open", type=int,
                        help="p_c, the most opening nonterminals in a row (default 6; 5 for generate)")
    parser.add_argument("--no-cache", action="store_true", help="re-encode prefixes instead of a KV cache")


def build_parser():
    parser = argparse.ArgumentParser(prog="hf-slm", description="Syntactic language models for HuggingFace transformers.")
    commands = parser.add_subparsers(dest="command", required=True)

    masks = commands.add_parser(
        "masks",
        help="show a grammar's attention mask, relative positions and labels for one tree",
        description="Show the model inputs a grammar derives from one tree. The tree is an action string "
        "'(S (NP the bird NP) S)' or PTB brackets '(S (NP (DT the) (NN bird)))'.",
    )
    masks.add_argument("tree")
    masks.add_argument("--grammar", default="tg", choices=["tg", "choe_charniak", "terminals"])
    masks.add_argument("--json", action="store_true", help="print one JSON object")
    masks.add_argument("--png", metavar="FILE", help="draw the mask like paper 000 Figure 2b")
    _add_tree_options(masks)
    masks.set_defaults(function=command_masks)

    quickstart = commands.add_parser(
        "quickstart", help="train a small TG on the shipped GUM sample, reload it, score and sample (a few minutes)"
    )
    quickstart.add_argument("--output", default="hf-slm-quickstart", help="checkpoint directory")
    quickstart.add_argument("--max-steps", type=int, default=1200)
    quickstart.add_argument("--max-seconds", type=float, default=300, help="stop training after this long")
    quickstart.set_defaults(function=command_quickstart)

    presets = commands.add_parser("presets", help="list the model presets")
    presets.set_defaults(function=command_presets)

    train = commands.add_parser("train", help="train a TG / TXL (CC) / TXL (terminals) model with transformers.Trainer")
    train.add_argument("--preset", required=True, help="see `hf-slm presets`")
    train.add_argument("--train", nargs="+", required=True,
                       help="tree files (PTB brackets), or one folder made by `hf-slm data prepare` (its train split)")
    train.add_argument("--eval", nargs="+",
                       help="tree files for evaluation loss (default with a prepared --train: its validation split)")
    train.add_argument("--output", required=True, help="output directory (checkpoints, final model and tokenizer)")
    train.add_argument("--tokenizer", help="a saved tokenizer directory (default: train one on --train; with a "
                       "prepared --train, the tokenizer saved in it)")
    train.add_argument("--vocab-size", type=int, help="word pieces of a newly trained tokenizer (default: the preset's)")
    train.add_argument("--max-steps", type=int)
    train.add_argument("--batch-size", type=int)
    train.add_argument("--learning-rate", type=float, help="peak learning rate")
    train.add_argument("--warmup-steps", type=int)
    train.add_argument("--eval-steps", type=int, default=500)
    train.add_argument("--save-steps", type=int, default=500)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--resume", action="store_true", help="resume from the last checkpoint in --output")
    train.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a model config field")
    _add_tree_options(train)
    train.set_defaults(function=command_train)

    parse_command = commands.add_parser("parse", help="best tree of each sentence (word-synchronous beam search)")
    parse_command.add_argument("--model", required=True, help="checkpoint directory or hub name")
    parse_command.add_argument("--pretty", action="store_true", help="draw each tree over several lines")
    parse_command.add_argument("sentences", nargs="+", metavar="SENTENCE", help="one sentence per argument, words separated by spaces")
    _add_beam_options(parse_command)
    parse_command.set_defaults(function=command_parse)

    score_command = commands.add_parser(
        "score", help="per-word surprisals, end_surprisal, log p(x) and the best tree, as JSON lines with their units")
    score_command.add_argument("--model", required=True)
    score_command.add_argument("--bits", action="store_true", help="surprisals and log p(x) in bits (default nats)")
    score_command.add_argument("sentences", nargs="+", metavar="SENTENCE")
    _add_beam_options(score_command)
    score_command.set_defaults(function=command_score)

    generate = commands.add_parser("generate", help="generate trees, optionally continuing a prompt")
    generate.add_argument("--model", required=True)
    generate.add_argument("--prompt", help="words to continue")
    choice = generate.add_mutually_exclusive_group()
    choice.add_argument("--num-beams", type=int, help="word beam of beam search (default: --num-trees)")
    choice.add_argument("--top-k", type=int, help="sample every action among the top k legal ones (0: among all)")
    generate.add_argument("--num-trees", type=int, default=1)
    generate.add_argument("--max-new-words", type=int, default=20)
    generate.add_argument("--seed", type=int)
    _add_beam_options(generate, sizes=False)
    generate.set_defaults(function=command_generate)

    evaluate = commands.add_parser("eval", help="evaluate a checkpoint: ppl, sg, blimp, rerank, parse")
    evaluations = evaluate.add_subparsers(dest="evaluation", required=True)
    rerank_command = _add_eval_command(evaluations, "rerank", "bracketing F1 of the highest joint-probability proposal",
                                       command_eval_rerank, beam=False)
    rerank_command.add_argument("--gold", required=True, help="gold trees (PTB brackets, file or .mrg folder)")
    rerank_command.add_argument("--proposals", required=True,
                                help="proposal trees: one per line, one blank-line separated block per sentence")
    parse_eval_command = _add_eval_command(evaluations, "parse", "bracketing F1 of beam-search parses", command_eval_parse)
    parse_eval_command.add_argument("--gold", required=True)
    ppl = _add_eval_command(evaluations, "ppl", "word perplexity (exact for terminals models, an upper bound for "
                            "syntactic ones, an approximation for them at document level)", command_eval_ppl)
    ppl.add_argument("--data", required=True, help="trees (PTB brackets) or one sentence per line")
    ppl.add_argument("--proposals", help="proposal trees per sentence (see hf_slm/evaluation/parsing.py); default: the beam")
    ppl.add_argument("--document-level", action="store_true",
                     help="documents separated by blank lines: each sentence after the greedy best trees of the ones "
                     "before it, an approximation for syntactic models (needs a document-level model)")
    blimp = _add_eval_command(evaluations, "blimp", "BLiMP accuracy per paradigm, field and overall", command_eval_blimp)
    blimp.add_argument("--data", required=True, help="a folder of BLiMP .jsonl files")
    sg = _add_eval_command(evaluations, "sg", "SyntaxGym: per-suite accuracy, circuits, the 31-suite SG score, a plot",
                           command_eval_sg)
    sg.add_argument("--suites", required=True, help="a folder of SyntaxGym suite JSON files (or one file)")
    sg.add_argument("--rule", default="first", choices=["first", "all", "mean"],
                    help="suites with several predictions: the first decides (default), all must hold, or their mean")
    add_card_command(commands)
    add_data_command(commands)
    add_publishing_commands(commands)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.function(args)
    except (ValueError, RuntimeError) as error:
        print(f"hf-slm {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
