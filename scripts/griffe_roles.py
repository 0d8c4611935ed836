"""A Griffe extension for the API reference (mkdocs.yml): the Sphinx roles
of im2rec's docstrings (``:class:`~im2rec.recordio.MXRecordIO```,
``:func:`pack```) as links to what they name, where the reference documents
it, and as code where it does not (mkdocstrings shows the roles as they
are written otherwise)."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

#: ``:role:`~target``` (``~``: show the last name only)
ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`(?P<short>~?)(?P<target>[^`]+)`")


class SphinxRoles(Extension):
    """Each role a cross-reference that does not fail the build when its
    target is not documented (``optional``: it is shown as code)."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(lambda m: _autoref(m, obj), obj.docstring.value)


def _autoref(match: re.Match[str], obj: Object) -> str:
    target = match["target"].lstrip(".")
    title = target.rsplit(".", 1)[-1] if match["short"] else target
    return (
        f'<autoref identifier="{_resolved(target, obj)}" optional><code>{title}</code></autoref>'
    )


def _resolved(target: str, obj: Object) -> str:
    """``target``'s full path, resolved in ``obj``'s scope where it is not
    one already (``pack`` in a docstring of ``im2rec.recordio``'s)."""
    if target.startswith("im2rec."):
        return target
    first, _, rest = target.partition(".")
    scope = obj if obj.is_module or obj.is_class else obj.parent
    while scope is not None:
        try:
            path = scope.resolve(first)
        except Exception:  # noqa: BLE001 - griffe's NameResolutionError, or an alias it cannot follow
            scope = scope.parent
            continue
        return f"{path}.{rest}" if rest else path
    return target
