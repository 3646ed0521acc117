"""The name the README gave the log subscriber before the logging went into one package,
:mod:`flask_solidq.logging`: ``flask_solidq.log_subscriber.connect()`` keeps working for the
apps that call it. New code imports :mod:`flask_solidq.logging.subscriber`."""

from flask_solidq.logging.subscriber import connect as connect
from flask_solidq.logging.subscriber import disconnect as disconnect
