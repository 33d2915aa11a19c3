"""The proposal parsers on the command line (hf_slm/parsers/):

    hf-slm parser train --kind crf|crf-unlabeled|biaffine|rnng-discriminative --train FILES --eval FILES --output DIR [--size paper]
    hf-slm propose --parser DIR --data FILE --num 300 --output FILE
    hf-slm eval ppl|rerank|uas|blimp ... --proposal-parser DIR  (draws the proposals itself, journaled)
    hf-slm parse --parser DIR SENTENCE...                      (the parser's best trees: hf_slm/cli/commands.py)
    hf-slm eval parse --parser DIR --gold FILE                 (bracketing F1; eval uas --parser: UAS and LAS)

`--proposal-parser` draws J unique trees per sentence (`--max-proposals`, default 300 as the papers) into
`proposals-DATA-KIND-HASH-J300-seed0.txt` in the results folder (hf_slm/parsers/proposals.py), then scores them as
`--proposals` would; the results record the parser (its weights' hash), J, the cap on draws and the seed. Everything
heavy is imported when a command runs.
"""

import json
import sys

from ..option_types import non_negative_int, positive_float, positive_int



def parser_kind_names():
    """The registered parser kinds' names (hf_slm/parsers/kinds.py and the families' records: cheap, no torch)."""
    from ..parsers.kinds import parser_kinds

    return [kind.name for kind in parser_kinds()]

DEFAULT_NUM_PROPOSALS = 300


def command_parser_train(args):
    from ..parsers.training import ParserTrainingSetup, train_parser
    from ..runs.distributed import is_main_process

    overrides = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        if not key or not value:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. --set lstm_hidden_size=200")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    normalization = {"strip_function_tags": args.strip_function_tags}
    if args.keep_traces:
        normalization["strip_traces"] = False
    setup = ParserTrainingSetup(
        kind=args.kind, train=args.train, eval=args.eval or [], output=args.output, size=args.size,
        encoder=args.encoder, tokenizer=args.tokenizer, max_steps=args.max_steps, batch_size=args.batch_size,
        learning_rate=args.learning_rate, eval_steps=args.eval_steps, save_steps=args.save_steps,
        logging_steps=args.logging_steps, seed=args.seed, resume=args.resume, overwrite=args.overwrite,
        min_count=args.min_count, normalize_options=normalization, model_overrides=overrides,
        max_seconds=args.max_seconds, mixed_precision=args.mixed_precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps)
    train_parser(setup)
    if is_main_process():
        print(f"saved the parser and its tokenizer to {args.output}")
    return 0


def read_data_sentences(path, normalization=None, limit=None):
    """The sentences of a data file as the evaluations read them (trees, one sentence per line, or CoNLL-U)."""
    from ..evaluation.perplexity import read_sentences

    sentences = read_sentences(path, normalization)
    return sentences[:limit] if limit is not None else sentences


def command_propose(args):
    from ..parsers.parser import ProposalParser
    from ..parsers.proposals import draw_proposals
    from ..runs.distributed import is_main_process

    sentences = read_data_sentences(args.data, limit=args.limit)  # before the parser loads: a bad file fails at once
    parser = ProposalParser.load(args.parser)
    record = draw_proposals(parser, sentences, args.output, num=args.num, max_draws=args.max_draws, seed=args.seed,
                            batch_size=args.batch_size, data=args.data, overwrite=args.overwrite)
    if is_main_process():
        print(json.dumps({key: record[key] for key in ("file", "kind", "num", "max_draws", "seed", "sentences",
                                                       "trees_per_sentence", "sentences_short_of_num")}))
    return 0


# ---- --proposal-parser on the evaluations -----------------------------------------------------------------------

def add_proposal_parser_options(command):
    """--proposal-parser and what it draws with, on `eval ppl`, `eval rerank`, `eval uas` and `eval blimp`."""
    command.add_argument("--proposal-parser", metavar="DIR",
                         help="draw the proposal trees with this parser (hf-slm parser train) instead of reading "
                              "--proposals: --max-proposals unique trees per sentence (default "
                              f"{DEFAULT_NUM_PROPOSALS}), sampled without replacement, written to "
                              "proposals-DATA-KIND-HASH-J300-seed0.* in the results folder and journaled (a rerun "
                              "resumes, or reuses them)")
    command.add_argument("--proposal-seed", type=non_negative_int, default=0,
                         help="the seed of --proposal-parser's draws (default 0)")
    command.add_argument("--proposal-max-draws", type=positive_int, metavar="N",
                         help="--proposal-parser draws at most N samples per sentence looking for unique trees "
                              "(default 10 x --max-proposals); a sentence with fewer distinct trees gets fewer")


