"""What a grammar does to one tree: tokens, kinds, attention mask, relative positions, labels.

Backs `hf-slm masks`. Each whitespace-separated word is one token (no subword model), so the output can be read
against the papers' figures. The tree is read as the grammar's tree format says (hf_slm/families/tree_formats.py
and mask_examples.py: PTB brackets or actions, unlabelled as a linearization writes them, an inline dependency
tree, or words), with the format's own options (a dependency tree's `variant` and `pieces`). With a segment
length (`segment_report`), the sequence is cut into segments with a memory, as Transformer-XL recurrence reads it
(paper 000, section 2.2 and Figure 8; modeling/segments.py), and bracketed trees or words may be a document.
"""

from ..families.tree_formats import build_mask_example
from ..modeling.grammars import IGNORE_INDEX, POSITION_KIND_NAMES, PositionKind
from ..modeling.segments import segment_sequence
from ..runs.user_files import check_replaceable, write_user_file
from ..tokenization.linearizers import top_down_actions
from ..tokenization.trees import read_tree_string


def actions_from_text(text, tree_format="auto", **normalize_options):
    """Actions of a tree given as `(S (NP the bird NP) S)` (actions) or as PTB brackets (with or without POS).

    The rule of `trees.input_format` decides which (unless tree_format is "actions" or "ptb"), as for the
    tokenizer: actions are taken as written, PTB brackets normalized with `normalize_options`. Plain words or
    a malformed tree are a ValueError naming the position.
    """
    return top_down_actions(read_tree_string(text, "the tree argument", tree_format, **normalize_options))


def mask_report(text, grammar_name, tree_format="auto", **options):
    """The JSON-ready report of `hf-slm masks` for one tree under the grammar `grammar_name`. `options`: the
    grammar's tree format's own (a dependency tree's variant and pieces) and tree normalization options."""
    example = build_mask_example(grammar_name, text, tree_format, **options)
    sequence = example.grammar.sequence(example.ids, **example.sequence_options)
    return {**sequence_report(grammar_name, example.tokens, sequence), **example.fields(sequence)}


def sequence_report(grammar_name, tokens, sequence):
    """The fields every report has: tokens, position kinds, the attention mask, relative positions and labels.
    `tokens`: the token of every id."""
    return {
        "grammar": grammar_name,
        "tokens": [tokens[i] for i in sequence.input_ids],
        "kinds": [POSITION_KIND_NAMES[PositionKind(k)] for k in sequence.position_kinds],
        "attention_mask": sequence.attention_mask.astype(int).tolist(),
        "relative_positions": sequence.relative_positions.tolist(),
        "labels": [None if label == IGNORE_INDEX else tokens[label] for label in sequence.labels],
    }


def segment_report(text, grammar_name, segment_length=8, memory_length=None, memory_update=None,
                   tree_format="auto", **options):
    """The report of `hf-slm masks --segment-length L`: per segment (`chunks`), the rows' positions, tokens,
    kinds, labels and depths, the attention mask and relative positions [L, M + L] (memory columns first), the
    memory's positions [M] (-1: empty) and the update matrices [M, L] and [M, M] (modeling/segments.py).

    Several bracketed trees (or sentences of words) are a document: `<s>` then the trees, each root a child of
    `<s>` (Grammar, document_level; paper 000 section 3.1). One tree is a sentence, also when it is a wrapper
    `(DOC (S ...) (S ...))` over a document's sentences, as in the reference's BLLIP documents: DOC is then a
    constituent like any other. Other formats read one tree, as `mask_report` does."""
    example = build_mask_example(grammar_name, text, tree_format, several=True, **options)
    tokens, trees = example.tokens, example.trees
    segmented = segment_sequence(example.grammar, example.ids, segment_length, memory_length, memory_update,
                                 **example.sequence_options)
    chunks = []
    for tau in range(segmented.num_segments):
        chunks.append({
            "positions": segmented.segment_positions[tau].tolist(),
            "tokens": [tokens[i] for i in segmented.input_ids[tau]],
            "kinds": [POSITION_KIND_NAMES[PositionKind(k)] for k in segmented.position_kinds[tau]],
            "labels": [None if label == IGNORE_INDEX else tokens[label] for label in segmented.labels[tau]],
            "depths": segmented.depth[tau].tolist(),
            "attention_mask": segmented.attention_mask[tau].astype(int).tolist(),
            "relative_positions": segmented.relative_positions[tau].tolist(),
            "memory_positions": segmented.memory_positions[tau].tolist(),
            "update_from_segment": segmented.update_from_segment[tau].astype(int).tolist(),
            "update_from_memory": segmented.update_from_memory[tau].astype(int).tolist(),
        })
    return {"grammar": grammar_name, "trees": trees, "document_level": trees > 1,
            "segment_length": segmented.segment_length, "memory_length": segmented.memory_length,
            "memory_update": segmented.memory_update, "chunks": chunks}


