"""Job definitions: the ``Job`` class and what a job class declares (arguments, options,
failure rules, control declarations, steps), and the registry of definitions by name."""

# Imported with the package: the registry fills the slot every job class registers through.
from flask_solidq.definitions import registry as registry
