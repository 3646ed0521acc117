"""Batches, the jobs of one ``solidq.batch()`` block whose callbacks run once, when the last
of them ends.

What it holds: the ``solidq_batches`` rows' writes, as a block opens, closes or adds to a
batch (:mod:`.blocks`), as its jobs' outcomes are counted and it finishes (:mod:`.counts`, the
only writer of its counters), its callbacks checked, stored and announced (:mod:`.callbacks`),
and its family of child batches (:mod:`.children`). The ``Batch`` a callback receives, and
its read by id that the argument codecs load it with, are the job definitions'
(:mod:`flask_solidq.definitions.batches`); the block itself is the extension's
(:mod:`flask_solidq.extension.batching`).
"""

from __future__ import annotations

from flask_solidq.batches.blocks import add_to_batch as add_to_batch
from flask_solidq.batches.blocks import close_batch as close_batch
from flask_solidq.batches.blocks import metadata_json as metadata_json
from flask_solidq.batches.blocks import open_batch as open_batch
from flask_solidq.batches.callbacks import ENQUEUE as ENQUEUE
from flask_solidq.batches.callbacks import Callback as Callback
from flask_solidq.batches.callbacks import announce_finished as announce_finished
from flask_solidq.batches.callbacks import callback_job as callback_job
from flask_solidq.batches.callbacks import prepare_callbacks as prepare_callbacks
from flask_solidq.batches.children import family as family
from flask_solidq.batches.counts import Tally as Tally
from flask_solidq.batches.counts import account as account
from flask_solidq.batches.counts import tally_by_batch as tally_by_batch
