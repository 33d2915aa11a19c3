"""`hf-slm data prepare --loader text --parser DIR`: raw text becomes a family's training trees, as papers 002 and 003
made theirs (paper 003 reparsed BLLIP with its CRF parser, paper 002 parsed it with Biaffine-roberta).

    hf-slm data prepare --loader text --parser runs/crf --path raw.txt --tokenizer runs/tg --output prepared/silver
    hf-slm data prepare --loader text --parser runs/dep --path raw/ --splits train=a.txt,validation=b.txt \
        --grammar dtg --output prepared/silver-dtg
    hf-slm train --preset tg-ptb --train prepared/silver --output runs/tg-silver

Each text file is split into sentences (one per line, or with --join-lines wrapped text where blank lines and
punctuation end them) and PTB-style words (hf_slm/data/sentence_splitting.py), and every sentence gets the parser's
best tree: a proposal parser's (`hf-slm parser train`) or a language model's beam search's. The trees are cached
sentence by sentence in `<output>/silver/` (hf_slm/summarization/silver.py, shared out under torchrun), so an
interrupted prepare resumes without parsing again, then written to `<output>/parsed/<split>.txt` (bracketed) or
`.conllu` (dependency), which the usual preparation then reads (the ptb loader, or conllu with the grammar's own
preparation). A sentence the parser cannot parse is left out and counted.
"""

from pathlib import Path

from ..data.sentence_splitting import line_number
from ..data.text_files import read_text
from ..search.scorers import scorer_class_for
from ..summarization.silver import document_sentences, parse_sentences
from ..tokenization.dependency_trees import DependencyTree
from .parser import load_tree_source

PARSED_FOLDER = "parsed"
SILVER_FOLDER = "silver"


def _split_files(path):
    """{split: [files]} of --path: a mapping (from --splits), or one file or folder as the train split."""
    if isinstance(path, dict):
        return {split: [Path(file) for file in (files if isinstance(files, list) else [files])]
                for split, files in path.items()}
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise ValueError(f"text folder {str(root)!r} holds no files")
        return {"train": files}
    if not root.is_file():
        raise ValueError(f"text path {str(root)!r} does not exist")
    return {"train": [root]}


def _conllu(tree_text):
    tree = DependencyTree.from_inline(tree_text)
    return "\n".join("\t".join([str(i), word, "_", "_", "_", "_", str(head), "_", "_", "_"])
                     for i, (word, head) in enumerate(zip(tree.words, tree.heads), start=1))


def parse_text_files(path, parser, output, line_breaks=True, batch_size=32, progress=True, log=print):
    """({split: [the written tree file]}, "constituency" or "dependency"): the parser's best tree of every sentence
    of the text files, per split (module docstring)."""
    from ..families.tree_formats import format_of_grammar
    from ..parsers.kinds import is_parser_config, kind_of_config

    model, tokenizer = load_tree_source(parser)
    if is_parser_config(model.config):
        tree_kind = kind_of_config(model.config).tree_kind
    else:
        tree_kind = format_of_grammar(model.config.grammar).kind
        if tree_kind == "words":
            raise ValueError(f"--parser {parser} reads words only and gives no trees; expected a proposal parser or a "
                             "language model of trees")
    scorer = scorer_class_for(model)(model, tokenizer)
    folder = Path(output) / PARSED_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, files in _split_files(path).items():
        sentences, sources = [], []
        for file in files:
            text = read_text(file, "text file")
            for words, start in document_sentences(text, line_breaks):
                sentences.append(words)
                sources.append(f"{file}, line {line_number(text, start)}")
        if not sentences:
            raise ValueError(f"split {split!r}: the text files {[str(f) for f in files]} hold no sentences")
        trees = parse_sentences(model, tokenizer, sentences, sources, cache_dir=Path(output) / SILVER_FOLDER,
                                batch_size=batch_size, progress=progress, scorer=scorer)
        kept = [tree for tree in trees if tree is not None]
        if len(kept) < len(trees):
            log(f"split {split!r}: {len(trees) - len(kept)} of {len(trees)} sentence(s) left out, the parser cannot "
                f"parse them (e.g. {trees.left_out[0]['source']}: {trees.left_out[0]['error']})")
        if tree_kind == "dependency":
            target = folder / f"{split}.conllu"
            target.write_text("\n\n".join(_conllu(tree) for tree in kept) + "\n\n", encoding="utf-8")
        else:
            target = folder / f"{split}.txt"
            target.write_text("\n".join(kept) + "\n", encoding="utf-8")
        log(f"split {split!r}: {len(kept)} parsed sentence(s) written to {target}")
        written[split] = [str(target)]
    return written, tree_kind
