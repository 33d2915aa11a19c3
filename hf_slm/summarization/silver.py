"""Silver trees: raw documents -> sentences -> PTB-style words -> the best tree of a trained model, cached.

Paper 003 (section 3.3) fine-tunes on XSum with "the linearization of the sentences in the document and their
corresponding silver parse trees". Here the trees come from our own models: each sentence is parsed with the
word-synchronous beam search (`hf_slm.parse`), so a constituency model gives bracketed trees and a dependency
model (DTG, TXL (trans)) inline dependency trees (`There/2 is/0 a/4 difference/2`). Sentences and words:
hf_slm/data/sentence_splitting.py.

Cache (`cache_dir`): parsing XSum takes hours, so every parsed sentence is recorded on disk as soon as its
chunk is done, keyed by the model and the sentence. The record is a journal of hf_slm/runs/journal.py,
`<cache_dir>/silver-<hash>.journal.jsonl`: its header says what parses (the model's weights
(`model_fingerprint`), the tokenizer's vocabulary and the beam options that change trees: the Scorer's
`tree_settings`), `<hash>` is the
sha256 of that header, so another model or other options get another file; each later line is one sentence
(`key`: its words joined by spaces) with its tree or why it cannot be parsed. A rerun (the same documents or
others) parses only the sentences the file lacks: an interrupted run resumes, and a sentence that recurs
(XSum's boilerplate lines) is parsed once. The folder is locked while a run writes it (`output_lock`).
Batching is taken as speed-only, as the evaluations take it: a cached tree is the one found when its sentence
was first parsed, whatever batch it was in. A sentence that cannot be parsed (hf_slm.search.beam.check_sentences:
too long for the model ...) is recorded with its reason, which names where it was first met.
"""

import contextlib
import hashlib
import json
import warnings
from pathlib import Path

from ..data.numbering import sentence_name
from ..search.beam import ON_ERROR, SentenceResults, SentencesLeftOut, sentence_words, warn_left_out
from ..runs.journal import RunJournal, map_in_chunks, model_fingerprint, output_lock
from ..search.scorers import scorer_of
from ..data.sentence_splitting import line_number, sentence_spans, treebank_words


def document_sentences(text, line_breaks=True):
    """(words, start offset) of each sentence of `text` that has words (hf_slm/data/sentence_splitting.py)."""
    found = []
    for start, end in sentence_spans(text, line_breaks):
        words = treebank_words(text[start:end])
        if words:
            found.append((words, start))
    return found


def cache_header(model, tokenizer, beam_options=None, scorer=None):
    """What a cached tree depends on: the model's weights, the tokenizer's vocabulary, the scorer's tree settings
    (a search's beam options; `scorer` default: the model's family's, with `beam_options`)."""
    scorer = scorer_of(model, tokenizer, scorer, **(beam_options or {}))
    return {"run": "silver trees", "model": model_fingerprint(model),
            "tokenizer": getattr(tokenizer, "vocabulary_fingerprint", None), "beam": scorer.tree_settings()}


