"""Recurring tasks: ``SOLIDQ_RECURRING`` schedules (:mod:`.schedule`) and the exactly-once
enqueue of each tick (:mod:`.tasks`), which the scheduler process drives."""
