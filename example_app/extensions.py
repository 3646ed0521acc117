"""The app's extensions, created once and set up by the factory."""

from __future__ import annotations

import os

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

from flask_solidq import SolidQ

db = SQLAlchemy()
migrate = Migrate(directory=os.path.join(os.path.dirname(__file__), "migrations"))
solidq = SolidQ()