def cache_path(cache_dir, header):
    """`<cache_dir>/silver-<first 16 hex digits of the header's sha256>.journal.jsonl`."""
    digest = hashlib.sha256(json.dumps(header, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"silver-{digest}.journal.jsonl"


def _parse_chunk(scorer, keys, words, names, batch_size, on_error, progress):
    """{"tree"} or {"tree": None, "error"} per sentence of a chunk (`keys` index `words` and `names`); `progress`:
    the search's own bar (its steps) under the bar over sentences."""
    trees = scorer.parse([words[key] for key in keys], batch_size=batch_size, progress=progress,
                         sources=[names[key] for key in keys], on_error=on_error)
    errors = {entry["index"]: entry["error"] for entry in trees.left_out}
    return [{"tree": tree} if tree is not None else {"tree": None, "error": errors[index]}
            for index, tree in enumerate(trees)]


def _trees_by_sentence(scorer, words, names, cache_dir, header, batch_size, progress, on_error, overwrite, log,
                       desc="silver trees"):
    """{sentence key: {"tree"} or {"tree": None, "error"}} of every distinct sentence (`words` and `names` map
    keys to words and sources): read from the cache when it holds them, else parsed and recorded."""
    lock = output_lock(cache_dir) if cache_dir is not None else contextlib.nullcontext()
    with lock:
        journal = None if cache_dir is None else RunJournal(cache_path(cache_dir, header), header, overwrite=overwrite,
                                                            **({"log": log} if log else {}))
        try:
            cached = journal.finished if journal is not None else {}
            # Similar lengths share a batch: a batch searches until its longest sentence is done.
            pending = sorted((key for key in words if key not in cached), key=lambda key: len(words[key]))
            if journal is not None and len(pending) < len(words):
                journal.log(f"{journal.path}: {len(words) - len(pending)} of {len(words)} distinct sentences parsed "
                            "before, read from the cache")
            if on_error == "raise":  # stop before any search, as hf_slm.parse does
                scorer.check_sentences([words[key] for key in pending], [names[key] for key in pending],
                                       on_error="raise")

            def parse_chunk(chunk):
                return _parse_chunk(scorer, chunk, words, names, batch_size, on_error, progress)

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=SentencesLeftOut)  # said once by the caller
                values = map_in_chunks(parse_chunk, pending, batch_size, journal, keys=pending, progress=progress,
                                       desc=desc, unit="sentence")
        finally:
            if journal is not None:
                journal.close()
    return {**{key: cached[key] for key in words if key in cached}, **dict(zip(pending, values))}


def parse_sentences(model, tokenizer, sentences, sources=None, cache_dir=None, batch_size=8, progress=True,
                    on_error="skip", overwrite=False, log=None, scorer=None, desc="silver trees", **beam_options):
    """The best tree of each sentence, parsed once per model and sentence when `cache_dir` is given.

    Args:
        sentences: lists of words (or strings, split on whitespace).
        sources: per sentence, how messages name it (e.g. "news.txt, line 4"); default "sentence i" (from 1).
        cache_dir: the folder of the cache (module docstring); None parses everything and records nothing.
        batch_size: sentences per beam-search batch; also the sentences recorded at a time.
        progress: a progress bar over the sentences still to parse, labelled `desc` ("parsing" for `hf-slm parse`).
        on_error: "skip" leaves out a sentence that cannot be parsed (its tree is None, `.left_out` names it,
            one SentencesLeftOut warning); "raise" raises ValueError naming it, before any search.
        overwrite: discard the cache file of this model and these options and parse everything again.
        log: where the cache says how many sentences it held (default: stderr).
        scorer: the Scorer whose `parse` finds the trees (hf_slm/search/scorers.py; default: the model's family's, with
            `beam_options`, BeamSearchOptions fields such as beam_size, word_beam_size, max_consecutive_open).

    Returns a SentenceResults (hf_slm.search.beam) of trees in input order: None for a sentence left out, which
    `.left_out` names as {"index", "source", "words", "error"}.
    """
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of sentences, got one string; wrap it in a list: "
                        f"[{sentences[:40]!r}]")
    all_words = [sentence_words(sentence) for sentence in sentences]
    if sources is None:
        sources = [sentence_name(index) for index in range(len(all_words))]
    if len(sources) != len(all_words):
        raise ValueError(f"got {len(sources)} sources for {len(all_words)} sentences; expected one per sentence")
    keys = [" ".join(words) for words in all_words]
    words, names = {}, {}  # per distinct sentence, its words and the name of its first occurrence
    for key, sentence, source in zip(keys, all_words, sources):
        if key not in words:
            words[key], names[key] = sentence, source
    scorer = scorer_of(model, tokenizer, scorer, **beam_options)
    header = cache_header(model, tokenizer, scorer=scorer)  # checks the beam options before anything else
    found = _trees_by_sentence(scorer, words, names, cache_dir, header, batch_size, progress, on_error, overwrite,
                               log, desc)
    trees, left_out = [], []
    for index, (key, source) in enumerate(zip(keys, sources)):
        value = found[key]
        if value["tree"] is None:
            if on_error == "raise":  # only a cached reason gets here: this run's own failures raised in parse
                raise ValueError(f"{source} cannot be parsed (recorded when first met: {value['error']})")
            left_out.append({"index": index, "source": source, "words": all_words[index], "error": value["error"]})
        trees.append(value["tree"])
    warn_left_out(left_out, len(trees))
    return SentenceResults(trees, left_out)


