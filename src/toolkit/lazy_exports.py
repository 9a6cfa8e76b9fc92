"""Short imports for the notebooks that load nothing they do not name.

`from toolkit.text import Vocab` reads better than `from toolkit.text.vocab import Vocab`,
but a package that imported all its modules up front would make every stage load the
corpus readers, and the translate command the training loop. So a package lists the names
it offers, module by module, and each is imported on first use (PEP 562's `__getattr__`).
"""

import importlib
import pkgutil
import sys
from collections.abc import Callable


def lazy_exports(package: str, modules: dict[str, list[str]]
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """The package's `__getattr__`, `__dir__` and `__all__` for these names of its modules."""
    home = {name: module for module, names in modules.items() for name in names}
    # Importing a submodule sets the package's attribute of its name, which would then hide
    # a function of the same name (search.beam_search the module, beam_search the function).
    submodules = {info.name for info in pkgutil.iter_modules(sys.modules[package].__path__)}
    if clashes := sorted(set(home) & submodules):
        raise ValueError(f"{package} cannot offer {clashes}: each is also a module's name")

    def __getattr__(name: str) -> object:
        if name not in home:  # a submodule is then imported as usual, by the import system
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(home)

    return __getattr__, __dir__, sorted(home)
