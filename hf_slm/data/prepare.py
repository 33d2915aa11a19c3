"""`hf-slm data prepare`: load a dataset, tokenize it and save it for `hf-slm train`.

The saved folder holds the `datasets.DatasetDict` (`save_to_disk`, with the loader's columns plus the id
columns), the tokenizer in `tokenizer/`, and `prepare.json` (loader, path, options, tokenizer, per-split
counts). What is tokenized:
- ptb, bllip (sentence level): `input_ids`, the unexpanded action ids of each tree (`<s>` + actions) as the
  tokenizer encodes it;
- bllip (document level): `input_ids`, `tokenizer.encode_document(trees)`, one sequence per document;
- xsum: `document_ids` and `summary_ids`, the ids of the whitespace-separated words of the document and the
  summary (`<s>` + word pieces, no trees; an empty text is `<s>` alone); with `summarization`, one
  document-level sequence per example instead, `input_ids` and `labels`: the document's silver trees, the
  prompt and the summary's trees (hf_slm/summarization/preparation.py);
- conllu: `input_ids`, the ids of the words (`<s>` + word pieces);
- text (`--parser DIR`): raw text, each sentence given the parser's best tree (hf_slm/parsers/silver_data.py: a
  proposal parser's or a language model's), written to `parsed/<split>.txt` (or `.conllu`) and then prepared as the
  ptb (or conllu) loader's trees;
- data of a family's own kind: what the family's preparation makes (below).

Trees are normalized once, by the loader, with the tokenizer's own normalization options (stored in its
config, and applied to every bracketed string it encodes later), so the saved ids are those the tokenizer
gives for the raw trees. The loaded trees are handed to the tokenizer as parsed trees, not strings: encoding
a normalized string would normalize it again, and "auto" POS detection takes a tree like (S (NP It) (VP
rained)), whose every word is an only child, for a POS-tagged one. Normalization options that differ from
the tokenizer's are an error (train the tokenizer with them instead).

Family preparations. A family whose data is not trees or words (the dependency families' CoNLL-U trees) names a
preparation hook in its record (`Family.preparation`; hf_slm/data/prepare_dependency.py). It runs when
`grammar` is one of the family's, or when the given tokenizer is the family's and the loader is the hook's. A
hook has `loader` (the loader of its data), `description` (its data in words), `options` (the names of the
prepare_dataset options it takes, e.g. vocab_size) and `record_key` (its entry in prepare.json), and
`create(loader, tokenizer, tokenizer_dir, grammar, **options)`, which checks them and returns the preparation
of this run: `loader_options(options)`, `journal_entry()` (what a tokenizer it trains depends on),
`trained_tokenizer(dataset, output, journal, log)` (when no tokenizer was given), `encode` (the datasets.map
function of a batch and the tokenizer), `id_columns` and `record(tokenizer)`.
"""

import datetime
import importlib.metadata
import json
from collections.abc import Mapping
from pathlib import Path

import pyarrow.compute as pc
from datasets import DatasetDict, load_from_disk

from ..families import data_preparations, families_of_tokenizer, family_for_grammar
from ..families.registry import resolve
from ..families.tree_formats import format_of_grammar
from ..runs.journal import LOCK_NAME, RunJournal, data_fingerprint, output_lock
from ..tokenization.trees import parse_tree
from . import load, loader_options
from .ptb import NORMALIZE_OPTIONS

TREE_LOADERS = ("ptb", "bllip")
PREPARE_RECORD = "prepare.json"
PREPARE_JOURNAL = "prepare.journal.jsonl"
TOKENIZER_FOLDER = "tokenizer"

# The summarization step parses with a trained model, a layer above data (hf_slm/summarization/): data reaches it
# by a "module:attribute" reference resolved when a summarization prepare runs, as a family record names its code.
SUMMARIZATION_PREPARATION = "hf_slm.summarization.preparation:SummarizationPreparation"
# Raw text parsed into training trees (`--loader text --parser DIR`), a layer above data too.
TEXT_LOADER = "text"
PARSED_TEXT = "hf_slm.parsers.silver_data:parse_text_files"

