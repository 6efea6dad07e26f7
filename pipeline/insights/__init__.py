"""DuckDB over the logs: the index, the views, the queries and the figures."""
