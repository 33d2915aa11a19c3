"""The `hf-slm` command line."""

import argparse
import contextlib
import json
import sys
import warnings

from ..data.numbering import sentence_name
from .card_command import add_card_command
from .errors import run_command
from .item_failures import report_failed_items
from ..data.command import add_data_command
from ..evaluation.protocols import PROTOCOL_EVALUATIONS, PROTOCOL_NAMES  # (imports nothing heavy)
from ..families import grammar_names
from ..option_types import non_negative_int, positive_float, positive_int
from .parser_command import add_parser_commands, add_proposal_parser_options
from .publishing_command import add_publishing_commands
from .quickstart import QUICKSTART_STEPS
from .summarization_command import add_summarization_commands, add_training_precision_options


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
    from .mask_inspection import (
        PNG_MARKER, format_report, format_segment_report, mask_report, plot_report, segment_report,
    )
    from ..runs.user_files import check_replaceable

    if args.segment_length is None:
        if args.memory is not None or args.memory_length is not None:
            raise ValueError("--memory and --memory-length describe segment recurrence; give --segment-length too")
    else:
        if args.png:
            raise ValueError("--png draws the whole-sequence mask; it does not combine with --segment-length")
        report = segment_report(args.tree, args.grammar, args.segment_length, args.memory_length, args.memory,
                                args.format, variant=args.variant, pieces=args.pieces, **_tree_options(args))
        print(json.dumps(report) if args.json else format_segment_report(report))
        return 0
    if args.png:  # before anything is printed: a file the user wrote is not replaced without --overwrite
        check_replaceable(args.png, PNG_MARKER, args.overwrite)
    report = mask_report(args.tree, args.grammar, args.format, variant=args.variant, pieces=args.pieces,
                         **_tree_options(args))
    if args.json:
        print(json.dumps({k: report[k] for k in ("tokens", "kinds", "attention_mask", "relative_positions", "labels")}))
    else:
        print(format_report(report))
    if args.png:
        plot_report(report, args.png, overwrite=args.overwrite)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def command_quickstart(args):
    from .quickstart import run_quickstart

    run_quickstart(output=args.output, max_steps=args.max_steps, max_seconds=args.max_seconds, overwrite=args.overwrite)
    return 0


def command_presets(args):
    from ..families import registered_families

    if args.paper is not None:
        return _print_paper_comparison(args.paper)
    for family in registered_families():  # one table per family: its own columns (Family.preset_columns)
        presets = family.all_presets()
        if not presets:
            continue
        rows = [(name, family.preset_columns(preset), preset["description"]) for name, preset in presets.items()]
        headers = list(rows[0][1])
        widths = [max(len(str(h)), *(len(str(columns[h])) for _, columns, _ in rows)) for h in headers]
        name_width = max(22, *(len(name) for name, _, _ in rows))
        print(f"{family.display_name} (paper {family.paper})")
        print(f"{'preset':<{name_width}} " + " ".join(f"{h:>{w}}" for h, w in zip(headers, widths)) + "  description")
        for name, columns, description in rows:
            print(f"{name:<{name_width}} " + " ".join(f"{columns[h]!s:>{w}}" for h, w in zip(headers, widths))
                  + f"  {description}")
        print()
    return 0


def _print_paper_comparison(paper):
    """`hf-slm presets --paper N`: each preset of the paper's families beside the paper's table, with every
    difference and its reason (hf_slm/families/paper_settings.py); exit status 1 if one is unexplained."""
    from ..families import paper_table
    from ..families.paper_settings import compare_table, count_preset_parameters, format_comparison

    table, presets = paper_table(paper)
    rows = compare_table(table, presets, lambda name, vocab_size: count_preset_parameters(name, vocab_size, table))
    print(format_comparison(table, rows, [name for name in presets if name not in table.presets]))
    return 1 if any(row.status == "unexplained" for row in rows) else 0


def _train_option_dest(flag, keywords):
    """The attribute argparse stores a `hf-slm train` option of a family under (`--min-count` -> min_count)."""
    return keywords.get("dest") or flag.lstrip("-").replace("-", "_")


def _family_train_options(args):
    """({dest: value} of the options of the chosen preset's family, given at a value other than their default),
    raising ValueError for an option of another family's presets (Family.train_options)."""
    from ..families import preset, registered_families

    family, _ = preset(args.preset)  # an unknown preset: the error lists every family's
    own = {}
    for other in registered_families():
        for flag, keywords in other.train_options:
            dest = _train_option_dest(flag, keywords)
            value = getattr(args, dest, None)
            if value is None or value is False:  # not given (--min-count 0 is given)
                continue
            if other.name != family.name:
                raise ValueError(f"{flag}: an option of {other.display_name} presets (paper {other.paper}); preset "
                                 f"{args.preset!r} is a {family.display_name} preset")
            own[dest] = value
    return family, own


def command_train(args):
    from ..training.train import train

    family, own = _family_train_options(args)
    overrides = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        if not key or not value:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. --set hidden_size=128")
        try:  # numbers, true/false, lists and objects are JSON; any other value (reference) is a string,
            overrides[key] = json.loads(value)  # and the config's field check names a value of the wrong type
        except json.JSONDecodeError:
            overrides[key] = value
    setup = family.training_setup(
        **own,
        preset=args.preset, train=args.train, eval=args.eval or [], output=args.output, tokenizer=args.tokenizer,
        vocab_size=args.vocab_size, model_overrides=overrides, max_steps=args.max_steps, batch_size=args.batch_size,
        learning_rate=args.learning_rate, warmup_steps=args.warmup_steps,
        embedding_learning_rate_multiplier=args.embedding_lr_multiplier, eval_steps=args.eval_steps,
        save_steps=args.save_steps, logging_steps=args.logging_steps, seed=args.seed, resume=args.resume,
        overwrite=args.overwrite,
        normalize_options=_tree_options(args), segment_length=args.segment_length,
        memory_length=args.memory_length, memory_update=args.memory, pieces=args.pieces,
        mixed_precision=args.mixed_precision, gradient_accumulation_steps=args.gradient_accumulation_steps,
        pack_to=args.pack_to,
    )
    if args.segment_length is None and (args.memory_length is not None or args.memory is not None):
        raise ValueError("--memory-length and --memory describe segment recurrence; give --segment-length too")
    train(setup)
    from ..runs.distributed import is_main_process

    if is_main_process():  # under torchrun the main process alone wrote them
        print(f"saved the model and tokenizer to {args.output}")
    return 0


