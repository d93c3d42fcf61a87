"""Request and response bodies of the API (pydantic models; shapes only, meaning is domain/)."""
