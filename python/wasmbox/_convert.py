"""What a tool may return beyond plain JSON data, turned into plain data."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data for a pydantic model, dataclass, enum member or date/time.

    Raises TypeError for anything else (a set, bytes, an arbitrary object): a tool's
    result must be JSON, as the guest's values must be.
    """
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump) and not isinstance(obj, type):
        return model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    raise TypeError(f"{type(obj).__name__} is not JSON (a dict, list, str, int, float, bool or None)")
