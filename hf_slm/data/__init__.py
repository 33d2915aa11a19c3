"""Dataset loaders (PTB, BLLIP-LG, XSum, CoNLL-U) returning datasets.DatasetDict.

    import hf_slm.data as data
    ptb = data.load("ptb", "treebank/combined", splits={"train": "00", "validation": "01"})
    ewt = data.load_conllu("ud_english_ewt")

Each loader streams its files through `datasets.Dataset.from_generator` (the cache is keyed on the files'
paths, sizes and modification times and on the options) and names the file and line of anything it cannot
read. `hf_slm.data.prepare.prepare_dataset` (the CLI `hf-slm data prepare`) tokenizes a loaded dataset and
saves it for `hf-slm train`.

The loader modules (and `datasets` with them) are imported on first use: the `hf-slm` command line imports
this package for its `data` subcommand, and every other subcommand should not pay for that.
"""

import inspect
from importlib import import_module
from pathlib import Path

# loader name -> (module, function)
_LOADER_FUNCTIONS = {
    "ptb": ("ptb", "load_ptb"),
    "bllip": ("bllip", "load_bllip"),
    "xsum": ("xsum", "load_xsum"),
    "conllu": ("conllu_loader", "load_conllu"),
}


def _loader_function(name):
    module, function = _LOADER_FUNCTIONS[name]
    return getattr(import_module(f".{module}", __name__), function)


def __getattr__(attribute):
    """`LOADERS` and the load_* functions, imported when first asked for."""
    if attribute == "LOADERS":
        loaders = {name: _loader_function(name) for name in _LOADER_FUNCTIONS}
        globals()["LOADERS"] = loaders
        return loaders
    for name, (_, function) in _LOADER_FUNCTIONS.items():
        if attribute == function:
            return _loader_function(name)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def loader_options(name):
    """The keyword options loader `name` accepts (the tree loaders also take the normalize_tree options)."""
    from .ptb import NORMALIZE_OPTIONS

    parameters = inspect.signature(_loader_function(name)).parameters
    names = [option for option, parameter in parameters.items()
             if option != "path" and parameter.kind is not inspect.Parameter.VAR_KEYWORD]
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        names += list(NORMALIZE_OPTIONS)
    return names


def load(name, path, **options):
    """Load dataset `path` with loader `name` (a key of LOADERS: ptb, bllip, xsum, conllu) and its `options`.

    Raises ValueError for an unknown loader, a missing path, an option the loader does not take, and (from
    the loaders) files in the wrong format, naming the file and line.
    """
    if name not in _LOADER_FUNCTIONS:
        raise ValueError(f"unknown loader {name!r}; expected one of {sorted(_LOADER_FUNCTIONS)}")
    if isinstance(path, (str, Path)) and not Path(path).exists():
        raise ValueError(f"{name} data path {str(path)!r} does not exist")
    unknown = sorted(set(options) - set(loader_options(name)))
    if unknown:
        raise ValueError(f"loader {name!r} has no option(s) {unknown}; it takes {loader_options(name)}")
    return _loader_function(name)(path, **options)


__all__ = ["LOADERS", "load", "load_bllip", "load_conllu", "load_ptb", "load_xsum", "loader_options"]