def load_syntactic_tokenizer(directory):
    """The hf_slm tokenizer saved in `directory`, loaded with the installed classes (no remote code).

    The class named in tokenizer_config.json must be one of hf_slm's: any other tokenizer (which
    AutoTokenizer would load just as well) is refused with an error naming it.
    """
    directory = Path(directory)
    config_path = directory / "tokenizer_config.json"
    if not config_path.is_file():
        state = "does not exist" if not directory.exists() else "has no tokenizer_config.json"
        raise ValueError(f"tokenizer directory {str(directory)!r} {state}; expected a saved hf_slm tokenizer")
    from ..auto import family_tokenizer_classes

    name = json.loads(config_path.read_text(encoding="utf-8")).get("tokenizer_class")
    classes = {cls.__name__: cls for cls in family_tokenizer_classes()}
    if name not in classes:
        raise ValueError(
            f"tokenizer {str(directory)!r} is a {name}; expected an hf_slm {' or '.join(classes)}"
        )
    return classes[name].from_pretrained(str(directory))


def locate_error(error, batch, position, what, unit="tree"):
    """`error` again, naming the example it happened in (by file and index, or document id)."""
    if "document_id" in batch:
        where = f"document {batch['document_id'][position]!r}"
    elif "file" in batch:
        where = f"{batch['file'][position]}, {unit} {batch['index'][position]}"
    else:
        where = f"example id {batch['id'][position]!r}"
    return ValueError(f"{where}: cannot encode its {what}: {error}")


def reads_unlabelled_trees(tokenizer):
    """Whether `tokenizer` encodes unlabelled trees only: its family's record says so (Family.unlabelled_trees),
    the family known by the tokenizer's class name (a checkpoint's own copy of the class too)."""
    return any(family.unlabelled_trees for family in families_of_tokenizer(tokenizer))


def trees_for_tokenizer(tokenizer, trees):
    """Labeled trees (read from tree files, normalized) as `tokenizer` encodes them: unlabelled for a tokenizer of
    unlabelled trees (its `unlabel`, which leaves the normalization alone for parsed trees), as they are otherwise."""
    return [tokenizer.unlabel(tree) for tree in trees] if reads_unlabelled_trees(tokenizer) else list(trees)


def encode_trees(batch, tokenizer):
    """input_ids of a batch of normalized one-line trees (parsed first, see the module docstring)."""
    trees = trees_for_tokenizer(tokenizer, [parse_tree(tree) for tree in batch["tree"]])
    try:
        encoded = tokenizer(trees)
        # The tokenizer's per-action fields (paper 003's Nb-Up: each `)`'s start) travel with the ids: the model
        # cannot read them without.
        return {name: encoded[name] for name in ("input_ids", *tokenizer.action_input_fields)}
    except ValueError:
        for position, tree in enumerate(trees):  # find the example to blame
            try:
                tokenizer(tree)
            except ValueError as error:
                raise locate_error(error, batch, position, "tree") from error
        raise


def encode_documents(batch, tokenizer):
    """input_ids of a batch of documents: each document's trees after one `<s>` (and the tokenizer's per-action
    fields)."""
    columns = {}
    for position, trees in enumerate(batch["trees"]):
        try:
            encoded = tokenizer.encode_document(trees_for_tokenizer(tokenizer, [parse_tree(tree) for tree in trees]))
        except ValueError as error:
            raise locate_error(error, batch, position, "trees") from error
        for name in ("input_ids", *tokenizer.action_input_fields):
            columns.setdefault(name, []).append(encoded[name])
    return columns