def _load(names):
    """(model, tokenizer) of a checkpoint; of several (--model given again: `names` a list), their ensemble, the uniform
    mixture of their next-action distributions (paper 000 section 3.7; hf_slm/search/ensemble.py), and their one
    tokenizer (checked to be one)."""
    from ..checkpoints.loading import load_checkpoint

    names = [names] if isinstance(names, str) else list(names)
    loaded = [load_checkpoint(name) for name in names]
    if len(loaded) == 1:
        return loaded[0]
    from ..search.ensemble import ensemble_of_checkpoints

    return ensemble_of_checkpoints(loaded, names)


# --model on the commands that take an ensemble (score, parse and the evaluations that score with a model).
ENSEMBLE_MODEL_HELP = ("checkpoint directory or hub name; give --model again for an ensemble of models that share a "
                       "tokenizer: the uniform mixture of their next-action distributions (paper 000, section 3.7)")


class _OneModel(argparse.Action):
    """--model on a command that takes one model: given twice is an error (argparse would keep the last)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice: this command takes one model (ensembles, --model given "
                         "again: score, parse, eval ppl, sg, blimp, parse, rerank, uas)")
        setattr(namespace, self.dest, values)


def _add_model_option(parser, ensembles=False, writes_results=False, or_parser=False):
    """--model (given again: an ensemble); with or_parser, --parser DIR instead (a proposal parser's trees)."""
    if ensembles:
        parser.add_argument("--model", required=not or_parser, action="append", metavar="MODEL",
                            help=ENSEMBLE_MODEL_HELP + (" (an ensemble's results need --output)" if writes_results else ""))
    else:
        parser.add_argument("--model", required=not or_parser, action=_OneModel, help="checkpoint directory or hub name")
    if or_parser:
        parser.add_argument("--parser", metavar="DIR",
                            help="instead of --model: a proposal parser (hf-slm parser train), its best trees")


def _model_or_parser(args, command):
    """Whether the command runs a proposal parser (--parser) rather than a model; exactly one must be given, and a
    parser runs no search (a search option set away from its default is refused, naming it)."""
    if (args.model is None) == (args.parser is None):
        raise ValueError(f"hf-slm {command}: give --model (a language model) or --parser (a proposal parser), one of "
                         "them")
    if args.parser is None:
        return False
    given = [name for name, default in SEARCH_OPTION_DEFAULTS.items() if getattr(args, name, default)
             not in (default, None)]
    if given:
        shown = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ValueError(f"hf-slm {command}: {shown} set(s) word-synchronous beam search, which a proposal parser "
                         "does not run (its best tree is exact); leave these options out")
    return True


def _beam_options(args):
    from ..modeling.generation_slm import CONSTRAINT_SETTINGS

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


# The options of word-synchronous beam search (`_add_beam_options`) and their defaults. A model whose scorer runs
# no search (Scorer.runs_search) refuses one set away from its default, naming it, rather than ignoring it; one given
# at its default value cannot be told apart and is ignored.
SEARCH_OPTION_DEFAULTS = {"beam_size": 100, "word_beam_size": 10, "fast_track": 1, "constraints": None,
                          "max_nonterminals": None, "max_consecutive_open": None, "no_cache": False}


def _scorer(args, model, tokenizer, command):
    """The Scorer of the model's family (hf_slm/search/scorers.py) with the command's search options; a scorer without
    a search refuses those set away from their defaults, naming them."""
    from ..search.scorers import scorer_class_for

    scorer_class = scorer_class_for(model)
    if scorer_class.runs_search:
        return scorer_class(model, tokenizer, **_beam_options(args))
    given = [name for name, default in SEARCH_OPTION_DEFAULTS.items() if getattr(args, name, default) != default]
    if given:
        shown = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ValueError(f"hf-slm {command}: {shown} set(s) word-synchronous beam search, which "
                         f"{scorer_class.without_search}; leave these options out")
    return scorer_class(model, tokenizer)


def _sentence_options(args):
    """What score, parse and the evaluations do with a sentence that cannot be scored, and (for the SENTENCE
    arguments) how messages name each one: "sentence 1" for the first."""
    options = {"on_error": "raise" if args.stop_on_error else "skip"}
    if hasattr(args, "sentences"):
        options["sources"] = [sentence_name(index) for index in range(len(args.sentences))]
    return options


@contextlib.contextmanager
def _left_out_said_once():
    """The commands say in one line of their own which sentences were left out (_say_left_out): the library's
    SentencesLeftOut warnings are not shown."""
    from ..search.beam import SentencesLeftOut

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=SentencesLeftOut)
        yield


def _say_left_out(command, left_out, total, noun="sentences"):
    """The batch commands' failure policy (hf_slm/cli/item_failures.py) for what search left out (entries with an
    "error", or a "source"): one stderr line naming them; returns the exit status, 1 when any was left out."""
    return report_failed_items(command, left_out, total, f"{noun} that cannot be scored",
                               "the others' results are complete; --stop-on-error stops instead")


def _parse_inputs(args):
    """(sentences, how messages name them) of `hf-slm parse`: the SENTENCE arguments ("sentence 1", ...), or the
    sentences of --file, split and tokenized (hf_slm/data/sentence_splitting.py) and named by their line."""
    if args.file is None:
        if args.join_lines:
            raise ValueError("--join-lines applies to the text of --file; without --file, each SENTENCE is one sentence")
        if not args.sentences:
            raise ValueError("no sentences to parse: give them as arguments, or a text file with --file")
        return args.sentences, _sentence_options(args)["sources"]
    if args.sentences:
        raise ValueError(f"got {len(args.sentences)} SENTENCE argument(s) and --file {args.file}; give one or the "
                         "other")
    from ..data.sentence_splitting import line_number
    from ..summarization.silver import document_sentences
    from ..data.text_files import read_text

    text = read_text(args.file, "text file")
    found = document_sentences(text, line_breaks=not args.join_lines)
    if not found:
        raise ValueError(f"text file {args.file} holds no sentences (no words at all)")
    return [words for words, _ in found], [f"{args.file}, line {line_number(text, start)}" for _, start in found]


