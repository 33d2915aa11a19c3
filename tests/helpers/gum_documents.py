"""GUM sample trees grouped into documents and prepared document-level (BLLIP's layout: a blank line between
documents), for the tests of segment recurrence and of document-level variants."""

from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "hf_slm" / "sample_data" / "gum"


def prepare_gum_documents(directory, trees_per_document):
    """Write 3 train and 1 dev / test documents of `trees_per_document` sample trees under `directory`/raw, train a
    300-piece tokenizer (`directory`/tokenizer) and prepare them (`directory`/prepared); the sample's tree lines."""
    from hf_slm import SyntacticTokenizer
    from hf_slm.data.prepare import prepare_dataset

    trees = [line for line in (SAMPLE / "train.txt").read_text().splitlines() if line.strip()]
    size = trees_per_document
    chunks = [trees[i : i + size] for i in range(0, size * 4, size)]
    raw = Path(directory) / "raw"
    raw.mkdir()
    for split, chosen in (("train", chunks[:3]), ("dev", chunks[3:]), ("test", chunks[3:])):
        (raw / f"{split}.txt").write_text("\n\n".join("\n".join(chunk) for chunk in chosen) + "\n")
    SyntacticTokenizer.train(trees[:200], vocab_size=300).save_pretrained(Path(directory) / "tokenizer")
    prepare_dataset("bllip", raw, Path(directory) / "tokenizer", Path(directory) / "prepared", document_level=True,
                    log=lambda *_: None)
    return trees
