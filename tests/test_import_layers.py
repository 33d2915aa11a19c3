"""No import circle runs through the command line, the scorers, the evaluation drivers or SOM's modules: the CLI
asks the family registry and the scorer interface, the drivers take any scorer, SOM's modules import no CLI and
the tokenizer check (checks.py) imports nothing of SOM. Read from the source (ast), imports inside functions
included."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Modules (names under hf_slm) that must sit in no import circle.
LAYERED = ("cli", "checks", "scorers", "search_scorer", "beam", "silver", "scoring", "sampling", "ensemble",
           "families.tree_formats", "som_scorer", "som_evaluation", "som_data", "som_training", "evaluation.perplexity",
           "evaluation.syntaxgym", "evaluation.blimp", "evaluation.parsing", "evaluation.attachment",
           "evaluation.results", "evaluation.evalb", "evaluation.rouge")


def _modules():
    """{module name under hf_slm: path} of hf_slm/, its sub-packages, and the hub code (modeling/, tokenization/)."""
    found = {}
    for path in sorted((ROOT / "hf_slm").rglob("*.py")):
        parts = path.relative_to(ROOT / "hf_slm").with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for folder in ("modeling", "tokenization"):
        for path in sorted((ROOT / folder).glob("*.py")):
            found[f"{folder}.{path.stem}" if path.stem != "__init__" else folder] = path
    return found


def _imports(modules):
    """{module: set of the modules it imports} (relative imports resolved; `hf_slm.x` absolute ones too)."""
    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    target = ".".join(part for part in (base, node.module) if part)
                else:
                    target = (node.module or "").removeprefix("hf_slm").lstrip(".")
                candidates = [target] + [f"{target}.{alias.name}".lstrip(".") for alias in node.names]
            elif isinstance(node, ast.Import):
                candidates = [alias.name.removeprefix("hf_slm").lstrip(".") for alias in node.names]
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


def test_no_import_circle_runs_through_the_cli_scorers_drivers_or_som_modules():
    modules = _modules()
    graph = _imports(modules)
    assert set(LAYERED) <= set(modules)
    circles = {module: sorted(other for other in _reachable(graph, module) if module in _reachable(graph, other))
               for module in LAYERED}
    assert {module: others for module, others in circles.items() if others} == {}


def test_checks_imports_nothing_of_som_and_som_imports_no_cli():
    graph = _imports(_modules())
    assert not {name for name in _reachable(graph, "checks") if name.startswith("som") or "som" in name.split(".")[-1]}
    for module in ("som_scorer", "som_evaluation", "som_data", "som_training"):
        assert "cli" not in _reachable(graph, module), module