def command_parse(args):
    from ..families import variant_for_config
    from ..families.tree_formats import tree_format
    from ..summarization.silver import parse_sentences

    sentences, sources = _parse_inputs(args)  # before the model loads: a missing file fails at once
    if _model_or_parser(args, "parse"):  # a proposal parser: its own Scorer, its kind's tree format
        from ..parsers.parser import ProposalParser

        parser = ProposalParser.load(args.parser)
        model, tokenizer, written = parser.model, parser.tokenizer, parser.tree_format
        scorer = _scorer(args, model, tokenizer, "parse")
    else:
        model, tokenizer = _load(args.model)
        scorer = _scorer(args, model, tokenizer, "parse")
        written = variant_for_config(model.config).tree_format
    with _left_out_said_once():
        trees = parse_sentences(model, tokenizer, sentences, sources, cache_dir=args.cache,
                                progress=True, on_error=_sentence_options(args)["on_error"],
                                scorer=scorer, desc="parsing")
    trees_written = tree_format(written)
    for tree in trees:
        if tree is None:  # left out: an empty line keeps one line per sentence
            print()
        elif args.pretty:
            trees_written.draw(tree)
        else:
            print(tree)
    return _say_left_out("parse", trees.left_out, len(trees))


# What `hf-slm score` prints of a scorer's result, when the result has it (a search's best tree; an exact scorer's
# "exact": true), then the units.
SCORE_FIELDS = ("words", "surprisals", "end_surprisal", "log_prob", "tree", "exact")


def command_score(args):
    model, tokenizer = _load(args.model)
    scorer = _scorer(args, model, tokenizer, "score")
    units = "bits" if args.bits else "nats"
    with _left_out_said_once():
        results = scorer.score(args.sentences, bits=args.bits, progress=True,
                               **_sentence_options(args))
    for result in results:
        if "error" in result:  # left out: a line that says why keeps one line per sentence
            print(json.dumps({"words": result["words"], "error": result["error"]}))
            continue
        # end_surprisal is printed so that a reader can check sum(surprisals) + end_surprisal == -log_prob.
        shown = {key: result[key] for key in SCORE_FIELDS if key in result}
        print(json.dumps({**shown, "units": units}))
    return _say_left_out("score", results.left_out, len(results))


def command_generate(args):
    model, tokenizer = _load(args.model)
    scorer = _scorer(args, model, tokenizer, "generate")
    for text in scorer.generate(args.prompt, num_trees=args.num_trees, num_beams=args.num_beams, top_k=args.top_k,
                                max_new_words=args.max_new_words, seed=args.seed):
        print(text)
    return 0


def _eval_setup(args):
    from ..runs.distributed import device, is_distributed
    from ..evaluation.results import results_directory

    if len(args.model) > 1 and args.output is None:
        raise ValueError(f"an ensemble (--model given {len(args.model)} times) has no checkpoint folder of its own for "
                         "its results: give --output")
    model, tokenizer = _load(args.model)
    _check_evaluation(args.evaluation, model)
    _apply_protocol(args, model)
    if is_distributed():  # under torchrun each process searches on its own device (hf_slm/runs/distributed.py)
        model.to(device())
    return model, tokenizer, results_directory(args.model[0], args.output)


# The options a protocol may set, per command (those the command has): search, proposals.
_PROTOCOL_OPTIONS = ("beam_size", "word_beam_size", "fast_track", "constraints", "max_proposals", "proposals",
                     "proposal_parser")


def _apply_protocol(args, model):
    """Set the options of `--protocol` the command left out (hf_slm/evaluation/protocols.py), then the defaults of the
    search options still unset; keep in args.protocol_record what the results file records (None without
    --protocol)."""
    from ..evaluation.protocols import apply_protocol
    from ..families import family_for_config

    present = {name: getattr(args, name) for name in _PROTOCOL_OPTIONS if hasattr(args, name)}
    args.protocol_record = None
    if getattr(args, "protocol", None):
        options, record = apply_protocol(args.protocol, args.evaluation, family_for_config(model.config), present)
        for name, value in options.items():
            if name not in present and name not in ("proposals", "proposal_parser"):
                raise ValueError(f"--protocol {args.protocol}: sets {name}, which eval {args.evaluation} has no "
                                 "option for")
            setattr(args, name, value)
        args.protocol_record = record
    for name, value in SEARCH_OPTION_DEFAULTS.items():
        if hasattr(args, name) and getattr(args, name) is None and value is not None:
            setattr(args, name, value)
    if args.protocol_record is not None:
        args.protocol_record["options"] = {name: getattr(args, name) for name in _PROTOCOL_OPTIONS
                                           if hasattr(args, name) and name not in ("proposals", "proposal_parser")}


def _record_protocol(args, metrics):
    """Write `--protocol`'s record into the results JSON the evaluation wrote (metrics["files"])."""
    from ..evaluation.results import add_to_results

    if getattr(args, "protocol_record", None) is None:
        return
    for path in metrics.get("files", {}).values():
        if str(path).endswith(".json"):
            add_to_results(path, "protocol", args.protocol_record)


def _check_evaluation(evaluation, model):
    """Refuse an `hf-slm eval` command the model's family does not support (Family.evaluations), naming those it
    does."""
    from ..families import family_for_config

    family = family_for_config(model.config)
    if evaluation not in family.evaluations:
        variant = family.variant_of(model.config)
        raise ValueError(f"hf-slm eval {evaluation}: a {variant.display_name} model does not support it (its family, "
                         f"{family.name}, supports eval {', '.join(family.evaluations)})")


def _reports():
    """Whether this process prints the results: under torchrun / accelerate launch every process computes its share
    and gets the merged metrics, and the main process alone reports them."""
    from ..runs.distributed import is_main_process

    return is_main_process()


def _report(metrics, keys):
    from ..evaluation.results import tidy_numbers

    shown = {k: metrics[k] for k in keys if k in metrics}
    print(json.dumps(tidy_numbers(shown)))
    _report_files(metrics)


def _report_files(metrics):
    """One line naming the files an evaluation wrote (named by its data: evaluation/results.py)."""
    files = list(metrics.get("files", {}).values())
    if files:
        print(f"wrote {', '.join(files)}", file=sys.stderr)


