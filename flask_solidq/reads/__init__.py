"""The read side: what the dashboard, the CLI, ``status`` and the metrics show of the queue
(jobs to browse, why a job waits, the controls' state, throughput), read in one transaction
each and never written. The operations change the queue; these only look at it."""