def draw_for_evaluation(args, model, sentences, data, directory, sent_ids=None):
    """With --proposal-parser: draw the proposals of the evaluation's sentences (`sentences()` reads them, as the
    evaluation will; `sent_ids()` their ids, which a CoNLL-U proposal file must repeat) into the results folder, set
    args.proposals to the file, and return the record the results keep (None without --proposal-parser)."""
    if getattr(args, "proposal_parser", None) is None:
        return None
    if args.proposals is not None:
        raise ValueError("--proposals and --proposal-parser both give proposal trees; give one of them")
    from ..evaluation.proposals import proposal_format
    from ..evaluation.results import data_name
    from ..parsers.parser import ProposalParser
    from ..parsers.proposals import draw_proposals, proposal_file_name

    parser = ProposalParser.load(args.proposal_parser)
    parser.check_serves(proposal_format(model).name, f"a {type(model).__name__}")
    num = args.max_proposals if args.max_proposals is not None else DEFAULT_NUM_PROPOSALS
    args.max_proposals = num
    path = directory / proposal_file_name(parser, data_name(data) + (f"-limit{args.limit}" if args.limit else ""),
                                          num, args.proposal_seed)
    record = draw_proposals(parser, sentences(), path, num=num, max_draws=args.proposal_max_draws,
                            seed=args.proposal_seed, batch_size=32, data=str(data), overwrite=args.overwrite,
                            sent_ids=sent_ids() if sent_ids is not None else None)
    args.proposals = record["file"]
    if getattr(args, "protocol_record", None) is not None:
        from ..evaluation.protocols import proposal_parser_note

        record["paper_parser"] = proposal_parser_note(args.protocol_record["name"], parser.kind.name)
    return record


def record_drawn_proposals(metrics, record):
    """Write the drawn proposals' record into the results JSON an evaluation wrote."""
    from ..evaluation.results import add_to_results

    if record is None:
        return
    metrics["proposal_parser"] = record
    for path in metrics.get("files", {}).values():
        if str(path).endswith(".json"):
            add_to_results(path, "proposal_parser", record)


# ---- parse, eval parse and eval uas with a parser --------------------------------------------------------------

def command_eval_with_parser(args, evaluation):
    """`hf-slm eval parse|uas --parser DIR`: the parser's best trees scored against gold (hf_slm/parsers/
    evaluation.py), results in --output or PARSER/eval_results."""
    from ..evaluation.results import results_directory
    from ..parsers.evaluation import parser_evaluation
    from ..parsers.parser import ProposalParser

    parser = ProposalParser.load(args.parser)
    gold = args.gold if evaluation == "parse" else args.data
    metrics = parser_evaluation(parser, gold, evaluation, limit=args.limit, batch_size=max(args.batch_size, 32),
                                output_dir=results_directory(args.parser, args.output), overwrite=args.overwrite,
                                include_punctuation=getattr(args, "include_punctuation", False))
    shown = ("uas", "las", "right_branching_uas") if evaluation == "uas" else (
        "f1", "precision", "recall", "unlabelled_f1", "right_branching_f1")
    from ..evaluation.results import tidy_numbers

    print(json.dumps(tidy_numbers({key: metrics[key] for key in (*shown, "sentences", "units") if key in metrics})))
    print(f"wrote {', '.join(metrics.get('files', {}).values())}", file=sys.stderr)
    return 0


