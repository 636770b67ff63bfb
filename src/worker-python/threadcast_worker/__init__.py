"""threadcast's Python worker: LangGraph (Python) graphs behind the threadcast gateway."""

__version__ = "0.1.0"
