"""Reading the graph: a record of CGC's session as a dict
(`record_dict`), a direct read of Kùzu's connection for the read-only
queries of the database phase (`KuzuReader`), and the tests that tell a
query naming what the schema lacks from any other failure.
"""


def record_dict(record, keys):
    data = getattr(record, "data", None)
    if callable(data):
        try:
            values = data()
        except Exception:  # noqa: BLE001 - read key by key below
            values = None
        if isinstance(values, dict):
            return {key: values.get(key) for key in keys}
    out = {}
    for key in keys:
        try:
            out[key] = record[key]
        except Exception:  # noqa: BLE001 - a missing column is None
            out[key] = None
    return out


class KuzuReader:
    """Read-only queries of the database phase straight through a Kùzu
    connection of CGC's own open database, all rows fetched at once.

    The stored-edge read (about 8 000 rows at 2 000 modules, every request
    the memo cannot answer) went through CGC's session wrapper — a query
    rewrite, a record object and a dict per row — for about 0.25 s of the
    lock; fetched directly it is about 0.15 s. Only plain `MATCH … RETURN`
    queries go here (the wrapper rewrites nothing in them); writes stay on
    CGC's path. `open` gives None where the database is not Kùzu's
    (FalkorDB, another manager) and the caller reads through CGC."""

    def __init__(self, connection):
        self._connection = connection

    @classmethod
    def open(cls, db_manager, backend):
        if backend != "kuzudb":
            return None
        try:
            import kuzu
        except ImportError:
            return None
        database = getattr(db_manager, "_db", None)
        if not isinstance(database, kuzu.Database):
            return None
        try:
            return cls(kuzu.Connection(database))
        except Exception:  # noqa: BLE001 - read through CGC instead
            return None

    def read(self, query, keys, **params):
        result = self._connection.execute(query, params)
        try:
            columns = result.get_column_names()
            rows = result.get_all()
        finally:
            close = getattr(result, "close", None)
            if callable(close):
                close()
        at = {name: i for i, name in enumerate(columns)}
        picks = [(key, at.get(key)) for key in keys]
        return [{key: (None if i is None else row[i]) for key, i in picks} for row in rows]

    def close(self):
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - CGC's close closes the database
                pass


def is_binder_error(exc):
    text = str(exc).lower()
    return "binder" in text or "cannot find a valid label" in text or "does not exist" in text


def is_cgc_binder_error(exc):
    """CGC's writer's own test (`_is_binder_exception`) for a label that
    does not bind."""
    text = str(exc).lower()
    return "binder" in text or "cannot find a valid label" in text
