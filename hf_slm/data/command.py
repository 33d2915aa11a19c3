"""`hf-slm data prepare`: the command line of hf_slm.data.prepare.

    hf-slm data prepare --loader ptb --path treebank/combined --splits train=00,validation=01 \
        --tokenizer my-tokenizer --output prepared/ptb
    hf-slm train --preset tg-ptb --train prepared/ptb --output runs/tg
    hf-slm data prepare --loader conllu --grammar dtg --path ud_english_ewt --non-projective lift \
        --vocab-size 2000 --output prepared/ewt-dtg
    hf-slm train --preset dtg-tiny --train prepared/ewt-dtg --output runs/dtg
    hf-slm data prepare --loader xsum --summarization --parser runs/tg --tokenizer runs/tg --path xsum \
        --output prepared/xsum-tg
    hf-slm finetune --task xsum --model runs/tg --train prepared/xsum-tg --output runs/tg-xsum
    hf-slm data prepare --loader text --parser runs/crf --path raw.txt --tokenizer runs/tg --output prepared/silver

`--splits` is `split=item[+item...]` joined by commas, or a JSON object. For ptb the items are WSJ sections
(`02-21`), file numbers (`0001-0159`) or file names and globs (see hf_slm/data/ptb.py); for the other
loaders they are files, relative to --path when --path is a folder, e.g. `--splits train=a.txt,test=b.txt`.
`--boundaries` (bllip, document level) is a file, a folder, or `split=file` pairs in the same spelling.
`--grammar` names a grammar whose family prepares its own data (hf_slm/data/prepare.py, "Family preparations";
the dependency grammars' conllu data: each tree as the grammar's transition sequence, with a tokenizer trained on
the train split unless `--tokenizer` names one); those preparations add their own options.
`hf-slm data fetch NAME` downloads a public dataset (UD English EWT, SyntaxGym, BLiMP, GUM) from its official
source into a cache, checked against pinned SHA-256 checksums, and prints the folder to read (hf_slm/data/fetch.py).

This module (and hf_slm.data) imports the data machinery only when the command runs, to keep `hf-slm` quick to start.
"""

import json
from pathlib import Path

from ..option_types import positive_int

LOADER_NAMES = "ptb, bllip, xsum, conllu, or text (raw text parsed with --parser)"


def parse_split_spec(text, option="--splits"):
    """`train=02-21,validation=22` -> {"train": ["02-21"], "validation": ["22"]}; JSON objects as they are."""
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{option} {text!r}: not a JSON object ({error.msg})") from None
        if not isinstance(spec, dict) or not spec:
            raise ValueError(f"{option} {text!r}: expected a non-empty JSON object {{split: items}}")
        return spec
    spec = {}
    for part in text.split(","):
        split, equals, items = part.partition("=")
        split, items = split.strip(), [item.strip() for item in items.split("+") if item.strip()]
        if not equals or not split or not items:
            raise ValueError(
                f"{option} {text!r}: expected split=item[+item...] separated by commas, e.g. "
                f"train=02-21,validation=22,test=23; the part {part!r} is not"
            )
        if split in spec:
            raise ValueError(f"{option} {text!r}: split {split!r} is given twice")
        spec[split] = items
    return spec


def _files_under(base, spec):
    """{split: [files]} with relative names resolved against the folder `base`."""
    base = Path(base)
    folder = base if base.is_dir() else base.parent
    return {split: [str(folder / item) if not Path(item).is_absolute() else item for item in items]
            for split, items in spec.items()}


def _normalization_flags(args):
    # Only the flags given on the command line: the rest come from the tokenizer (see prepare.py).
    flags = {"strip_traces": args.strip_traces, "strip_function_tags": args.strip_function_tags,
             "binarize": args.binarize, "remove_unary": args.remove_unary}
    return {name: value for name, value in flags.items() if value is not None}


SUMMARIZATION_FLAGS = ("prompt", "max_document_words", "max_summary_words", "truncate_summaries", "labels")


def _summarization_options(args):
    """(SummarizationFormat fields or None, the parser's beam options) of --summarization and its flags."""
    given = {name: getattr(args, name) for name in SUMMARIZATION_FLAGS if getattr(args, name) not in (None, False)}
    beam = {name: getattr(args, name) for name in ("beam_size", "word_beam_size") if getattr(args, name) is not None}
    if not args.summarization:
        used = [f"--{name.replace('_', '-')}" for name in [*given, *beam]]
        if used:
            raise ValueError(f"{', '.join(used)} apply to --summarization (xsum)")
        return None, None
    return given or True, beam


