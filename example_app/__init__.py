"""The flask-solidq example app (run it with ``make demo``)."""
