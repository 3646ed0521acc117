"""Where the queue's rows live: engines and their pooler settings, transactions (the app's
session joined, or a write of the queue's own), the database's clock, the hot paths on the
drivers' own connections, installing the tables, and in :mod:`.dialects` what each database
needs that SQLAlchemy Core doesn't render. Nothing here knows a job's life."""
