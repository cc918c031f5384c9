"""The store's schema, owned in one place: numbered migrations over one SQLite file.

Every table an arena store holds is created by a step of :data:`.schema.MIGRATIONS`, and the
file's ``PRAGMA user_version`` says how many steps it has had. Opening a store for writing
runs the steps it lacks, in one transaction each, so a store written by any earlier version
(version 0: the arena before this package, with or without ladder tables) upgrades in place
with nothing lost, and a store from a newer arena is refused rather than misread.
"""

from .schema import LATEST, MIGRATIONS, SchemaError, connect, migrate, schema_version

__all__ = ["LATEST", "MIGRATIONS", "SchemaError", "connect", "migrate", "schema_version"]
