"""The source files a checkpoint carries, so that it loads with `trust_remote_code=True` without hf-slm.

transformers copies the file of a class registered for an Auto class, and the files it imports relatively, found
in that file's own folder. That serves hf-slm's families, whose hub code is one flat folder. A family that lives
in another package (registered with hf_slm.register_family) defines its classes in its own file, over hf-slm's
classes: its file and hf-slm's hub files lie in two folders, and the checkpoint needs both. `SavesHubCode`
copies, after the weights are saved, the file of every class in the model's, its config's and its grammar's
class hierarchies up to transformers' own, and every file they import relatively: from its own folder, or, for a
family's own file, from hf-slm's (any hub module it imports, not only its base classes' files).
All of them land flat in the checkpoint, where relative imports find one another. A family's own file imports
hf-slm's classes relatively inside a `try:` block (transformers' import check skips those) and absolutely from
hf_slm in the `except ImportError:` branch, for use with hf-slm installed.

Hub code: imports only transformers and the standard library.
"""

import shutil
import sys
from pathlib import Path

from transformers.dynamic_module_utils import get_relative_imports

# Classes from these packages are the frame, not a family's code: their files are never copied.
_FRAMEWORK_PACKAGES = ("builtins", "torch", "transformers", "huggingface_hub", "abc", "typing")


def hub_code_files(objects):
    """The source files of the classes of `objects` (their whole hierarchies below the framework's) and the files
    they import relatively, each path once, in a stable order. A relative import is found beside the importing file,
    or else among the folders of the files found so far: a family outside hf-slm imports hf-slm's hub modules
    relatively (in a checkpoint they lie beside its file), any of them, not only its base classes' files."""
    files = []
    for obj in objects:
        cls = obj if isinstance(obj, type) else type(obj)
        for base in cls.__mro__:
            if base.__module__.split(".")[0] in _FRAMEWORK_PACKAGES:
                continue
            path = getattr(sys.modules.get(base.__module__), "__file__", None)
            if path is not None:
                _add_with_relative_imports(Path(path), files)
    folders = list(dict.fromkeys(path.parent for path in files))
    for path in list(files):
        for name in sorted(get_relative_imports(path)):
            relative = f"{name.replace('.', '/')}.py"
            if (path.parent / relative).is_file():
                continue
            found = next((folder / relative for folder in folders if (folder / relative).is_file()), None)
            if found is not None:
                _add_with_relative_imports(found, files)
    return files


def _add_with_relative_imports(path, files):
    if path in files or not path.is_file():  # a relative import of another folder's file: that folder serves it
        return
    files.append(path)
    for name in sorted(get_relative_imports(path)):
        _add_with_relative_imports(path.parent / f"{name.replace('.', '/')}.py", files)


def copy_hub_code(objects, folder):
    """Copy the hub code of `objects` into `folder`, keeping files already there (transformers' copies)."""
    folder = Path(folder)
    names = {}
    for path in hub_code_files(objects):
        if path.name in names and names[path.name] != path:
            raise ValueError(f"two hub code files are both named {path.name} ({names[path.name]} and {path}); a "
                             "checkpoint holds them in one folder: rename one")
        names[path.name] = path
        target = folder / path.name
        if not target.exists():
            shutil.copyfile(path, target)


class SavesHubCode:
    """Mixin of the pretrained-model classes: `save_pretrained` also copies the hub code of the model, its config and
    whatever else `hub_code_objects` names (module docstring)."""

    def hub_code_objects(self):
        return [self, self.config]

    def save_pretrained(self, save_directory, *args, is_main_process=True, **kwargs):
        super().save_pretrained(save_directory, *args, is_main_process=is_main_process, **kwargs)
        if is_main_process:
            copy_hub_code(self.hub_code_objects(), save_directory)
