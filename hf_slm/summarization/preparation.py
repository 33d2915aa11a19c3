"""What `hf-slm data prepare --loader xsum --summarization` does differently: every other step (the output
layout, saving and journaling each split, resuming, prepare.json) is prepare.py's.

    hf-slm data prepare --loader xsum --summarization --parser runs/tg --path xsum/ --tokenizer runs/tg \
        --output prepared/xsum-tg
    hf-slm finetune --task xsum --model runs/tg --train prepared/xsum-tg --output runs/tg-xsum

- Each XSum example becomes one document-level sequence (hf_slm/summarization/summaries.py: the document's silver trees
  truncated to 600 words, the prompt, the summary's trees), saved as `input_ids` and `labels` (-100 where no
  action is trained; by default the document and the prompt) beside the loader's columns, with
  `summary_start` and whether the document or the summary was truncated.
- The silver trees come from `parser` (a checkpoint folder: a language model's best trees by its beam search, or a
  proposal parser's, `hf-slm parser train`, as paper 003 made its XSum trees with its CRF parser), checked to give trees the tokenizer encodes before
  the data is loaded, or from `silver_trees`, a file of the user's own parses, one bracketed tree per sentence,
  matched to the sentences by their words (hf_slm/summarization/given_trees.py; `--silver-trees FILE`). They are cached in `<output>/silver/` (hf_slm/summarization/silver.py), sentence by sentence as
  they are found: a prepare interrupted while parsing resumes where it stopped, with the splits saved before the
  interruption loaded as they are. A words-only tokenizer (TXL (terminals)) needs no parser.
- prepare.json records the format (prompt, limits, labels), the parser and the counts of truncated documents,
  truncated summaries and sentences the parser left out; `document_level` is true, so that training makes a
  document-level model.
"""

from dataclasses import dataclass, field
from pathlib import Path

SUMMARIZATION_LOADER = "xsum"
SILVER_FOLDER = "silver"


@dataclass
class SummarizationPreparation:
    """The summarization settings of one prepare: the format, the parser (a checkpoint folder, None for a
    words-only tokenizer) and the parser's beam options."""

    summary_format: object  # hf_slm.summarization.summaries.SummarizationFormat
    parser: str | None = None
    beam_options: dict = field(default_factory=dict)
    parser_pair: tuple | None = None  # (model, tokenizer), loaded by `check`
    counts: dict = field(default_factory=dict)
    silver_trees: str | None = None  # a file of the user's own trees instead of a parser
    given_trees: object = None  # its GivenTrees (hf_slm/summarization/given_trees.py), loaded by `create`

    @classmethod
    def create(cls, loader, tokenizer, summarization, parser, beam_options, silver_trees=None):
        """The preparation of `summarization` (True, a dict of SummarizationFormat fields, or a format), checked
        against the loader, the tokenizer and the parser (or the file of silver trees) before any data is read."""
        from .summaries import SummarizationFormat, check_given_trees, check_parser, document_grammar, prompt_ids

        if loader != SUMMARIZATION_LOADER:
            raise ValueError(f"summarization applies to the {SUMMARIZATION_LOADER} loader, not to {loader!r}")
        if tokenizer is None:
            raise ValueError("summarization needs the target model's tokenizer (--tokenizer): the sequences are "
                             "encoded with it")
        if isinstance(summarization, SummarizationFormat):
            summary_format = summarization.check()
        else:
            summary_format = SummarizationFormat(**(summarization if isinstance(summarization, dict) else {})).check()
        summary_format = summary_format.for_tokenizer(tokenizer)  # the default prompt in the tokenizer's trees
        grammar = document_grammar(tokenizer)
        prompt_ids(tokenizer, summary_format.prompt, grammar)
        preparation = cls(summary_format, str(parser) if parser is not None else None, dict(beam_options or {}))
        if grammar.words_only:
            return preparation  # words only: no trees, no parser (one given is not used)
        if parser is not None and silver_trees is not None:
            raise ValueError("--parser and --silver-trees both give the silver trees; give one of them")
        if silver_trees is not None:
            from .given_trees import GivenTrees

            preparation.silver_trees, preparation.given_trees = str(silver_trees), GivenTrees(silver_trees)
            if beam_options:
                raise ValueError("the parser's beam options apply to --parser; trees from --silver-trees are not searched")
            check_given_trees(preparation.given_trees, tokenizer)
            return preparation
        if parser is None:
            raise ValueError(f"the tokenizer encodes trees ({tokenizer.linearization}): give a parser model (--parser) "
                             "whose silver trees the documents and summaries get, or a file of them (--silver-trees)")
        from ..parsers.parser import load_tree_source

        preparation.parser_pair = load_tree_source(parser)  # a language model or a proposal parser
        check_parser(*preparation.parser_pair, tokenizer, parser_name=f"the parser {str(parser)!r}")
        return preparation

    def _parser_kind(self):
        """What gave the silver trees: a proposal parser of some kind, a language model's beam search, or a file."""
        if self.parser_pair is None:
            return "the user's trees (--silver-trees)" if self.silver_trees else None
        from ..parsers.kinds import is_parser_config, kind_of_config

        config = self.parser_pair[0].config
        if is_parser_config(config):
            return f"proposal parser ({kind_of_config(config).name}): its best trees"
        return "language model: the best trees of its word-synchronous beam search"

    def journal_entry(self):
        """What the saved splits depend on besides the data and the tokenizer."""
        from ..runs.journal import model_fingerprint

        entry = {"format": self.summary_format.to_dict(), "beam": self.beam_options,
                 "parser": model_fingerprint(self.parser_pair[0]) if self.parser_pair is not None else None}
        if self.given_trees is not None:  # (absent otherwise: the journals of earlier prepares stay valid)
            entry["silver_trees"] = self.given_trees.fingerprint
        return entry

    def encode_split(self, split, data, tokenizer, output, log):
        """The split's rows as summarization sequences: a Dataset of the loader's columns, input_ids, labels,
        summary_start, document_truncated and summary_truncated."""
        from datasets import Dataset

        from .summaries import summarization_examples

        rows = list(data)
        examples, counts = summarization_examples(rows, tokenizer, self.parser_pair, self.summary_format,
                                                  cache_dir=Path(output) / SILVER_FOLDER, progress=True,
                                                  given_trees=self.given_trees, **self.beam_options)
        for name, count in counts.items():
            self.counts[name] = self.counts.get(name, 0) + count
        log(f"split {split!r}: {len(examples)} sequences; {counts['documents_truncated']} documents cut to "
            f"{self.summary_format.max_document_words} words, {counts['summaries_truncated']} summaries cut to "
            f"{self.summary_format.max_summary_words}, {counts['sentences_left_out']} sentences the parser left out")
        columns = {name: [row[name] for row in rows] for name in rows[0]} if rows else {}
        for name in ("input_ids", "labels", "summary_start", "document_truncated", "summary_truncated",
                     *tokenizer.action_input_fields):  # the tokenizer's per-action fields (Nb-Up: the starts)
            if examples and name in examples[0]:
                columns[name] = [example[name] for example in examples]
        return Dataset.from_dict(columns)

    def record(self):
        return {**self.summary_format.to_dict(), "parser": self.parser, "parser_beam_options": self.beam_options,
                "parser_kind": self._parser_kind(),
                **({"silver_trees": self.silver_trees} if self.silver_trees is not None else {}),
                "counts (splits tokenized by this run)": self.counts,
                "sequence": "document trees, prompt, summary trees (hf_slm/summarization/summaries.py)"}
