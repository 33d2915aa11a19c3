"""Register the Auto classes as soon as transformers is there, without importing it ourselves.

`import hf_slm` promises that AutoConfig / AutoModel / AutoModelForCausalLM / AutoTokenizer load hf-slm
checkpoints without trust_remote_code (hf_slm.auto does the registering). It also has to stay cheap: the
`hf-slm` command line runs `hf_slm/__init__.py` first, and `hf-slm --help` or `hf-slm masks` need neither
torch nor transformers (several seconds to import). So registration waits for transformers:

- if transformers is already imported when hf_slm is, `watch_transformers` registers at once;
- otherwise it puts `_ImportWatcher` in front of `sys.meta_path`. The watcher wraps the loaders of
  `transformers` and of hf_slm's own submodules, and registers after one of them has run, when transformers
  is loaded and no hf_slm module is half-initialized. Registering imports hf_slm.auto, which imports our
  modeling and tokenization modules: doing that while one of them is being imported (say modeling_slm, which
  imports transformers first) would meet a partially initialized module, hence the count of hf_slm imports in
  progress.

hf_slm's `__getattr__` also calls `register_auto_classes_once` when it hands out a name that needs
transformers, so `from hf_slm import SyntacticTokenizer` registers whatever the import order.
"""

import importlib.abc
import sys

WATCHED_PACKAGE = "hf_slm"

_state = {"registered": False, "registering": False, "imports_in_progress": 0}


def register_auto_classes_once():
    """Register hf-slm's classes with the Auto factories (imports transformers and torch); idempotent."""
    if _state["registered"] or _state["registering"]:
        return
    _state["registering"] = True
    try:
        from .auto import register_auto_classes

        register_auto_classes()
        _state["registered"] = True
    finally:
        _state["registering"] = False
    _remove_watcher()


def register_family_if_ready(family):
    """Register a family added after hf-slm's classes were registered (hf_slm.register_family); before that,
    `register_auto_classes_once` registers every family at once."""
    if _state["registered"]:
        from .auto import register_family_classes

        register_family_classes(family)


def _register_when_ready():
    # Called after a watched module ran. Only the outermost hf_slm import may register (see the docstring).
    if _state["imports_in_progress"] == 0 and "transformers" in sys.modules:
        register_auto_classes_once()


def _is_watched(name):
    return name == "transformers" or name.startswith(WATCHED_PACKAGE + ".")


class _NotifyingLoader(importlib.abc.Loader):
    """Runs a module with the loader that found it, then lets registration happen if the time has come.

    Everything else (get_source for tracebacks, resource readers, is_package...) is the wrapped loader's.
    """

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        _state["imports_in_progress"] += 1
        try:
            self.loader.exec_module(module)
        finally:
            _state["imports_in_progress"] -= 1
        _register_when_ready()

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the finders behind it and wraps the loader of a watched module."""

    def find_spec(self, name, path=None, target=None):
        if not _is_watched(name):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _NotifyingLoader(spec.loader)
                return spec
        return None


def _remove_watcher():
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _ImportWatcher)]


def watch_transformers():
    """Register now if transformers is imported, else as soon as it is (called by `import hf_slm`); and register
    each family added later with the Auto classes too."""
    from .families.registry import on_family_registered

    on_family_registered(register_family_if_ready)
    if "transformers" in sys.modules:
        register_auto_classes_once()
    elif not _state["registered"] and not any(isinstance(f, _ImportWatcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportWatcher())
