"""The job's life, one module per step, as plain functions over a connection:
enqueue -> dispatch -> claim -> execute, plus release and maintenance."""
