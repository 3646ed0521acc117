"""The job definitions the tests enqueue, a module per suite that needs its own."""
