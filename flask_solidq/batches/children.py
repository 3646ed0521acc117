"""A batch's family, the batch and its children at any depth, which a hand retry or discard
of the batch acts on."""

from __future__ import annotations

import sqlalchemy as sa

from flask_solidq.models.tables import BATCHES


def family(connection: sa.Connection, batch_id: int) -> list[int]:
    """Batch ``batch_id`` and its children, theirs, and so on: the batches ``retry --batch``
    and ``discard --batch`` act on, in id order. One indexed read per generation."""
    found = {batch_id}
    generation = [batch_id]
    while generation:
        children = connection.scalars(
            sa.select(BATCHES.c.id).where(BATCHES.c.parent_id.in_(generation))
        ).all()
        generation = [child for child in children if child not in found]
        found.update(generation)
    return sorted(found)