def command_data_prepare(args):
    from .prepare import prepare_dataset

    path, options = args.path, _normalization_flags(args)
    if args.splits:
        spec = parse_split_spec(args.splits)
        if args.loader == "ptb":
            options["splits"] = spec
        else:
            path = _files_under(args.path, spec)
    if args.boundaries:
        boundaries = args.boundaries
        if "=" in boundaries or boundaries.strip().startswith("{"):
            boundaries = {split: files[0] if isinstance(files, list) and len(files) == 1 else files
                          for split, files in parse_split_spec(boundaries, "--boundaries").items()}
        options["boundaries"] = boundaries
    if args.split_file:
        options["split_file"] = args.split_file
    if args.cache_dir:
        options["cache_dir"] = args.cache_dir
    if args.non_projective:
        options["non_projective"] = args.non_projective
    if args.join_lines:
        if args.loader != "text":
            raise ValueError("--join-lines applies to --loader text (raw text)")
        options["join_lines"] = True
    summarization, parser_beam_options = _summarization_options(args)
    for name in _preparation_options():  # a family preparation's options (vocab_size, ...)
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    prepare_dataset(args.loader, path, args.tokenizer, args.output, num_proc=args.num_proc,
                    document_level=args.document_level, overwrite=args.overwrite, grammar=args.grammar,
                    summarization=summarization, parser=args.parser, parser_beam_options=parser_beam_options,
                    silver_trees=args.silver_trees, **options)
    return 0


def command_data_fetch(args):
    from .fetch import available_sources, describe_sources, fetch_dataset

    if args.list:
        print("\n".join(describe_sources()))
        return 0
    if not args.names:
        raise ValueError(f"name a dataset to fetch ({', '.join(available_sources())}) or give --list")
    for name in args.names:
        # Only the folder goes to stdout (progress is on stderr), so that `$(hf-slm data fetch NAME)` is the path.
        print(fetch_dataset(name, cache_dir=args.cache_dir, progress=not args.quiet))
    return 0


def add_fetch_command(actions):
    fetch = actions.add_parser(
        "fetch", help="download a public dataset (ud-english-ewt, syntaxgym, blimp, gum-const) into a cache",
        description="Download a dataset from its official source, pinned to a fixed commit, into "
        "$HF_SLM_DATA_CACHE/NAME (default ~/.cache/hf-slm/data/NAME), check every file's SHA-256 checksum, and "
        "print the folder to pass to a command (SyntaxGym's suites, BLiMP's data, the CoNLL-U files). A file "
        "already in the cache with the right checksum is not downloaded again. $HF_SLM_DATA_MIRROR=URL "
        "downloads URL/NAME/PATH instead (a mirror), checked the same way.",
    )
    fetch.add_argument("names", nargs="*", metavar="NAME", help="the datasets (hf-slm data fetch --list)")
    fetch.add_argument("--list", action="store_true", help="say what each dataset is, its license and size")
    fetch.add_argument("--cache-dir", metavar="DIR",
                       help="the cache folder (default: $HF_SLM_DATA_CACHE or ~/.cache/hf-slm/data)")
    fetch.add_argument("--quiet", action="store_true", help="no progress bar")
    fetch.set_defaults(function=command_data_fetch)


def _preparation_hooks():
    """{data preparation hook: the grammars it prepares for} (light to import: the records name their classes)."""
    from ..families import data_preparations

    return data_preparations()


def _preparation_options():
    return [name for hook in _preparation_hooks() for name in hook.options]


