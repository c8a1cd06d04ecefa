"""Offline stand-in for the ``tree_sitter_languages`` package.

CodeGraphContext 0.6.13 loads grammars through ``tree-sitter-language-pack``,
which downloads them at run time and so fails without a network; CGC then
finds no functions at all. When that happens CGC falls back to
``from tree_sitter_languages import get_language`` (the only name it imports
from this package, in ``utils/tree_sitter_manager.py``), called with the
language-pack name of each language it parses (``tools/graph_builder.py``
maps suffixes to those names). This module answers that fallback from pinned
grammar wheels, which ship their grammars compiled, so the end-to-end tests
can index these languages offline:

=============  ==========================  ============================
CGC name       wheel (module)              function
=============  ==========================  ============================
python         tree-sitter-python          ``language()``
javascript     tree-sitter-javascript      ``language()``
typescript     tree-sitter-typescript      ``language_typescript()``
tsx            tree-sitter-typescript      ``language_tsx()``
go             tree-sitter-go              ``language()``
rust           tree-sitter-rust            ``language()``
=============  ==========================  ============================

Any other name raises ``LanguageNotBundledError``.
"""

import importlib

import tree_sitter

__all__ = ["BUNDLED_LANGUAGES", "LanguageNotBundledError", "get_language", "get_parser"]

# CGC's language name -> (module of the grammar wheel, function returning the
# grammar's pointer for ``tree_sitter.Language``).
_GRAMMARS = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
}

BUNDLED_LANGUAGES = tuple(_GRAMMARS)


class LanguageNotBundledError(KeyError):
    """The requested grammar is not shipped by this stand-in.

    A ``KeyError`` because CGC turns ``KeyError`` from ``get_language`` into
    its own "language is not available" error instead of a crash.
    """

    def __init__(self, name):
        super().__init__(name)
        self.name = name

    def __str__(self):
        return (
            f"tree-sitter grammar {self.name!r} is not available offline: this "
            f"tree_sitter_languages stand-in only bundles {', '.join(BUNDLED_LANGUAGES)}"
        )


def get_language(name):
    """Return the ``tree_sitter.Language`` for one of ``BUNDLED_LANGUAGES``."""
    try:
        module_name, function_name = _GRAMMARS[name]
    except (KeyError, TypeError):
        raise LanguageNotBundledError(name) from None
    module = importlib.import_module(module_name)
    return tree_sitter.Language(getattr(module, function_name)())


def get_parser(name):
    """Return a new ``tree_sitter.Parser`` for ``name`` (as the real package)."""
    return tree_sitter.Parser(get_language(name))
