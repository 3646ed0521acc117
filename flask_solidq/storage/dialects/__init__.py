"""One module per database for what SQLAlchemy Core doesn't render: PostgreSQL's
(:mod:`.postgres`), SQLite's (:mod:`.sqlite`) and MySQL/MariaDB's (:mod:`.mysql`)."""
