"""hf_slm/ has no import circle, and its folders are layers that import downward only (issue 27).

The layers, lowest first (LAYERS):
1. the hub code: modeling/ and tokenization/ (installed as hf_slm.modeling, hf_slm.tokenization);
2. the foundations: the package itself and its Auto registration, the option types (option_types.py), the family registry and records (families/), the proposal parsers' registry (parsers/kinds.py),
   the datasets and file readers (data/), long runs (runs/), checkpoint loading and checks (checkpoints/), the
   model card templates (model_cards/ at the top of the repository, installed as hf_slm.model_cards);
3. the work done with a model: search/ (scoring, parsing, generating), training/, evaluation/, publishing/,
   summarization/, the proposal parsers' training, proposals and evaluation (parsers/) - modules of one layer may import each other (without a circle);
4. a family's own code, which builds on those and which its record names: families/ordered_memory/'s modules and
   the families' card modules (families/*_card.py);
5. the command line: cli/.
A lower layer reaches an upper one only through a "module:attribute" reference resolved when it runs (a family
record naming its code, data prepare naming the summarization step), never by an import.

The imports are read from the source (ast), imports inside functions included."""

import ast
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HUB_FOLDERS = ("modeling", "tokenization")
# Sub-packages of hf_slm kept at the top of the repository (pyproject's package-dir): the hub code, and the model
# card templates (installed as hf_slm.model_cards).
OUTSIDE_FOLDERS = HUB_FOLDERS + ("model_cards",)
# (layer, patterns of module names under hf_slm), lowest first. A plain name stands for that module and everything
# under it; a module belongs to the layer of the longest pattern it matches.
LAYERS = (
    ("hub code", ("modeling", "tokenization")),
    ("foundations", ("", "auto_registration", "auto", "option_types", "families", "data", "runs", "checkpoints",
                     "model_cards", "parsers.kinds")),
    ("work with a model", ("search", "training", "evaluation", "publishing", "summarization", "parsers")),
    ("families' own code", ("families.ordered_memory.*", "families.recurrent_grammars.*", "families.*_card")),
    ("command line", ("cli",)),
)


def _modules():
    """{module name under hf_slm: path} of hf_slm/, its sub-packages, the hub code (modeling/, tokenization/) and
    the card templates' package (model_cards/)."""
    found = {}
    for path in sorted((ROOT / "hf_slm").rglob("*.py")):
        parts = path.relative_to(ROOT / "hf_slm").with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for folder in OUTSIDE_FOLDERS:
        for path in sorted((ROOT / folder).glob("*.py")):
            found[f"{folder}.{path.stem}" if path.stem != "__init__" else folder] = path
    return found


def _is_package(path):
    return path.name == "__init__.py"


def _imports(modules):
    """{module: set of the modules it imports} (relative imports resolved; `hf_slm.x` absolute ones too)."""
    graph = {}
    for module, path in modules.items():
        package = module if _is_package(path) else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    target = ".".join(part for part in (base, node.module) if part)
                elif node.module == "hf_slm" or (node.module or "").startswith("hf_slm."):
                    target = node.module.removeprefix("hf_slm").lstrip(".")
                else:
                    continue
                candidates = [target] + [f"{target}.{alias.name}".lstrip(".") for alias in node.names]
            elif isinstance(node, ast.Import):
                candidates = [alias.name.removeprefix("hf_slm").lstrip(".") for alias in node.names
                              if alias.name == "hf_slm" or alias.name.startswith("hf_slm.")]
            else:
                continue
            targets.update(name for name in candidates if name in modules and name != module)
        graph[module] = targets
    return graph


def _reachable(graph, start):
    seen, stack = set(), [start]
    while stack:
        for target in graph.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def _matches(module, pattern):
    if any(character in pattern for character in "*?["):
        return fnmatch(module, pattern)
    return module == pattern or (pattern != "" and module.startswith(pattern + "."))


def layer_of(module):
    """(index, name) of the layer a module belongs to: the one of the longest pattern it matches; None if none."""
    matches = [(len(pattern), index, name) for index, (name, patterns) in enumerate(LAYERS)
               for pattern in patterns if _matches(module, pattern)]
    if not matches:
        return None
    _, index, name = max(matches)
    return index, name


def test_the_graph_reads_imports_at_the_top_and_inside_functions():
    graph = _imports(_modules())
    assert "families.registry" in graph["families"]  # from .registry import ...
    assert "search.beam" in graph["search.scorers"]  # an import inside a function
    assert "data.prepare" in graph["cli.commands"] or "data.command" in graph["cli.commands"]
    assert "modeling.grammars" in graph["checkpoints.checks"]
    assert "model_cards" in graph["publishing.model_card"]


def test_hf_slm_has_no_import_circle():
    modules = _modules()
    graph = _imports(modules)
    own = [module for module in modules if not module.startswith(HUB_FOLDERS)]
    circles = {module: sorted(other for other in _reachable(graph, module) if module in _reachable(graph, other))
               for module in own}
    assert {module: others for module, others in circles.items() if others} == {}


def test_every_module_belongs_to_a_layer():
    assert [module for module in _modules() if layer_of(module) is None] == []


def test_layers_import_downward_only():
    graph = _imports(_modules())
    upward = sorted(f"{module} ({layer_of(module)[1]}) imports {target} ({layer_of(target)[1]})"
                    for module, targets in graph.items() for target in targets
                    if layer_of(target)[0] > layer_of(module)[0])
    assert upward == []


def test_the_declared_folders_are_the_ones_on_disk():
    """Every package and top-level module of hf_slm/ is named in LAYERS (no folder left out, none made up)."""
    package = ROOT / "hf_slm"
    on_disk = {path.parent.name for path in package.glob("*/__init__.py")}
    on_disk |= {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    declared = {pattern.split(".")[0] for name, patterns in LAYERS for pattern in patterns}
    # the hub code and the card templates are installed under hf_slm but live at the top of the repository
    assert declared - {""} - set(OUTSIDE_FOLDERS) == on_disk
    assert all((ROOT / folder / "__init__.py").is_file() for folder in OUTSIDE_FOLDERS)
    assert not any((package / folder).exists() for folder in OUTSIDE_FOLDERS)


def test_the_layer_rule_sees_an_upward_import():
    """Self-check: an import from the foundations into the command line would be reported."""
    assert layer_of("data.prepare")[0] < layer_of("cli.commands")[0]
    assert layer_of("families.ordered_memory")[1] == "foundations"  # the record itself stays cheap and low
    assert layer_of("families.ordered_memory.training")[1] == "families' own code"
    assert layer_of("families.compositional_card")[1] == "families' own code"
    assert layer_of("modeling.grammars")[1] == "hub code"