def _encode_word_lists(tokenizer, word_lists, batch, what):
    ids = []
    for position, words in enumerate(word_lists):
        if not words:
            ids.append([tokenizer.bos_token_id])
            continue
        try:
            ids.append(tokenizer(words, is_split_into_words=True)["input_ids"])
        except ValueError as error:
            raise locate_error(error, batch, position, what, unit="sentence") from error
    return ids


def encode_xsum(batch, tokenizer):
    """document_ids and summary_ids: the ids of the whitespace-separated words of each text."""
    return {
        "document_ids": _encode_word_lists(tokenizer, [text.split() for text in batch["document"]], batch, "document"),
        "summary_ids": _encode_word_lists(tokenizer, [text.split() for text in batch["summary"]], batch, "summary"),
    }


def encode_words(batch, tokenizer):
    """input_ids of each sentence's words (CoNLL-U)."""
    return {"input_ids": _encode_word_lists(tokenizer, batch["words"], batch, "words")}


def _encoder(loader, document_level, preparation=None):
    if preparation is not None:
        return preparation.encode, list(preparation.id_columns)
    if loader in TREE_LOADERS:
        return (encode_documents if document_level else encode_trees), ["input_ids"]
    if loader == "xsum":
        return encode_xsum, ["document_ids", "summary_ids"]
    return encode_words, ["input_ids"]


def _loader_arguments(loader, tokenizer, document_level, options):
    """The keyword arguments of the loader: `options` checked, normalization taken from the tokenizer."""
    given = {name: value for name, value in options.items() if name in NORMALIZE_OPTIONS}
    if loader not in TREE_LOADERS:
        if given:
            raise ValueError(
                f"tree normalization options {sorted(given)} apply to the tree loaders {list(TREE_LOADERS)}, "
                f"not to {loader!r}"
            )
        if document_level:
            raise ValueError(f"document_level applies to the bllip loader, not to {loader!r}")
        return dict(options)
    differing = {name: value for name, value in given.items() if tokenizer.normalization.get(name) != value}
    if differing:
        stored = {name: tokenizer.normalization.get(name) for name in differing}
        raise ValueError(
            f"normalization {differing} differs from the tokenizer's {stored}: the tokenizer applies its own options "
            "to every tree it encodes later, so the prepared trees must match them; leave the options out, or train "
            "a tokenizer with them (SyntacticTokenizer.train(trees, ..., **options) stores them)"
        )
    arguments = {**options, **tokenizer.normalization}
    if document_level:
        if loader != "bllip":
            raise ValueError(f"document_level applies to the bllip loader, not to {loader!r}")
        arguments["document_level"] = True
    return arguments


def _jsonable(value):
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def id_count(dataset, column):
    """The total number of ids in a list column (computed in Arrow, without Python lists)."""
    lengths = pc.list_value_length(dataset.data.column(column))
    return int(pc.sum(lengths).as_py() or 0)


def format_summary(record):
    """The per-split table printed at the end of `hf-slm data prepare`."""
    columns = record["id_columns"]
    lines = [f"{'split':<12} {'examples':>10}" + "".join(f" {column:>14}" for column in columns)]
    for split, counts in record["splits"].items():
        lines.append(f"{split:<12} {counts['examples']:>10,}" + "".join(f" {counts['ids'][c]:>14,}" for c in columns))
    return "\n".join(lines)


def holds_trees(record):
    """Whether a prepare.json record describes ids of trees (a tree loader's, a family preparation's, or
    summarization sequences), which syntactic models train on."""
    keys = ["summarization"] + [hook.record_key for hook in data_preparations()]
    return record.get("loader") in TREE_LOADERS or any(record.get(key) for key in keys)


def _flags(names):
    return ", ".join(f"--{name.replace('_', '-')}" for name in names)