def format_segment_report(report):
    """Plain text: per segment, what each memory slot holds, then one row per position with the original
    positions it attends (m<slot>=<position> for memory columns) and their relative positions, and the next
    memory's slots."""
    M = report["memory_length"]
    lines = [f"{report['grammar']}: segments of {report['segment_length']} positions, memory of {M} slots "
             f"({report['memory_update']} update), {report['trees']} tree(s)"]
    for tau, chunk in enumerate(report["chunks"]):
        held = [f"{y}:{p}" for y, p in enumerate(chunk["memory_positions"]) if p >= 0]
        lines.append(f"segment {tau}: memory {' '.join(held) or 'empty'}")
        for x, position in enumerate(chunk["positions"]):
            if position < 0:
                continue
            attended = []
            for column, allowed in enumerate(chunk["attention_mask"][x]):
                if allowed:
                    where = (f"m{column}={chunk['memory_positions'][column]}" if column < M
                             else str(chunk["positions"][column - M]))
                    attended.append(f"{where}({chunk['relative_positions'][x][column]})")
            lines.append(f"  {position:>4}  {chunk['tokens'][x]:<12} {chunk['kinds'][x]:<14} "
                         f"{chunk['labels'][x] or '_':<12} {' '.join(attended)}")
        kept = []
        for y in range(M):
            if 1 in chunk["update_from_segment"][y]:
                kept.append(f"{y}<-{chunk['positions'][chunk['update_from_segment'][y].index(1)]}")
            elif 1 in chunk["update_from_memory"][y]:
                kept.append(f"{y}<-{chunk['memory_positions'][chunk['update_from_memory'][y].index(1)]}")
        lines.append(f"  next memory: {' '.join(kept) or 'empty'}")
    return "\n".join(lines)


def format_report(report):
    """A plain-text table: one row per position, its kind, label and the positions it attends."""
    width = max(len(t) for t in report["tokens"])
    kind_width = max(len(k) for k in report["kinds"])
    lines = [f"{'i':>3}  {'input':<{width}}  {'kind':<{kind_width}}  {'label':<{width}}  attends (relative position)"]
    for i, token in enumerate(report["tokens"]):
        label = report["labels"][i] or "_"
        attended = [
            f"{j}({report['relative_positions'][i][j]})"
            for j, allowed in enumerate(report["attention_mask"][i])
            if allowed
        ]
        extra = ""
        if report.get("composes") and report["composes"][i]:  # an external composer's inputs
            extra += f"  composes {' '.join(map(str, report['composes'][i]))}"
        if report.get("starts") and report["starts"][i] is not None:  # the start pointer's target
            extra += f"  start {report['starts'][i]}"
        lines.append(f"{i:>3}  {token:<{width}}  {report['kinds'][i]:<{kind_width}}  {label:<{width}}  "
                     f"{' '.join(attended)}{extra}")
    return "\n".join(lines)


# The PNG text chunk `hf-slm masks --png` writes: a file that holds it is a drawing of this command, which a rerun
# replaces; any other file is the user's (hf_slm/runs/user_files.py).
PNG_MARKER = "hf-slm masks --png"


def plot_report(report, path, overwrite=False):
    """Draw the mask like paper 000 Figure 2b: STACK rows blue, COMPOSE rows orange, relpos in cells. A file at
    `path` that this function did not draw is replaced only with `overwrite`."""
    check_replaceable(path, PNG_MARKER, overwrite)  # before drawing
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    tokens = report["tokens"]
    n = len(tokens)
    size = max(4.0, 0.42 * n + 1.5)
    figure, axes = plt.subplots(figsize=(size, size))
    stack_colour, compose_colour = "#4c72b0", "#dd8452"
    for i in range(n):
        colour = compose_colour if report["kinds"][i].endswith("compose") else stack_colour
        for j in range(n):
            if report["attention_mask"][i][j]:
                axes.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white"))
                axes.text(j + 0.5, i + 0.5, str(report["relative_positions"][i][j]), ha="center", va="center",
                          color="white", fontsize=8)
            else:
                axes.add_patch(Rectangle((j, i), 1, 1, facecolor="#f2f2f2", edgecolor="white"))
    axes.set_xlim(0, n)
    axes.set_ylim(n, 0)
    axes.set_xticks([k + 0.5 for k in range(n)])
    axes.set_yticks([k + 0.5 for k in range(n)])
    axes.set_xticklabels(tokens, rotation=90, fontsize=8)
    axes.set_yticklabels([f"{t}  {i}" for i, t in enumerate(tokens)], fontsize=8)
    axes.set_xlabel("attended position j")
    axes.set_ylabel("attending position i")
    axes.set_aspect("equal")
    axes.tick_params(length=0)
    if any(kind.endswith("compose") for kind in report["kinds"]):
        axes.legend(handles=[Patch(color=stack_colour, label="STACK"), Patch(color=compose_colour, label="COMPOSE")],
                    loc="upper right", fontsize=8)
    axes.set_title(f"{report['grammar']} attention mask (numbers: relative positions)", fontsize=9)
    figure.tight_layout()
    write_user_file(path, lambda target: figure.savefig(target, dpi=120, metadata={"Software": PNG_MARKER}),
                    PNG_MARKER, overwrite)
    plt.close(figure)