def command_eval_rerank(args):
    from ..evaluation.evalb import GoldSentence
    from ..evaluation.parsing import read_gold_trees, rerank
    from .parser_command import draw_for_evaluation, record_drawn_proposals

    model, tokenizer, directory = _eval_setup(args)
    if args.chunk_size < 1:
        raise ValueError(f"--chunk-size {args.chunk_size}: expected a positive number of proposals")
    # the gold words EVALB compares (traces removed) are the words the proposals must spell
    drawn = draw_for_evaluation(args, model, lambda: [GoldSentence(tree, index=index).words for index, tree in
                                                      enumerate(read_gold_trees(args.gold, limit=args.limit))],
                                args.gold, directory)
    metrics = rerank(model, tokenizer, args.gold, args.proposals, limit=args.limit, batch_size=args.batch_size,
                     output_dir=directory, overwrite=args.overwrite, chunk_size=args.chunk_size,
                     max_proposals=args.max_proposals)
    if not _reports():  # every process scored its share of the proposals; the main one reports
        return 0
    _record_protocol(args, metrics)
    record_drawn_proposals(metrics, drawn)
    _report(metrics, ("precision", "recall", "f1", "exact_match", "sentences", "oracle", "first_proposal", "units"))
    return 0


# What `hf-slm eval parse` prints of the metrics, when they have it: EVALB's scores, or a family's own (e.g. UF1,
# p / p' accuracy and the perplexity given the memory's decisions).
PARSE_FIELDS = ("uf1", "precision", "recall", "f1", "exact_match", "p_accuracy", "next_p_accuracy", "perplexity",
                "sentences", "brackets", "units")


def command_eval_parse(args):
    if _model_or_parser(args, "eval parse"):
        from .parser_command import command_eval_with_parser

        return command_eval_with_parser(args, "parse")
    model, tokenizer, directory = _eval_setup(args)
    scorer = _scorer(args, model, tokenizer, "eval parse")
    with _left_out_said_once():
        metrics = scorer.evaluate_parses(args.gold, limit=args.limit, batch_size=args.batch_size,
                                         output_dir=directory, overwrite=args.overwrite,
                                         on_error=_sentence_options(args)["on_error"])
    if not _reports():
        return 0
    _record_protocol(args, metrics)
    status = _say_left_out("eval parse", metrics.get("left_out", []),
                           metrics.get("sentences_left_out", 0) + metrics.get("sentences", 0))
    _report(metrics, PARSE_FIELDS)
    return status


def command_eval_sg(args):
    from ..evaluation.syntaxgym import format_summary, run_syntaxgym

    model, tokenizer, directory = _eval_setup(args)
    scorer = _scorer(args, model, tokenizer, "eval sg")
    with _left_out_said_once():
        metrics = run_syntaxgym(model, tokenizer, args.suites, output_dir=directory, limit=args.limit,
                                batch_size=args.batch_size, rule=args.rule, overwrite=args.overwrite,
                                on_error=_sentence_options(args)["on_error"], scorer=scorer)
    if not _reports():
        return 0
    _record_protocol(args, metrics)
    status = _say_left_out("eval sg", metrics.get("left_out", []), metrics["counts"]["items"], "items")
    print(format_summary(metrics))
    _report_files(metrics)
    return status


def command_eval_ppl(args):
    from ..evaluation.perplexity import read_documents, word_perplexity
    from .parser_command import draw_for_evaluation, record_drawn_proposals

    model, tokenizer, directory = _eval_setup(args)
    scorer = _scorer(args, model, tokenizer, "eval ppl")

    def data_sentences():  # as word_perplexity reads them: the tokenizer's normalization, --limit
        documents = read_documents(args.data, dict(getattr(tokenizer, "normalization", None) or {}),
                                   args.document_level)
        if args.limit is not None:
            documents = documents[: args.limit] if args.document_level else [documents[0][: args.limit]]
        return [sentence for document in documents for sentence in document]

    drawn = draw_for_evaluation(args, model, data_sentences, args.data, directory)
    with _left_out_said_once():
        metrics = word_perplexity(model, tokenizer, args.data, proposals=args.proposals,
                                  document_level=args.document_level, batch_size=args.batch_size, limit=args.limit,
                                  output_dir=directory, overwrite=args.overwrite, max_proposals=args.max_proposals,
                                  on_error=_sentence_options(args)["on_error"], scorer=scorer)
    if not _reports():
        return 0
    _record_protocol(args, metrics)
    record_drawn_proposals(metrics, drawn)
    status = _say_left_out("eval ppl", metrics.get("left_out", []),
                           metrics["sentences"] + metrics.get("sentences_left_out", 0))
    print(metrics["summary"])
    _report_files(metrics)
    return status


def command_eval_blimp(args):
    from ..evaluation.blimp import read_blimp, run_blimp, split_words
    from .parser_command import draw_for_evaluation, record_drawn_proposals

    model, tokenizer, directory = _eval_setup(args)
    scorer = _scorer(args, model, tokenizer, "eval blimp")
    # the pairs evaluated, good sentence then bad, as run_blimp splits their words
    drawn = draw_for_evaluation(args, model, lambda: [split_words(pair[side]) for pair in read_blimp(args.data, args.limit)
                                                      for side in ("sentence_good", "sentence_bad")],
                                args.data, directory)
    with _left_out_said_once():
        metrics = run_blimp(model, tokenizer, args.data, limit=args.limit, output_dir=directory,
                            batch_size=args.batch_size, overwrite=args.overwrite,
                            on_error=_sentence_options(args)["on_error"], scorer=scorer, proposals=args.proposals,
                            max_proposals=args.max_proposals)
    if not _reports():
        return 0
    _record_protocol(args, metrics)
    record_drawn_proposals(metrics, drawn)
    status = _say_left_out("eval blimp", metrics.get("left_out", []),
                           metrics["pairs"] + metrics.get("pairs_left_out", 0), "pairs")
    from ..evaluation.results import tidy_numbers

    print(json.dumps(tidy_numbers({key: metrics[key] for key in ("accuracy", "pairs", "paradigms", "by_field", "units",
                                                                  "log_prob")})))
    _report_files(metrics)
    return status