def _documents(documents):
    """(id, text) pairs of a mapping {id: text}, of (id, text) pairs or of dicts with "id" and "document"."""
    items = documents.items() if isinstance(documents, dict) else documents
    pairs, seen = [], set()
    for position, item in enumerate(items):
        if isinstance(item, dict):
            missing = [field for field in ("id", "document") if field not in item]
            if missing:
                raise ValueError(f"document {position}: missing field(s) {missing}; expected 'id' and 'document'")
            item = (item["id"], item["document"])
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError(f"document {position} is a {type(item).__name__}; expected (id, text), a mapping "
                             "{id: text} or a dict with 'id' and 'document'")
        document_id, text = str(item[0]), item[1]
        if not isinstance(text, str):
            raise ValueError(f"document {document_id}: its text is a {type(text).__name__}; expected a string")
        if document_id in seen:
            raise ValueError(f"document id {document_id!r} occurs twice (the second time at position {position}); "
                             "expected one text per id")
        seen.add(document_id)
        pairs.append((document_id, text))
    return pairs


def silver_trees(model, tokenizer, documents, cache_dir=None, line_breaks=True, batch_size=8, progress=True,
                 on_error="skip", overwrite=False, **beam_options):
    """Split raw documents into sentences and PTB-style words, and parse every sentence (`parse_sentences`).

    Args:
        documents: a mapping {id: text}, (id, text) pairs, or dicts with "id" and "document" (XSum's rows).
        line_breaks: every line break ends a sentence (XSum: one paragraph per line); False for wrapped text,
            where only blank lines do (hf_slm/data/sentence_splitting.py).
        cache_dir, batch_size, progress, on_error, overwrite, beam_options: as in `parse_sentences`. Sentences
            are named "document ID, sentence K (line L)" (K and L counted from 1 within the document).

    Returns a SentenceResults (hf_slm.search.beam) of one dict per document, {"id", "words": [per sentence its words],
    "trees": [per sentence its tree, None when left out]}; `.left_out` names each sentence left out, as
    {"document", "sentence", "source", "words", "error"}.
    """
    pairs = _documents(documents)
    sentences, sources, owners = [], [], []
    per_document = []
    for document_id, text in pairs:
        found = document_sentences(text, line_breaks)
        per_document.append(len(found))
        for number, (words, start) in enumerate(found, start=1):
            sentences.append(words)
            sources.append(f"document {document_id}, sentence {number} (line {line_number(text, start)})")
            owners.append((document_id, number))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=SentencesLeftOut)  # said below, per document
        trees = parse_sentences(model, tokenizer, sentences, sources, cache_dir=cache_dir, batch_size=batch_size,
                                progress=progress, on_error=on_error, overwrite=overwrite, **beam_options)
    results, start = [], 0
    for (document_id, _), count in zip(pairs, per_document):
        results.append({"id": document_id, "words": sentences[start : start + count],
                        "trees": list(trees[start : start + count])})
        start += count
    left_out = [{"document": owners[entry["index"]][0], "sentence": owners[entry["index"]][1], **entry}
                for entry in trees.left_out]
    warn_left_out(left_out, len(sentences))
    return SentenceResults(results, left_out)


__all__ = ["cache_header", "cache_path", "document_sentences", "parse_sentences", "silver_trees"]