def family_preparation(loader, tokenizer, tokenizer_dir, grammar, options):
    """The preparation of a family's own data (module docstring, "Family preparations"), or None for trees or
    words. The hooks' options are taken out of `options`; errors name the option or grammar that does not fit."""
    hooks = data_preparations()
    names = [name for hook in hooks for name in hook.options]
    given = {name: options.pop(name) for name in names if name in options}
    given = {name: value for name, value in given.items() if value is not None}
    if grammar is not None:
        hook = family_for_grammar(grammar).preparation  # an unknown grammar: the error lists them
        if hook is None:
            readers = [name for grammars in hooks.values() for name in grammars]
            raise ValueError(f"--grammar {grammar}: prepare encodes the trees of the grammars whose data is prepared "
                             f"for them ({', '.join(readers)}); {grammar} reads "
                             f"{format_of_grammar(grammar).description} (prepare them with the tokenizer --tokenizer "
                             "names)")
        return hook.create(loader, tokenizer, tokenizer_dir, grammar, **_taken(hook, given))
    own = [family.preparation for family in families_of_tokenizer(tokenizer) if family.preparation is not None] \
        if tokenizer is not None else []
    if own and own[0].loader == loader:
        return own[0].create(loader, tokenizer, tokenizer_dir, None, **_taken(own[0], given))
    if given:
        wanted = "; ".join(f"{hook.description} (--loader {hook.loader} --grammar {'|'.join(grammars)})"
                           for hook, grammars in hooks.items() if set(given) & set(hook.options))
        raise ValueError(f"{_flags(given)} apply to {wanted}")
    if tokenizer is None:
        waiting = [(hook, grammars) for hook, grammars in hooks.items() if hook.loader == loader]
        if waiting:
            raise ValueError(f"--loader {loader} without --tokenizer: pass --grammar "
                             f"({', '.join(name for _, grammars in waiting for name in grammars)}) to train a tokenizer "
                             "on the training split, or --tokenizer")
        trained = ", ".join(f"{hook.description} (--grammar {'|'.join(grammars)})" for hook, grammars in hooks.items())
        raise ValueError(f"the {loader} loader needs --tokenizer (only --grammar trains a tokenizer, for {trained})")
    return None


def _taken(hook, given):
    """The options `hook` takes of `given`; another hook's option is an error naming it."""
    foreign = sorted(set(given) - set(hook.options))
    if foreign:
        raise ValueError(f"{_flags(foreign)} do not apply to {hook.description}")
    return given