def add_data_command(commands):
    """Add `data fetch` and `data prepare` to the `hf-slm` subcommands (an argparse subparsers object)."""
    data = commands.add_parser("data", help="prepare datasets (PTB, BLLIP, XSum, CoNLL-U) for training; fetch public "
                               "ones (UD English EWT, SyntaxGym, BLiMP, GUM)")
    actions = data.add_subparsers(dest="data_command", required=True)
    add_fetch_command(actions)
    prepare = actions.add_parser(
        "prepare", help="load, tokenize and save a dataset that `hf-slm train --train DIR` reads",
        description="Load a dataset with one of hf_slm.data's loaders, tokenize it with a saved hf_slm tokenizer "
        "(datasets.map) and save it with save_to_disk, the tokenizer and prepare.json beside it. Trees are "
        "normalized with the tokenizer's own options (stored in its config); a normalization flag that contradicts "
        "them is an error.",
    )
    prepare.add_argument("--loader", required=True, help=f"the dataset format: {LOADER_NAMES}")
    prepare.add_argument("--path", required=True, help="the data: a folder or a file (see --splits for others)")
    prepare.add_argument("--tokenizer", help="a saved hf_slm tokenizer directory (required but with --grammar, which "
                         "trains the grammar's tokenizer on the train split when it is left out)")
    prepare.add_argument("--output", required=True,
                         help="the folder to write (new or empty); each split is saved and journaled "
                              "(prepare.journal.jsonl) as it is done, so the same command after an interruption "
                              "resumes; the folder is locked (.hf-slm.lock) while it is written")
    prepare.add_argument("--num-proc", type=positive_int,
                         help="processes for reading tree files (one-tree-per-line files of "
                         "several MiB are cut into byte ranges), tokenizing and saving; the output does not depend "
                         "on it. Inputs are streamed to disk (datasets' Arrow cache), never held in memory whole")
    prepare.add_argument("--splits", metavar="SPEC",
                         help="split=item[+item],... (ptb: sections 02-21, file numbers 0001-0159, file names or "
                              "globs; other loaders: files) or a JSON object")
    prepare.add_argument("--document-level", action="store_true", help="one example per document (bllip)")
    prepare.add_argument("--boundaries", metavar="PATH_OR_SPEC",
                         help="bllip document boundaries: a file, a folder, or split=file pairs")
    prepare.add_argument("--split-file", help="xsum: the split JSON of the original release")
    prepare.add_argument("--cache-dir", help="datasets' cache folder for the loaded data")
    # Data of a family's own kind; the grammar is checked when the command runs, so that building the parser
    # imports no grammar code.
    hooks = _preparation_hooks()
    prepare.add_argument("--grammar", metavar="GRAMMAR",
                         help="for data that a grammar's family prepares itself ("
                              + "; ".join(f"{hook.description}: --loader {hook.loader}, grammars {', '.join(grammars)}"
                                          for hook, grammars in hooks.items())
                              + "): encode it as the grammar reads it, with a tokenizer trained on the train split "
                                "unless --tokenizer names one (default: the grammar the --tokenizer implies)")
    prepare.add_argument("--non-projective", choices=["keep", "error", "skip", "lift"],
                         help="conllu: what to do with a non-projective tree (default: keep; a grammar's preparation "
                              "may ask for another, as the dependency grammars' transition systems, which build "
                              "projective trees only, ask for error)")
    for hook in hooks:
        hook.add_arguments(prepare)
    prepare.add_argument("--overwrite", action="store_true",
                         help="write into a non-empty --output, starting over (also when an interrupted prepare "
                              "there was of other data, tokenizer or options)")
    # Summarization sequences (xsum): hf_slm/summarization/preparation.py and hf_slm/summarization/summaries.py.
    prepare.add_argument("--summarization", action="store_true",
                         help="xsum: one sequence per example for `hf-slm finetune`: the document's silver trees (cut "
                              "to --max-document-words at a sentence boundary), the prompt, the summary's trees; "
                              "input_ids and labels (only the summary's by default)")
    prepare.add_argument("--parser", metavar="MODEL",
                         help="--summarization, or --loader text: the checkpoint whose best trees the texts get, a "
                              "proposal parser (hf-slm parser train) or a language model of trees (cached in "
                              "OUTPUT/silver/, so an interrupted prepare resumes); not needed for a words-only "
                              "tokenizer")
    prepare.add_argument("--join-lines", action="store_true",
                         help="--loader text: the text is wrapped, only blank lines and punctuation end sentences "
                              "(default: every line break ends one)")
    prepare.add_argument("--silver-trees", metavar="FILE",
                         help="--summarization: instead of --parser, your own parses (e.g. paper 003's CRF parser's): "
                              "one bracketed tree per line, each sentence of the documents and summaries taking the "
                              "tree whose words are its words (PTB-style, as hf_slm/data/sentence_splitting.py splits "
                              "them); a sentence without one is an error naming it")
    prepare.add_argument("--prompt", help="--summarization: the prompt tree (default '(NP Summary :)')")
    prepare.add_argument("--max-document-words", type=positive_int, help="--summarization: default 600")
    prepare.add_argument("--max-summary-words", type=positive_int,
                         help="--summarization: default 70; a longer summary is an "
                         "error naming its document unless --truncate-summaries")
    prepare.add_argument("--truncate-summaries", action="store_true",
                         help="--summarization: cut longer summaries (counted in the output) instead of stopping")
    prepare.add_argument("--labels", choices=["summary", "all"],
                         help="--summarization: train on the summary's actions (default) or on the whole sequence")
    prepare.add_argument("--beam-size", type=positive_int,
                         help="--summarization: the parser's action beam (default 100)")
    prepare.add_argument("--word-beam-size", type=positive_int,
                         help="--summarization: the parser's word beam (default 10)")
    # Tree normalization: by default the tokenizer's own options; a flag that contradicts them is an error.
    prepare.add_argument("--keep-traces", dest="strip_traces", action="store_false", default=None,
                         help="keep -NONE- traces")
    prepare.add_argument("--strip-function-tags", action="store_true", default=None, help="NP-SBJ-1 -> NP")
    prepare.add_argument("--binarize", action="store_true", default=None, help="left binarization (nltk CNF)")
    prepare.add_argument("--remove-unary", action="store_true", default=None, help="remove unary chains")
    prepare.set_defaults(function=command_data_prepare)
    return data
