"""The MCP tools' URL fetcher: it lives in finspace.documents.fetch, where the EDGAR client shares its checks."""

from finspace.documents.fetch import MAX_REDIRECTS, Fetched, check_url, fetch, file_name, refused_address, resolve

__all__ = ["MAX_REDIRECTS", "Fetched", "check_url", "fetch", "file_name", "refused_address", "resolve"]
