"""Offline, Python-only stand-in for the ``tree_sitter_languages`` package.

CodeGraphContext 0.6.13 loads grammars through ``tree-sitter-language-pack``,
which downloads them at run time and so fails without a network; CGC then
finds no functions at all. When that happens CGC falls back to
``from tree_sitter_languages import get_language`` (the only name it imports
from this package). This module answers that fallback from the
``tree-sitter-python`` wheel, which ships its grammar compiled, so the
end-to-end tests can index Python workspaces offline.
"""

import tree_sitter
import tree_sitter_python

__all__ = ["LanguageNotBundledError", "get_language"]

BUNDLED_LANGUAGES = ("python",)


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
    """Return the ``tree_sitter.Language`` for ``name`` (only ``'python'``)."""
    if name != "python":
        raise LanguageNotBundledError(name)
    return tree_sitter.Language(tree_sitter_python.language())
