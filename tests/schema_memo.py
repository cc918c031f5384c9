"""A schema validator for tests that check many messages of one kind (test_protocol, test_envs)."""

from __future__ import annotations

from typing import Any

import jsonschema

from arena.referee import protocol


class SchemaMemo:
    """Validates the referee's lines against their schemas as ``protocol.validate`` does, remembering
    each part a ``$ref`` leads to that was found valid: a game's lines repeat their events, actions,
    players and cards many times (every seat is told each event), and jsonschema's walk of them was
    three quarters of test_protocol's time. Only valid parts are remembered, by the schema they were
    checked against and their ``repr`` (so 1, 1.0 and True, and a list and a tuple, stay apart), so
    every error is found and reported as jsonschema reports it."""

    def __init__(self) -> None:
        self.valid: set[tuple[int, str]] = set()
        self.targets: dict[tuple[int, str], Any] = {}
        self.validators: dict[str, Any] = {}

    def _ref(self, validator: Any, ref: str, instance: Any, schema: dict[str, Any]) -> Any:
        where = (id(schema), ref)  # a $ref in one schema object always resolves to the same place
        target = self.targets.get(where)
        if target is None:
            target = self.targets[where] = validator._resolver.lookup(ref)  # as jsonschema's own $ref does
        key = (id(target.contents), repr(instance))
        if key in self.valid:
            return
        errors = list(validator.descend(instance, target.contents, resolver=target.resolver))
        if not errors:
            self.valid.add(key)
        yield from errors

    def validate(self, name: str, message: Any) -> None:
        if name not in self.validators:
            plain = protocol.validator(name)
            cls = jsonschema.validators.extend(type(plain), {"$ref": self._ref})
            self.validators[name] = cls(plain.schema, registry=protocol.registry())
        self.validators[name].validate(message)