def add_parser_commands(commands):
    """`parser train` and `propose` on the `hf-slm` subcommands."""
    from .summarization_command import add_training_precision_options

    parser_group = commands.add_parser("parser", help="train a proposal parser (CRF constituency, biaffine dependency)")
    actions = parser_group.add_subparsers(dest="parser_command", required=True)
    train = actions.add_parser(
        "train", help="train a proposal parser with transformers.Trainer",
        description="Train the parser the papers drew proposal and silver trees from: 'crf' (labelled span CRF "
                    "constituency parser, Zhang, Zhou and Li 2020), 'crf-unlabeled' (paper 003's unlabelled trees) or "
                    "'biaffine' (Dozat and Manning 2017 with a projective tree CRF, for dependency trees), or 'rnng-discriminative' (the "
                    "discriminative RNNG, paper 000's proposal model; any other registered kind). The output "
                    "folder holds the model, its tokenizer and hub code (AutoModel.from_pretrained(DIR, "
                    "trust_remote_code=True) loads it without hf-slm), and training_setup.json with its held-out "
                    "F1 or UAS beside a right-branching baseline. One process or torchrun.")
    train.add_argument("--kind", required=True, choices=parser_kind_names())
    train.add_argument("--train", nargs="+", required=True,
                       help="bracketed tree files (crf, crf-unlabeled, rnng-discriminative; a folder: its .mrg files) or CoNLL-U files "
                            "(biaffine; non-projective trees are lifted)")
    train.add_argument("--eval", nargs="+", help="held-out files of the same kind: evaluation loss (the checkpoint of "
                       "lowest is kept) and the final F1 / UAS")
    train.add_argument("--output", required=True, help="output directory (checkpoints, final parser, tokenizer)")
    train.add_argument("--size", choices=["tiny", "paper"], default="tiny",
                       help="'tiny' (default: a 2-layer BiLSTM of 128, minutes on two CPU cores) or 'paper' (the cited "
                            "parsers' 3-layer BiLSTM of 400)")
    train.add_argument("--encoder", metavar="NAME_OR_PATH",
                       help="a HuggingFace encoder (e.g. roberta-base, as paper 002's Biaffine-roberta; a local folder "
                            "where no hub is reachable) instead of the BiLSTM: word vectors pooled from its pieces, "
                            "fine-tuned")
    train.add_argument("--tokenizer", help="a saved parser tokenizer (default: built from --train)")
    train.add_argument("--max-steps", type=positive_int)
    train.add_argument("--batch-size", type=positive_int, help="sentences per batch")
    train.add_argument("--learning-rate", type=positive_float)
    train.add_argument("--eval-steps", type=positive_int, default=200)
    train.add_argument("--save-steps", type=positive_int, default=200)
    train.add_argument("--logging-steps", type=positive_int, default=20)
    train.add_argument("--seed", type=non_negative_int, default=0)
    train.add_argument("--min-count", type=positive_int, default=2,
                       help="words seen fewer times become unknown-word classes (default 2)")
    train.add_argument("--max-seconds", type=positive_float, help="stop training after this many seconds")
    train.add_argument("--resume", action="store_true", help="continue the run in --output from its last complete checkpoint")
    train.add_argument("--overwrite", action="store_true", help="replace a trained parser in --output")
    train.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    train.add_argument("--strip-function-tags", action="store_true", help="NP-SBJ-1 -> NP in the training trees")
    train.add_argument("--keep-traces", action="store_true", help="keep -NONE- traces (default: removed)")
    add_training_precision_options(train)
    train.set_defaults(function=command_parser_train)

    propose = commands.add_parser(
        "propose", help="draw J unique proposal trees per sentence with a proposal parser",
        description="Draw --num unique trees per sentence of --data from a parser's q(y | x), without replacement "
                    "(samples until --num distinct trees or --max-draws samples), into --output in the format `hf-slm "
                    "eval ppl|rerank|uas --proposals` reads, each tree with its log q(y | x). Journaled beside the "
                    "output: a rerun resumes.")
    propose.add_argument("--parser", required=True, help="a parser checkpoint (hf-slm parser train)")
    propose.add_argument("--data", required=True,
                         help="trees (their words), one sentence per line, or a CoNLL-U file (its FORMs)")
    propose.add_argument("--num", type=positive_int, default=DEFAULT_NUM_PROPOSALS,
                         help=f"unique trees per sentence (default {DEFAULT_NUM_PROPOSALS}, the papers' J)")
    propose.add_argument("--max-draws", type=positive_int, help="samples per sentence at most (default 10 x --num)")
    propose.add_argument("--seed", type=non_negative_int, default=0)
    propose.add_argument("--output", required=True, help="the proposal file to write")
    propose.add_argument("--limit", type=positive_int, help="only the first N sentences")
    propose.add_argument("--batch-size", type=positive_int, default=32, help="sentences per forward pass")
    propose.add_argument("--overwrite", action="store_true",
                         help="start over when the journal beside --output was of another parser, data or settings")
    propose.set_defaults(function=command_propose)