def prepare_dataset(loader, path, tokenizer_dir, output, num_proc=None, document_level=False, overwrite=False,
                    log=print, grammar=None, summarization=None, parser=None, parser_beam_options=None, silver_trees=None,
                    **options):
    """Load `path` with `loader`, tokenize it and save it to `output` (see the module docstring).

    Args:
        loader: a name of hf_slm.data.LOADERS ("ptb", "bllip", "xsum", "conllu").
        path: the loader's path (a folder, a file or a mapping {split: files}).
        tokenizer_dir: a saved hf_slm tokenizer; None (a family preparation only): train one on the train split.
        output: the folder to write; it must be new or empty unless `overwrite`, or hold the journal of an
            interrupted prepare of the same data, tokenizer and options, which is resumed: each split is saved
            (`<output>/<split>/`) and journaled (`prepare.journal.jsonl`) as soon as it is tokenized, and a rerun
            loads the finished splits instead of tokenizing them again. The folder is locked while it is written.
        num_proc: processes for tokenizing (datasets.map) and saving.
        document_level: one example per document (bllip).
        overwrite: replace the contents of a non-empty `output` (an interrupted prepare is started over).
        log: where the summary goes (print by default).
        grammar: a grammar whose family prepares its own data (module docstring, "Family preparations"; e.g. a
            dependency grammar's conllu data); the family's preparation options (vocab_size, ...) are among
            `options`.
        summarization, parser, parser_beam_options: xsum data as summarization sequences
            (hf_slm/summarization/preparation.py): `summarization` True or a dict of SummarizationFormat fields (prompt,
            max_document_words, max_summary_words, truncate_summaries, labels); `parser` the checkpoint folder of
            the silver trees, searched with `parser_beam_options` (BeamSearchOptions fields).
        silver_trees: instead of `parser`, a file of the user's own trees, one per sentence, matched to the sentences by
            their words (hf_slm/summarization/given_trees.py).
        options: the loader's options (splits, boundaries, split_file, cache_dir, tree normalization,
            non_projective) and a family preparation's.
    Returns the saved DatasetDict.
    """
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise ValueError(f"output {str(output)!r} is a file; expected a folder to write the dataset into")
    # A summarization or text prepare interrupted while parsing its first split left only its silver-tree cache.
    resumable = (output / PREPARE_JOURNAL).is_file() or bool((summarization or loader == TEXT_LOADER)
                                                             and (output / "silver").is_dir())
    if output.exists() and any(p.name != LOCK_NAME for p in output.iterdir()) and not overwrite and not resumable:
        raise ValueError(f"output {str(output)!r} is not empty; choose another folder or overwrite it")
    if num_proc is not None and (not isinstance(num_proc, int) or num_proc < 1):
        raise ValueError(f"num_proc {num_proc!r}: expected a positive number of processes")
    parsed_from = None  # raw text parsed into trees: what the record says of it
    if loader == TEXT_LOADER:
        parsed_from = {"text": _jsonable(path if isinstance(path, Mapping) else str(path)), "parser": str(parser)}
        loader, path, parser = _parsed_text(path, parser, tokenizer_dir, grammar, output, options, log)
        if loader is None:
            return None
    tokenizer = load_syntactic_tokenizer(tokenizer_dir) if tokenizer_dir is not None else None
    options = dict(options)
    preparation = family_preparation(loader, tokenizer, tokenizer_dir, grammar, options)
    if preparation is not None:
        options = preparation.loader_options(options)
    arguments = _loader_arguments(loader, tokenizer, document_level, options)
    summarizer = None
    if summarization:  # checked (the parser loaded and matched to the tokenizer) before the data is read
        summarizer = resolve(SUMMARIZATION_PREPARATION).create(loader, tokenizer, summarization, parser,
                                                               parser_beam_options, silver_trees=silver_trees)
    elif parser is not None or silver_trees is not None:
        raise ValueError(f"{'a parser model' if parser is not None else 'silver trees'} apply to summarization data "
                         "(--summarization)" + (", or to raw text (--loader text)" if parser is not None else ""))
    with output_lock(output, log=log):
        # The tree loaders read large files with num_proc processes too; the prepared data does not depend on it.
        reading = {"num_proc": num_proc} if num_proc and "num_proc" in loader_options(loader) else {}
        dataset = load(loader, path, **arguments, **reading)
        # What the saved splits depend on; the data by its files' names, sizes and times (BLLIP is gigabytes).
        header = {"run": "prepare", "loader": loader, "document_level": bool(document_level),
                  "data": data_fingerprint(_jsonable(path), contents=False),
                  "tokenizer": data_fingerprint(tokenizer_dir) if tokenizer is not None else preparation.journal_entry(),
                  "options": _jsonable({k: v for k, v in arguments.items() if k != "cache_dir"})}
        if summarizer is not None:
            header["summarization"] = summarizer.journal_entry()
        journal = RunJournal(output / PREPARE_JOURNAL, header, overwrite=overwrite, log=log)
        try:
            if tokenizer is None:
                tokenizer = preparation.trained_tokenizer(dataset, output, journal, log)
            return _tokenize_and_save(loader, path, tokenizer_dir, output, num_proc, document_level, log, tokenizer,
                                      arguments, dataset, journal, preparation, summarizer, parsed_from)
        finally:
            journal.close()


