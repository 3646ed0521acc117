"""The worker's side of steps that resume (``self.step(...)``), a job's saved progress
watched, written and recovered.

What it holds: the run of a steps job as the worker drives it, watched, counted and checked
as it ends (:mod:`.runs`), its progress written while it runs (:mod:`.saves`), and the jobs of
a dead worker that resume from their saved steps or fail (:mod:`.lost`). What a job declares
and calls (``Resumable``, ``Step``, ``max_resumptions``, ``resume_errors``) are plain values
of the job definitions (:mod:`flask_solidq.definitions.steps`,
:mod:`flask_solidq.definitions.step_options`).
"""

from __future__ import annotations

from flask_solidq.steps.lost import LostSteps as LostSteps
from flask_solidq.steps.lost import of_claims as of_claims
from flask_solidq.steps.runs import begin_run as begin_run
from flask_solidq.steps.runs import end_run as end_run
from flask_solidq.steps.runs import limit_of as limit_of
from flask_solidq.steps.runs import past_limit as past_limit
from flask_solidq.steps.runs import resumes_on as resumes_on
from flask_solidq.steps.runs import unwatch as unwatch
from flask_solidq.steps.runs import watch as watch
from flask_solidq.steps.saves import count_resumption as count_resumption
from flask_solidq.steps.saves import save as save
from flask_solidq.steps.saves import saver as saver