def command_eval_uas(args):
    from ..evaluation.attachment import evaluate_uas, gold_sentences
    from .parser_command import draw_for_evaluation, record_drawn_proposals

    if _model_or_parser(args, "eval uas"):
        from .parser_command import command_eval_with_parser

        return command_eval_with_parser(args, "uas")
    model, tokenizer, directory = _eval_setup(args)
    drawn = draw_for_evaluation(args, model, lambda: [s["words"] for s in gold_sentences(args.data, args.limit)],
                                args.data, directory,
                                sent_ids=lambda: [s["sent_id"] for s in gold_sentences(args.data, args.limit)])
    # the proposals' cap where there are proposals (without them, the beam parses)
    capped = {} if args.max_proposals is None else {"max_proposals": args.max_proposals}
    with _left_out_said_once():
        metrics = evaluate_uas(model, tokenizer, args.data, proposals=args.proposals,
                               include_punctuation=args.include_punctuation, limit=args.limit,
                               batch_size=args.batch_size, output_dir=directory, overwrite=args.overwrite,
                               **capped, **_sentence_options(args), **_beam_options(args))
    if not _reports():
        return 0
    _record_protocol(args, metrics)
    record_drawn_proposals(metrics, drawn)
    status = _say_left_out("eval uas", metrics.get("left_out", []),
                           metrics["sentences"] + metrics["sentences_left_out"])
    _report(metrics, ("uas", "correct", "scored_tokens", "sentences", "punctuation", "first_proposal", "oracle",
                      "parses", "units"))
    return status


EVAL_OUTPUTS = (
    "Results are named by the data: KIND-DATA.json (e.g. ppl-test.json for --data test.txt; -limitN added with "
    "--limit), so a run on other data never replaces a result a model card quotes. Finished items go to "
    "KIND-DATA.journal.jsonl as they are done: after an interruption, the same command resumes where it stopped "
    "(same numbers as an uninterrupted run); a run with another model, other settings or other data of the same "
    "name is refused unless --overwrite. The results folder is locked (.hf-slm.lock) while a run writes it."
)


# What `eval ppl --proposals` and `eval blimp --proposals` read (hf_slm/evaluation/proposals.py).
PROPOSALS_HELP = ("proposal trees in the format of the model's trees (PTB brackets; unlabelled or labelled brackets "
                  "for a model of unlabelled trees; CoNLL-U, analyses grouped by sent_id, or inline WORD/HEAD trees "
                  "for a model of dependency trees), one per line in blocks separated by blank lines: p(x) >= the sum "
                  "of p(x, y) over them, so the perplexity is an upper bound")


def _add_eval_command(evaluations, name, help_text, function, beam=True, ensembles=False, or_parser=False,
                      limit_help="evaluate only the first N items"):
    command = evaluations.add_parser(name, help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}. "
                                     f"{EVAL_OUTPUTS}")
    _add_model_option(command, ensembles, writes_results=True, or_parser=or_parser)
    command.add_argument("--limit", type=positive_int, help=limit_help)
    command.add_argument("--batch-size", type=positive_int,
                         default=8, help="items per batch (a resumed run may change it)")
    command.add_argument("--output", help="results directory (default: MODEL/eval_results)")
    command.add_argument("--overwrite", action="store_true",
                         help="discard the journal and results of an earlier run into the same KIND-DATA files and "
                              "start over (needed when the model, the settings or the data differ)")
    if beam:
        # no argparse defaults: an option the command gives is told apart from one a protocol sets (_apply_protocol)
        _add_beam_options(command, defaults=name not in PROTOCOL_EVALUATIONS)
        _add_stop_option(command)
    if name in PROTOCOL_EVALUATIONS:
        command.add_argument("--protocol", choices=PROTOCOL_NAMES,
                             help="the evaluation settings of a paper (hf_slm/evaluation/protocols.py: beam, proposals, "
                                  "n_c / p_c, ...), for a model of that paper's families; an option given here wins, "
                                  "and the results file records each setting with its source")
    command.set_defaults(function=function)
    return command


def _add_max_proposals_option(parser):
    parser.add_argument("--max-proposals", type=positive_int,
                        help="score the first N distinct proposal trees of each sentence (default: all of them; "
                             "--protocol sets the paper's)")


def _add_stop_option(parser):
    parser.add_argument("--stop-on-error", action="store_true",
                        help="stop (exit 2, before any search) at the first sentence that cannot be scored: empty, a "
                        "word without pieces, or too long for the model even as its shortest tree. By default such a "
                        "sentence is left out: one 'warning' line on stderr names it (sentences numbered from 1), "
                        "its place in the output says why, the others are scored as usual, and the exit status is 1 "
                        "(hf_slm/cli/item_failures.py)")


# The papers whose families have a table (Family.paper_table), written out so that building the parser imports no
# family module; the registry refuses any other (hf_slm.families.paper_table).
PAPERS_WITH_TABLES = ("000", "001", "002", "003")


# The names of modeling.generation_slm.CONSTRAINT_SETTINGS, written out so that building the parser imports
# no torch (a test holds them equal).
CONSTRAINT_SETTING_NAMES = ("default", "paper003-sg", "paper003-summaries")


def _add_beam_options(parser, sizes=True, defaults=True):
    """The search options; with defaults=False argparse leaves them None and _apply_protocol fills them in."""
    def default(name):
        return SEARCH_OPTION_DEFAULTS[name] if defaults else None

    if sizes:
        parser.add_argument("--beam-size", type=positive_int, default=default("beam_size"),
                            help=f"action beam (default {SEARCH_OPTION_DEFAULTS['beam_size']}; papers 002 and 003: "
                                 "300)")
        parser.add_argument("--word-beam-size", type=positive_int, default=default("word_beam_size"),
                            help=f"default {SEARCH_OPTION_DEFAULTS['word_beam_size']}")
    parser.add_argument("--fast-track", type=non_negative_int, default=default("fast_track"),
                        help=f"default {SEARCH_OPTION_DEFAULTS['fast_track']}")
    parser.add_argument("--constraints", choices=CONSTRAINT_SETTING_NAMES,
                        help="named n_c / p_c settings: 'default' (n_c = 2 x words, p_c = 6: every gold tree of the GUM "
                             "and PTB samples stays reachable), 'paper003-sg' (n_c = words, p_c = 3) or "
                             "'paper003-summaries' (n_c = words, p_c = 5); --max-* options override them")
    parser.add_argument("--max-nonterminals", type=positive_int, help="n_c (default: 2 x the number of words)")
    parser.add_argument("--max-consecutive-open", type=positive_int,
                        help="p_c, the most opening nonterminals in a row (default 6; 5 for generate)")
    parser.add_argument("--no-cache", action="store_true", help="re-encode prefixes instead of a KV cache")
    _add_autocast_option(parser)


