"""Read queries over the catalog read model (used by the REST API): one object whose
methods are grouped by concern in their own modules."""

from __future__ import annotations

from icelog.projections.access_queries import AccessQueries
from icelog.projections.location_queries import LocationQueries
from icelog.projections.query_base import Rows, TabularRow, decode_token, encode_token
from icelog.projections.tabular_queries import TabularQueries
from icelog.projections.task_queries import TaskQueries
from icelog.projections.warehouse_queries import WarehouseQueries

__all__ = ["CatalogQueries", "Rows", "TabularRow", "decode_token", "encode_token"]


class CatalogQueries(WarehouseQueries, AccessQueries, TabularQueries, LocationQueries, TaskQueries):
    """Queries over the read model. Each call is one short read on a pooled connection."""
