"""A tiny explicit registry: components are chosen by name, never by ``if/elif`` chains."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from evidential.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to components of one kind (fusion rules, routing policies, evaluators, ...).

    Args:
        kind: What the registry holds, used in error messages (e.g. ``"fusion rule"``).

    Example:
        >>> rules = Registry("fusion rule")
        >>> @rules.register("yager")
        ... def yager(*args): ...
        >>> rules.names()
        ('yager',)
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, *, overwrite: bool = False) -> Callable[[T], T]:
        """Decorator that registers a component under ``name``."""

        def deco(obj: T) -> T:
            if name in self._items and not overwrite:
                raise ValueError(
                    f"{self.kind} {name!r} is already registered; pass overwrite=True to replace it"
                )
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        """Return the component registered as ``name`` or raise :class:`UnknownNameError`."""
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        # a registry name is a string; an unhashable value (a list from a JSON file) is simply absent
        return isinstance(name, str) and name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