def _add_autocast_option(parser):
    parser.add_argument("--autocast", choices=sorted(AUTOCAST_DTYPES), metavar="{bf16,fp16}",
                        help="run the model under torch.autocast in this dtype on the device it computes on (the CPU, "
                        "or each process's GPU under torchrun): faster on GPUs, numbers within bf16's rounding of "
                        "float32's; results journaled without it are not resumed with it")


# --autocast's names of torch dtypes.
AUTOCAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def _autocast(args):
    """The torch.autocast context --autocast asks for, on the device this process computes on; else none."""
    if not getattr(args, "autocast", None):
        return contextlib.nullcontext()
    import torch

    from ..runs.distributed import device

    return torch.autocast(device().type, dtype=getattr(torch, AUTOCAST_DTYPES[args.autocast]))


def _grammar_help():
    """`hf-slm masks --grammar`'s help: every registered family's grammars (hf_slm.families, no torch)."""
    from ..families import registered_families

    listed = "; ".join(f"{', '.join(family.grammars)} (paper {family.paper})" for family in registered_families()
                       if family.grammars)
    return (f"{listed}. A grammar over dependency trees reads an inline tree: each word followed by / and its head "
            "(0 = the root), e.g. 'There/2 is/0 a/4 difference/2'; one over unlabelled trees reads the tree "
            "unlabelled, as its tokenizer normalizes it")


def _preset_families():
    """`hf-slm train --preset`'s help: the families whose presets `hf-slm presets` lists (reading the presets
    themselves would import torch)."""
    from ..families import registered_families

    return "the presets of " + "; ".join(f"{family.name} (paper {family.paper})" for family in registered_families()
                                         if family.reference("presets") is not None)


def _add_family_train_options(train):
    """Each family's own `hf-slm train` options (Family.train_options), one group per family."""
    from ..families import registered_families

    for family in registered_families():
        if not family.train_options:
            continue
        group = train.add_argument_group(f"{family.display_name} presets (paper {family.paper}) only")
        for flag, keywords in family.train_options:
            group.add_argument(flag, **keywords)


