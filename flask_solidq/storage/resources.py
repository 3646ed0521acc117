"""Where the data folders shipped with flask-solidq are: ``migrations/``, ``templates/``,
``static/``.

They live at the top of the repository, and the wheel ships them inside the package
(``flask_solidq/migrations`` ...; see ``force-include`` in pyproject.toml). An installed wheel
finds them through :mod:`importlib.resources`; a source checkout or an editable install, whose
package folder lacks them, finds them beside the package folder instead.
"""

from __future__ import annotations

import importlib.resources
import pathlib


def resource_dir(name: str) -> pathlib.Path:
    """The folder ``name`` (``"migrations"``, ``"templates"``, ``"static"``) shipped with
    flask-solidq.

    :raises FileNotFoundError: neither the package nor the source tree has it (a broken
        install).
    """
    packaged = importlib.resources.files("flask_solidq") / name
    # A package imported from a zip file has no folder on disk to hand out; only a real
    # folder is of use to Alembic, Jinja and send_from_directory.
    if isinstance(packaged, pathlib.Path) and packaged.is_dir():
        return packaged
    source = pathlib.Path(__file__).resolve().parents[2] / name
    if source.is_dir():
        return source
    raise FileNotFoundError(
        f"flask-solidq's {name!r} folder is missing: looked in {packaged} and {source}."
        " Reinstall flask-solidq."
    )
