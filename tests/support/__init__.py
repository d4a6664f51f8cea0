"""What the tests and the benchmarks share: a server in its own process group (``process``), server-sent event
lines split as SSE splits them (``sse``), and catalogues of generated models (``catalog``).

bench/ imports this package too (it puts tests/ on sys.path), so a server is started, waited for and stopped
the same way everywhere.
"""