def build_parser():
    parser = argparse.ArgumentParser(prog="hf-slm", description="Syntactic language models for HuggingFace transformers.")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error (hf-slm --debug COMMAND ...; also HF_SLM_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", required=True)

    masks = commands.add_parser(
        "masks",
        help="show a grammar's attention mask, relative positions and labels for one tree",
        description="Show the model inputs a grammar derives from one tree. The tree is an action string "
        "'(S (NP the bird NP) S)' or PTB brackets '(S (NP (DT the) (NN bird)))': an action string when a token "
        "'X)' closes an '(X' of the string, else PTB brackets (hf_slm.tokenization.trees.input_format).",
    )
    masks.add_argument("tree")
    masks.add_argument("--format", default="auto", choices=["auto", "actions", "ptb"],
                       help="how to read the tree (default: the rule above)")
    masks.add_argument("--grammar", default=grammar_names()[0], metavar="GRAMMAR", choices=grammar_names(),
                       help=_grammar_help())
    masks.add_argument("--variant", default="paper", choices=["paper", "reference"],
                       help="for a grammar with a variant that follows its authors' released code: 'reference' "
                            "reads the tree as that code does (default: 'paper', as the paper describes it)")
    masks.add_argument("--pieces", action="store_true",
                       help="grammars over dependency trees: read each word as SentencePiece pieces joined by | "
                            "(e.g. ▁Th|ere/2)")
    masks.add_argument("--segment-length", type=positive_int, metavar="L",
                       help="cut the sequence into segments of L positions with a memory (Transformer-XL recurrence, "
                            "paper 000 section 2.2, Figure 8) and show each segment's mask [L, M + L] (memory columns "
                            "first), relative positions, memory positions and update matrices. TREE may then be a "
                            "document: several trees one after another (read after one <s>) or one (DOC ...) tree")
    masks.add_argument("--memory", choices=["structure", "shift"],
                       help="with --segment-length: the memory update, 'structure' (keep what the stack may still "
                            "attend; the default of grammars with a stack) or 'shift' (Transformer-XL's; the default "
                            "of the others)")
    masks.add_argument("--memory-length", type=non_negative_int, metavar="M",
                       help="with --segment-length: memory slots (default L, as paper 000's reference)")
    masks.add_argument("--json", action="store_true", help="print one JSON object")
    masks.add_argument("--png", metavar="FILE", help="draw the mask like paper 000 Figure 2b (a drawing of an "
                       "earlier --png there is replaced; any other file only with --overwrite)")
    masks.add_argument("--overwrite", action="store_true", help="with --png: replace the file even when this "
                       "command did not draw it")
    _add_tree_options(masks)
    masks.set_defaults(function=command_masks)

    quickstart = commands.add_parser(
        "quickstart", help="train a small TG on the shipped GUM sample, reload it, score and sample (a few minutes)"
    )
    quickstart.add_argument("--output", default="hf-slm-quickstart", help="checkpoint directory")
    quickstart.add_argument("--max-steps", type=positive_int, default=QUICKSTART_STEPS,
                            help="training steps (default %(default)s: about 3 minutes on 2 CPU cores; every machine "
                                 "trains the same model, a slower one for longer)")
    quickstart.add_argument("--max-seconds", type=positive_float, default=None,
                            help="stop training after this many seconds (default: no limit); a capped run says it "
                                 "stopped early and is not reused as a finished model")
    quickstart.add_argument("--overwrite", action="store_true",
                            help="train a new model in --output; without it, a rerun reuses the model an earlier "
                                 "quickstart finished there (an interrupted one resumes from its last checkpoint)")
    quickstart.set_defaults(function=command_quickstart)

    presets = commands.add_parser("presets", help="list the model presets")
    presets.add_argument("--paper", choices=PAPERS_WITH_TABLES,
                         help="show each preset of this paper's families beside the paper's table (field by field, "
                              "the parameter count too), with every difference and its reason")
    presets.set_defaults(function=command_presets)

    train = commands.add_parser("train", help="train a model of a preset (see `hf-slm presets`) with transformers.Trainer")
    train.add_argument("--preset", required=True, help="see `hf-slm presets`: " + _preset_families())
    train.add_argument("--train", nargs="+", required=True,
                       help="tree files (PTB brackets), or one folder made by `hf-slm data prepare` (its train split; "
                            "the only input of grammars over other trees, e.g. --loader conllu for dependency trees); "
                            "a family's own options below may say otherwise")
    train.add_argument("--eval", nargs="+",
                       help="files for evaluation loss, as --train (default with a prepared --train: its validation "
                            "split). The final model is then the checkpoint of lowest evaluation loss, as the papers "
                            "select (evaluated at every save)")
    train.add_argument("--output", required=True, help="output directory (checkpoints, final model and tokenizer)")
    train.add_argument("--tokenizer", help="a saved tokenizer directory (default: train one on --train; with a "
                       "prepared --train, the tokenizer saved in it)")
    train.add_argument("--vocab-size", type=positive_int,
                       help="word pieces of a newly trained tokenizer (default: the preset's); with a preset whose "
                            "vocabulary is words, it trains SentencePiece pieces instead")
    train.add_argument("--pieces", choices=["sentencepiece", "byte_bpe", "words"],
                       help="the vocabulary of a newly trained tokenizer: SentencePiece's unigram model, a GPT-2-style "
                            "byte-level BPE (paper 003's models read GPT-2's vocabulary), or words, those seen once "
                            "replaced by Berkeley unknown-word classes (paper 000's PTB set-up; its size is the data's). "
                            "Default: the preset's (words for paper 000's PTB presets), else SentencePiece")
    train.add_argument("--max-steps", type=positive_int)
    train.add_argument("--batch-size", type=positive_int, help="sequences per batch (default: the preset's)")
    train.add_argument("--learning-rate", type=positive_float, help="peak learning rate")
    train.add_argument("--warmup-steps", type=non_negative_int)
    train.add_argument("--embedding-lr-multiplier", type=positive_float, metavar="FACTOR",
                       help="the token embedding's (and the tied output layer's) learning rate is FACTOR times the "
                            "schedule's (default: the preset's, e.g. 2.0 for paper 002's; 1.0 otherwise)")
    train.add_argument("--eval-steps", type=positive_int, default=500)
    train.add_argument("--save-steps", type=positive_int, default=500)
    train.add_argument("--logging-steps", type=positive_int, default=20, help="log the training loss every N steps")
    train.add_argument("--seed", type=non_negative_int, default=0)
    train.add_argument("--resume", action="store_true",
                       help="resume from the last complete checkpoint in --output, with the tokenizer saved in it (never "
                            "trained again; --tokenizer, if given, must match it)")
    train.add_argument("--overwrite", action="store_true",
                       help="replace a trained model (or an interrupted run's checkpoints) in --output; its "
                            "checkpoint-* folders and eval_results/ are removed. Without it such an --output is "
                            "refused. The folder is locked (.hf-slm.lock) while training writes it")
    train.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a model config field")
    train.add_argument("--segment-length", type=non_negative_int, metavar="L",
                       help="Transformer-XL segment recurrence (paper 000 section 2.2): read each training sequence L "
                            "positions at a time with a memory carried from segment to segment, so that sequences "
                            "(documents) longer than max_sequence_length train; batch rows are streams of sequences. "
                            "On prepared documents the preset's L and M apply unless given (paper 000's Figure 9: "
                            "`hf-slm presets --paper 000`), with its document batch unless --batch-size; 0 reads "
                            "whole sequences without segments")
    train.add_argument("--memory-length", type=non_negative_int, metavar="M", help="with --segment-length: memory slots (default L)")
    train.add_argument("--memory", choices=["structure", "shift"],
                       help="with --segment-length: the memory update, 'structure' (keep what the grammar's stack may "
                            "still attend; the default of grammars with a stack) or 'shift' (Transformer-XL's; the "
                            "others' default)")
    train.add_argument("--pack-to", type=non_negative_int, metavar="N",
                       help="pack whole sentences, in order, into training sequences of at most N positions, cut only "
                            "between sentences (paper 003, Appendix A); each sentence is read exactly as alone (its "
                            "own mask block and positions from 0). Default: the preset's (paper 003's presets: their "
                            "cutoff length); 0 trains one sentence per sequence")
    _add_family_train_options(train)
    _add_tree_options(train)
    add_training_precision_options(train)
    train.set_defaults(function=command_train)

    parse_command = commands.add_parser("parse", help="best tree of each sentence (word-synchronous beam search, or a "
                                        "proposal parser's, --parser)")
    _add_model_option(parse_command, ensembles=True, or_parser=True)
    parse_command.add_argument("--pretty", action="store_true", help="draw each tree over several lines")
    parse_command.add_argument("sentences", nargs="*", metavar="SENTENCE", help="one sentence per argument, words separated by spaces")
    parse_command.add_argument("--file", metavar="TEXTFILE",
                               help="parse raw UTF-8 text instead: split into sentences (every line break ends one) "
                                    "and PTB-style words (hf_slm/data/sentence_splitting.py); one tree per line, "
                                    "in order")
    parse_command.add_argument("--join-lines", action="store_true",
                               help="with --file: the text is wrapped, only blank lines and punctuation end sentences")
    parse_command.add_argument("--cache", metavar="DIR",
                               help="record each tree in DIR as it is found, keyed by the model and the sentence: a "
                                    "rerun (or a run stopped midway, run again) parses only what DIR lacks "
                                    "(hf_slm/summarization/silver.py)")
    _add_beam_options(parse_command)
    _add_stop_option(parse_command)
    parse_command.set_defaults(function=command_parse)

    score_command = commands.add_parser(
        "score", help="per-word surprisals, end_surprisal, log p(x) and the best tree, as JSON lines with their units")
    _add_model_option(score_command, ensembles=True)
    score_command.add_argument("--bits", action="store_true", help="surprisals and log p(x) in bits (default nats)")
    score_command.add_argument("sentences", nargs="+", metavar="SENTENCE")
    _add_beam_options(score_command)
    _add_stop_option(score_command)
    score_command.set_defaults(function=command_score)

    generate = commands.add_parser("generate", help="generate trees, optionally continuing a prompt")
    _add_model_option(generate)
    generate.add_argument("--prompt", help="words to continue")
    choice = generate.add_mutually_exclusive_group()
    choice.add_argument("--num-beams", type=positive_int, help="word beam of beam search (default: --num-trees)")
    choice.add_argument("--top-k", type=non_negative_int,
                        help="sample every action among the top k legal ones (0: among all)")
    generate.add_argument("--num-trees", type=positive_int, default=1)
    generate.add_argument("--max-new-words", type=positive_int, default=20)
    generate.add_argument("--seed", type=non_negative_int)
    _add_beam_options(generate, sizes=False)
    generate.set_defaults(function=command_generate)

    evaluate = commands.add_parser("eval", help="evaluate a checkpoint: ppl, sg, blimp, rerank, parse, uas, rouge")
    evaluations = evaluate.add_subparsers(dest="evaluation", required=True)
    rerank_command = _add_eval_command(evaluations, "rerank", "bracketing F1 of the highest joint-probability proposal",
                                       command_eval_rerank, beam=False, ensembles=True)
    rerank_command.add_argument("--gold", required=True, help="gold trees (PTB brackets, file or .mrg folder)")
    rerank_command.add_argument("--proposals",
                                help="proposal trees: one per line, one blank-line separated block per sentence (or "
                                     "--proposal-parser)")
    add_proposal_parser_options(rerank_command)
    _add_autocast_option(rerank_command)
    _add_max_proposals_option(rerank_command)
    rerank_command.add_argument("--chunk-size", type=positive_int, default=2048,
                                help="proposals scored and journaled together (whole sentences; under torchrun, "
                                "what one process scores at a time)")
    parse_eval_command = _add_eval_command(evaluations, "parse", "bracketing F1 of beam-search parses (or of a proposal "
                                           "parser's best trees, --parser)", command_eval_parse, ensembles=True,
                                           or_parser=True)
    parse_eval_command.add_argument("--gold", required=True)
    ppl = _add_eval_command(evaluations, "ppl", "word perplexity (exact for models that score words exactly, an upper "
                            "bound for syntactic ones, an approximation for them at document level)", command_eval_ppl,
                            ensembles=True)
    ppl.add_argument("--data", required=True, help="trees (PTB brackets), one sentence per line, or a CoNLL-U file (its "
                     "sentences' FORM column)")
    ppl.add_argument("--proposals", help=PROPOSALS_HELP + "; one block per sentence of --data, in order. Default: the "
                     "beam")
    _add_max_proposals_option(ppl)
    add_proposal_parser_options(ppl)
    ppl.add_argument("--document-level", action="store_true",
                     help="documents separated by blank lines: each sentence after the greedy best trees of the ones "
                     "before it, an approximation for syntactic models (needs a document-level model)")
    blimp = _add_eval_command(evaluations, "blimp", "BLiMP accuracy per paradigm, field and overall", command_eval_blimp,
                             ensembles=True, limit_help="evaluate only the first N pairs of each paradigm (each .jsonl "
                                                        "file): --limit 20 on the 67 paradigms scores 1,340 pairs")
    blimp.add_argument("--data", required=True, help="a folder of BLiMP .jsonl files")
    blimp.add_argument("--proposals", help=PROPOSALS_HELP + "; two blocks per pair, the good sentence's then the bad "
                       "one's, in the order of the data (files by name), for every pair or for those evaluated. "
                       "Default: the beam")
    _add_max_proposals_option(blimp)
    add_proposal_parser_options(blimp)
    sg = _add_eval_command(evaluations, "sg", "SyntaxGym: per-suite accuracy, circuits, the 31-suite SG score, a plot",
                           command_eval_sg, ensembles=True)
    sg.add_argument("--suites", required=True, help="a folder of SyntaxGym suite JSON files (or one file)")
    sg.add_argument("--rule", default="first", choices=["first", "all", "mean"],
                    help="suites with several predictions: the first decides (default), all must hold, or their mean")
    uas = _add_eval_command(evaluations, "uas", "unlabeled attachment score of a dependency model's parses: the beam's "
                            "best tree, or the highest log p(x, y) proposal with --proposals (or of a proposal "
                            "parser's best trees, --parser, with LAS)", command_eval_uas, ensembles=True,
                            or_parser=True)
    uas.add_argument("--data", required=True, help="gold dependency trees: a CoNLL-U file (HEAD column filled)")
    uas.add_argument("--proposals", help="proposal trees per gold sentence, in gold order: a CoNLL-U file of several "
                     "analyses per sentence (grouped by # sent_id) or inline trees (one per line, blank-line separated "
                     "blocks); the beam options are then unused (see hf_slm/evaluation/attachment.py)")
    _add_max_proposals_option(uas)
    add_proposal_parser_options(uas)
    uas.add_argument("--include-punctuation", action="store_true",
                     help="score punctuation too (default: not scored: gold UPOS PUNCT, or without UPOS words made only "
                          "of Unicode punctuation characters)")
    add_summarization_commands(commands, evaluations, _add_eval_command)  # finetune, summarize, eval rouge
    add_card_command(commands)
    add_data_command(commands)
    add_publishing_commands(commands)
    add_parser_commands(commands)
    return parser


def refuse_empty_values(parser, args):
    """An option given an empty value is an argparse error naming it: above all a path from `"$(hf-slm data fetch
    NAME)"` whose fetch failed (it printed its own error and no folder), which the command would otherwise read as
    the current folder and fail on again, confusingly."""
    subparsers = [parser]
    while True:  # the parser of the chosen (sub)command
        choices = [action for action in subparsers[-1]._actions if isinstance(action, argparse._SubParsersAction)]
        chosen = getattr(args, choices[0].dest, None) if choices else None
        if chosen is None:
            break
        subparsers.append(choices[0].choices[chosen])
    for action in subparsers[-1]._actions:
        value = getattr(args, action.dest, None)
        if action.option_strings and (value == "" or isinstance(value, list) and "" in value):
            subparsers[-1].error(f"argument {action.option_strings[-1]}: an empty value; expected "
                                 f"{action.metavar or action.dest.upper()} (if it came from \"$(hf-slm data fetch "
                                 "NAME)\", that fetch failed: see its error above)")


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    refuse_empty_values(parser, args)
    # The words that chose the command ("eval ppl", "data prepare") name it in error lines.
    words = (args.command, getattr(args, "evaluation", None), getattr(args, "data_command", None),
             getattr(args, "parser_command", None))
    command = " ".join(word for word in words if word)
    with _autocast(args):
        return run_command(args.function, args, command)


if __name__ == "__main__":
    sys.exit(main())