def _parsed_text(path, parser, tokenizer_dir, grammar, output, options, log):
    """(the loader of the parsed trees, their files {split: [file]}, None): `--loader text --parser DIR` parses the
    text files into tree files (hf_slm/parsers/silver_data.py), which the ptb or conllu loader then reads. Without a
    tokenizer or grammar to encode them, it stops there: (None, None, None), the tree files written."""
    if parser is None:
        raise ValueError("--loader text reads raw text: give --parser (a proposal parser or a model of trees) whose best "
                         "trees the sentences get")
    line_breaks = not options.pop("join_lines", False)
    with output_lock(output, log=log):
        files, tree_kind = resolve(PARSED_TEXT)(path, parser, output, line_breaks=line_breaks, log=log)
    if tokenizer_dir is None and grammar is None:
        first = next(iter(files.values()))[0]
        log(f"the trees are in {Path(output) / 'parsed'}: train on them (hf-slm train --preset ... --train {first}), "
            "or give --tokenizer (or --grammar for dependency trees) to tokenize them here")
        return None, None, None
    return ("conllu" if tree_kind == "dependency" else "ptb"), files, None


def _tokenize_and_save(loader, path, tokenizer_dir, output, num_proc, document_level, log, tokenizer, arguments,
                       dataset, journal, preparation=None, summarizer=None, parsed_from=None):
    """The work of `prepare_dataset` once `output` is locked: each split tokenized, saved and journaled (or
    loaded, when an earlier run finished it), then the tokenizer and the record."""
    encode, id_columns = _encoder(loader, document_level, preparation)
    if summarizer is not None:
        id_columns = ["input_ids", "labels"]
        document_level = True  # several trees in one sequence: training makes a document-level model
    journal.say_resumed(list(dataset), "split")
    encoded = {}
    for split, data in dataset.items():
        if split in journal.finished and (output / split).is_dir():
            encoded[split] = load_from_disk(str(output / split))
            continue
        try:
            if summarizer is not None:
                encoded[split] = summarizer.encode_split(split, data, tokenizer, output, log)
            else:
                encoded[split] = data.map(encode, batched=True, num_proc=num_proc, fn_kwargs={"tokenizer": tokenizer},
                                          desc=f"tokenizing {split}")
        except ValueError as error:
            raise ValueError(f"split {split!r}: {error}") from error
        encoded[split].save_to_disk(str(output / split), num_proc=num_proc)
        journal.record([(split, {"examples": len(encoded[split])})])
    encoded = DatasetDict(encoded)
    # What DatasetDict.save_to_disk writes beside its splits, which were saved one by one above.
    (output / "dataset_dict.json").write_text(json.dumps({"splits": list(encoded)}), encoding="utf-8")
    tokenizer.save_pretrained(str(output / TOKENIZER_FOLDER))

    recorded_options = {name: value for name, value in arguments.items() if name in loader_options(loader)
                        and name not in ("cache_dir", "document_level")}
    record = {
        "loader": loader,
        "path": _jsonable(path if isinstance(path, Mapping) else str(path)),
        "options": _jsonable(recorded_options),
        "document_level": bool(document_level),
        "tokenizer": {
            "source": str(tokenizer_dir) if tokenizer_dir is not None else "trained on the train split",
            "class": type(tokenizer).__name__,
            "vocab_size": len(tokenizer),
            "linearization": tokenizer.linearization,
        },
        **({} if preparation is None else {preparation.record_key: preparation.record(tokenizer)}),
        "summarization": summarizer.record() if summarizer is not None else None,
        # raw text whose sentences got a parser's best trees (`--loader text --parser`), read back by `loader`
        **({"parsed_from": parsed_from} if parsed_from is not None else {}),
        "id_columns": id_columns,
        "splits": {
            split: {"examples": len(data), "ids": {column: id_count(data, column) for column in id_columns}}
            for split, data in encoded.items()
        },
        "hf_slm_version": importlib.metadata.version("hf-slm"),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    (output / PREPARE_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    log(format_summary(record))
    log(f"saved to {output} (tokenizer in {output / TOKENIZER_FOLDER}, record in {output / PREPARE_RECORD})")
    return encoded
