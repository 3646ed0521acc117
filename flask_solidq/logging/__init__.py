"""flask-solidq's logging: the lines it logs about jobs (:mod:`.subscriber`, with the line
each signal logs in :mod:`.signal_lines`, what a line shows in :mod:`.fields` and its
``event`` in :mod:`.events`), the level and the text or JSON format ``flask solidq work``
writes them in (:mod:`.formats`), the records it makes for less (:mod:`.records`), and the
writer that takes them to stderr without a worker's threads taking turns over it
(:mod:`.line_writer`).

Only the processes and the CLI use it. Inside this package ``import logging`` is still the
standard library's (imports are absolute); import its modules by their full names
(``from flask_solidq.logging import subscriber``), never ``from flask_solidq import logging``,
which would hide the standard library's module in the importing one.
"""
